"""Run a tool-calling conversation between a chat client you pass in and your skills.

No SDK is imported here: any object shaped like the OpenAI client (`client.chat.completions.create(model=,
messages=, tools=)`) or the Anthropic client (`client.messages.create(model=, system=, messages=, tools=,
max_tokens=)`) works, and responses may be SDK objects or plain dicts. The loop calls the model, dispatches
every tool call through an `AgentView` (the same text `ipyskills load` / `ipyskills run` would give), sends
the results back, and stops when the model answers without tool calls or after `max_turns` model calls.

Example with a real client::

    from openai import OpenAI
    from ipyskills import SkillRegistry
    from ipyskills.agent.loop import run_agent

    reg = SkillRegistry(["./skills"])
    transcript = run_agent(OpenAI(), reg, "Convert this JSON to CSV: [{\"a\": 1}]", model="gpt-4o-mini")
    print(transcript.final)
    for call in transcript.tool_calls:
        print(call.name, call.arguments, "->", call.result.text[:200])

Without a model, `ScriptedClient` replays a fixed list of steps. It is a deterministic stand-in for demos
and tests, not a model: it never reads the conversation, it just returns the next scripted response::

    from ipyskills.agent.loop import ScriptedClient, run_agent

    client = ScriptedClient([
        [("read_skill", {"skill_name": "data-processor"})],
        [("execute_skill_script", {"skill_name": "data-processor",
                                   "script_path": "scripts/analyze.py", "input": "[1, 2, 3]"})],
        "The mean is 2.",
    ], style="anthropic")
    transcript = run_agent(client, reg, "Analyse [1, 2, 3]", model="scripted")
"""


from __future__ import annotations

import time
from collections.abc import Callable

from ..errors import ConfigError
from .client_errors import AgentInterrupted, ClientError, client_error, request_fields  # noqa: F401
from .stand_ins import MatchingClient, ScriptedClient  # noqa: F401 (re-exported: the documented names)
from .tools import AgentView
from .transcript import (  # noqa: F401 (re-exported: the stop reasons and records callers read)
    ANSWERED,
    EMPTY_REPLY,
    ERROR,
    INTERRUPTED,
    MAX_TURNS,
    TRUNCATED,
    Reply,
    Step,
    ToolCall,
    Transcript,
    Usage,
    _compact,
    call_target,
)
from .transports import (  # noqa: F401 (re-exported)
    DEFAULT_MAX_TOKENS,
    OWN_FIELDS,
    STREAM_REFUSED,
    STYLES,
    _get,
    detect_style,
    model_reply,
    request_options,
    tool_results,
    usage_of,
)

DEFAULT_MAX_TURNS = 8


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


def _finish(transcript: Transcript, text: str, truncated: bool) -> bool:
    transcript.final = text
    transcript.stop_reason = TRUNCATED if truncated else ANSWERED
    return True
