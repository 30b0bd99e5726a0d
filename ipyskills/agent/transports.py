"""The two tool-calling wire styles, OpenAI's (`chat.completions.create`) and Anthropic's (`messages.create`):
detecting which one a client object speaks, building the request, reading the reply (SDK objects or plain
dicts) and handing tool results back. A new style is added here, and nowhere else."""

from __future__ import annotations

import json
import time

from ..errors import ConfigError, SkillError
from .client_errors import ClientError, client_error
from .transcript import Reply, ToolCall, Usage

STYLES = ("openai", "anthropic")
DEFAULT_MAX_TOKENS = 4096  # the output cap of one model call when the caller gives none

# The request fields the loop fills in itself; a request option may not replace them.
OWN_FIELDS = ("model", "messages", "tools", "system")
STREAM_REFUSED = ("streaming is not supported: the loop needs each reply whole (its tool calls complete) "
                  "before it can go on; leave out stream=True (the transcript still shows each turn as it "
                  "ends)")


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
