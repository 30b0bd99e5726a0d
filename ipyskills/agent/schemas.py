"""The two agent tools' names, descriptions and JSON schemas, the `ToolResult` every call returns, and the
checking of the arguments a model sends (a wrong call gets an answer saying how to call it right).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..core.prompt import CUT_MARK, LEVEL2_CAP, cap_text  # noqa: F401 (cap_text and CUT_MARK: one import place)
from ..errors import ConfigError

READ_SKILL = "read_skill"
EXECUTE_SKILL_SCRIPT = "execute_skill_script"
TOOL_NAMES = (READ_SKILL, EXECUTE_SKILL_SCRIPT)
FORMATS = ("openai", "anthropic")

# What one tool result may hold, in characters. Agent harnesses commonly cut tool output somewhere in the
# 10-30K range; we cut first, visibly, keeping the start and the end.
DEFAULT_OUTPUT_CAP = LEVEL2_CAP  # the same cap as level-2 text, so read_skill shows what `load` shows
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
