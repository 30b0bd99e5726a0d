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
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from .core.tools import EXECUTE_SKILL_SCRIPT, READ_SKILL, AgentView, ToolResult
from .errors import ConfigError, SkillError

STYLES = ("openai", "anthropic")
DEFAULT_MAX_TURNS = 8

# Why the loop ended.
ANSWERED = "answered"  # the model replied without tool calls
MAX_TURNS = "max_turns"  # the model was still calling tools when the turn limit was reached
TRUNCATED = "truncated"  # the model's reply was cut by its token limit
ERROR = "error"  # the client failed (see Transcript.error)


@dataclass
class ToolCall:
    """One tool call the model made and the text it got back."""

    id: str
    name: str
    arguments: Any  # as the model sent them: a JSON string (OpenAI) or an object (Anthropic)
    result: ToolResult
    turn: int
    seconds: float = 0.0  # time the dispatcher took (a script run included)

    @property
    def skill(self) -> str:
        """The skill the call names ("" when the arguments do not name one)."""
        return call_target(self.name, self.arguments)[0]

    @property
    def level(self) -> int:
        """Progressive-disclosure level the call reached: 2 (a skill's instructions) or 3 (a file or a
        script run); 0 for a call that does not name a skill."""
        return call_target(self.name, self.arguments)[1]


@dataclass
class Usage:
    """Token usage of one model call as the API reported it (None where it reported nothing)."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    raw: dict = field(default_factory=dict)  # the provider's usage object, as a dict

    @property
    def total(self) -> int | None:
        if self.input_tokens is None and self.output_tokens is None:
            return None
        return (self.input_tokens or 0) + (self.output_tokens or 0)

    def __str__(self) -> str:
        if self.total is None:
            return "usage not reported"
        return f"{_n(self.input_tokens)} in / {_n(self.output_tokens)} out"


def _n(value) -> str:
    return "?" if value is None else f"{value:,}"


@dataclass
class Reply:
    """One model call, parsed: its text, the tool calls it asked for, why it stopped, usage and time."""

    text: str
    calls: list[tuple[str, str, Any]]  # (id, tool name, arguments as sent)
    finish_reason: str
    usage: Usage
    seconds: float
    message: dict  # the assistant message to put back into the conversation


@dataclass
class Step:
    """One model turn of a transcript: what the model said and asked for, and the tool calls it led to."""

    turn: int
    text: str
    finish_reason: str
    usage: Usage
    seconds: float  # the model call alone
    tool_calls: list[ToolCall] = field(default_factory=list)


@dataclass
class Transcript:
    """The whole exchange: the messages as sent to the client, each tool call, and how it ended."""

    style: str
    messages: list[dict] = field(default_factory=list)
    system: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    final: str = ""  # the model's last text reply ("" when it stopped for the turn limit)
    stop_reason: str = ""  # ANSWERED, MAX_TURNS or TRUNCATED; ERROR when the client failed
    finish_reason: str = ""  # the provider's own reason from the last response (stop, end_turn, ...)
    turns: int = 0  # model calls made
    model: str = ""
    steps: list[Step] = field(default_factory=list)  # one per model call, with usage and timing
    seconds: float = 0.0  # wall-clock time of the whole loop
    error: str = ""  # the one-line client error that ended the loop (stop_reason ERROR)
    running: bool = False  # True while the loop is still going (for live displays)

    @property
    def usage(self) -> Usage:
        """Token usage summed over the turns (None where no turn reported a figure)."""
        ins = [s.usage.input_tokens for s in self.steps if s.usage.input_tokens is not None]
        outs = [s.usage.output_tokens for s in self.steps if s.usage.output_tokens is not None]
        return Usage(sum(ins) if ins else None, sum(outs) if outs else None)

    @property
    def activated(self) -> list[tuple[str, int]]:
        """(skill, highest level reached) for each skill the model used successfully, in first-use order."""
        seen: dict[str, int] = {}
        for call in self.tool_calls:
            if call.result.is_error or not call.skill:
                continue
            seen[call.skill] = max(seen.get(call.skill, 0), call.level)
        return list(seen.items())

    def __str__(self) -> str:
        lines = [f"{self.turns} turn(s), {len(self.tool_calls)} tool call(s), stopped: {self.stop_reason}"]
        for call in self.tool_calls:
            first = call.result.text.splitlines()[0] if call.result.text else ""
            flag = " [error]" if call.result.is_error else ""
            lines.append(f"  turn {call.turn}: {call.name}({_compact(call.arguments)}){flag} -> {first}")
        if self.final:
            lines.append(f"final: {self.final}")
        if self.error:
            lines.append(f"error: {self.error}")
        return "\n".join(lines)


def call_target(name: str, arguments: Any) -> tuple[str, int]:
    """(skill, level) a tool call names, from its arguments as the model sent them; ("", 0) if none."""
    if isinstance(arguments, (str, bytes)):
        try:
            arguments = json.loads(arguments or "{}")
        except ValueError:
            return "", 0
    if not isinstance(arguments, dict) or not isinstance(arguments.get("skill_name"), str):
        return "", 0
    skill, _sep, rest = arguments["skill_name"].strip().partition("/")
    if name == READ_SKILL:
        path = arguments.get("file_path") or rest
        return skill, 3 if path and path.strip("./") not in ("SKILL.md", "skill.md") else 2
    if name == EXECUTE_SKILL_SCRIPT:
        return skill, 3
    return "", 0


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
              on_event: Callable[[str, Transcript], None] | None = None, inputs_dir=None,
              **create_options) -> Transcript:
    """Run the tool-calling loop and return the `Transcript`.

    `skills` is a `SkillRegistry` (all its skills) or an `AgentView` (filtered, with its activation
    tracker: pass the same view again to continue a conversation, call `view.reset()` for a new one).
    `prompt` is the user's message, or a list of messages to start from. `system` is put before the skills
    section of the system prompt. `style` is "openai" or "anthropic" (detected from the client if None).
    `max_tokens` is sent to Anthropic-style clients only; `create_options` go to every create() call.
    `inputs_dir`: a folder whose files the model may hand to scripts (execute_skill_script's `inputs`,
    paths relative to it; nothing outside it); for a view, give it there (`reg.for_agent(inputs_dir=...)`).

    `on_event(kind, transcript)` is called as the loop goes, for live displays: "start", "model" (a model
    turn was added to `transcript.steps`), "tool" (a tool call and its result were added), "done".
    A failure of the client (bad key, rate limit, unknown model, no connection) raises `ClientError`, one
    line that says what to do, with the transcript so far as its `.transcript`.
    """
    if not isinstance(max_turns, int) or isinstance(max_turns, bool) or max_turns < 1:
        raise ConfigError(f"max_turns must be a whole number of at least 1, got {max_turns!r}")
    style = style or detect_style(client)
    if style not in STYLES:
        raise ConfigError(f"style must be one of {', '.join(STYLES)}, got {style!r}")
    if isinstance(skills, AgentView):
        if inputs_dir is not None:
            raise ConfigError("inputs_dir goes to the view when you pass one: reg.for_agent(inputs_dir=...)")
        view = skills
    else:
        view = AgentView(skills, inputs_dir=inputs_dir)
    system_text = "\n\n".join(part for part in (system, view.system_prompt("xml")) if part)
    tools = view.tool_schemas(style)
    transcript = Transcript(style=style, system=system_text, model=model, running=True)
    if isinstance(prompt, str):
        transcript.messages.append({"role": "user", "content": prompt})
    else:
        transcript.messages.extend(dict(m) for m in prompt)
    emit = on_event or (lambda kind, t: None)
    started = time.perf_counter()
    emit("start", transcript)
    try:
        for turn in range(1, max_turns + 1):
            transcript.turns = turn
            try:
                reply = model_reply(client, transcript.messages, model=model, style=style, system=system_text,
                                    tools=tools, max_tokens=max_tokens, **create_options)
            except ClientError as exc:
                transcript.turns = turn - 1
                transcript.stop_reason, transcript.error = ERROR, str(exc)
                exc.transcript = transcript
                raise
            transcript.finish_reason = reply.finish_reason
            transcript.messages.append(reply.message)
            step = Step(turn, reply.text, reply.finish_reason, reply.usage, reply.seconds)
            transcript.steps.append(step)
            emit("model", transcript)
            if not reply.calls:
                truncated = reply.finish_reason in ("length", "max_tokens")
                _finish(transcript, reply.text, truncated=truncated)
                return transcript
            results = []
            for call_id, name, arguments in reply.calls:
                t0 = time.perf_counter()
                result = view.dispatch(name, arguments)
                call = ToolCall(call_id, name, arguments, result, turn, time.perf_counter() - t0)
                transcript.tool_calls.append(call)
                step.tool_calls.append(call)
                results.append(call)
                emit("tool", transcript)
            if style == "openai":
                transcript.messages.extend({"role": "tool", "tool_call_id": c.id, "content": c.result.text}
                                           for c in results)
            else:
                transcript.messages.append({"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": c.id, "content": c.result.text,
                     "is_error": c.result.is_error} for c in results]})
        transcript.stop_reason = MAX_TURNS
        return transcript
    finally:
        transcript.seconds = time.perf_counter() - started
        transcript.running = False
        emit("done", transcript)


def model_reply(client, messages: list[dict], *, model: str, style: str | None = None, system: str = "",
                tools: list[dict] | None = None, max_tokens: int = 4096, **create_options) -> Reply:
    """One model call, nothing dispatched: the reply's text, the tool calls it asks for, usage and time.

    This is the first turn of `run_agent` on its own (a trigger eval uses it). A failure of the client
    raises `ClientError`.
    """
    style = style or detect_style(client)
    if style == "openai":
        sent = ([{"role": "system", "content": system}] if system else []) + list(messages)
        kwargs = dict(create_options, model=model, messages=sent)
        create = _get(_get(client, "chat"), "completions")
    else:
        kwargs = dict(create_options, model=model, messages=messages, max_tokens=max_tokens)
        if system:
            kwargs["system"] = system
        create = _get(client, "messages")
    if tools:
        kwargs["tools"] = tools
    t0 = time.perf_counter()
    try:
        response = create.create(**kwargs)
    except SkillError:
        raise
    except Exception as exc:  # the SDK's own errors; KeyboardInterrupt is not an Exception and passes
        raise client_error(exc, model, style) from exc
    seconds = time.perf_counter() - t0
    parse = _openai_reply if style == "openai" else _anthropic_reply
    reply = parse(response)
    reply.seconds = seconds
    reply.usage = usage_of(response)
    return reply


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


def _openai_reply(response) -> Reply:
    choices = _get(response, "choices") or []
    message = _get(choices[0], "message") if choices else None
    if message is None:
        raise SkillError("the chat client returned a response without choices[0].message; "
                         "is it an OpenAI-style client? Otherwise pass style='anthropic'")
    finish = str(_get(choices[0], "finish_reason") or "")
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
    parsed = [(c["id"], c["function"]["name"], c["function"]["arguments"])
              for c in assistant.get("tool_calls", [])]
    return Reply(content, parsed, finish, Usage(), 0.0, assistant)


def _anthropic_reply(response) -> Reply:
    blocks = _get(response, "content")
    if blocks is None:
        raise SkillError("the chat client returned a response without content blocks; "
                         "is it an Anthropic-style client? Otherwise pass style='openai'")
    finish = str(_get(response, "stop_reason") or "")
    content = [_block_dict(b) for b in blocks]
    text = "".join(b.get("text", "") for b in content if b.get("type") == "text")
    parsed = [(b.get("id"), b.get("name"), b.get("input")) for b in content if b.get("type") == "tool_use"]
    return Reply(text, parsed, finish, Usage(), 0.0, {"role": "assistant", "content": content})


def usage_of(response) -> Usage:
    """The response's usage, OpenAI (prompt_tokens/completion_tokens) or Anthropic (input/output_tokens)."""
    raw = _plain(_get(response, "usage"))
    if not isinstance(raw, dict) or not raw:
        return Usage()

    def number(*keys):
        for key in keys:
            value = raw.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
        return None

    return Usage(number("input_tokens", "prompt_tokens"), number("output_tokens", "completion_tokens"), raw)


def _plain(value):
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return _plain(dump(exclude_none=True))
    try:
        return {k: _plain(v) for k, v in vars(value).items() if not k.startswith("_") and v is not None}
    except TypeError:
        return str(value)


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


# ---------------------------------------------------------------------------------------- client errors


class ClientError(SkillError):
    """The chat client failed: bad API key, rate limit, unknown model, no connection, ...

    The message is one line that says what happened and what to do. `kind` is one of auth, permission,
    not_found, rate_limit, bad_request, server, timeout, connection, client; `status` is the HTTP status
    when there was one. `transcript` is the conversation up to the failure (set by `run_agent`).
    """

    FATAL = ("auth", "permission", "not_found", "bad_request")  # retrying the same call cannot help

    def __init__(self, message: str, kind: str = "client", status: int | None = None):
        super().__init__(message)
        self.kind, self.status = kind, status
        self.transcript = None


_HINTS = {
    "auth": ("authentication failed", ("check the API key the client was created with (api_key=, or "
             "OPENAI_API_KEY / ANTHROPIC_API_KEY)")),
    "permission": ("permission denied", "this key may not use that model or endpoint"),
    "not_found": ("not found", "check the model name (--model / model=) and the client's base_url"),
    "rate_limit": ("rate limit or quota exceeded", ("wait and try again, lower parallel=, or check the "
                   "account's quota")),
    "bad_request": ("request refused", "the provider did not accept the request; the detail says why"),
    "server": ("server error", "the provider failed; try again later"),
    "timeout": ("timed out", "the API did not answer in time; try again, or raise the client's timeout"),
    "connection": ("cannot connect", "check the network and the client's base_url"),
    "client": ("the client failed", "see the detail"),
}


def client_error(exc: BaseException, model: str = "", style: str = "") -> ClientError:
    """A `ClientError` for an exception raised by a chat client (no SDK imported: duck-typed)."""
    status = getattr(exc, "status_code", None)
    if not isinstance(status, int):
        status = getattr(getattr(exc, "response", None), "status_code", None)
    status = status if isinstance(status, int) else None
    cls = type(exc).__name__
    if status == 401 or cls == "AuthenticationError":
        kind = "auth"
    elif status == 403 or cls == "PermissionDeniedError":
        kind = "permission"
    elif status == 404 or cls == "NotFoundError":
        kind = "not_found"
    elif status == 429 or cls == "RateLimitError":
        kind = "rate_limit"
    elif status in (400, 413, 422) or cls in ("BadRequestError", "UnprocessableEntityError"):
        kind = "bad_request"
    elif (status or 0) >= 500 or cls in ("InternalServerError", "OverloadedError"):
        kind = "server"
    elif "Timeout" in cls:
        kind = "timeout"
    elif "Connection" in cls:
        kind = "connection"
    else:
        kind = "client"
    what, hint = _HINTS[kind]
    detail = _error_detail(exc).strip().rstrip(".")
    provider = style or "chat"
    code = f" ({status})" if status else ""
    subject = f"model {model!r} " if kind == "not_found" and model else ""
    line = f"{provider} API: {subject}{what}{code}: {detail}; {hint}" if detail else \
        f"{provider} API: {subject}{what}{code} ({cls}); {hint}"
    return ClientError(_one_line(line, 400), kind, status)


def _error_detail(exc: BaseException) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return err["message"]
        if isinstance(err, str):
            return err
    message = getattr(exc, "message", None)
    return message if isinstance(message, str) and message else str(exc)


def _one_line(text: str, cap: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= cap else text[:cap - 1] + "…"


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


# ----------------------------------------------------------------------------------- matching client

_WORD = re.compile(r"[a-z][a-z0-9]+")
_STOP = frozenset([
    "a", "an", "and", "any", "are", "as", "at", "be", "by", "can", "do", "does", "for", "from", "has",
    "have", "how", "i", "in", "into", "is", "it", "its", "me", "my", "of", "on", "or", "our", "please",
    "that", "the", "their", "them", "then", "these", "this", "those", "to", "use", "used", "user",
    "uses", "using", "was", "what", "when", "where", "which", "who", "why", "will", "with", "would",
    "you", "your", "wants", "want", "asks", "ask",
])


def _words(text: str) -> set[str]:
    out = set()
    for word in _WORD.findall(text.lower()):
        if word in _STOP or len(word) < 3:
            continue
        for suffix in ("ing", "es", "ed", "s"):
            if word.endswith(suffix) and len(word) - len(suffix) >= 4:
                word = word[: -len(suffix)]
                break
        out.add(word)
    return out


_CATALOG_ENTRY = re.compile(r"<name>(.*?)</name>\s*<description>(.*?)</description>", re.DOTALL)


class MatchingClient(ScriptedClient):
    """A deterministic stand-in for a chat model that picks skills by shared words. It is NOT a model.

    On the first turn it reads the `<available_skills>` catalog in the system prompt and the user's last
    message, and calls read_skill for the skill whose description shares the most content words with the
    message (at least `min_shared`); otherwise it answers in text. After a tool result it answers
    "Done." Like a model, it reacts to the description text, so description variants give different
    trigger rates in an eval; unlike a model, it understands nothing. For demos and tests without an API
    key. `requests` keeps every call's keyword arguments.
    """

    def __init__(self, style: str = "openai", min_shared: int = 2, as_dicts: bool = False):
        super().__init__([], style=style, as_dicts=as_dicts)
        self.min_shared = min_shared

    def choose(self, system: str, message: str) -> str | None:
        """The skill this stand-in would load for `message` under the catalog in `system` (None = none)."""
        asked = _words(message)
        best, best_score = None, 0
        for name, description in _CATALOG_ENTRY.findall(system or ""):
            score = len(asked & _words(description))
            if score > best_score:
                best, best_score = name.strip(), score
        return best if best_score >= self.min_shared else None

    def _create(self, **kwargs):
        self.requests.append(_snapshot(kwargs))
        n = len(self.requests)
        messages = kwargs.get("messages") or []
        system = kwargs.get("system") or next(
            (m.get("content") for m in messages if m.get("role") == "system"), "")
        last = messages[-1] if messages else {}
        content = last.get("content")
        if last.get("role") == "user" and isinstance(content, str):
            skill = self.choose(system if isinstance(system, str) else "", content) if kwargs.get("tools") else None
            step = [("read_skill", {"skill_name": skill})] if skill else "No skill needed for this."
        else:
            step = "Done."
        response = self._openai(step, n) if self.style == "openai" else self._anthropic(step, n)
        return response if self.as_dicts else _objects(response)
