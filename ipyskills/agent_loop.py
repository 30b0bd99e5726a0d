"""Run a tool-calling conversation between a chat client you pass in and your skills.

No SDK is imported here: any object shaped like the OpenAI client (`client.chat.completions.create(model=,
messages=, tools=)`) or the Anthropic client (`client.messages.create(model=, system=, messages=, tools=,
max_tokens=)`) works, and responses may be SDK objects or plain dicts. The loop calls the model, dispatches
every tool call through an `AgentView` (the same text `ipyskills load` / `ipyskills run` would give), sends
the results back, and stops when the model answers without tool calls or after `max_turns` model calls.

Example with a real client::

    from openai import OpenAI
    from ipyskills import SkillRegistry
    from ipyskills.agent_loop import run_agent

    reg = SkillRegistry(["./skills"])
    transcript = run_agent(OpenAI(), reg, "Convert this JSON to CSV: [{\"a\": 1}]", model="gpt-4o-mini")
    print(transcript.final)
    for call in transcript.tool_calls:
        print(call.name, call.arguments, "->", call.result.text[:200])

Without a model, `ScriptedClient` replays a fixed list of steps. It is a deterministic stand-in for demos
and tests, not a model: it never reads the conversation, it just returns the next scripted response::

    from ipyskills.agent_loop import ScriptedClient, run_agent

    client = ScriptedClient([
        [("read_skill", {"skill_name": "data-processor"})],
        [("execute_skill_script", {"skill_name": "data-processor",
                                   "script_path": "scripts/analyze.py", "input": "[1, 2, 3]"})],
        "The mean is 2.",
    ], style="anthropic")
    transcript = run_agent(client, reg, "Analyse [1, 2, 3]", model="scripted")
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from .core.tools import AgentView, ToolResult
from .errors import ConfigError, SkillError

STYLES = ("openai", "anthropic")
DEFAULT_MAX_TURNS = 8

# Why the loop ended.
ANSWERED = "answered"  # the model replied without tool calls
MAX_TURNS = "max_turns"  # the model was still calling tools when the turn limit was reached
TRUNCATED = "truncated"  # the model's reply was cut by its token limit


@dataclass
class ToolCall:
    """One tool call the model made and the text it got back."""

    id: str
    name: str
    arguments: Any  # as the model sent them: a JSON string (OpenAI) or an object (Anthropic)
    result: ToolResult
    turn: int


@dataclass
class Transcript:
    """The whole exchange: the messages as sent to the client, each tool call, and how it ended."""

    style: str
    messages: list[dict] = field(default_factory=list)
    system: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    final: str = ""  # the model's last text reply ("" when it stopped for the turn limit)
    stop_reason: str = ""  # ANSWERED, MAX_TURNS or TRUNCATED
    finish_reason: str = ""  # the provider's own reason from the last response (stop, end_turn, ...)
    turns: int = 0  # model calls made

    def __str__(self) -> str:
        lines = [f"{self.turns} turn(s), {len(self.tool_calls)} tool call(s), stopped: {self.stop_reason}"]
        for call in self.tool_calls:
            first = call.result.text.splitlines()[0] if call.result.text else ""
            flag = " [error]" if call.result.is_error else ""
            lines.append(f"  turn {call.turn}: {call.name}({_compact(call.arguments)}){flag} -> {first}")
        if self.final:
            lines.append(f"final: {self.final}")
        return "\n".join(lines)


def _compact(arguments: Any) -> str:
    if isinstance(arguments, str):
        return arguments
    try:
        return json.dumps(arguments, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(arguments)


# -------------------------------------------------------------------------------------------------- loop


def run_agent(client, skills, prompt: str | list[dict], *, model: str, style: str | None = None,
              max_turns: int = DEFAULT_MAX_TURNS, system: str = "", max_tokens: int = 4096,
              **create_options) -> Transcript:
    """Run the tool-calling loop and return the `Transcript`.

    `skills` is a `SkillRegistry` (all its skills) or an `AgentView` (filtered, with its activation
    tracker: pass the same view again to continue a conversation, call `view.reset()` for a new one).
    `prompt` is the user's message, or a list of messages to start from. `system` is put before the skills
    section of the system prompt. `style` is "openai" or "anthropic" (detected from the client if None).
    `max_tokens` is sent to Anthropic-style clients only; `create_options` go to every create() call.
    """
    if not isinstance(max_turns, int) or isinstance(max_turns, bool) or max_turns < 1:
        raise ConfigError(f"max_turns must be a whole number of at least 1, got {max_turns!r}")
    style = style or detect_style(client)
    if style not in STYLES:
        raise ConfigError(f"style must be one of {', '.join(STYLES)}, got {style!r}")
    view = skills if isinstance(skills, AgentView) else AgentView(skills)
    system_text = "\n\n".join(part for part in (system, view.system_prompt("xml")) if part)
    tools = view.tool_schemas(style)
    transcript = Transcript(style=style, system=system_text)
    if isinstance(prompt, str):
        transcript.messages.append({"role": "user", "content": prompt})
    else:
        transcript.messages.extend(dict(m) for m in prompt)
    step = _openai_turn if style == "openai" else _anthropic_turn
    for turn in range(1, max_turns + 1):
        transcript.turns = turn
        done = step(client, view, transcript, tools, model, max_tokens, create_options)
        if done:
            return transcript
    transcript.stop_reason = MAX_TURNS
    return transcript


def detect_style(client) -> str:
    """"openai" for a client with chat.completions.create, "anthropic" for one with messages.create."""
    openai_like = callable(_get(_get(_get(client, "chat"), "completions"), "create"))
    anthropic_like = callable(_get(_get(client, "messages"), "create"))
    if openai_like and not anthropic_like:
        return "openai"
    if anthropic_like and not openai_like:
        return "anthropic"
    what = "both" if openai_like else "neither"
    raise ConfigError(f"cannot tell the chat client's style: it has {what} chat.completions.create and "
                      "messages.create; pass style='openai' or style='anthropic'")


def _openai_turn(client, view, transcript, tools, model, max_tokens, options) -> bool:
    messages = transcript.messages
    sent = ([{"role": "system", "content": transcript.system}] if transcript.system else []) + messages
    kwargs = dict(options, model=model, messages=sent)
    if tools:
        kwargs["tools"] = tools
    response = client.chat.completions.create(**kwargs)
    choices = _get(response, "choices") or []
    message = _get(choices[0], "message") if choices else None
    if message is None:
        raise SkillError("the chat client returned a response without choices[0].message; "
                         "is it an OpenAI-style client? Otherwise pass style='anthropic'")
    transcript.finish_reason = str(_get(choices[0], "finish_reason") or "")
    content = _get(message, "content") or ""
    calls = list(_get(message, "tool_calls") or [])
    assistant: dict = {"role": "assistant", "content": content or None}
    if calls:
        assistant["tool_calls"] = [
            {"id": _get(c, "id"), "type": "function",
             "function": {"name": _get(_get(c, "function"), "name"),
                          "arguments": _get(_get(c, "function"), "arguments")}}
            for c in calls
        ]
    messages.append(assistant)
    if not calls:
        return _finish(transcript, content, truncated=transcript.finish_reason == "length")
    for c in assistant["tool_calls"]:
        name, arguments = c["function"]["name"], c["function"]["arguments"]
        result = view.dispatch(name, arguments)
        transcript.tool_calls.append(ToolCall(c["id"], name, arguments, result, transcript.turns))
        messages.append({"role": "tool", "tool_call_id": c["id"], "content": result.text})
    return False


def _anthropic_turn(client, view, transcript, tools, model, max_tokens, options) -> bool:
    kwargs = dict(options, model=model, messages=transcript.messages, max_tokens=max_tokens)
    if transcript.system:
        kwargs["system"] = transcript.system
    if tools:
        kwargs["tools"] = tools
    response = client.messages.create(**kwargs)
    blocks = _get(response, "content")
    if blocks is None:
        raise SkillError("the chat client returned a response without content blocks; "
                         "is it an Anthropic-style client? Otherwise pass style='openai'")
    transcript.finish_reason = str(_get(response, "stop_reason") or "")
    content = [_block_dict(b) for b in blocks]
    transcript.messages.append({"role": "assistant", "content": content})
    text = "".join(b.get("text", "") for b in content if b.get("type") == "text")
    uses = [b for b in content if b.get("type") == "tool_use"]
    if not uses:
        return _finish(transcript, text, truncated=transcript.finish_reason == "max_tokens")
    results = []
    for use in uses:
        result = view.dispatch(use.get("name"), use.get("input"))
        transcript.tool_calls.append(ToolCall(use.get("id"), use.get("name"), use.get("input"), result,
                                              transcript.turns))
        results.append({"type": "tool_result", "tool_use_id": use.get("id"), "content": result.text,
                        "is_error": result.is_error})
    transcript.messages.append({"role": "user", "content": results})
    return False


def _finish(transcript: Transcript, text: str, truncated: bool) -> bool:
    transcript.final = text
    transcript.stop_reason = TRUNCATED if truncated else ANSWERED
    return True


def _get(obj, key, default=None):
    """A field of an SDK object or of a plain dict."""
    if obj is None:
        return default
    if isinstance(obj, dict):
        return obj.get(key, default)
    return getattr(obj, key, default)


def _block_dict(block) -> dict:
    """An Anthropic content block as a plain dict, fit to send back in the next request."""
    kind = _get(block, "type")
    if kind == "text":
        return {"type": "text", "text": _get(block, "text") or ""}
    if kind == "tool_use":
        return {"type": "tool_use", "id": _get(block, "id"), "name": _get(block, "name"),
                "input": _get(block, "input")}
    if isinstance(block, dict):
        return dict(block)
    dump = getattr(block, "model_dump", None)  # other SDK blocks (e.g. thinking) go back unchanged
    return dump(exclude_none=True) if callable(dump) else dict(vars(block))


# ------------------------------------------------------------------------------------- scripted client


class ScriptedClient:
    """A deterministic stand-in for a chat model, for demos and tests. It is NOT a model.

    It ignores the conversation and returns the scripted steps in order, one per create() call. A step is
    a string (a final text answer) or a list of tool calls, each `(tool_name, arguments)` where
    `arguments` is a dict or raw JSON text (to show how malformed arguments are handled). `style` picks
    the client shape it imitates ("openai": `client.chat.completions.create`; "anthropic":
    `client.messages.create`); `as_dicts=True` returns plain dicts instead of attribute objects.
    Every create() call's keyword arguments are kept in `requests`.
    """

    def __init__(self, steps: list, style: str = "openai", as_dicts: bool = False):
        if style not in STYLES:
            raise ConfigError(f"style must be one of {', '.join(STYLES)}, got {style!r}")
        self.steps = list(steps)
        self.style = style
        self.as_dicts = as_dicts
        self.requests: list[dict] = []
        create = SimpleNamespace(create=self._create)
        if style == "openai":
            self.chat = SimpleNamespace(completions=create)
        else:
            self.messages = create

    def _create(self, **kwargs):
        self.requests.append(_snapshot(kwargs))
        n = len(self.requests)
        if n > len(self.steps):
            raise SkillError(f"ScriptedClient ran out of steps: it was called {n} times but has "
                             f"{len(self.steps)} scripted step(s); add steps or lower max_turns")
        step = self.steps[n - 1]
        response = self._openai(step, n) if self.style == "openai" else self._anthropic(step, n)
        return response if self.as_dicts else _objects(response)

    @staticmethod
    def _calls(step) -> list[tuple[str, Any]]:
        return [] if isinstance(step, str) else [(name, args) for name, args in step]

    def _openai(self, step, n: int) -> dict:
        calls = self._calls(step)
        message = {"role": "assistant", "content": step if isinstance(step, str) else None}
        if calls:
            message["tool_calls"] = [
                {"id": f"call_{n}_{i}", "type": "function",
                 "function": {"name": name,
                              "arguments": args if isinstance(args, str) else json.dumps(args)}}
                for i, (name, args) in enumerate(calls)
            ]
        return {"id": f"scripted-{n}", "object": "chat.completion",
                "choices": [{"index": 0, "message": message,
                             "finish_reason": "tool_calls" if calls else "stop"}]}

    def _anthropic(self, step, n: int) -> dict:
        calls = self._calls(step)
        content = [{"type": "text", "text": step}] if isinstance(step, str) else []
        content += [{"type": "tool_use", "id": f"toolu_{n}_{i}", "name": name, "input": args}
                    for i, (name, args) in enumerate(calls)]
        return {"id": f"scripted-{n}", "type": "message", "role": "assistant", "content": content,
                "stop_reason": "tool_use" if calls else "end_turn"}


def _objects(value):
    """Plain dicts as attribute objects, the way SDK responses look (a tool_use `input` stays a dict)."""
    if isinstance(value, dict):
        return SimpleNamespace(**{k: v if k == "input" else _objects(v) for k, v in value.items()})
    if isinstance(value, list):
        return [_objects(v) for v in value]
    return value


def _snapshot(kwargs: dict) -> dict:
    # The loop keeps appending to its message list; keep what was sent at the time.
    return json.loads(json.dumps(kwargs, default=str))
