"""Skills as agent tools: the dispatcher and the filtered view one agent gets (the schemas and argument
checks are in schemas.py, the run report in report.py, the inputs folder in inputs.py).

Two tools, with the names and parameters of WeKnora's design so an agent written for it works unchanged:

- `read_skill(skill_name, file_path?)`: level 2 (the skill's instructions, `<skill_content>`) or, with
  `file_path`, level 3 (one bundled file, `<skill_resource>`). SiYuan's locator form is accepted too:
  `skill_name="pdf-processing/references/forms.md"`.
- `execute_skill_script(skill_name, script_path, args?, input?)`: runs a bundled script in the sandbox;
  `args` is a list of strings, `input` becomes the script's stdin. The model gets a run report.

Framing: whatever a script prints or a skill file holds, a tool result has exactly one opening and one
closing tag of its block (`<script_result>`, `<skill_content>`, `<skill_resource>`) and of each section
(`<stdout>`, `<stderr>`, `<artifacts>`, `<skill_resources>`): text placed inside is passed through
`core.prompt.neutralise`, which writes the `<` of any look-alike of those tags as `&lt;`, and every part of the
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
import logging
import os
from collections.abc import Iterable
from pathlib import Path, PurePosixPath
from typing import Any

from ..core.prompt import catalog
from ..errors import ConfigError, GuardBlocked, ResourceError, SandboxError, SkillError, SkillNotFound
from .inputs import MAX_AGENT_INPUTS, _input_name_problem, _inputs_folder, _listing
from .report import _run_error_kind, _short, run_report
from .schemas import (  # noqa: F401 (re-exported: the names an agent application imports from here)
    CUT_MARK,
    DEFAULT_OUTPUT_CAP,
    EXECUTE_SKILL_SCRIPT,
    FORMATS,
    NO_MODEL_KEY,
    READ_SKILL,
    TOOL_NAMES,
    ToolResult,
    _BadArguments,
    _error,
    _parse_arguments,
    cap_text,
    schemas_for,
)
from .system_prompt import system_prompt_for

log = logging.getLogger(__name__)

# registry.run options that run_request (the call's own checks) does not take.
_RUN_ONLY_OPTIONS = ("backend", "guard", "progress", "save_to", "on_output", "overwrite")


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
        return catalog(self.skills())

    def system_prompt(self, format: str = "xml") -> str:
        """Behavioural instructions plus the catalog ("xml" or "markdown"); "" when no skill is visible."""
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
