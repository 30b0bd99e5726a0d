"""What one agent run leaves behind: its tool calls, turns, token usage and why it stopped (`Transcript`),
and the stop reasons themselves."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .tools import EXECUTE_SKILL_SCRIPT, READ_SKILL, ToolResult

# Why the loop ended.
ANSWERED = "answered"  # the model replied without tool calls
MAX_TURNS = "max_turns"  # the model was still calling tools when the turn limit was reached
TRUNCATED = "truncated"  # the model's reply was cut by its token limit
ERROR = "error"  # the client failed (see Transcript.error)
INTERRUPTED = "interrupted"  # Ctrl-C (interrupt the kernel) stopped it (see AgentInterrupted)

EMPTY_REPLY = "(empty reply: the model answered with no text and no tool call)"


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
