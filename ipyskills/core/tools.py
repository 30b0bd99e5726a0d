"""Skills as agent tools: the tool schemas, the dispatcher, and the filtered view one agent gets.

Two tools, with the names and parameters of WeKnora's design so an agent written for it works unchanged:

- `read_skill(skill_name, file_path?)`: level 2 (the skill's instructions, `<skill_content>`) or, with
  `file_path`, level 3 (one bundled file, `<skill_resource>`). SiYuan's locator form is accepted too:
  `skill_name="pdf-processing/references/forms.md"`.
- `execute_skill_script(skill_name, script_path, args?, input?)`: runs a bundled script in the sandbox;
  `args` is a list of strings, `input` becomes the script's stdin. The model gets a run report.

Framing: whatever a script prints or a skill file holds, a tool result has exactly one opening and one
closing tag of its block (`<script_result>`, `<skill_content>`, `<skill_resource>`) and of each section
(`<stdout>`, `<stderr>`, `<artifacts>`, `<skill_resources>`): text placed inside is passed through
`prompt.neutralise`, which writes the `<` of any look-alike of those tags as `&lt;`, and every part of the
frame is capped on its own, so no cut can remove a tag. The status and exit code are in the opening tag
and the Status line, from the result itself.

`dispatch` never raises for anything a model can send: every failure comes back as a `ToolResult` whose
text starts with "Error:" and says what was wrong and what to do next, with `is_error` set so an adapter
can flag it (Anthropic's `is_error`). Unlike WeKnora, a guard block names the rule and the line.

`AgentView` is what one agent sees: an optional allow-list and per-skill enable/disable filter the catalog,
the `skill_name` enum and the dispatcher alike. A hidden skill is reported exactly like a missing one, so
the filter leaks nothing. The view also tracks which skills were activated in the current conversation
and answers a repeated activation with a short note instead of the whole body again.
"""

from __future__ import annotations

import difflib
import json
import logging
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from html import escape
from pathlib import Path, PurePosixPath
from typing import Any

from ..errors import ConfigError, GuardBlocked, ResourceError, SandboxError, SkillError, SkillNotFound
from .prompt import LEVEL2_CAP, neutralise

log = logging.getLogger(__name__)

READ_SKILL = "read_skill"
EXECUTE_SKILL_SCRIPT = "execute_skill_script"
TOOL_NAMES = (READ_SKILL, EXECUTE_SKILL_SCRIPT)
FORMATS = ("openai", "anthropic")

# What one tool result may hold, in characters. Agent harnesses commonly cut tool output somewhere in the
# 10-30K range; we cut first, visibly, keeping the start and the end.
DEFAULT_OUTPUT_CAP = LEVEL2_CAP  # the same cap as level-2 text, so read_skill shows what `load` shows
CUT_MARK = "\n[ipyskills: {cut} characters cut here; a tool result is capped at {cap} characters]\n"
# Frontmatter key (a widely used extension) by which an author keeps a skill away from the model.
NO_MODEL_KEY = "disable-model-invocation"

_READ_SKILL_DESCRIPTION = (
    "Load a skill. Call this with just skill_name when the user's task matches the description of one of "
    "the available skills, before you start on the task: it returns the skill's full instructions, the "
    "skill's folder and a list of the files bundled with it. "
    "When those instructions point you to one of the files, call this again with file_path set to that "
    "file's path relative to the skill folder (for example references/forms.md) to read it. "
    "Returns the text wrapped in <skill_content> or <skill_resource> tags, or a line starting with "
    "'Error:' that says what to change."
)
_EXECUTE_DESCRIPTION = (
    "Run a script bundled with a skill, in a sandbox, and get its exit code, duration, standard output, "
    "standard error and any files it wrote. Call this when a skill's instructions tell you to run one of "
    "its scripts; read the skill first with read_skill. The script runs non-interactively in a fresh, "
    "writable working folder (the skill's own files stay read-only at their place, so paths the skill's "
    "instructions give still work); files it writes there come back listed in the result. Pass "
    "command-line arguments in args as a list of strings, and data you already have (for example a JSON "
    "string) in input, which the script reads from standard input. "
    "Python packages the skill needs are installed into the sandbox before its first run; the script "
    "itself has no network access. "
    "Long output is cut in the middle, and the cut is marked. A failure comes back as a line starting "
    "with 'Error:' or as a report with a non-zero exit code; read it, then fix the call or tell the user."
)


# ---------------------------------------------------------------------------------------------- results


@dataclass(frozen=True)
class ToolResult:
    """What `dispatch` returns: the exact text for the model, and whether the call failed.

    `error` is a short machine-readable kind ("" on success): unknown_tool, bad_arguments, unknown_skill,
    resource, guard_blocked, sandbox, timed_out, out_of_memory, exit_code, skill, internal.
    """

    tool: str
    text: str
    is_error: bool = False
    error: str = ""

    def __str__(self) -> str:
        return self.text


def _error(tool: str, kind: str, message: str) -> ToolResult:
    return ToolResult(tool=tool, text=f"Error: {message}", is_error=True, error=kind)


def cap_text(text: str, cap: int = DEFAULT_OUTPUT_CAP, *, result_cap: int | None = None) -> str:
    """`text` if it fits in `cap` characters, else its start and end around a mark saying how much was cut.

    The result is never longer than `cap` (as long as `cap` leaves room for the mark itself). The mark
    names `result_cap` (default `cap`): the limit of the whole tool result when `text` is one part of it.
    """
    if len(text) <= cap:
        return text
    cut = len(text) - cap
    while True:  # the mark's length depends on the number in it; settle it in a step or two
        mark = CUT_MARK.format(cut=cut, cap=cap if result_cap is None else result_cap)
        keep = max(cap - len(mark), 0)
        new_cut = len(text) - keep
        if new_cut == cut:
            break
        cut = new_cut
    head = keep - keep // 3  # the start usually says what this is; the end holds the error or the summary
    tail = keep - head
    return text[:head] + mark + (text[len(text) - tail:] if tail else "")


# ---------------------------------------------------------------------------------------------- schemas


_INPUTS_DESCRIPTION = (
    "Optional. Files or folders from the user's inputs folder, each named by its path relative to that "
    "folder (e.g. [\"sales.csv\"] or [\"reports/q3.pdf\"]). Each is copied into the script's working "
    "folder under its own base name before it starts, so refer to it by that name in args (e.g. "
    "args [\"q3.pdf\"]). Only files in the inputs folder can be given."
)


def _parameters(names: list[str], tool: str, inputs: bool = False) -> dict:
    """JSON Schema for one tool's arguments; `skill_name` is an enum of the visible skills. `inputs`: the
    execute tool takes an `inputs` list (only offered when the application named an inputs folder)."""
    skill_name = {"type": "string", "enum": list(names)}
    if tool == READ_SKILL:
        skill_name["description"] = "Name of the skill, exactly as listed among the available skills."
        return {
            "type": "object",
            "properties": {
                "skill_name": skill_name,
                "file_path": {
                    "type": "string",
                    "description": (
                        "Optional. Path of one file inside the skill folder, relative to it, as listed in "
                        "the skill's resources (e.g. references/forms.md). Leave it out to load the "
                        "skill's instructions."
                    ),
                },
            },
            "required": ["skill_name"],
            "additionalProperties": False,
        }
    skill_name["description"] = "Name of the skill that bundles the script."
    schema = {
        "type": "object",
        "properties": {
            "skill_name": skill_name,
            "script_path": {
                "type": "string",
                "description": "Path of the script relative to the skill folder, e.g. scripts/analyze.py.",
            },
            "args": {
                "type": "array",
                "items": {"type": "string"},
                "description": (
                    "Optional command-line arguments, one list item each, e.g. [\"--to\", \"csv\"]. A file "
                    "argument must name a file that exists in the skill folder; for data you have in the "
                    "conversation, use input instead."
                ),
            },
            "input": {
                "type": "string",
                "description": (
                    "Optional text passed to the script on standard input, like piping: "
                    "echo '<input>' | python scripts/analyze.py"
                ),
            },
        },
        "required": ["skill_name", "script_path"],
        "additionalProperties": False,
    }
    if inputs:
        schema["properties"]["inputs"] = {"type": "array", "items": {"type": "string"},
                                          "description": _INPUTS_DESCRIPTION}
    return schema


def schemas_for(names: list[str], format: str = "openai", *, inputs: bool = False) -> list[dict]:
    """The two tool definitions for the skills `names`, in `format`; no names gives [] (no tools at all).
    `inputs`: offer execute_skill_script's `inputs` argument (the view has an inputs folder)."""
    if format not in FORMATS:
        raise ConfigError(f"tool schema format must be one of {', '.join(FORMATS)}, got {format!r}")
    if not names:
        return []
    specs = [(READ_SKILL, _READ_SKILL_DESCRIPTION), (EXECUTE_SKILL_SCRIPT, _EXECUTE_DESCRIPTION)]
    out = []
    for name, description in specs:
        params = _parameters(names, name, inputs)
        if format == "openai":
            out.append({"type": "function", "function": {"name": name, "description": description,
                                                          "parameters": params}})
        else:
            out.append({"name": name, "description": description, "input_schema": params})
    return out


# -------------------------------------------------------------------------------------------- arguments

# tool -> {argument: (expected type, required)}. script_path is checked later: the locator form
# skill_name="name/scripts/x.py" may carry it instead.
_SIGNATURES = {
    READ_SKILL: {"skill_name": (str, True), "file_path": (str, False)},
    EXECUTE_SKILL_SCRIPT: {"skill_name": (str, True), "script_path": (str, False),
                           "args": (list, False), "input": (str, False), "inputs": (list, False)},
}
_EXAMPLES = {
    READ_SKILL: '{"skill_name": "<skill>"} or {"skill_name": "<skill>", "file_path": "references/x.md"}',
    EXECUTE_SKILL_SCRIPT: '{"skill_name": "<skill>", "script_path": "scripts/x.py", "args": ["--flag"]}',
}


class _BadArguments(Exception):
    """Internal: the arguments do not fit the tool; the message is for the model."""


def _parse_arguments(tool: str, arguments: Any) -> dict:
    """Checked arguments with optional ones that are null or "" dropped; _BadArguments says what is wrong."""
    if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
        arguments = {}
    if isinstance(arguments, (str, bytes, bytearray)):
        try:
            arguments = json.loads(arguments)
        except (ValueError, UnicodeDecodeError) as exc:
            raise _BadArguments(
                f"the arguments for {tool} are not valid JSON ({exc}). Send one JSON object, e.g. "
                f"{_EXAMPLES[tool]}"
            ) from None
    if not isinstance(arguments, dict):
        raise _BadArguments(
            f"the arguments for {tool} must be a JSON object, got {_json_type(arguments)}. "
            f"Example: {_EXAMPLES[tool]}"
        )
    signature = _SIGNATURES[tool]
    extra = sorted(str(k) for k in arguments if k not in signature)
    if extra:
        raise _BadArguments(
            f"{tool} got unexpected argument(s) {', '.join(extra)}; it takes only "
            f"{', '.join(signature)}. Example: {_EXAMPLES[tool]}"
        )
    checked = {}
    for key, (kind, required) in signature.items():
        value = arguments.get(key)
        if required and (value is None or (isinstance(value, str) and not value.strip())):
            raise _BadArguments(f"{tool}: {key} is required. Example: {_EXAMPLES[tool]}")
        if value is None or value == "":
            continue
        if not isinstance(value, kind) or isinstance(value, bool):
            want = "a string" if kind is str else "an array of strings"
            raise _BadArguments(f"{tool}: {key} must be {want}, got {_json_type(value)}")
        if kind is list:
            for i, item in enumerate(value):
                if not isinstance(item, str):
                    hint = ('write numbers and flags as strings, e.g. ["--limit", "10"]' if key == "args" else
                            'name each file by its path in the inputs folder, e.g. ["sales.csv"]')
                    raise _BadArguments(f"{tool}: {key}[{i}] must be a string, got {_json_type(item)}; {hint}")
        checked[key] = value
    return checked


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


# ------------------------------------------------------------------------------------------ run reports


_LINE_BREAKS = str.maketrans({c: repr(c)[1:-1] for c in "\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"})


def one_line(text: str) -> str:
    """`text` with every character Python or a model may read as a line break escaped, so a value in
    the report's head can never start a line of its own (a forged `Status:` line)."""
    return text.translate(_LINE_BREAKS)


def run_report(result, cap: int = DEFAULT_OUTPUT_CAP) -> str:
    """The text a model gets for one `ExecuteResult`: a status, then stdout, stderr and artifacts.

    Every text that comes from the run (output, arguments, notices, findings, file names) is neutralised
    (`prompt.neutralise`), so the block and each section have exactly one opening and one closing tag.
    The head and the artifact listing are each capped to a quarter of `cap`; standard output and error
    share what is left, each keeping its start and end.
    """
    attrs = (f'skill="{escape(_short(result.skill, 200))}" script="{escape(_short(result.script, 300))}" '
             f'exit_code="{result.exit_code if result.exit_code is not None else "none"}"')
    opening = f"<script_result {attrs}>"
    head = [f"Status: {_status(result)}"]
    if result.args:
        head.append("Arguments: " + json.dumps(list(result.args), ensure_ascii=False))
    if getattr(result, "inputs", None):
        head.append("Inputs in the working folder: " + json.dumps(list(result.inputs), ensure_ascii=False))
    head.append(f"Backend: {one_line(result.backend or 'unknown')}"
                + (f" ({one_line(result.isolation)})" if result.isolation else ""))
    if result.notice:
        head.append(f"Notice: {one_line(result.notice)}")  # it quotes file names a skill chose
    for finding in result.findings:
        head.append(f"Guard warning: {one_line(str(finding))}")
    quarter = max(cap // 4, 200)
    head_text = cap_text(neutralise("\n".join(head)), quarter, result_cap=cap)
    tail = []
    notes = [neutralise(_short(n, 600)) for n in getattr(result, "artifact_notes", list)()]
    if result.artifacts or notes:
        listing = [f"  Note: {n}" for n in notes]  # first: a long file list gives way, the notes stay
        listing += [f'  <file size="{a.size}">{escape(_short(a.path, 300))}</file>' for a in result.artifacts]
        while listing and len("\n".join(listing)) > quarter:  # whole lines only: no tag is ever cut
            cut_mark = (f"  [ipyskills: {len(result.artifacts)} files listed in all; "
                        "the rest of this list was cut]")
            listing = listing[:len(listing) // 2] + [cut_mark]
            if len(listing) <= 2:
                break
        tail += ["<artifacts>", *listing, "</artifacts>"]
    tail.append("</script_result>")

    streams = [("stdout", neutralise(result.stdout or "")), ("stderr", neutralise(result.stderr or ""))]
    frame = len("\n".join([opening, head_text, *tail])) + sum(len(f"\n<{n}>\n\n</{n}>") for n, _ in streams)
    budget = max(cap - frame, 0)
    sizes = _share(budget, [len(text) for _, text in streams])
    body = []
    for (tag, text), size in zip(streams, sizes):
        if not text:
            body.append(f"<{tag}></{tag}>")
            continue
        text = cap_text(text, size, result_cap=cap)
        end = "" if text.endswith("\n") else "\n"
        body.append(f"<{tag}>\n{text}{end}</{tag}>")
    return "\n".join([opening, head_text, *body, *tail])


def _short(text: str, limit: int) -> str:
    text = str(text)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _share(budget: int, lengths: list[int]) -> list[int]:
    """Split `budget` between streams: equal shares, and what a short stream does not need goes to the other."""
    if sum(lengths) <= budget:
        return lengths
    shares = [0] * len(lengths)
    left, open_ = budget, sorted(range(len(lengths)), key=lambda i: lengths[i])
    while open_:
        each = left // len(open_)
        i = open_.pop(0)
        shares[i] = min(lengths[i], each)
        left -= shares[i]
    return shares


def _status(result) -> str:
    secs = f"{result.duration:.2f} s"
    if result.timed_out:
        return (f"TIMED OUT after {secs}; the script was stopped before it finished. Any output it produced "
                "is below. Try smaller input or fewer items, or tell the user it needs a longer timeout.")
    if result.oom_killed:
        return (f"OUT OF MEMORY after {secs}; the sandbox's memory limit stopped the script. Try smaller "
                "input, or tell the user it needs a higher memory limit.")
    if result.exit_code == 0:
        return f"completed, exit code 0, in {secs}"
    return (f"FAILED with exit code {result.exit_code} after {secs}; standard error below usually says why. "
            "Fix the arguments or input and try again, or tell the user.")


def _run_error_kind(result) -> str:
    if result.timed_out:
        return "timed_out"
    if result.oom_killed:
        return "out_of_memory"
    return "" if result.exit_code == 0 else "exit_code"


# ------------------------------------------------------------------------------------ activation tracker


class ActivationTracker:
    """Which skills were activated in one conversation, so their instructions are not sent twice.

    Only activations are tracked; file reads and runs always go through.
    """

    def __init__(self):
        self._active: list[str] = []

    @property
    def active(self) -> list[str]:
        """Activated skill names, in activation order."""
        return list(self._active)

    def is_active(self, name: str) -> bool:
        return name in self._active

    def activate(self, name: str) -> None:
        if name not in self._active:
            self._active.append(name)

    def forget(self, name: str) -> None:
        """Call when the conversation no longer holds the skill's instructions (e.g. after compaction)."""
        if name in self._active:
            self._active.remove(name)

    def reset(self) -> None:
        """Start a new conversation."""
        self._active.clear()


def already_active_note(name: str) -> str:
    return (f"Skill {name!r} is already active in this conversation; its instructions are in an earlier "
            "read_skill result above. Follow them. To read one of its files, call read_skill with file_path.")


# ------------------------------------------------------------------------------------------- agent view


class AgentView:
    """What one agent may see and do with a registry's skills.

    `allow`: skill names the agent may use (None = all). `disabled`: names switched off. A skill whose
    frontmatter sets `disable-model-invocation: true` starts disabled; `enable(name)` switches it on.
    `output_cap` bounds every tool result (characters). `backend`, `timeout`, `guard` and any other
    `run_options` go to `registry.run` for execute_skill_script.

    `inputs_dir`: a folder the application (never the model) chooses, whose files the model may hand to a
    script with execute_skill_script's `inputs` argument, each named by its path relative to the folder.
    Without it the argument is not offered, and using it is an error. A name is refused unless it stays
    inside the folder: no absolute path, drive, `~` or `..`, and no link leading out (the name is resolved,
    links and all, and must land inside). Everything inside the folder is readable by the model's runs, so
    give a folder meant for that, not a home directory.

    Visibility is computed on every call, so skills added to the registry later show up at once, and the
    catalog, the schema enum and the dispatcher always agree.
    """

    def __init__(self, registry, allow: Iterable[str] | None = None, disabled: Iterable[str] = (), *,
                 output_cap: int = DEFAULT_OUTPUT_CAP, backend: str | None = None,
                 timeout: float | None = None, guard: bool | None = None, track_activations: bool = True,
                 inputs_dir=None, **run_options):
        if isinstance(allow, str) or isinstance(disabled, str):
            raise ConfigError("allow and disabled take a list of skill names, not a single string")
        if not isinstance(output_cap, int) or isinstance(output_cap, bool) or output_cap < 1000:
            raise ConfigError(f"output_cap must be a whole number of characters, at least 1000; got {output_cap!r}")
        self.registry = registry
        self.allow = None if allow is None else frozenset(allow)
        self._disabled = set(disabled)
        self._enabled: set[str] = set()  # explicit enables, which beat disable-model-invocation
        self.output_cap = output_cap
        self.run_options = {k: v for k, v in dict(run_options, backend=backend, timeout=timeout,
                                                   guard=guard).items() if v is not None}
        self.tracker = ActivationTracker() if track_activations else None
        self.inputs_dir = _inputs_folder(inputs_dir)

    # -- visibility

    def skills(self) -> list:
        """The visible skills' metadata, in registry order."""
        return [meta for meta in self.registry.list() if self._visible(meta)]

    def names(self) -> list[str]:
        return [meta.name for meta in self.skills()]

    def _visible(self, meta) -> bool:
        name = meta.name
        if self.allow is not None and name not in self.allow:
            return False
        if name in self._disabled:
            return False
        opted_out = _truthy((meta.frontmatter or {}).get(NO_MODEL_KEY))
        return not opted_out or name in self._enabled

    def disable(self, name: str) -> None:
        """Hide a skill from the agent (catalog, enum and dispatcher)."""
        name = self._canonical(name)
        self._disabled.add(name)
        self._enabled.discard(name)
        if self.tracker:
            self.tracker.forget(name)

    def enable(self, name: str) -> None:
        """Show a skill again (also one whose author set disable-model-invocation). The allow-list still applies."""
        name = self._canonical(name)
        if self.allow is not None and name not in self.allow:
            raise ConfigError(f"skill {name!r} is not in this view's allow-list, so enabling it has no effect; "
                              "create the view with it in allow=[...]")
        self._disabled.discard(name)
        self._enabled.add(name)

    def _canonical(self, name: str) -> str:
        # The registry also finds a skill by its folder name; filters work on the skill's own name.
        return self.registry.get(name).name  # SkillNotFound carries the registry's own advice

    # -- what the model is given

    def catalog(self) -> str:
        """The `<available_skills>` block for the visible skills ("" when none)."""
        from .prompt import catalog

        return catalog(self.skills())

    def system_prompt(self, format: str = "xml") -> str:
        """Behavioural instructions plus the catalog ("xml" or "markdown"); "" when no skill is visible."""
        from .agent_prompt import system_prompt_for

        return system_prompt_for(self.skills(), format)

    def tool_schemas(self, format: str = "openai") -> list[dict]:
        """The tool definitions ("openai" or "anthropic"); [] when no skill is visible."""
        return schemas_for(self.names(), format, inputs=self.inputs_dir is not None)

    def reset(self) -> None:
        """Start a new conversation: forget which skills were activated."""
        if self.tracker:
            self.tracker.reset()

    # -- calls

    def dispatch(self, tool_name: str, arguments: Any = None) -> ToolResult:
        """Run one tool call and return the model's text; never raises for anything the model sent."""
        tool = tool_name if isinstance(tool_name, str) else repr(tool_name)
        try:
            if tool_name not in TOOL_NAMES:
                return self._unknown_tool(tool)
            if not self.names():
                return _error(tool, "unknown_tool", "no skills are available to this agent, so skill tools "
                                                    "cannot be used; answer without them.")
            try:
                args = _parse_arguments(tool, arguments)
            except _BadArguments as exc:
                return _error(tool, "bad_arguments", str(exc))
            if tool == READ_SKILL:
                return self._read_skill(args)
            return self._execute(args)
        except Exception as exc:  # a bug of ours must not end the agent's conversation
            log.exception("ipyskills: %s failed unexpectedly", tool)
            return _error(tool, "internal", f"{tool} failed inside ipyskills ({type(exc).__name__}: {exc}). "
                                            "This is not caused by your arguments; tell the user.")

    def _unknown_tool(self, tool: str) -> ToolResult:
        offered = ", ".join(TOOL_NAMES) if self.names() else "none (no skills are available)"
        return _error(tool, "unknown_tool", f"there is no tool named {tool!r} here. Skill tools: {offered}.")

    def _locate(self, tool: str, args: dict, path_key: str) -> tuple[str, str | None] | ToolResult:
        """(skill, path) from skill_name and the path argument, accepting the `name/path` locator form."""
        name, sep, rest = args["skill_name"].strip().partition("/")
        path = args.get(path_key)
        if sep:
            if path is not None:
                return _error(tool, "bad_arguments",
                              f"give the file once: either skill_name={name!r} with {path_key}={path!r}, or "
                              f"skill_name={args['skill_name']!r} alone")
            path = rest
        if name not in self.names():
            return self._unknown_skill(tool, name)
        return name, path

    def _unknown_skill(self, tool: str, name: str) -> ToolResult:
        names = self.names()  # only visible names, so a hidden skill reads exactly like a missing one
        close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
        lowered = [n for n in names if n.lower() == name.lower() and n not in close]
        hint = f" Did you mean {' or '.join(repr(n) for n in lowered + close)}?" if lowered or close else ""
        return _error(tool, "unknown_skill",
                      f"unknown skill {name!r}.{hint} Available skills: {', '.join(names)}.")

    def _within_skill(self, name: str, path: str) -> str:
        """`path` without a leading `name/` when the model repeated the skill's name in it (a common slip of
        small models: file_path="data-processor/SKILL.md") and the skill has no such folder of its own."""
        prefix = f"{name}/"
        bare = path.removeprefix("./")
        if not bare.startswith(prefix):
            return path
        try:
            root = Path(self.registry.get(name).path)
        except SkillError:
            return path
        return path if (root / name).is_dir() else bare[len(prefix):]

    def _read_skill(self, args: dict) -> ToolResult:
        located = self._locate(READ_SKILL, args, "file_path")
        if isinstance(located, ToolResult):
            return located
        name, path = located
        if path is not None:
            path = self._within_skill(name, path)
        activation = path is None or path in ("SKILL.md", "skill.md", "./SKILL.md", "./skill.md")
        if activation and self.tracker and self.tracker.is_active(name):
            return ToolResult(READ_SKILL, already_active_note(name))
        locator = name if path is None else f"{name}/{path}"
        try:
            loaded = self.registry.load(locator)
            text = str(loaded)  # exactly what `load` and the CLI show, when it fits this view's cap
            if len(text) > self.output_cap and hasattr(loaded, "render"):
                text = loaded.render(self.output_cap)  # cut inside the block, so its tags stay whole
        except ResourceError as exc:
            return _error(READ_SKILL, "resource", f"cannot read {locator!r}: {exc}")
        except SkillNotFound:
            return self._unknown_skill(READ_SKILL, name)  # e.g. removed from disk since listing
        except SkillError as exc:
            return _error(READ_SKILL, "skill", f"cannot load skill {name!r}: {exc}")
        if activation and self.tracker and text.startswith("<skill_content"):
            self.tracker.activate(name)
        return ToolResult(READ_SKILL, text)

    def _execute(self, args: dict) -> ToolResult:
        located = self._locate(EXECUTE_SKILL_SCRIPT, args, "script_path")
        if isinstance(located, ToolResult):
            return located
        name, script = located
        if not script:
            return _error(EXECUTE_SKILL_SCRIPT, "bad_arguments",
                          "script_path is required: the script's path relative to the skill folder, e.g. "
                          "scripts/analyze.py. Load the skill with read_skill to see its files.")
        where = f"{name}/{script}"
        call = {"args": list(args.get("args") or []), "stdin": args.get("input")}
        if args.get("inputs"):
            staged = self._input_paths(args["inputs"])
            if isinstance(staged, ToolResult):
                return staged
            call["inputs"] = staged
        try:
            # The call's own problems (a path outside the skill, a missing file) first, so that what is
            # left below is about running, which the model cannot fix.
            # With this view's limits, so an input over its input_cap is the call's problem too.
            limits = {k: v for k, v in self.run_options.items() if k not in _RUN_ONLY_OPTIONS}
            self.registry.run_request(name, script, **call, **limits)
        except SkillNotFound:
            return self._unknown_skill(EXECUTE_SKILL_SCRIPT, name)
        except SkillError as exc:
            return _error(EXECUTE_SKILL_SCRIPT, "bad_arguments",
                          f"cannot run {where!r}: {exc}. Load the skill with read_skill to see its files.")
        try:
            result = self.registry.run(name, script, **call, **self.run_options)
        except GuardBlocked as exc:
            return _error(EXECUTE_SKILL_SCRIPT, "guard_blocked", _guard_message(where, exc))
        except SandboxError as exc:
            return _error(EXECUTE_SKILL_SCRIPT, "sandbox",
                          f"{where!r} was not run: {exc}. The call itself was well-formed; if this is "
                          "about the sandbox, scripts cannot run here right now, so tell the user.")
        except SkillError as exc:
            return _error(EXECUTE_SKILL_SCRIPT, "skill", f"{where!r} was not run: {exc}")
        kind = _run_error_kind(result)
        return ToolResult(EXECUTE_SKILL_SCRIPT, run_report(result, self.output_cap), is_error=bool(kind),
                          error=kind)


    def _input_paths(self, names: list[str]) -> list[str] | ToolResult:
        """Host paths for the model's `inputs`, each checked to stay inside the inputs folder."""
        def refuse(message: str) -> ToolResult:
            return _error(EXECUTE_SKILL_SCRIPT, "bad_arguments", f"inputs: {message}")

        if self.inputs_dir is None:
            return refuse("this agent has no inputs folder, so no file can be passed. Put data you have in "
                          "input (the script's standard input) instead, or tell the user the script needs a "
                          "file.")
        root = Path(os.path.realpath(self.inputs_dir))
        if not root.is_dir():
            return _error(EXECUTE_SKILL_SCRIPT, "sandbox", "the inputs folder is not available right now; "
                                                          "tell the user.")
        if len(names) > MAX_AGENT_INPUTS:
            return refuse(f"{len(names)} names; give at most {MAX_AGENT_INPUTS} (a folder counts as one).")
        paths, staged_as = [], {}
        for raw in names:
            problem = _input_name_problem(raw)
            candidate = None if problem else root.joinpath(*PurePosixPath(raw).parts)
            if candidate is not None and not os.path.lexists(candidate):
                problem = "there is no such file or folder in the inputs folder"
            if candidate is not None and not problem:
                # Resolved with its links: whatever the name leads to must be inside the folder.
                real = Path(os.path.realpath(candidate))
                if real == root or root not in real.parents:
                    problem = ("it is a link that leads out of the inputs folder; only what is inside the "
                               "folder can be given")
                elif not (real.is_file() or real.is_dir()):
                    problem = "it is not a regular file or folder (or it is a broken link)"
            if problem:
                return refuse(f"{_short(raw, 200)!r} cannot be given: {problem}. Name a file or folder by its "
                              f"path relative to the inputs folder{_listing(root)}.")
            base = candidate.name
            if base in staged_as:
                return refuse(f"{staged_as[base]!r} and {raw!r} would both be copied in as {base!r}; give "
                              "one of them, or their common folder.")
            staged_as[base] = raw
            # The unresolved path, so a link is staged under the name the model gave (its target was checked
            # above; only the application can change the folder between the check and the copy).
            paths.append(str(candidate))
        return paths


# registry.run options that run_request (the call's own checks) does not take.
_RUN_ONLY_OPTIONS = ("backend", "guard", "progress", "save_to", "on_output", "overwrite")
MAX_AGENT_INPUTS = 100  # names one execute_skill_script call may give in `inputs`


def _inputs_folder(value) -> Path | None:
    """The application's inputs folder, absolute; ConfigError when it is not an existing folder."""
    if value is None:
        return None
    if not isinstance(value, (str, os.PathLike)) or not os.fspath(value):
        raise ConfigError(f"inputs_dir must be a folder path, got {value!r}")
    folder = Path(os.path.expanduser(os.fspath(value))).absolute()
    if not folder.is_dir():
        raise ConfigError(f"inputs_dir {os.fspath(value)!r} is not an existing folder; create it, or give the "
                          "folder whose files the agent may pass to scripts")
    # Everything under it is the model's to read: the whole disk or a home directory is never that.
    if folder.resolve() in (Path(folder.anchor), Path.home().resolve()):
        raise ConfigError(f"inputs_dir {os.fspath(value)!r} would give the agent every file under "
                          f"{folder.resolve()}; make a folder holding only the files it may read")
    return folder


def _input_name_problem(raw: str) -> str:
    """Why `raw` is not a plain relative path inside a folder ("" when it is)."""
    if not raw.strip():
        return "it is empty"
    if "\0" in raw:
        return "it contains a NUL character"
    if "\\" in raw:
        return "it contains a backslash; separate folders with /"
    if raw.startswith("/") or re.match(r"^[A-Za-z]:", raw):
        return "it is an absolute path"
    if raw.startswith("~"):
        return "'~' is not expanded; paths are relative to the inputs folder"
    parts = PurePosixPath(raw).parts
    if ".." in parts:
        return "it contains '..'"
    if not [p for p in parts if p != "."]:
        return "it names the inputs folder itself"
    return ""


def _listing(root: Path, limit: int = 20) -> str:
    """'; it holds: a.csv, data/, ...' for an error message: what the model can ask for instead (links
    leading out are not offered)."""
    names = []
    try:
        with os.scandir(root) as entries:
            for entry in entries:
                real = Path(os.path.realpath(entry.path))
                if root in real.parents and (real.is_file() or real.is_dir()):
                    names.append(entry.name + ("/" if real.is_dir() else ""))
    except OSError:
        return ""
    names.sort()
    if not names:
        return "; it is empty"
    more = f", and {len(names) - limit} more" if len(names) > limit else ""
    return "; it holds: " + ", ".join(_short(n, 100) for n in names[:limit]) + more


def _guard_message(where: str, exc: GuardBlocked) -> str:
    blocking = [f for f in exc.findings if getattr(f, "severity", "block") == "block"]
    if blocking:
        detail = "; ".join(f"line {f.line}: rule {f.rule}: {f.message.rstrip('. ')}" for f in blocking)
    else:
        detail = str(exc)
    return (f"{where!r} was not run: the static safety guard blocked it ({detail}). You cannot override "
            "the guard; use another approach, or tell the user which rule fired if the script is needed.")


def _truthy(value) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("true", "yes", "1", "on")
    return value is True


# ------------------------------------------------------------------- one-liners for SkillRegistry


def tool_schemas(registry, format: str = "openai", **view_options) -> list[dict]:
    """Tool definitions for all of `registry`'s skills (or a filtered view: allow=, disabled=)."""
    return AgentView(registry, **view_options).tool_schemas(format)


def dispatch(registry, tool_name: str, arguments: Any = None, **view_options) -> ToolResult:
    """One stateless tool call (no activation tracking; use an `AgentView` for a conversation)."""
    return AgentView(registry, track_activations=False, **view_options).dispatch(tool_name, arguments)


def system_prompt(registry, format: str = "xml", **view_options) -> str:
    """Instructions and catalog for a system prompt; "" when there are no skills."""
    return AgentView(registry, **view_options).system_prompt(format)
