"""The IPython magics: %skills, %skill_load, %%skill_run, %%skill, %%skill_call.

Misuse raises IPython's `UsageError` (shown as one line). A `SkillError` from the library is re-raised as
`MagicError`, which IPython shows as one line too (via `_render_traceback_`) while the cell still counts as
failed, so "Run all" stops there. KeyboardInterrupt is never caught: the backends clean up on it.

Every magic returns an object (a table, a report, the loaded skill, the run result) so it can be kept in a
variable; core objects render richly through the formatters the extension registers.

Agent prototyping (`%skills tools`, `%skills prompt --format`, `%%skill_call`, `%skills agent`) goes through
one `AgentView` built by `agent_view()` from the session's agent filter (the `agent_allow`, `agent_disabled`
and `agent_enabled` traits), so the tools, the system prompt and a replayed call always agree, and agree with
an agent loop given the `.view` that `%skills agent` returns.
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import sys
from pathlib import Path

from IPython.core import magic_arguments as ma
from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_cell_magic, line_magic, magics_class
from traitlets import List, Unicode

from ..agent.schemas import FORMATS as TOOL_FORMATS
from ..errors import SkillError
from .completion import make_completer  # noqa: F401 (re-exported: the extension's old import place)
from .config import IPySkillsConfig
from .display import (
    AgentSettings,
    AgentText,
    ImageResource,
    Rich,
    SkillTable,
    SystemPrompt,
    ToolCallView,
    ToolSchemas,
    content_bundle,
)
from .magic_args import (  # noqa: F401 (strip_comment: re-exported)
    HelpShown,
    _check_agent_options,
    _check_lab_options,
    _names,
    _optional_rest,
    parse,
    strip_comment,
)

SKILLS_COMMANDS = ("list", "add", "validate", "prompt", "browse", "refresh", "tools", "agent", "deps", "eval",
                   "budget", "mcp")
ALL_SKILLS = "*"  # `--allow '*'` lifts the session's allow-list (not a valid skill name, so unambiguous)
_AGENT_TRAITS = ("agent_allow", "agent_disabled", "agent_enabled", "agent_inputs", "agent_client", "agent_model",
                 "agent_options", "eval_parallel")
_IMAGE_PREFIX = "image/"


class MagicError(SkillError):
    """A library error raised from a magic, shown by IPython as one line instead of a traceback."""

    def __init__(self, original: SkillError):
        super().__init__(str(original))
        self.original = original

    def _render_traceback_(self) -> list[str]:
        return [f"\x1b[0;31m{type(self.original).__name__}\x1b[0m: {self}"]


@magics_class
class IPySkills(IPySkillsConfig, Magics):
    """Agent Skills magics. Settings: `%config IPySkills` lists them; `c.IPySkills.*` in ipython_config.py."""

    # The session's agent filter, the same for %skills tools, %skills prompt --format and %%skill_call.
    agent_allow = List(Unicode(), default_value=None, allow_none=True,
                       help="Skills an agent may see and use (None = all). Also: %skills agent --allow a,b"
                       ).tag(config=True)
    agent_disabled = List(Unicode(), help="Skills hidden from the agent. Also: %skills agent --disable a,b"
                          ).tag(config=True)
    agent_enabled = List(Unicode(), help="Skills shown to the agent although their SKILL.md sets "
                         "disable-model-invocation. Also: %skills agent --enable a,b").tag(config=True)
    agent_inputs = Unicode("", help="A folder whose files the agent may hand to scripts (execute_skill_script's "
                           "inputs, named relative to it; nothing outside it). Empty: no files.").tag(config=True)

    def __init__(self, shell=None, **kwargs):
        super().__init__(shell=shell, **kwargs)
        self.apply_environment()
        self._written: dict[Path, str] = {}  # file -> sha256 of what %%skill last wrote there
        self._registry = None
        self.observe(self._settings_changed)

    # ------------------------------------------------------------------ registry and settings

    @property
    def registry(self):
        """The process-wide registry (`ipyskills.registry()`), with this config applied on first use."""
        if self._registry is None:
            from ..core.registry import shared_registry

            self._registry = shared_registry()
            self._push_settings()
        return self._registry

    def _settings_changed(self, change) -> None:
        if change["name"] in ("authoring_root", "table_rows", *_AGENT_TRAITS) or self._registry is None:
            return  # the registry picks settings up on first use
        self._push_settings()

    def _push_settings(self) -> None:
        apply_settings(self._registry, self.settings())

    def _call(self, fn, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except MagicError:
            raise
        except SkillError as exc:
            raise MagicError(exc) from exc

    # ------------------------------------------------------------------ %skills

    @ma.magic_arguments()
    @ma.argument("command", nargs="?", default="list", metavar="COMMAND",
                 help="list (default), add DIR, validate [NAME|PATH], deps NAME, prompt, tools, agent, browse, "
                      "refresh")
    @ma.argument("target", nargs="?", default=None, metavar="TARGET",
                 help="the folder for `add`; the skill name or path for `validate`; the skill for `deps`")
    @ma.argument("-f", "--filter", default=None, metavar="TEXT",
                 help="only skills whose name, description, status or root contains TEXT")
    @ma.argument("-n", "--rows", type=int, default=None, metavar="N", help="rows shown (default 50)")
    @ma.argument("--format", default=None, metavar="FORMAT",
                 help="prompt: xml or markdown (the agent's system prompt); tools: openai (default) or anthropic")
    @ma.argument("--allow", default=None, metavar="A,B",
                 help="tools, prompt --format: only these skills, for this call; agent: set the session's "
                      "allow-list ('*' lifts it)")
    @ma.argument("--disable", default=None, metavar="A,B", help="agent: hide these skills from the agent")
    @ma.argument("--enable", default=None, metavar="A,B",
                 help="agent: show these skills again (also those whose SKILL.md sets disable-model-invocation)")
    @ma.argument("--reset", action="store_true", help="agent: back to all skills, nothing disabled or enabled")
    @ma.argument("--install", action="store_true", help="deps: install them now, as the first run would")
    @ma.argument("--deps", default=None, choices=("auto", "declared", "off"),
                 help="deps: which requirements count (default: the deps setting)")
    @ma.argument("--queries", default=None, metavar="VAR|PATH",
                 help="eval: (text, should_trigger) pairs in a variable (list or DataFrame), or a .csv/.json path")
    @ma.argument("--client", default=None, metavar="VAR",
                 help="eval, budget: the variable holding the chat client (default: IPySkills.agent_client)")
    @ma.argument("--model", default=None, metavar="M", help="eval, budget: the model (default: IPySkills.agent_model)")
    @ma.argument("--runs", type=int, default=None, metavar="K", help="eval: runs per query (default 3)")
    @ma.argument("--description", action="append", default=None, metavar="TEXT",
                 help="eval: a description variant to try next to the current one (repeatable)")
    @ma.argument("--descriptions", default=None, metavar="VAR", help="eval: a variable holding a list of variants")
    @ma.argument("--parallel", type=int, default=None, metavar="N",
                 help="eval: model calls in flight at once (default: IPySkills.eval_parallel)")
    @ma.argument("--option", action="append", default=None, metavar="K=V",
                 help="eval: a request option for every model call, like temperature=0, max_tokens=256 or "
                      "tool_choice=auto (repeatable; over IPySkills.agent_options)")
    @ma.argument("-o", "--output", dest="var", default=None, metavar="VAR",
                 help="eval, budget: also keep the report in the variable VAR")
    @line_magic
    def skills(self, line: str = ""):
        """Agent Skills: the catalog, and add / validate / prompt / tools / agent / browse / refresh.

        %skills [list] [-f TEXT] [-n N]   the catalog as a table
        %skills add DIR                   add a root of skills or one skill folder
        %skills validate [NAME|PATH]      strict validation report (all skills without a target)
        %skills deps NAME [--install]     the Python packages the skill's scripts need, each with where it
                                          came from; --install provisions them now (else the first run does)
        %skills prompt                    the level-1 <available_skills> block of every discovered skill,
                                          exactly as `ipyskills prompt` prints it (no instructions, no filter)
        %skills prompt --format xml       the agent's whole system-prompt section: instructions for the two
        %skills prompt --format markdown  skill tools, then the catalog of the skills visible to the agent
                                          (the session's agent filter applied; --allow A,B narrows this call)
        %skills tools [--format openai|anthropic] [--allow A,B]
                                          the tool definitions the agent gets (a list: pass it as tools=)
        %skills agent                     the session's agent filter and what it leaves visible; `.view` is
                                          the AgentView to give run_agent()
        %skills agent --allow A,B         only these skills ('*' = all again); --disable A,B hides skills,
                                          --enable A,B shows them again, --reset clears all three
        %skills eval NAME --queries VAR [--client VAR] [--model M] [--runs K] [--description TEXT]...
                     [--option K=V]...
                                          trigger eval: does NAME's description make the model load it for
                                          the queries that should trigger it, and only those? Variants run
                                          side by side, best first; Ctrl-C keeps the finished runs
        %skills budget [NAME]             characters and tokens at levels 1 and 2, largest level-3 files,
                                          against the spec's guidance (provider counter or chars/4 estimate)
        %skills browse                    the widget browser
        %skills refresh                   re-scan the roots
        %skills mcp [start|stop]          MCP client configuration; start/stop a 127.0.0.1 server of this kernel

        The agent filter is also settable as traits: c.IPySkills.agent_allow / agent_disabled /
        agent_enabled (ipython_config.py or %config). It applies to %skills tools, %skills prompt --format
        and %%skill_call alike, never to the catalog table or to bare %skills prompt.
        """
        try:
            args = parse(self.skills, line)
        except HelpShown:
            return None
        command = args.command
        if command == "help":
            print(self.skills.parser.format_help())
            return None
        if command not in SKILLS_COMMANDS:
            close = difflib.get_close_matches(command, SKILLS_COMMANDS, n=1, cutoff=0.6)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise UsageError(f"%skills: unknown command {command!r}; {hint}use one of "
                             f"{', '.join(SKILLS_COMMANDS)} (or %skills help)")
        needs_target = command in ("add", "deps", "eval")
        takes_target = command in ("add", "validate", "deps", "eval", "budget", "mcp")
        if needs_target and not args.target:
            raise UsageError({"add": "%skills add needs a folder: %skills add DIR (a root of skills or one skill "
                                     "folder)",
                              "deps": "%skills deps needs a skill: %skills deps NAME [--install]",
                              "eval": "%skills eval needs a skill: %skills eval NAME --queries VAR"}[command])
        _check_lab_options(command, args)
        if (args.install or args.deps) and command != "deps":
            raise UsageError(f"--install and --deps go with %skills deps, not %skills {command}")
        if args.target and not takes_target:
            raise UsageError(f"%skills {command} takes no argument (got {args.target!r})")
        if args.rows is not None and args.rows < 1:
            raise UsageError("%skills --rows must be at least 1")
        _check_agent_options(command, args)
        return getattr(self, f"_skills_{command}")(args)

    def _skills_list(self, args):
        reg = self.registry
        table = SkillTable(self._call(reg.list), shadowed=getattr(reg, "shadowed", ()),
                           skipped=getattr(reg, "skipped", ()), limit=args.rows or self.table_rows)
        return table.filter(args.filter) if args.filter else table

    def _skills_mcp(self, args):  # %skills mcp [start|stop]: see mcp_magic.py
        from .mcp_magic import skills_mcp

        return skills_mcp(self, args)

    def _skills_refresh(self, args):
        self._call(self.registry.refresh)
        return self._skills_list(args)

    def _skills_add(self, args):
        self._call(self.registry.add, args.target)
        return self._skills_list(args)

    def _skills_validate(self, args):
        from .display import ReportList

        reg = self.registry
        if args.target:
            return self._call(reg.validate, args.target)
        skills = self._call(reg.list)
        if args.filter:
            skills = SkillTable(skills).filter(args.filter).skills
        return ReportList([self._call(reg.validate, str(s.path)) for s in skills])

    def _skills_deps(self, args):
        from .deps_view import ProgressLog, RequirementsView

        reqs = self._call(self.registry.requirements, args.target)
        installed = None
        if args.install:
            installed = self._call(self.registry.install_requirements, args.target,
                                   backend=self.sandbox_backend, deps=args.deps or self.deps,
                                   progress=ProgressLog())
        return RequirementsView(reqs, args.deps or self.deps, installed, install_asked=args.install)

    def _skills_eval(self, args):
        from .agent_magic import skills_eval

        return skills_eval(self, args)

    def _skills_budget(self, args):
        from .agent_magic import skills_budget

        return skills_budget(self, args)

    def _skills_prompt(self, args):
        if args.format is None:  # the level-1 block alone, unfiltered: what `ipyskills prompt` prints
            return AgentText(self._call(self.registry.catalog))
        view = self.agent_view(allow=args.allow)
        return SystemPrompt(self._call(view.system_prompt, args.format), args.format, view.names(), view.allow)

    def _skills_tools(self, args):
        format = args.format or TOOL_FORMATS[0]
        view = self.agent_view(allow=args.allow)
        return ToolSchemas(self._call(view.tool_schemas, format), format, view.names(), view.allow)

    def _skills_agent(self, args):
        # Check every name before changing anything, so a typo leaves the filter as it was.
        allow = _names(args.allow) if args.allow is not None else None
        if allow is not None:
            allow = None if allow == [ALL_SKILLS] else self._canonical(allow, "--allow")
        disable = self._canonical(_names(args.disable), "--disable")
        enable = self._canonical(_names(args.enable), "--enable")
        keep_allow = args.allow is None and not args.reset
        new_allow = self.agent_allow if keep_allow else allow
        blocked = [n for n in enable if new_allow is not None and n not in new_allow]
        if blocked:
            raise UsageError(f"{', '.join(blocked)} not in the agent allow-list ({', '.join(new_allow)}), so "
                             f"enabling has no effect; widen it: %skills agent --allow "
                             f"{','.join([*new_allow, *blocked])}")
        disabled, enabled = ([], []) if args.reset else (list(self.agent_disabled), list(self.agent_enabled))
        for name in disable:
            disabled = [*[n for n in disabled if n != name], name]
            enabled = [n for n in enabled if n != name]
        for name in enable:
            disabled = [n for n in disabled if n != name]
            enabled = [*[n for n in enabled if n != name], name]
        self.agent_allow, self.agent_disabled, self.agent_enabled = new_allow, disabled, enabled
        return self.agent_settings()

    # ------------------------------------------------------------------ the agent view

    def agent_view(self, allow=None, conversation: bool = False):
        """The `AgentView` the agent magics use: the session's filter; `allow` (names or "A,B") replaces
        the session's allow-list for one call. Without `conversation` it tracks no activations, so a
        replayed read_skill always shows the whole text; with it, the view is one conversation's (a
        repeated read_skill gets the short "already active" note), as an agent loop wants."""
        if isinstance(allow, str):
            allow = None if _names(allow) == [ALL_SKILLS] else self._canonical(_names(allow), "--allow")
        elif allow is None:
            allow = self.agent_allow
        reg = self.registry
        # Names set through config may be folder names; the view filters on skill names.
        known = self._known
        allow = None if allow is None else known(allow)
        view = self._call(reg.for_agent, allow, known(self.agent_disabled), track_activations=conversation,
                          inputs_dir=self.agent_inputs or None)
        for name in known(self.agent_enabled):
            if name in reg and (view.allow is None or name in view.allow):
                view.enable(name)  # an enable for a skill that is gone, or not allowed, has no effect
        return view

    def _known(self, names) -> list[str]:
        """Each name as the registry's skill name where it resolves (a folder name does), else unchanged."""
        reg = self.registry
        return [reg.get(n).name if n in reg else n for n in names]

    def agent_settings(self) -> AgentSettings:
        """What `%skills agent` returns: the session's filter, a view with it applied, and why skills are hidden."""
        view = self.agent_view(conversation=True)
        visible = set(view.names())
        hidden = {}
        for meta in self._call(self.registry.list):
            if meta.name in visible:
                continue
            if view.allow is not None and meta.name not in view.allow:
                hidden[meta.name] = "not in the allow-list"
            elif meta.name in self._known(self.agent_disabled):
                hidden[meta.name] = "disabled for this session (%skills agent --enable NAME shows it)"
            else:
                hidden[meta.name] = ("its SKILL.md sets disable-model-invocation "
                                     "(%skills agent --enable NAME shows it)")
        named = [*(self.agent_allow or ()), *self.agent_disabled, *self.agent_enabled]
        missing = sorted({n for n in named if n not in self.registry})
        return AgentSettings(view, self.agent_allow, self.agent_disabled, self.agent_enabled, hidden, missing)

    def _canonical(self, names: list[str], option: str) -> list[str]:
        """Skill names as the registry knows them (a folder name works too); an unknown one is a one-line error."""
        if ALL_SKILLS in names:
            raise UsageError(f"{option} '*' means every skill and cannot be mixed with names")
        return [self._call(self.registry.get, name).name for name in names]

    def _skills_browse(self, args):
        from .browser import SkillBrowser

        return SkillBrowser(self.registry, magics=self)

    # ------------------------------------------------------------------ %skill_load

    @ma.magic_arguments()
    @ma.argument("locator", metavar="NAME[/PATH]", help="a skill name, or name/path of one of its files")
    @ma.argument("--raw", action="store_true", help="the exact text an agent receives, nothing else")
    @line_magic
    def skill_load(self, line: str = ""):
        """Show a skill (level 2) or one of its files (level 3); --raw gives the exact agent text."""
        try:
            args = parse(self.skill_load, line)
        except HelpShown:
            return None
        return self._call(self.load, args.locator, raw=args.raw)

    def load(self, locator: str, raw: bool = False):
        """What `%skill_load` returns: a rich view of a skill or file, or `AgentText` when `raw`."""
        from ..core.resources import guess_mime, normalize_resource_path, split_locator

        reg = self.registry
        name, path = split_locator(locator)
        if path and guess_mime(path).startswith(_IMAGE_PREFIX) and not guess_mime(path).endswith("svg+xml"):
            if raw:
                reg.load(locator)  # raises the agent-side refusal, word for word
            return self._image(name, normalize_resource_path(path))
        obj = reg.load(locator)
        if raw:
            return AgentText(str(obj))
        if path is None:
            return Rich(obj, content_bundle(obj, self._meta_for(obj)))
        return obj

    def _meta_for(self, content):
        try:
            meta = self.registry.get(content.name)
        except SkillError:
            return None
        return meta if Path(meta.path) == Path(content.directory) else None

    def _image(self, name: str, path: str):
        data, mime = self.registry.read_bytes(f"{name}/{path}")
        return ImageResource(self.registry.get(name).name, path, data, mime)

    # ------------------------------------------------------------------ %%skill_run

    @ma.magic_arguments()
    @ma.argument("--backend", choices=("auto", "docker", "local"), default=None,
                 help="where to run (default: IPySkills.sandbox_backend)")
    @ma.argument("--runtime", choices=("runc", "runsc", "auto"), default=None,
                 help="the Docker runtime: runc, runsc (gVisor) or auto (default: IPySkills.runtime)")
    @ma.argument("--timeout", type=float, default=None, metavar="S", help="seconds before the run is killed")
    @ma.argument("--memory", default=None, metavar="M", help="memory limit, like 256m or 1g")
    @ma.argument("--network", action="store_true", default=None, help="allow network access for this run")
    @ma.argument("--no-guard", dest="guard", action="store_false", default=None,
                 help="skip the static guard (the sandbox still applies)")
    @ma.argument("--deps", default=None, choices=("auto", "declared", "off"),
                 help="install the skill's Python requirements first (default: IPySkills.deps)")
    @ma.argument("--stdin", dest="stdin_var", default=None, metavar="VAR",
                 help="give the script the value of the variable VAR as stdin (str or bytes; other values "
                      "as JSON); not with a cell body")
    @ma.argument("--input", dest="inputs", action="append", default=None, metavar="PATH",
                 help="copy this file or folder into the run's workspace (its working directory) first; "
                      "repeatable")
    @ma.argument("--save", dest="save_to", default=None, metavar="DIR",
                 help="write the files the script made to DIR (never over an existing file), linked in the "
                      "result")
    @ma.argument("-o", "--output", dest="var", default=None, metavar="VAR",
                 help="also keep the result in the variable VAR")
    @ma.argument("name", metavar="NAME", help="the skill")
    @ma.argument("script", metavar="SCRIPT", help="the script, relative to the skill folder")
    @_optional_rest("args", nargs=argparse.REMAINDER, metavar="ARGS",
                 help="passed to the script as they are (put ipyskills options before NAME)")
    @line_cell_magic
    def skill_run(self, line: str = "", cell: str | None = None):
        """Run a skill's script in the sandbox; the cell body is its stdin.

        %%skill_run [--backend B] [--runtime R] [--timeout S] [--memory M] [--network] [--no-guard]
                    [--deps MODE] [--stdin VAR] [--input PATH]... [--save DIR] [-o VAR] NAME SCRIPT [ARGS...]

        The line expands notebook variables as IPython does ({var}, $var; $$ for a literal $); the cell
        body is passed as it is.

        The script runs in a writable workspace (its working directory; the skill is read-only at its
        own path). --input stages a notebook-side file or folder there under its own name; files the
        script writes there or in $IPYSKILLS_OUTPUT come back as artifacts, and --save DIR writes them to
        DIR with links in the result. Output shows live while the script runs; Ctrl-C (interrupt the
        kernel) stops it and keeps what it printed.

        Before the first run of a skill whose Python requirements the sandbox lacks, they are installed
        (progress shows while that happens; it does not count against the timeout).
        """
        try:
            args = parse(self.skill_run, line)
        except HelpShown:
            return None
        except UsageError as exc:
            if "required" not in str(exc):
                raise
            magic = "%%skill_run" if cell is not None else "%skill_run"
            raise UsageError(f"{exc}; call it as {magic} [options] NAME SCRIPT [ARGS...]") from None
        if args.var is not None and not args.var.isidentifier():
            raise UsageError(f"-o needs a Python variable name, got {args.var!r}")
        stdin = cell or ""
        if args.stdin_var is not None:
            if cell and cell.strip():
                raise UsageError("--stdin VAR and a cell body both give stdin: use one of them")
            stdin = self._stdin_from(args.stdin_var)
        from ..errors import RunInterrupted
        from ..sandbox.interrupts import shield_repeated_interrupts
        from .live import LiveOutput

        live = LiveOutput(f"{args.name}/{args.script}", self.shell)
        # Only the first Ctrl-C counts until its clean-up is done and shown (a second one would cut
        # the sandbox's removal short and lose the output so far).
        with shield_repeated_interrupts() as shield:
            try:
                result = self._call(
                    self.registry.run, args.name, args.script, args=list(args.args), stdin=stdin,
                    backend=args.backend or self.sandbox_backend,
                    timeout=args.timeout if args.timeout is not None else self.timeout,
                    memory=args.memory or self.memory,
                    network=bool(args.network) if args.network is not None else self.network,
                    guard=self.guard if args.guard is None else args.guard,
                    deps=args.deps or self.deps, progress=_progress_log(),
                    inputs=args.inputs, save_to=args.save_to, on_output=live, runtime=args.runtime,
                )
            except RunInterrupted as stop:
                live.interrupted(stop.line(), stop.result)  # the output so far and one line, no traceback
                if args.var:
                    self.shell.user_ns[args.var] = stop.result
                return None
            except KeyboardInterrupt:
                if shield is not None and shield.escaped:
                    print("interrupted again while the sandbox was being removed; if anything is left, "
                          "`ipyskills sandbox cleanup` removes it", file=sys.stderr)
                else:
                    print("interrupted before the script started; nothing is left running", file=sys.stderr)
                return None
        live.finish()
        if args.var:
            self.shell.user_ns[args.var] = result
        return result

    def _stdin_from(self, name: str):
        """The value of the user's variable `name` as stdin: str and bytes as they are, else JSON."""
        if name not in self.shell.user_ns:
            raise UsageError(f"--stdin {name}: no variable named {name!r} in the notebook")
        value = self.shell.user_ns[name]
        if isinstance(value, (str, bytes, bytearray)):
            return value
        import json

        try:
            return json.dumps(value, default=str)
        except (TypeError, ValueError) as exc:
            raise UsageError(f"--stdin {name}: a {type(value).__name__} cannot be sent as text ({exc}); "
                             "pass a str or bytes") from None

    # ------------------------------------------------------------------ %%skill_call

    @ma.magic_arguments()
    @ma.argument("tool", metavar="TOOL", help="read_skill or execute_skill_script")
    @ma.argument("--allow", default=None, metavar="A,B",
                 help="only these skills, for this call (default: the session's agent filter)")
    @ma.argument("-o", "--output", dest="var", default=None, metavar="VAR",
                 help="also keep the ToolResult (text, is_error, error) in the variable VAR")
    @cell_magic
    def skill_call(self, line: str = "", cell: str = ""):
        """Replay one agent tool call: the cell is the JSON arguments object, the output the exact tool result.

        %%skill_call [--allow A,B] [-o VAR] TOOL
        {"skill_name": "data-processor", "file_path": "references/output-formats.md"}

        The call goes through the same dispatcher as an agent loop, with the session's agent filter
        (%skills agent), so anything the model could send comes back as the model would see it: bad JSON,
        an unknown skill or a refused path give the tool's "Error: ..." text, not a traceback. Each call
        stands alone (no "already active" note for a skill read before).
        """
        try:
            args = parse(self.skill_call, line)
        except HelpShown:
            return None
        if args.var is not None and not args.var.isidentifier():
            raise UsageError(f"-o needs a Python variable name, got {args.var!r}")
        if args.allow is not None and not _names(args.allow):
            raise UsageError("--allow needs skill names separated by commas, like --allow a,b")
        view = self.agent_view(allow=args.allow)
        result = view.dispatch(args.tool, cell or "")  # the raw text, as a model sends it: the dispatcher parses
        if args.var:
            self.shell.user_ns[args.var] = result
        return ToolCallView(args.tool, cell or "", result)

    # ------------------------------------------------------------------ %%skill_agent

    @ma.magic_arguments()
    @ma.argument("--client", default=None, metavar="VAR",
                 help="the variable holding an OpenAI- or Anthropic-style client (default: IPySkills.agent_client)")
    @ma.argument("--model", default=None, metavar="M", help="the model (default: IPySkills.agent_model)")
    @ma.argument("--max-turns", dest="max_turns", type=int, default=8, metavar="N",
                 help="model calls before the loop stops (default 8)")
    @ma.argument("--allow", default=None, metavar="A,B",
                 help="only these skills, for this conversation (default: the session's agent filter)")
    @ma.argument("--option", action="append", default=None, metavar="K=V",
                 help="a request option for every model call, like temperature=0, max_tokens=256 or "
                      "tool_choice=auto (repeatable; over IPySkills.agent_options)")
    @ma.argument("-o", "--output", dest="var", default=None, metavar="VAR",
                 help="also keep the Transcript in the variable VAR")
    @cell_magic
    def skill_agent(self, line: str = "", cell: str = ""):
        """Talk to a real model with your skills: the cell is the user's message.

        %%skill_agent [--client VAR] [--model M] [--max-turns N] [--allow a,b] [--option K=V]... [-o VAR]
        Summarise these response times in ms: [12, 15, 9, 22, 17]

        The tool loop runs through the session's agent view (%skills agent) and the transcript shows as it
        happens: the system prompt (collapsed), each model turn with the usage the API reports and its
        time, every tool call with its arguments and the exact text returned, the skills activated and at
        which level, and the answer. A client failure (bad key, rate limit, unknown model) is one line.
        --option K=V (repeatable) adds a request option to every model call (the value is read as JSON
        when it is JSON: temperature=0, max_tokens=256, tool_choice=auto), over
        IPySkills.agent_options. Ctrl-C (interrupt the kernel) stops the loop with one line and keeps the
        transcript so far in -o VAR, marked interrupted.
        """
        from .agent_magic import skill_agent

        try:
            args = parse(self.skill_agent, line)
        except HelpShown:
            return None
        return skill_agent(self, args, cell or "")

    # ------------------------------------------------------------------ %%skill (authoring)

    @ma.magic_arguments()
    @ma.argument("locator", metavar="NAME[/PATH]",
                 help="write NAME's SKILL.md, or the file PATH inside skill NAME, from the cell")
    @ma.argument("--force", action="store_true",
                 help="overwrite a file this session did not write (the old one is kept as FILE.bak)")
    @line_cell_magic
    def skill(self, line: str = "", cell: str | None = None):
        """Author a skill: the cell becomes NAME's SKILL.md (or NAME/PATH), validated at once.

        A new skill goes to IPySkills.authoring_root (default ./skills). A file is only overwritten when this
        session wrote it last or its text is unchanged; otherwise --force, which keeps the old file as .bak.
        Bundled and read-only skills are never written.
        """
        try:
            args = parse(self.skill, line)
        except HelpShown:
            return None
        if cell is None:
            raise UsageError("%%skill is a cell magic: put the file's text in the cell below %%skill NAME[/PATH]")
        from .authoring import write_skill_file

        outcome = self._call(write_skill_file, self, args.locator, cell, force=args.force)
        return outcome

    # ------------------------------------------------------------------ helpers used by authoring

    def written_hash(self, path: Path) -> str | None:
        return self._written.get(path)

    def remember_write(self, path: Path, text: str) -> None:
        self._written[path] = hashlib.sha256(text.encode("utf-8")).hexdigest()


def _progress_log():
    from .deps_view import ProgressLog

    return ProgressLog()


def apply_settings(registry, settings) -> None:
    """Give the registry new settings (its default roots follow them)."""
    registry.configure(settings)


