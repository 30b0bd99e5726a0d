"""Smoke-test published skill collections through ipyskills: does each script get past its imports?

For every skill (a folder with SKILL.md) under the given collection folders, and every `*.py`, `*.sh` and
`*.js` in its `scripts/` folder (recursively) or its root, run the script with `--help` through
`SkillRegistry.run` on the Docker backend and classify what happened:

  ok                     exit 0, or it printed a usage text
  needs-input            an argument error (argparse "required", "usage:" with an error, a file named --help)
                         after the imports: the script started
  needs-service          started, then needed a server, the network or an API key the sandbox lacks
  missing-python-module  ModuleNotFoundError / "No module named X"
  missing-node-module    Node's "Cannot find module 'x'"
  missing-program        "command not found", FileNotFoundError for a program, "X is not installed", or the
                         run was refused because the profile image with the programs is absent
  provision-failed       ipyskills could not install the skill's requirements
  guard-blocked          the static guard refused the script
  timeout / oom          killed by the run's limits
  not-a-script           a package module run on its own (relative import, "should not be run directly",
                         or "No module named X" where X is the skill's own folder: meant for `python -m`)
  other-error            anything else (the first error line is kept as detail)

`run()` gets `deps=MODE` only when it has that keyword (inspect.signature), so the same harness gives the
numbers before and after dependency provisioning. Sequential (one run at a time).

    python scripts/try_published.py /tmp/published/anthropics-skills ... [--json OUT] [--limit N]
        [--deps auto|declared|off] [--timeout 30] [--skill NAME]... [--no-guard] [--image TAG]
        [--workdir workspace|skill] [--no-sdist]

`IPYSKILLS_*` settings apply (`IPYSKILLS_GPU_WHEELS=1 IPYSKILLS_DEPS_MAX_SIZE=4g` accepts torch's CUDA
build), apart from those the options set. `--no-sdist` refuses packages that publish no wheel instead of building them from their sdists (in a
throwaway network-off container of the build image, the default), to count what source builds add. `--workdir skill` runs every script the old way (working directory = the read-only skill, script path
relative to it) instead of the default writable workspace with the script called by its path in the skill,
so the two layouts can be compared on the same scripts.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import re
import sys
import time
from collections import Counter
from pathlib import Path

OUTCOMES = ("ok", "needs-input", "needs-service", "missing-python-module", "missing-node-module", "missing-program",
            "provision-failed", "guard-blocked", "timeout", "oom", "not-a-script", "other-error")
STARTED = ("ok", "needs-input", "needs-service")  # got past the imports
SCRIPT_SUFFIXES = (".py", ".sh", ".js")
SKIP_DIRS = {".git", "node_modules", "__pycache__", ".venv", "venv"}

_NO_MODULE = re.compile(r"No module named '?([A-Za-z0-9_.]+)'?")
_NODE_MODULE = re.compile(r"Cannot find module '([^']+)'")
_PROGRAM = [
    re.compile(r"(?:^|\s|/)([A-Za-z0-9_.+-]+): (?:command )?not found", re.MULTILINE),
    re.compile(r"FileNotFoundError: \[Errno 2\] No such file or directory: '([^'/]*)'"),
    re.compile(r"\b([A-Za-z0-9_.+-]+) (?:is )?not installed", re.IGNORECASE),
    re.compile(r"exec: \"?([A-Za-z0-9_.+-]+)\"?: executable file not found"),
]
_NEEDS_INPUT = [
    re.compile(r"error: the following arguments are required"),
    re.compile(r"error: (?:argument|one of the arguments|unrecognized arguments)"),
    re.compile(r"No such file or directory: '--help'|not found: '?--help|not exist: '?--help", re.IGNORECASE),
    re.compile(r"--help'? (?:not found|does not exist)|not found: \S*--help", re.IGNORECASE),
    re.compile(r"EOFError: EOF when reading a line"),  # it asked for input: it started
]
# Got past its imports, then needed a service, a network or an API key the sandbox does not give.
_NEEDS_SERVICE = re.compile(r"requests\.exceptions\.ConnectionError|Max retries exceeded|Connection refused|"
                            r"\b[A-Z][A-Z0-9_]*(?:API_KEY|TOKEN)\b[^\n]*not set", re.IGNORECASE)
# A package's module run on its own: it is not a script, whatever it imports.
_NOT_SCRIPT = re.compile(r"attempted relative import with no known parent package|should not be run directly")
# A script that catches its own ImportError and says what to pip install.
_SAYS_PIP = re.compile(r"\b([A-Za-z0-9_.+-]+) (?:is )?not (?:installed|available)\b[^\n]*\b(?:pip3?|conda) install\b",
                       re.IGNORECASE)
_USAGE = re.compile(r"^\s*usage\b", re.IGNORECASE | re.MULTILINE)


def find_skills(collection: Path) -> list[Path]:
    """Folders holding a SKILL.md (hidden folders included: some collections keep skills in `.curated/`)."""
    found = []
    for root, dirs, files in os.walk(collection):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        if "SKILL.md" in files or "skill.md" in files:
            found.append(Path(root))
    return sorted(found)


def find_scripts(skill_dir: Path) -> list[str]:
    rels = set()
    for path in skill_dir.iterdir():
        if path.is_file() and path.suffix in SCRIPT_SUFFIXES:
            rels.add(path.name)
    scripts = skill_dir / "scripts"
    if scripts.is_dir():
        for root, dirs, files in os.walk(scripts):
            dirs[:] = [d for d in dirs if d not in SKIP_DIRS]
            for name in files:
                if name.endswith(SCRIPT_SUFFIXES) and name != "__init__.py":
                    rels.add((Path(root) / name).relative_to(skill_dir).as_posix())
    return sorted(rels)


def classify(exit_code, stdout: str, stderr: str, timed_out=False, oom=False) -> tuple[str, str]:
    """(outcome, detail) for one finished run."""
    text = f"{stderr}\n{stdout}"
    if timed_out:
        return "timeout", ""
    if oom:
        return "oom", ""
    if exit_code == 0:
        return "ok", ""
    match = _NO_MODULE.search(text)
    if match:
        return "missing-python-module", match.group(1).split(".")[0]
    match = _SAYS_PIP.search(text)
    if match:
        return "missing-python-module", match.group(1)
    match = _NODE_MODULE.search(text)
    if match:
        return "missing-node-module", match.group(1)
    for pattern in _PROGRAM:
        match = pattern.search(text)
        if match and match.group(1) not in ("--help", "-h"):
            return "missing-program", match.group(1)
    if _NOT_SCRIPT.search(text):
        return "not-a-script", first_error_line(text)
    for pattern in _NEEDS_INPUT:
        if pattern.search(text):
            return "needs-input", first_error_line(text)
    if _USAGE.search(text):
        return "ok", "printed usage (exit %s)" % exit_code
    if _NEEDS_SERVICE.search(text):
        return "needs-service", first_error_line(text)
    return "other-error", first_error_line(text)


def first_error_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for line in reversed(lines):  # a traceback's last line names the exception
        if re.match(r"^[A-Za-z_.]*(Error|Exception)\b", line):
            return line[:200]
    for line in lines:
        if "error" in line.lower():
            return line[:200]
    return lines[-1][:200] if lines else ""


def local_module(skill_dir: Path, outcome: str, detail: str) -> tuple[str, str]:
    """A "missing" module that is the skill's own folder or file is a layout matter, not a dependency."""
    if outcome == "missing-python-module" and detail and (
            (skill_dir / detail).is_dir() or (skill_dir / f"{detail}.py").is_file()):
        return "not-a-script", f"imports its own package {detail!r}: meant to run as python -m"
    return outcome, detail


def classify_exception(exc: BaseException) -> tuple[str, str]:
    from ipyskills.errors import GuardBlocked, SandboxError

    name = type(exc).__name__
    message = str(exc).splitlines()[0][:300] if str(exc) else name
    if name == "ProvisionError" or re.search(r"dependency image failed", message):
        return "provision-failed", message
    if isinstance(exc, GuardBlocked):
        return "guard-blocked", message
    if isinstance(exc, SandboxError) and re.search(r"needs the \w+ image", message):
        return "missing-program", message
    return "other-error", f"{name}: {message}"


def try_script(reg, name: str, script: str, *, timeout: float, deps: str | None, guard: bool) -> dict:
    kwargs = {"args": ["--help"], "stdin": "", "backend": "docker", "timeout": timeout, "guard": guard}
    if deps is not None and "deps" in inspect.signature(reg.run).parameters:
        kwargs["deps"] = deps
    started = time.monotonic()
    try:
        result = reg.run(name, script, **kwargs)
    except Exception as exc:  # noqa: BLE001 - every failure is a classified outcome
        outcome, detail = classify_exception(exc)
        return {"outcome": outcome, "detail": detail, "exit_code": None,
                "seconds": round(time.monotonic() - started, 2), "raised": type(exc).__name__}
    outcome, detail = classify(result.exit_code, result.stdout, result.stderr, result.timed_out,
                               result.oom_killed)
    return {"outcome": outcome, "detail": detail, "exit_code": result.exit_code,
            "timed_out": result.timed_out, "oom": result.oom_killed,
            "seconds": round(time.monotonic() - started, 2), "notice": result.notice,
            "stdout_tail": result.stdout[-1500:], "stderr_tail": result.stderr[-1500:]}


def survey(collections: list[Path], *, limit: int | None, timeout: float, deps: str | None, guard: bool,
           only: set[str], image: str | None = None, allow_sdist: bool = True, out=sys.stdout) -> dict:
    from ipyskills import SkillRegistry
    from ipyskills.settings import Settings

    # IPYSKILLS_* settings apply (e.g. IPYSKILLS_GPU_WHEELS=1 IPYSKILLS_DEPS_MAX_SIZE=4g); these win
    settings = Settings.from_env().with_overrides(default_roots=False, bundled_skills=False, backend="docker",
                                                  timeout=timeout, pool_size=0, guard=guard, allow_sdist=allow_sdist)
    if image:  # a configured image is used as is: no switch to a profile image
        settings = settings.with_overrides(image=image)
    results = []
    for collection in collections:
        done = 0
        for skill_dir in find_skills(collection):
            if only and skill_dir.name not in only:
                continue
            scripts = find_scripts(skill_dir)
            if not scripts:
                continue
            reg = SkillRegistry([str(skill_dir)], settings=settings)  # one skill per registry: no collisions
            names = reg.names()
            for script in scripts:
                if limit is not None and done >= limit:
                    break
                done += 1
                row = {"collection": collection.name, "skill": skill_dir.name,
                       "path": skill_dir.relative_to(collection).as_posix(), "script": script}
                if not names:
                    row.update(outcome="other-error", detail="skill not loaded by ipyskills", exit_code=None)
                else:
                    row.update(try_script(reg, names[0], script, timeout=timeout, deps=deps, guard=guard))
                    row["outcome"], row["detail"] = local_module(skill_dir, row["outcome"], row["detail"])
                results.append(row)
                print(f"  {row['outcome']:<22} {row['collection']}/{row['path']}/{script}"
                      f"  {row.get('detail', '')[:90]}", file=out, flush=True)
        if limit is not None and done >= limit:
            print(f"  (capped at {limit} scripts for {collection.name})", file=out, flush=True)
    return report(results, collections=collections, limit=limit, timeout=timeout, deps=deps, guard=guard,
                  image=settings.image)


def report(results: list[dict], **meta) -> dict:
    by_collection: dict[str, Counter] = {}
    skills: dict[str, set] = {}
    for row in results:
        by_collection.setdefault(row["collection"], Counter())[row["outcome"]] += 1
        skills.setdefault(row["collection"], set()).add(row["path"])
    total = Counter(row["outcome"] for row in results)
    modules = Counter(row["detail"] for row in results if row["outcome"] == "missing-python-module")
    programs = Counter(row["detail"] for row in results if row["outcome"] == "missing-program")
    return {
        "meta": {"collections": [str(c) for c in meta["collections"]], "limit": meta["limit"],
                 "timeout": meta["timeout"], "deps": meta["deps"], "guard": meta["guard"],
                 "image": meta["image"], "when": time.strftime("%Y-%m-%dT%H:%M:%S%z")},
        "totals": {
            "skills_with_scripts": sum(len(s) for s in skills.values()),
            "scripts": len(results),
            "started": sum(total[o] for o in STARTED),
            "outcomes": {o: total[o] for o in OUTCOMES if total[o]},
            "missing_modules": dict(modules.most_common()),
            "missing_programs": dict(programs.most_common()),
        },
        "collections": {name: {"skills_with_scripts": len(skills[name]), "scripts": sum(c.values()),
                               "outcomes": {o: c[o] for o in OUTCOMES if c[o]}}
                        for name, c in by_collection.items()},
        "results": results,
    }


SHORT = {"ok": "ok", "needs-input": "input", "needs-service": "svc", "missing-python-module": "py-mod", "missing-node-module": "js-mod",
         "missing-program": "prog", "provision-failed": "prov", "guard-blocked": "guard", "timeout": "tmo",
         "oom": "oom", "not-a-script": "module", "other-error": "other"}


def print_tables(data: dict, out=sys.stdout) -> None:
    per_skill: dict[tuple[str, str], Counter] = {}
    for row in data["results"]:
        per_skill.setdefault((row["collection"], row["path"]), Counter())[row["outcome"]] += 1
    cols = list(OUTCOMES)
    header = f"{'skill':<48} {'n':>3} " + " ".join(f"{SHORT[o]:>6}" for o in cols)
    for collection, summary in data["collections"].items():
        print(f"\n== {collection}: {summary['skills_with_scripts']} skills with scripts, "
              f"{summary['scripts']} scripts", file=out)
        print(header, file=out)
        for (coll, path), counts in sorted(per_skill.items()):
            if coll != collection:
                continue
            print(f"{path[-48:]:<48} {sum(counts.values()):>3} "
                  + " ".join(f"{counts[o] or '':>6}" for o in cols), file=out)
        counts = Counter(summary["outcomes"])
        print(f"{'TOTAL':<48} {summary['scripts']:>3} " + " ".join(f"{counts[o] or '':>6}" for o in cols),
              file=out)
    totals = data["totals"]
    print(f"\nAll: {totals['scripts']} scripts in {totals['skills_with_scripts']} skills; "
          f"started {totals['started']} ({100 * totals['started'] / max(1, totals['scripts']):.0f}%); "
          + ", ".join(f"{k} {v}" for k, v in totals["outcomes"].items()), file=out)
    if totals["missing_modules"]:
        print("missing modules: " + ", ".join(f"{k} {v}" for k, v in totals["missing_modules"].items()),
              file=out)
    if totals["missing_programs"]:
        print("missing programs: " + ", ".join(f"{k[:60]} {v}" for k, v in totals["missing_programs"].items()),
              file=out)


def reclassify(data: dict) -> dict:
    """The same results classified again from their kept output (after the rules changed)."""
    roots = {Path(c).name: Path(c) for c in data["meta"]["collections"]}
    for row in data["results"]:
        if "stderr_tail" in row:
            outcome, detail = classify(row["exit_code"], row.get("stdout_tail", ""), row["stderr_tail"],
                                       row.get("timed_out", False), row.get("oom", False))
            row["outcome"], row["detail"] = local_module(roots[row["collection"]] / row["path"], outcome, detail)
    meta = dict(data["meta"], collections=[Path(c) for c in data["meta"]["collections"]])
    return report(data["results"], **{k: meta[k] for k in ("collections", "limit", "timeout", "deps", "guard",
                                                           "image")})


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("collections", nargs="*", type=Path, help="folders holding published skills")
    parser.add_argument("--reclassify", metavar="JSON", help="classify the results of an earlier --json again")
    parser.add_argument("--json", metavar="OUT", help="write every result and the totals as JSON")
    parser.add_argument("--limit", type=int, default=None, help="at most N scripts per collection")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per run (default 30)")
    parser.add_argument("--deps", choices=("auto", "declared", "off"), default="auto",
                        help="passed to run() when it has a deps keyword (default auto)")
    parser.add_argument("--skill", action="append", default=[], help="only skills in folders of this name")
    parser.add_argument("--no-guard", action="store_true", help="skip the static guard")
    parser.add_argument("--image", help="run in this image as is (default: the configured sandbox image, "
                                        "switched to a profile image such as office when a skill needs it)")
    parser.add_argument("--workdir", choices=("workspace", "skill"), default="workspace",
                        help="the run's working directory: the writable workspace (default) or the skill")
    parser.add_argument("--no-sdist", dest="allow_sdist", action="store_false",
                        help="refuse packages without a wheel instead of building them from their sdists (in "
                        "a network-off container of the build image, the default)")
    parser.add_argument("--allow-sdist", dest="allow_sdist", action="store_true",
                        help="build them (the default; kept so older commands still work)")
    args = parser.parse_args(argv)
    if args.workdir == "skill":
        from ipyskills.sandbox import runner

        original = runner.run

        def run_in_skill(request, *a, **k):
            request.workdir = "skill"
            return original(request, *a, **k)

        runner.run = run_in_skill
    if args.reclassify:
        data = reclassify(json.loads(Path(args.reclassify).read_text(encoding="utf-8")))
        print_tables(data)
        if args.json:
            Path(args.json).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        return 0
    if not args.collections:
        parser.error("give one or more collection folders (or --reclassify JSON)")
    for folder in args.collections:
        if not folder.is_dir():
            parser.error(f"not a folder: {folder}")
    data = survey(args.collections, limit=args.limit, timeout=args.timeout, deps=args.deps,
                  guard=not args.no_guard, only=set(args.skill), image=args.image, allow_sdist=args.allow_sdist)
    print_tables(data)
    if args.json:
        Path(args.json).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
