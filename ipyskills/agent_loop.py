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

import ast
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
DEFAULT_MAX_TOKENS = 4096  # the output cap of one model call when the caller gives none

# Why the loop ended.
ANSWERED = "answered"  # the model replied without tool calls
MAX_TURNS = "max_turns"  # the model was still calling tools when the turn limit was reached
TRUNCATED = "truncated"  # the model's reply was cut by its token limit
ERROR = "error"  # the client failed (see Transcript.error)
INTERRUPTED = "interrupted"  # Ctrl-C (interrupt the kernel) stopped it (see AgentInterrupted)

EMPTY_REPLY = "(empty reply: the model answered with no text and no tool call)"

# The request fields the loop fills in itself; a request option may not replace them.
OWN_FIELDS = ("model", "messages", "tools", "system")
STREAM_REFUSED = ("streaming is not supported: the loop needs each reply whole (its tool calls complete) "
                  "before it can go on; leave out stream=True (the transcript still shows each turn as it "
                  "ends)")


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
    stop_reason: str = ""  # ANSWERED, MAX_TURNS or TRUNCATED; ERROR when the client failed, INTERRUPTED
    finish_reason: str = ""  # the provider's own reason from the last response (stop, end_turn, ...)
    turns: int = 0  # model calls made
    model: str = ""
    steps: list[Step] = field(default_factory=list)  # one per model call, with usage and timing
    seconds: float = 0.0  # wall-clock time of the whole loop
    error: str = ""  # the one-line client error that ended the loop (stop_reason ERROR)
    running: bool = False  # True while the loop is still going (for live displays)
    options: dict = field(default_factory=dict)  # the request options every model call carried

    @property
    def interrupted(self) -> bool:
        """Ctrl-C stopped the loop; the transcript holds what happened before."""
        return self.stop_reason == INTERRUPTED

    @property
    def empty_reply(self) -> bool:
        """The model's last reply had no text and no tool call (a small model's usual failure)."""
        return self.stop_reason in (ANSWERED, TRUNCATED) and not self.final.strip()

    @property
    def warnings(self) -> list[str]:
        """What the usage figures give away: a server that left the tool results out of the next prompt
        (OpenAI-style only; its prompt tokens count everything sent, while Anthropic's leave cache reads out)."""
        if self.style != "openai":
            return []
        for before, after in zip(self.steps, self.steps[1:]):
            chars = sum(len(c.result.text) for c in before.tool_calls)
            if chars < 400 or before.usage.input_tokens is None or after.usage.input_tokens is None:
                continue
            grew = after.usage.input_tokens - before.usage.input_tokens
            if grew < chars / 16:  # about a quarter of the chars/4 the results alone should add
                return [f"turn {after.turn}'s prompt grew by {grew:,} tokens although the tool results sent "
                        f"back hold {chars:,} characters: the server seems to leave tool results out of the "
                        "prompt, so the model never sees them (llama-cpp-python's chatml-function-calling "
                        "template does)"]
        return []

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
        elif self.empty_reply:
            lines.append(f"final: {EMPTY_REPLY}")
        lines += [f"warning: {w}" for w in self.warnings]
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
        path = (arguments.get("file_path") or rest or "").strip().removeprefix("./").removeprefix(f"{skill}/")
        return skill, 3 if path and path not in ("SKILL.md", "skill.md") else 2
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
              max_turns: int = DEFAULT_MAX_TURNS, system: str = "", max_tokens: int = DEFAULT_MAX_TOKENS,
              tool_choice=None, on_event: Callable[[str, Transcript], None] | None = None, inputs_dir=None,
              **create_options) -> Transcript:
    """Run the tool-calling loop and return the `Transcript`.

    `skills` is a `SkillRegistry` (all its skills) or an `AgentView` (filtered, with its activation
    tracker: pass the same view again to continue a conversation, call `view.reset()` for a new one).
    `prompt` is the user's message, or a list of messages to start from. `system` is put before the skills
    section of the system prompt. `style` is "openai" or "anthropic" (detected from the client if None).
    Request options (see `request_options`): `max_tokens` caps every reply and is always sent (to an
    OpenAI-style client as max_tokens, or as max_completion_tokens when you pass that instead);
    `tool_choice` is "auto" for OpenAI-style clients whenever tools are offered (a tool's name forces that
    tool); `create_options` (temperature, top_p, seed, ...) go to every create() call as they are.
    `inputs_dir`: a folder whose files the model may hand to scripts (execute_skill_script's `inputs`,
    paths relative to it; nothing outside it); for a view, give it there (`reg.for_agent(inputs_dir=...)`).

    `on_event(kind, transcript)` is called as the loop goes, for live displays: "start", "model" (a model
    turn was added to `transcript.steps`), "tool" (a tool call and its result were added), "done".
    A failure of the client (bad key, rate limit, unknown model, no connection) raises `ClientError`, one
    line that says what to do, with the transcript so far as its `.transcript`. Ctrl-C raises
    `AgentInterrupted` (a KeyboardInterrupt) with the transcript so far, marked `interrupted`.
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
    options = dict(create_options, max_tokens=max_tokens, tool_choice=tool_choice)
    sent_options = request_options(style, tools, **options)  # a bad option fails before any request
    transcript = Transcript(style=style, system=system_text, model=model, running=True, options=sent_options)
    if isinstance(prompt, str):
        transcript.messages.append({"role": "user", "content": prompt})
    else:
        transcript.messages.extend(dict(m) for m in prompt)
    emit = on_event or (lambda kind, t: None)
    started = time.perf_counter()
    doing = "before the first model call"
    emit("start", transcript)
    try:
        for turn in range(1, max_turns + 1):
            transcript.turns = turn
            doing = f"during the model call of turn {turn}"
            try:
                reply = model_reply(client, transcript.messages, model=model, style=style, system=system_text,
                                    tools=tools, **options)
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
                doing = f"during the tool call {name} of turn {turn}"
                t0 = time.perf_counter()
                result = view.dispatch(name, arguments)
                call = ToolCall(call_id, name, arguments, result, turn, time.perf_counter() - t0)
                transcript.tool_calls.append(call)
                step.tool_calls.append(call)
                results.append(call)
                emit("tool", transcript)
            transcript.messages.extend(tool_results(style, results))
        transcript.stop_reason = MAX_TURNS
        return transcript
    except KeyboardInterrupt as exc:
        transcript.turns = len(transcript.steps)
        transcript.stop_reason = INTERRUPTED
        transcript.seconds = time.perf_counter() - started
        raise AgentInterrupted(transcript, doing) from exc
    finally:
        transcript.seconds = time.perf_counter() - started
        transcript.running = False
        emit("done", transcript)


def tool_results(style: str, calls: list[ToolCall]) -> list[dict]:
    """The messages that hand the tool results back: OpenAI-style one "tool" message per call (its id and
    the text, as OpenAI specifies and compatible servers accept; llama-cpp-python's chatml-function-calling
    accepts them but its template drops them, which `Transcript.warnings` notices), Anthropic-style one
    user message of tool_result blocks."""
    if style == "openai":
        return [{"role": "tool", "tool_call_id": c.id, "content": c.result.text} for c in calls]
    return [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": c.id, "content": c.result.text,
                                          "is_error": c.result.is_error} for c in calls]}]


def request_options(style: str, tools=None, /, *, max_tokens: int = DEFAULT_MAX_TOKENS, tool_choice=None,
                    **options) -> dict:
    """The keyword arguments every create() call carries besides the model, messages, system prompt and tools.

    `max_tokens` is always sent: it caps the reply (a small local model may otherwise ramble for minutes).
    OpenAI-style clients get it as `max_tokens` (what local servers read), or as `max_completion_tokens` when
    that is among `options` (OpenAI's newer name, which its reasoning models require). Anthropic-style
    clients get `max_tokens` (which their API requires; `max_completion_tokens` is taken as it).
    `tool_choice` is sent only when tools are offered: "auto" by default for OpenAI-style clients (OpenAI's
    own default, and what servers such as llama-cpp-python's need before they pass tools to the model),
    nothing by default for Anthropic-style ones (their default is auto). "auto", "none" and "required" (or
    "any") are translated to each API's form, as is a tool's name, which forces that tool. Other `options`
    (temperature, top_p, seed, ...) are passed as they are; `stream` is refused (see STREAM_REFUSED)."""
    for key in OWN_FIELDS:
        if key in options:
            raise ConfigError(f"{key!r} cannot be a request option: ipyskills sets it itself (model with "
                              "model= / --model, the rest from the skills and the conversation)")
    if options.get("stream"):
        raise ConfigError(STREAM_REFUSED)
    options.pop("stream", None)
    cap = options.pop("max_completion_tokens", None)
    use_completion_name = cap is not None and style == "openai"
    cap = max_tokens if cap is None else cap
    if not isinstance(cap, int) or isinstance(cap, bool) or cap < 1:
        raise ConfigError(f"max_tokens must be a whole number of at least 1 (an output cap is always sent), "
                          f"got {cap!r}")
    sent = dict(options)
    sent["max_completion_tokens" if use_completion_name else "max_tokens"] = cap
    names = [(t.get("function") or t).get("name") for t in tools or ()]
    if names:
        choice = _tool_choice(style, tool_choice, names)
        if choice is not None:
            sent["tool_choice"] = choice
    return sent


def _tool_choice(style: str, choice, names: list[str]):
    if choice is None:
        return "auto" if style == "openai" else None
    if not isinstance(choice, str):
        return choice  # the API's own form (a dict), as given
    word = {"any": "required"}.get(choice, choice) if style == "openai" else choice
    if style == "openai":
        if word in ("auto", "none", "required"):
            return word
        if word in names:
            return {"type": "function", "function": {"name": word}}
    else:
        word = {"required": "any"}.get(word, word)
        if word in ("auto", "any", "none"):
            return {"type": word}
        if word in names:
            return {"type": "tool", "name": word}
    raise ConfigError(f"tool_choice must be auto, none, required or a tool's name ({', '.join(names)}), "
                      f"got {choice!r}")


def model_reply(client, messages: list[dict], *, model: str, style: str | None = None, system: str = "",
                tools: list[dict] | None = None, **options) -> Reply:
    """One model call, nothing dispatched: the reply's text, the tool calls it asks for, usage and time.

    This is the first turn of `run_agent` on its own (a trigger eval uses it). `options` are request
    options (`max_tokens`, `tool_choice`, `temperature`, ...: see `request_options`). A failure of the
    client raises `ClientError`.
    """
    style = style or detect_style(client)
    kwargs = request_options(style, tools, **options)
    if style == "openai":
        sent = ([{"role": "system", "content": system}] if system else []) + list(messages)
        kwargs.update(model=model, messages=sent)
        create = _get(_get(client, "chat"), "completions")
    else:
        kwargs.update(model=model, messages=messages)
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
        sent = {k: v for k, v in kwargs.items() if k not in OWN_FIELDS}
        raise client_error(exc, model, style, sent) from exc
    seconds = time.perf_counter() - t0
    if _is_stream(response):
        close = getattr(response, "close", None)
        if callable(close):
            close()
        raise ClientError(f"{style} API: the client returned a stream; {STREAM_REFUSED}", "stream")
    parse = _openai_reply if style == "openai" else _anthropic_reply
    reply = parse(response)
    reply.seconds = seconds
    reply.usage = usage_of(response)
    return reply


def _is_stream(response) -> bool:
    """A streamed response (the SDKs' Stream objects, a generator of chunks) rather than a whole reply."""
    return not isinstance(response, (dict, list, str, bytes)) and (
        hasattr(response, "__next__") or type(response).__name__ in ("Stream", "MessageStream"))


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
    # The message goes back in the next request: content is "" (never None, never left out) next to tool
    # calls, which OpenAI accepts and llama-cpp-python's server requires (it answers None with a 500).
    assistant: dict = {"role": "assistant", "content": content}
    parsed = [(_get(c, "id"), _get(_get(c, "function"), "name"), _get(_get(c, "function"), "arguments"))
              for c in calls]
    if calls:
        assistant["tool_calls"] = [
            {"id": call_id, "type": "function",
             "function": {"name": name, "arguments": arguments if isinstance(arguments, str) else
                          json.dumps(arguments, ensure_ascii=False)}}
            for call_id, name, arguments in parsed
        ]
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


class AgentInterrupted(KeyboardInterrupt):
    """Ctrl-C during `run_agent`: a KeyboardInterrupt (code that does not look for it still stops) that
    carries the transcript so far (`stop_reason` INTERRUPTED) and says where the loop was."""

    def __init__(self, transcript: Transcript, doing: str = ""):
        super().__init__(f"interrupted after {transcript.seconds:.1f} s")
        self.transcript = transcript
        self.doing = doing

    def line(self) -> str:
        """One line for the user: 'interrupted after 4.0 s, during the model call of turn 2; ...'."""
        t = self.transcript
        where = f", {self.doing}" if self.doing else ""
        return (f"interrupted after {t.seconds:.1f} s{where}; kept {t.turns} turn(s) and "
                f"{len(t.tool_calls)} tool call(s)")


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


def client_error(exc: BaseException, model: str = "", style: str = "", options: dict | None = None) -> ClientError:
    """A `ClientError` for an exception raised by a chat client (no SDK imported: duck-typed).

    `options` are the request options that were sent, named in the hint when the server's answer suggests
    the request itself was the problem. A server error whose detail says which field of the request it
    could not take (a validation error, a template that met a field it did not expect) is our bad request,
    not a server fault: kind "bad_request", with the field named first so the one-line cap never cuts it.
    """
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
    raw = _error_detail(exc)
    fields = request_fields(exc, raw) if kind in ("bad_request", "server") else ""
    detail = fields or raw.strip().rstrip(".")
    sent = ", ".join(f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in (options or {}).items())
    what, hint = _HINTS[kind]
    if kind == "server" and fields:  # a 500 that names a field of our request: ours, not the server's fault
        kind = "bad_request"
        what = "request refused"
        hint = "a 500, but caused by the request, not a server fault"
    if kind == "bad_request":
        hint += (f"; check the request options ({sent}), or report it to ipyskills if they are the defaults"
                 if sent else "")
    elif kind == "server" and not detail and sent:
        hint = (f"the server failed without saying why; if it fails the same way again, it may not handle "
                f"one of the request options ({sent})")
    provider = style or "chat"
    code = f" ({status})" if status else ""
    subject = f"model {model!r} " if kind == "not_found" and model else ""
    line = f"{provider} API: {subject}{what}{code}: {detail}; {hint}" if detail else \
        f"{provider} API: {subject}{what}{code} ({cls}); {hint}"
    return ClientError(_one_line(line, 600), kind, status)


def request_fields(exc: BaseException, detail: str) -> str:
    """The fields of our request that a server's error names, as 'messages[2].content: Input should be a
    valid string'; "" when it names none. Reads FastAPI's 422 body (`detail`: a list of `loc`/`msg`), the
    same errors as text (llama-cpp-python's 500 "7 validation errors: {'type': ..., 'loc': (...), ...}"),
    and a chat template's "'dict object' has no attribute 'content'"."""
    body = getattr(exc, "body", None)
    errors = body.get("detail") if isinstance(body, dict) and isinstance(body.get("detail"), list) else []
    if not errors:
        for line in detail.splitlines():
            line = line.strip()
            if line.startswith("{") and "'loc'" in line:
                try:
                    errors.append(ast.literal_eval(line))
                except (ValueError, SyntaxError):
                    found = re.search(r"'loc': \(([^)]*)\).*?'msg': (['\"])(.*?)\2", line)
                    if found:
                        errors.append({"loc": [w.strip(" '") for w in found.group(1).split(",")],
                                       "msg": found.group(3)})
    errors = [e for e in errors if isinstance(e, dict) and isinstance(e.get("loc"), (list, tuple))]
    # A union of message types: each type that failed on its role literal was not the one meant.
    wrong = {_member(e["loc"]) for e in errors if e.get("type") == "literal_error" and e["loc"][-1] == "role"}
    meant = [e for e in errors if _member(e["loc"]) not in wrong - {None}] or errors
    named = [f"{_path(e['loc'])}: {e.get('msg', '')}".rstrip(": ") for e in meant]
    if named:
        more = len(errors) - 1
        return named[0] + (f" (and {more} more validation error(s))" if more else "")
    found = re.search(r"has no attribute '(\w+)'", detail)
    if found:
        return f"{found.group(1)}: the server's template found no {found.group(1)!r} where it needed one"
    return ""


def _member(loc) -> str | None:
    """The union member a validation error is about (a CamelCase segment), if any."""
    return next((str(part) for part in loc if isinstance(part, str) and part[:1].isupper()), None)


def _path(loc) -> str:
    """('body', 'messages', 2, 'ChatCompletionRequestAssistantMessage', 'content') -> messages[2].content"""
    out = ""
    for part in loc:
        if part == "body" and not out:
            continue
        if isinstance(part, int) or (isinstance(part, str) and part.isdigit()):
            out += f"[{part}]"
        elif isinstance(part, str) and not part[:1].isupper():
            out += f".{part}" if out else part
    return out or "the request"


def _error_detail(exc: BaseException) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return err["message"]
        if isinstance(err, str):
            return err
        if isinstance(body.get("detail"), str):
            return body["detail"]
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
