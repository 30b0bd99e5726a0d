"""SkillRegistry: the one object the CLI, the notebook and agent loops talk to.

Roots are searched in precedence order: roots added with `add()` (the most recent first), then the roots
given to the constructor (or, when none were given, the configured ones, the conventional locations and the
bundled skills). An earlier root wins a name collision; the loser is kept in `shadowed`.

Scanning is lazy: the first call that needs skills scans; `refresh()` re-scans (stat-only where nothing
changed) and `add()` re-scans too. Bodies and resources are read on each `load()`.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

from ..errors import ConfigError, ResourceError, SandboxError, SkillNotFound
from ..settings import Settings, check_deps_mode
from . import resources as res
from .discover import Discovery, Root, ScanResult, default_roots, make_root
from .model import Problem, SkillMeta
from .prompt import SkillContent, SkillResource, catalog


class SkillRegistry:
    def __init__(self, roots=None, *, settings: Settings | None = None):
        self.settings = settings if settings is not None else Settings.from_env()
        if isinstance(roots, (str, Path)):
            roots = [roots]
        self._explicit = roots is not None
        self._base_roots: list[Root] = (
            [make_root(r, explicit=True, origin="configured") for r in roots]
            if roots is not None else default_roots(self.settings)
        )
        self._added: list[Root] = []
        self._discovery = Discovery()
        self._scan: ScanResult | None = None
        self._by_name: dict[str, SkillMeta] = {}
        self._sorted: list[SkillMeta] | None = None  # list() order, made once per scan
        self._by_folder: dict[str, list[SkillMeta]] | None = None  # get() by folder name, made on need

    # --- roots and scanning ---------------------------------------------------------------------------

    @property
    def roots(self) -> list[Path]:
        """The roots in precedence order (earlier wins)."""
        return [r.path for r in self._roots()]

    def _roots(self) -> list[Root]:
        return [*reversed(self._added), *self._base_roots]

    def add(self, path) -> None:
        """Add a root or a single skill folder; it takes precedence over every root already present."""
        root = make_root(path, explicit=True, origin="added")
        if not os.path.isdir(root.path):  # os.path: False for any OSError, e.g. a name too long
            raise ConfigError(f"cannot add {root.path}: it is not a folder; give a skill folder or a folder of skills")
        self._added = [r for r in self._added if r.path != root.path] + [root]
        self.refresh()

    def configure(self, settings: Settings) -> None:
        """Use new settings. Default roots follow skill_dirs / default_roots / bundled_skills (roots given
        to the constructor are kept); the next call re-scans only when the roots changed."""
        old, self.settings = self.settings, settings
        roots_changed = (old.skill_dirs, old.default_roots, old.bundled_skills) != (
            settings.skill_dirs, settings.default_roots, settings.bundled_skills)
        if roots_changed and not self._explicit:
            self._base_roots = default_roots(settings)
            self._scan = None

    def refresh(self) -> None:
        """Re-scan the roots. Unchanged SKILL.md files are not re-read (cache by mtime and size)."""
        old, self._scan = self._scan, self._discovery.scan(self._roots())
        if old is not None and _same_objects(old.skills, self._scan.skills):
            return  # nothing changed: the name index and the sorted list still hold
        self._by_name = {m.name: m for m in self._scan.skills}
        self._sorted = self._by_folder = None

    def _scanned(self) -> ScanResult:
        if self._scan is None:
            self.refresh()
        return self._scan

    @property
    def skipped(self) -> list[tuple[Path, list[Problem]]]:
        """Skill folders that were found but not loaded, with the reasons."""
        return list(self._scanned().skipped)

    @property
    def shadowed(self) -> list[tuple[SkillMeta, SkillMeta]]:
        """(winner, loser) for every name claimed by more than one skill."""
        return list(self._scanned().shadowed)

    @property
    def diagnostics(self) -> list[Problem]:
        """Findings about roots and walks: a missing root you gave, a walk cut short by a cap."""
        return list(self._scanned().diagnostics)

    # --- level 1 --------------------------------------------------------------------------------------

    def list(self) -> list[SkillMeta]:
        scan = self._scanned()
        if self._sorted is None:
            self._sorted = sorted(scan.skills, key=_by_name)
        return list(self._sorted)

    def names(self) -> list[str]:
        return [m.name for m in self.list()]

    def get(self, name: str) -> SkillMeta:
        meta = self._lookup(name)
        if meta is None and self._scan is not None:
            # A skill copied into a root since the last scan: look again once before saying it is not
            # there (a re-scan only stats what it has already read).
            self.refresh()
            meta = self._lookup(name)
        if meta is None:
            raise SkillNotFound(self._not_found_message(name))
        return meta

    def _lookup(self, name: str) -> SkillMeta | None:
        self._scanned()
        meta = self._by_name.get(name)
        if meta is not None:
            return meta
        # A skill whose name differs from its folder (loaded with a warning) is also found by folder name.
        if self._by_folder is None:
            self._by_folder = {}
            for m in self._by_name.values():
                self._by_folder.setdefault(m.path.name, []).append(m)
        by_folder = self._by_folder.get(name, ())
        return by_folder[0] if len(by_folder) == 1 else None

    def __contains__(self, name: str) -> bool:
        return isinstance(name, str) and self._lookup(name) is not None

    def __len__(self) -> int:
        return len(self._scanned().skills)

    def _not_found_message(self, name: str) -> str:
        known = sorted(self._by_name)
        if not known:
            where = ", ".join(str(p) for p in self.roots) or "no roots"
            return f"no skill named {name!r}: no skills were found (searched {where}); add a root with --dir or add()"
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
        if not close:
            close = [k for k in known if name.lower() in k.lower()][:3]
        hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        shown = ", ".join(known[:20]) + (f" and {len(known) - 20} more" if len(known) > 20 else "")
        return f"no skill named {name!r}{hint} (available: {shown})"

    def catalog(self, *, instructions: str | None = None) -> str:
        """Level 1: the <available_skills> block, or "" when there are no skills."""
        return catalog(self.list(), instructions=instructions)

    # --- levels 2 and 3 -------------------------------------------------------------------------------

    def load(self, locator: str, *, read_cap: int | None = None) -> SkillContent | SkillResource:
        """`name` -> SkillContent (activation); `name/path` -> SkillResource (one bundled file)."""
        name, raw_path = res.split_locator(locator)
        meta = self.get(name)
        if raw_path is None:
            return self.activate(meta)
        rel = res.normalize_resource_path(raw_path)
        if res.is_skill_file(rel):  # either accepted name, whatever case the file is stored in
            return self.activate(meta)
        cap = self.settings.read_cap if read_cap is None else read_cap
        if not isinstance(cap, int) or isinstance(cap, bool) or cap < 1:
            raise ResourceError(f"read_cap must be a whole number of bytes of at least 1, got {cap!r}")
        return SkillResource(meta.name, rel, res.read_resource_text(meta.path, rel, cap=cap))

    def activate(self, skill: str | SkillMeta) -> SkillContent:
        """Level 2, within `Settings.level2_cap` characters: a longer body is read only in part and cut
        visibly, so every caller (load, CLI, notebook, read_skill) gets the same text."""
        meta = skill if isinstance(skill, SkillMeta) else self.get(skill)
        cap = self.settings.level2_cap
        if not isinstance(cap, int) or isinstance(cap, bool) or cap < 1000:
            raise ResourceError(f"level2_cap must be a whole number of characters of at least 1000, got {cap!r}")
        skill_md = confined_skill_md(meta)
        manifest = res.list_resources(meta.path, cap=self.settings.manifest_cap)
        body, left = read_skill_body_capped(skill_md, cap)
        return SkillContent(meta.name, body, meta.path, manifest.files, manifest.truncated, cap=cap, body_left=left)

    def read_bytes(self, locator: str, *, cap: int = res.BYTES_CAP) -> tuple[bytes, str]:
        """(bytes, mime) of a resource, for rich display (images etc.); same confinement as load()."""
        name, raw_path = res.split_locator(locator)
        meta = self.get(name)
        if raw_path is None:
            raise ResourceError(f"{locator!r} names a skill, not a file; give name/path")
        return res.read_resource_bytes(meta.path, res.normalize_resource_path(raw_path), cap=cap)

    # --- validation and running -----------------------------------------------------------------------

    def validate(self, name_or_path):
        """Strict report for a skill given by name, or for a folder / SKILL.md path."""
        from .validate import validate_path

        if isinstance(name_or_path, str) and name_or_path in self:
            return validate_path(self.get(name_or_path).path)
        path = Path(os.path.expanduser(name_or_path))  # unlike Path.expanduser, never raises (~nosuchuser)
        if os.path.exists(path):
            return validate_path(path)
        raise SkillNotFound(self._not_found_message(str(name_or_path)) + "; nor is it an existing path")

    def run(self, name: str, script: str, args=None, stdin=None, backend: str | None = None,
            timeout: float | None = None, memory=None, network: bool | None = None,
            guard: bool | None = None, deps: str | None = None, progress=None, inputs=None,
            save_to=None, on_output=None, overwrite: bool = False, runtime: str | None = None, **limits):
        """Run one of the skill's scripts in the sandbox and return its ExecuteResult.

        The script runs in a writable workspace (its working directory); the skill stays read-only at
        its own path. inputs: host files or folders copied into the workspace first (each under its base
        name). Files the script writes in the workspace (other than unchanged inputs) or under
        $IPYSKILLS_OUTPUT come back as `result.artifacts`; save_to: a host folder they are written to
        (never over an existing file unless overwrite=True; see result.saved and result.save_note).
        on_output(stream, text): called with "stdout"/"stderr" text as it arrives (within the cap).
        deps: "auto" | "declared" | "off" (default: the `deps` setting): which of the skill's Python
        requirements are installed into the sandbox first. progress: called with one line per stage of
        slow preparation work (resolving and installing dependencies). runtime: "runc" | "runsc" | "auto"
        (default: the `runtime` setting): the Docker runtime, runsc being gVisor's user-space kernel.
        Ctrl-C raises ipyskills.errors.RunInterrupted (a KeyboardInterrupt) once the sandbox is removed;
        its `result` holds the output so far."""
        from ..sandbox import runner

        request = self.run_request(name, script, args=args, stdin=stdin, timeout=timeout, memory=memory,
                                   network=network, deps=deps, inputs=inputs, **limits)
        request.on_output = on_output
        settings = self.settings if runtime is None else self.settings.with_overrides(runtime=runtime)
        result = runner.run(
            request,
            backend=self.settings.backend if backend is None else backend,
            guard=self.settings.guard if guard is None else guard,
            settings=settings,
            progress=progress,
        )
        if save_to is not None:
            result.save(save_to, overwrite=overwrite)
        return result

    def run_request(self, name: str, script: str, args=None, stdin=None, timeout=None, memory=None,
                    network=None, deps=None, inputs=None, **limits):
        """The RunRequest `run()` would hand to the runner (script confined, limits checked)."""
        from ..sandbox.policy import Limits
        from ..sandbox.request import RunRequest

        meta = self.get(name)
        if not isinstance(script, str):
            raise SandboxError(f"script must be a path inside the skill like 'scripts/x.py', got {script!r}")
        try:
            rel = res.normalize_resource_path(script)
        except ResourceError as exc:
            raise SandboxError(f"script path refused: {exc}") from None
        try:
            target = res.resolve_in_skill(meta.path, rel)
        except ResourceError as exc:
            raise SandboxError(f"script path refused: {exc}") from None
        if not _is_file(target):
            scripts = [f for f in res.list_resources(meta.path).files if f.startswith("scripts/")][:10]
            hint = f" (its scripts: {', '.join(scripts)})" if scripts else ""
            raise SandboxError(f"skill {meta.name!r} has no file {rel!r}{hint}")
        args = _check_args(args)
        stdin_bytes = _check_stdin(stdin)
        unknown = set(limits) - set(Limits.__dataclass_fields__)
        if unknown:
            raise SandboxError(f"unknown limit(s): {', '.join(sorted(unknown))}; "
                               f"known: {', '.join(Limits.__dataclass_fields__)}")
        lim = Limits.from_settings(self.settings, timeout=timeout, memory=memory, network=network, **limits)
        if len(stdin_bytes) > lim.stdin_cap:
            raise SandboxError(f"stdin is {len(stdin_bytes):,} bytes, over the {lim.stdin_cap:,} byte cap for one "
                               "run; write large data to a file the skill reads, or raise stdin_cap "
                               "(Settings.stdin_cap, IPYSKILLS_STDIN_CAP)")
        deps = check_deps_mode(self.settings.deps if deps is None else deps)
        from ..sandbox.inputs import stage_inputs

        staged = stage_inputs(inputs, lim.input_cap)
        return RunRequest(
            skill_name=meta.name,
            skill_dir=meta.path.resolve(),
            script=rel,
            args=args,
            stdin=stdin_bytes,
            limits=lim,
            image=self.settings.image,
            requirements=self.requirements(meta.name),  # also says which image profile the scripts need
            deps=deps,
            allow_sdist=self.settings.allow_sdist,
            deps_budget=self._deps_budget(),
            inputs=staged,
        )

    def _deps_budget(self):
        from ..sandbox.provision.budget import Budget

        return Budget(max_count=self.settings.deps_max_count, max_bytes=self.settings.deps_max_size,
                      allow_gpu=self.settings.gpu_wheels)

    def install_requirements(self, name: str, *, backend: str | None = None, deps: str | None = None,
                             progress=None):
        """Provision the skill's requirements now, where `backend` would run it (as the first run would);
        returns the Provisioned record (None when there is nothing to install)."""
        from ..sandbox import runner

        meta = self.get(name)
        deps = check_deps_mode(self.settings.deps if deps is None else deps)
        request = runner.RunRequest(skill_name=meta.name, skill_dir=meta.path.resolve(), script="",
                                    image=self.settings.image, deps=deps, allow_sdist=self.settings.allow_sdist,
                                    deps_budget=self._deps_budget(),
                                    requirements=None if deps == "off" else self.requirements(meta.name))
        impl, _notice = runner.select_backend(self.settings.backend if backend is None else backend,
                                              request.image, self.settings)
        return runner.provision(impl, request, progress)

    def requirements(self, name: str, *, provided=None) -> SkillRequirements:  # noqa: F821
        """What the skill needs: Python distributions with their sources, programs, and the image profile."""
        from .requirements import analyze_cached, default_provided

        meta = self.get(name)
        compatibility = meta.frontmatter.get("compatibility") if isinstance(meta.frontmatter, dict) else None
        return analyze_cached(meta.path, skill_name=meta.name,
                       provided=default_provided() if provided is None else provided,
                       compatibility=compatibility if isinstance(compatibility, str) else "")

    # --- agent tools (ipyskills.agent.tools) -----------------------------------------------------------

    def tool_schemas(self, format: str = "openai", **view_options) -> list[dict]:
        """read_skill / execute_skill_script as JSON Schema tools ([] when no skills are visible)."""
        from ..agent import tools

        return tools.tool_schemas(self, format, **view_options)

    def dispatch(self, tool_name: str, arguments=None, **view_options):
        """The exact text a model gets for one tool call (a ToolResult; errors come back as text)."""
        from ..agent import tools

        return tools.dispatch(self, tool_name, arguments, **view_options)

    def system_prompt(self, format: str = "xml", **view_options) -> str:
        """Catalog plus behavioural instructions ("" when no skills are visible)."""
        from ..agent import tools

        return tools.system_prompt(self, format, **view_options)

    def for_agent(self, allow=None, disabled=(), **options):
        """An AgentView: one conversation's filtered catalog, tools, dispatcher and activation tracker."""
        from ..agent import tools

        return tools.AgentView(self, allow, disabled, **options)

    def eval_trigger(self, name: str, queries, *, client, model: str, **options):
        """Trigger eval of skill `name`: does its description make the model load it when it should?
        See `ipyskills.agent.prompt_lab.trigger_eval.eval_trigger` (runs=, descriptions=, parallel=, allow=...).
        `allow` / `disabled` filter what the model sees, as in `for_agent`."""
        from ..agent.prompt_lab.trigger_eval import eval_trigger

        view = self.for_agent(options.pop("allow", None), options.pop("disabled", ()))
        return eval_trigger(view, name, queries, client=client, model=model, **options)

    def budget(self, name: str | None = None, **options):
        """Characters and tokens of each skill at levels 1 and 2 and its largest files, against the
        specification's guidance (`ipyskills.agent.prompt_lab.budget.skill_budget`: client=, model=, counter=)."""
        from ..agent.prompt_lab.budget import skill_budget

        return skill_budget(self, name, **options)

    def __repr__(self) -> str:
        n = len(self._scan.skills) if self._scan is not None else "?"
        return f"<SkillRegistry {n} skills from {len(self._roots())} roots>"


def _by_name(meta: SkillMeta) -> str:
    return meta.name


def _same_objects(a: list, b: list) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b))


def read_skill_body(skill_md: Path) -> str:
    """The SKILL.md body, read now: a skill edited since discovery shows its new text."""
    from . import parse

    parsed = parse.parse_skill_md(skill_md, lenient=True)  # InvalidSkill when it no longer parses
    return parse.read_body(skill_md, parsed.body_offset)


def confined_skill_md(meta: SkillMeta) -> Path:
    """The SKILL.md, refused when it is a link to a file outside the skill folder (as every bundled file
    is). The skill folder itself may be a link (`~/.claude/skills/x -> ~/src/x`): it is resolved first."""
    try:
        root = Path(meta.path).resolve(strict=True)
        target = Path(meta.skill_md).resolve(strict=True)
    except (OSError, RuntimeError) as exc:
        raise ResourceError(f"cannot read the SKILL.md of {meta.name!r}: {getattr(exc, 'strerror', None) or exc}") from None
    if root not in target.parents:
        raise ResourceError(f"the SKILL.md of {meta.name!r} is a link to a file outside its skill folder "
                            f"({target}); refused. Copy the file into the skill folder instead of linking it")
    return target


def read_skill_body_capped(skill_md: Path, cap: int) -> tuple[str, str]:
    """(body, what was not read): the body's first `cap` characters' worth of bytes at most (4 a character),
    so a 100 MiB body costs no more than a capped one. `what was not read` is "" when it was read whole."""
    import codecs

    from . import parse

    parsed = parse.parse_skill_md(skill_md, lenient=True)  # InvalidSkill when it no longer parses
    limit = cap * 4 + 4
    try:
        with open(skill_md, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            fh.seek(parsed.body_offset)
            raw = fh.read(limit + 1)
    except OSError as exc:
        raise ResourceError(f"cannot read {skill_md}: {exc.strerror}") from None
    if len(raw) <= limit:
        return parse.read_body(skill_md, parsed.body_offset), ""
    raw = raw[:limit]
    try:
        text = codecs.getincrementaldecoder("utf-8")().decode(raw, final=False)  # a split last character waits
    except UnicodeDecodeError:
        parse._decode(raw, first_line=None, what="body", path=Path(skill_md))  # raises the usual error
        raise
    left = size - parsed.body_offset - len(text.encode("utf-8"))
    return text.replace("\r\n", "\n").replace("\r", "\n").strip(), f"{left:,} bytes"


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:  # e.g. a name over the file system's limit (ENAMETOOLONG): no such file either
        return False


def _check_args(args) -> list[str]:
    if args is None:
        return []
    if isinstance(args, (str, bytes)):
        raise SandboxError("args must be a list of strings (one item per argument), not one string")
    args = list(args)
    bad = [a for a in args if not isinstance(a, str)]
    if bad:
        raise SandboxError(f"args must be strings; got {bad[0]!r}")
    if any("\x00" in a for a in args):
        raise SandboxError("an argument contains a NUL character, which no program can receive")
    return args


def _check_stdin(stdin) -> bytes:
    if stdin is None:
        return b""
    if isinstance(stdin, str):
        return stdin.encode("utf-8")
    if isinstance(stdin, (bytes, bytearray)):
        return bytes(stdin)
    raise SandboxError(f"stdin must be str or bytes, got {type(stdin).__name__}")


_shared: SkillRegistry | None = None


def shared_registry() -> SkillRegistry:
    """The process-wide registry (`ipyskills.registry()`), created on first call. It lives here, not in the
    package root, so the notebook can reach it without importing the root that loads the notebook."""
    global _shared
    if _shared is None:
        _shared = SkillRegistry()
    return _shared
