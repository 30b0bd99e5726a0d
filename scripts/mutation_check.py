"""Break the README's promises one at a time and see whether the test suite notices.

Each mutation below is written by hand, not generated: it is the smallest change to the package that
breaks one promise a user relies on (a container limit, a confinement of the local backend, a validation
rule, the guard, a default), so a mutation that survives names a promise no test holds the code to.
Random operator swaps would mostly hit code no promise is about, and would say little about what the suite
proves.

For each mutation the script unpacks the tree at `--ref` into a throw-away folder (`git archive REF | tar -x`),
finds the mutation's snippet by searching the copy's `ipyskills/` (it must occur exactly once in the package,
so a mutation follows code that moved between files), replaces it, and runs the mutation's pytest selection
there with the project's virtualenv:

    .venv/bin/python -m pytest -x -q -p no:cacheprovider SELECTION     (cwd = the copy)

with `PYTHONPATH` starting with the copy (the venv's editable install points at the working tree, and the
copy must win; checked by importing `ipyskills` in the copy before anything runs, and by the `canary`
mutation, which must be caught) and `IPYSKILLS_REQUIRE_DOCKER=1`, under a per-mutation time limit.
Outcomes:

    caught     a test failed (the first failing test is shown); that test is run once more on an unmutated
               copy, and a failure there too makes it `flaky`, not caught
    survived   every selected test passed
    timeout    the time limit ended the run (a hang is not counted as caught)
    n/a        the snippet is not in the package at that ref, or not once (the code did not exist then)
    error      pytest could not run the selection (nothing collected, an internal error)

Usage:

    .venv/bin/python scripts/mutation_check.py [--ref REF] [--only ID[,ID]] [--json] [--list]

`--list` only checks that every snippet is found once at the ref. Selections name files by glob patterns
expanded in the copy, so test files added later with the same naming are included. Every copy is removed
at the end, on Ctrl-C and on SIGTERM; containers a killed pytest left (labelled with its pid) are removed.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PYTHON = REPO / ".venv" / "bin" / "python"


@dataclass(frozen=True)
class Mutation:
    id: str
    promise: str  # the README promise this change breaks, in one line
    edits: tuple[tuple[str, str], ...]  # (exact snippet, replacement); usually one
    tests: tuple[str, ...]  # pytest arguments: paths or globs relative to the tree, then options (-k ...)
    limit: float = 900.0  # seconds for the whole selection
    counted: bool = True  # False for the canary: it checks the harness, not the suite


def mutation(id, promise, old, new, tests, *, more=(), limit=900.0, counted=True) -> Mutation:
    return Mutation(id, promise, ((old, new), *more), tuple(tests), limit, counted)


# Selections. Globs keep working when files are added; the first file listed is the likeliest to notice,
# and -x stops at the first failure, so a caught mutation costs little.
DOCKER = ("tests/sandbox/test_*limit*.py", "tests/sandbox/test_*cgroup*.py", "tests/sandbox/test_*inspect*.py",
          "tests/sandbox/test_docker_attacks.py", "tests/sandbox/test_docker_backend.py",
          "tests/sandbox/test_docker_lifetime_and_caps.py")
DEFAULTS = ("tests/sandbox/test_*default*.py", "tests/sandbox/test_*limit*.py", "tests/sandbox/test_*cgroup*.py",
            "tests/sandbox/test_*inspect*.py", "tests/sandbox/test_docker_attacks.py",
            "tests/sandbox/test_docker_backend.py", "tests/core/test_registry.py", "tests/cli/test_cli_run.py",
            "tests/notebook/test_nb_config.py")
LOCAL = ("tests/sandbox/test_local_attacks.py", "tests/sandbox/test_local_confinement.py",
         "tests/sandbox/test_local_*.py")
VALIDATE = ("tests/core/test_validate*.py", "tests/cli/test_cli_validate.py", "tests/core/test_discover*.py",
            "tests/core/test_registry.py", "tests/notebook/test_nb_authoring.py")
FALLBACK = ("tests/sandbox", "tests/cli", "tests/core", "tests/agent", "tests/notebook", "-m", "not browser",
            "-k", "fallback or no_engine or without_docker or auto_backend or backend_auto")
REMOTE = ("tests/sandbox", "-k", "remote or tcp or docker_host or transfer")

MUTATIONS = [
    mutation("canary", "harness check: the copy's ipyskills is the one the tests import (must be caught)",
             "MAX_NAME_LENGTH = 64", "MAX_NAME_LENGTH = 3", ["tests/core/test_validate.py"],
             limit=300, counted=False),
    # -- the container (README: The sandbox, the table) ----------------------------------------------------
    mutation("docker-swap", "256 MiB memory with no extra swap (swap made unlimited)",
             "memswap_limit=limits.memory", "memswap_limit=-1", DOCKER),
    mutation("docker-cpu", "1 CPU (the CPU limit removed)",
             "nano_cpus=int(limits.cpus * 1e9), ", "", DOCKER),
    mutation("docker-memory", "256 MiB memory (no memory limit at all)",
             "mem_limit=limits.memory, memswap_limit=limits.memory, ", "", DOCKER),
    mutation("docker-readonly-root", "read-only root filesystem",
             "read_only=True, shm_size=SHM_SIZE", "read_only=False, shm_size=SHM_SIZE", DOCKER),
    mutation("docker-network", "network none unless asked for (bridge on every run)",
             'network_mode="bridge" if limits.network else "none"', 'network_mode="bridge"', DOCKER),
    mutation("docker-caps", "all capabilities dropped",
             'cap_drop=["ALL"], security_opt=', "security_opt=", DOCKER),
    mutation("docker-no-new-privs", "no-new-privileges",
             'security_opt=["no-new-privileges:true", f"seccomp={seccomp_profile()}"]',
             'security_opt=[f"seccomp={seccomp_profile()}"]', DOCKER),
    mutation("docker-seccomp", "the project's seccomp profile on every run",
             'security_opt=["no-new-privileges:true", f"seccomp={seccomp_profile()}"]',
             'security_opt=["no-new-privileges:true"]',
             ("tests/sandbox/test_docker_lifetime_and_caps.py", *DOCKER)),
    # UID, not only user=: root without capabilities could not even enter its uid-1000 workspace
    mutation("docker-root", "uid/gid 1000 in the container (runs as root, the workspace its own)",
             'UID = 1000\nWORKDIR = "/skill"', 'UID = 0\nWORKDIR = "/skill"', DOCKER),
    # -- defaults (README: limits row; Settings is what reg.run, the CLI and the magics use) ----------------
    mutation("default-network", "network off by default (the setting's default made True)",
             "    cpus: float = 1.0\n    network: bool = False", "    cpus: float = 1.0\n    network: bool = True",
             DEFAULTS),
    mutation("default-network-limits", "network off by default (Limits' default made True)",
             "the /tmp tmpfs\n    network: bool = False", "the /tmp tmpfs\n    network: bool = True", DEFAULTS),
    mutation("default-timeout", "30 s wall-clock timeout by default (the setting's default: 300 s)",
             "timeout: float = 30.0  # seconds, per run", "timeout: float = 300.0  # seconds, per run", DEFAULTS),
    mutation("default-timeout-limits", "30 s wall-clock timeout by default (Limits' default: 300 s)",
             "timeout: float = 30.0  # seconds of wall time", "timeout: float = 300.0  # seconds of wall time",
             DEFAULTS),
    mutation("default-pids", "128 pids by default (the setting's default: 4096)",
             '    memory: str = "256m"\n    pids: int = 128', '    memory: str = "256m"\n    pids: int = 4096',
             DEFAULTS),
    mutation("default-pids-limits", "128 pids by default (Limits' default: 4096)",
             "(no extra swap)\n    pids: int = 128", "(no extra swap)\n    pids: int = 4096", DEFAULTS),
    # -- run lifetime and caps -------------------------------------------------------------------------------
    mutation("timeout-not-enforced", "a run ends at its timeout (host and launcher give it a minute more)",
             "deadline = time.monotonic() + limits.timeout\n", "deadline = time.monotonic() + limits.timeout + 60\n",
             DOCKER, more=[('"deadline": limits.timeout + DEADLINE_GRACE,', '"deadline": limits.timeout + 60,')]),
    mutation("output-cap", "stdout and stderr 1 MiB each, cut visibly (no cut)",
             "room = self.cap - self.kept", "room = len(data)",
             ("tests/sandbox/test_docker_backend.py", "tests/sandbox/test_docker_attacks.py",
              "tests/sandbox/test_local_attacks.py")),
    mutation("artifact-file-cap", "100 files at most come back (Docker: launcher and host caps removed)",
             'cap, max_files = job["artifact_cap"], job["artifact_files"]',
             'cap, max_files = job["artifact_cap"], 10**9',
             ("tests/sandbox/test_docker_backend.py", "tests/sandbox/test_docker_lifetime_and_caps.py"),
             more=[("if len(listed) > limits.artifact_files:", "if False:"),
                   ("for entry in listed[:limits.artifact_files]:", "for entry in listed:")]),
    mutation("no-removal-on-timeout", "the host kills and removes the container at the timeout",
             "_remove(client, container_id)  # host-enforced: kill and remove right away", "pass",
             ("tests/sandbox/test_docker_attacks.py", "tests/sandbox/test_docker_backend.py",
              "tests/sandbox/test_pool.py")),
    mutation("pool-reuse", "each warm container serves exactly one run (the pool hands one out twice)",
             "warm = self._idle.popleft()", "warm = self._idle[0]", ("tests/sandbox/test_pool.py",)),
    mutation("remote-mounts", "a remote engine gets the skill copied in, not mounted",
             "return not docker_client.is_local(client)", "return False", REMOTE,
             limit=1800),  # a private engine starts and loads the image first (up to 900 s per test)
    mutation("auto-notice", 'backend="auto" says visibly when it falls back to local',
             'return backend_class("local")(), f"backend auto: Docker not used ({reason}); ran on the local backend '
             'instead"',
             'return backend_class("local")(), ""', FALLBACK),
    # -- the local backend -----------------------------------------------------------------------------------
    mutation("local-netns", "local: no network where namespaces allow it (network namespace never made)",
             "net = CLONE_NEWNET if want_net else 0", "net = 0", LOCAL),
    mutation("local-pidns", "local: a private /proc via a new pid namespace (never made)",
             "CLONE_NEWPID = 0x20000000", "CLONE_NEWPID = 0", LOCAL),
    mutation("local-landlock", "local: Landlock confines reads, writes, TCP and signals (never applied)",
             'if spec.get("landlock") is not None:', "if False:", LOCAL),
    mutation("local-pdeathsig", "local: the helper dies with its owner (parent-death signal off)",
             '    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)\n    if spec.get("owner")', '    if spec.get("owner")',
             ("tests/sandbox/test_local_confinement.py", "tests/sandbox/test_local_*.py")),
    # -- parsing, validation, resources, guard ---------------------------------------------------------------
    mutation("yaml-aliases", "frontmatter YAML aliases are refused (no billion-laughs blow-up)",
             "if id(node) in seen:", "if False:",
             ("tests/core/test_parse*.py", "tests/core/test_discover.py", "tests/cli/test_cli_validate.py"),
             limit=600),  # without a per-test limit the alias test takes 4-5 min here before it fails
    mutation("guard-rm-root", "the guard blocks `rm -rf /`",
             '(recursive or cmd.name == "shred") and R.is_root_path(target)', "False",
             ("tests/sandbox/test_guard.py", "tests/cli/test_cli_guard.py", "tests/sandbox/test_guard_*.py"),
             limit=600),
    mutation("name-uppercase", "a skill name has no A-Z (the uppercase rule removed)",
             'if any("A" <= c <= "Z" for c in name):', "if False:", VALIDATE, limit=600),
    mutation("resolve-escape", "a resource path cannot leave its skill (resolve_in_skill's check removed)",
             "if target != root and root not in target.parents:", "if False:",
             ("tests/core/test_resources*.py", "tests/core/test_registry.py", "tests/agent/test_dispatch.py",
              "tests/cli/test_cli_core.py", "tests/notebook/test_nb_authoring.py"), limit=600),
    mutation("name-folder", "a skill's name equals its folder's (the rule removed)",
             "if folder_name is not None and folder_name != name:", "if False:", VALIDATE, limit=600),
    mutation("description-length", "a description is 1-1024 characters (no upper bound)",
             "if length > MAX_DESCRIPTION_LENGTH:", "if False:", VALIDATE, limit=600),
]


@dataclass
class Outcome:
    id: str
    promise: str
    status: str  # caught, survived, timeout, flaky, n/a, error
    seconds: float = 0.0
    first_failure: str = ""
    note: str = ""
    files: list[str] = field(default_factory=list)


# -- copies of the tree ------------------------------------------------------------------------------------

def unpack(ref: str, dest: Path) -> Path:
    """The tree at `ref` in `dest` (readable by every uid: some tests run the sandbox as uid 1000)."""
    dest.mkdir(mode=0o755)
    archive = subprocess.Popen(["git", "-C", str(REPO), "archive", ref], stdout=subprocess.PIPE)
    subprocess.run(["tar", "-x", "-C", str(dest)], stdin=archive.stdout, check=True)
    archive.stdout.close()
    if archive.wait() != 0:
        raise SystemExit(f"git archive {ref} failed")
    return dest


def locate(tree: Path, snippet: str) -> tuple[Path | None, str]:
    """The one file under tree/ipyskills holding `snippet` once, or (None, why not)."""
    hits = []
    for path in sorted((tree / "ipyskills").rglob("*.py")):
        count = path.read_text(encoding="utf-8", errors="replace").count(snippet)
        hits += [path] * count
    if len(hits) == 1:
        return hits[0], ""
    where = ", ".join(sorted({str(p.relative_to(tree)) for p in hits}))
    return None, "snippet not found" if not hits else f"snippet found {len(hits)} times ({where})"


def apply(tree: Path, m: Mutation) -> tuple[list[str], str]:
    """Apply every edit of `m`; returns (files changed, "") or ([], why it could not be applied)."""
    found = []
    for old, _new in m.edits:  # locate all first, so a half-applied mutation never runs
        path, why = locate(tree, old)
        if path is None:
            return [], f"{why}: {old.strip()[:60]!r}"
        found.append(path)
    for path, (old, new) in zip(found, m.edits):
        path.write_text(path.read_text(encoding="utf-8").replace(old, new), encoding="utf-8")
    return sorted({str(p.relative_to(tree)) for p in found}), ""


def selection(tree: Path, args: tuple[str, ...]) -> list[str]:
    """Globs expanded in the tree (each file once, in the order given); options passed as they are."""
    out, seen, option_value = [], set(), False
    for arg in args:
        if option_value or arg.startswith("-"):
            out.append(arg)
            option_value = arg in ("-k", "-m")
            continue
        for match in sorted(glob.glob(arg, root_dir=tree)) if glob.has_magic(arg) else [arg]:
            if (tree / match).exists() and match not in seen:
                seen.add(match)
                out.append(match)
    return out


def environment(tree: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(tree), env.get("PYTHONPATH", "")) if p)
    env["IPYSKILLS_REQUIRE_DOCKER"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def check_import(tree: Path) -> None:
    """The copy's ipyskills must be what `import ipyskills` finds there, not the editable install's."""
    out = subprocess.run([str(PYTHON), "-c", "import ipyskills; print(ipyskills.__file__)"], cwd=tree,
                         env=environment(tree), capture_output=True, text=True, check=False)
    if not out.stdout.strip().startswith(str(tree)):
        raise SystemExit(f"the copy's ipyskills is not imported ({out.stdout.strip() or out.stderr.strip()})")


# -- running pytest ------------------------------------------------------------------------------------------

def stop(proc: subprocess.Popen) -> None:
    """Ctrl-C first, so pytest runs its teardowns (private engines, containers); then SIGKILL the group."""
    for sig, wait in ((signal.SIGINT, 45), (signal.SIGKILL, 10)):
        if proc.poll() is not None:
            break
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(wait)
        except subprocess.TimeoutExpired:
            pass


def remove_leftovers(pid: int) -> None:
    """Containers labelled with the (killed) pytest's pid are ours: remove them."""
    ids = subprocess.run(["docker", "ps", "-aq", "--filter", f"label=ipyskills.pid={pid}"],
                         capture_output=True, text=True, check=False).stdout.split()
    if ids:
        subprocess.run(["docker", "rm", "-f", *ids], capture_output=True, check=False)


def forget_cached_venvs(work: Path) -> None:
    """Older trees' tests keep a uid-1000 venv at a fixed path whose .pth names the tree that made it;
    made by one of our copies, it would send the next copy's tests to a removed (or other) tree."""
    for pth in glob.glob("/tmp/ipyskills-test-venv-*/lib/python3*/site-packages/ipyskills-repo.pth"):
        venv = Path(pth).parents[3]
        if Path(pth).read_text().startswith(str(work)):
            shutil.rmtree(venv, ignore_errors=True)


def pytest(tree: Path, args: list[str], limit: float, log: Path) -> tuple[int | None, str, float]:
    """(exit code or None on time-out, first failing test id, seconds)."""
    forget_cached_venvs(tree.parent)
    cmd = [str(PYTHON), "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-rfE", *args]
    began = time.monotonic()
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, cwd=tree, env=environment(tree), stdout=out,
                                           stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                                  start_new_session=True)  # its own group, to end it whole
        try:
            code = proc.wait(limit)
        except subprocess.TimeoutExpired:
            stop(proc)
            code = None
        except BaseException:  # Ctrl-C or SIGTERM of this script: end the run before the copy goes
            stop(proc)
            remove_leftovers(proc.pid)
            raise
    remove_leftovers(proc.pid)
    return code, first_failure(log.read_text(errors="replace")), time.monotonic() - began


def first_failure(text: str) -> str:
    for line in text.splitlines():
        m = re.match(r"^(FAILED|ERROR) (\S+)", line)
        if m:
            return m[2]
    return ""


# -- one mutation ----------------------------------------------------------------------------------------

def check(m: Mutation, ref: str, work: Path, clean: dict) -> Outcome:
    tree = unpack(ref, work / f"tree-{m.id}")
    try:
        files, why = apply(tree, m)
        if why:
            return Outcome(m.id, m.promise, "n/a", note=why)
        args = selection(tree, m.tests)
        if not any(not a.startswith("-") for a in args):
            return Outcome(m.id, m.promise, "error", files=files, note="no test file of the selection exists")
        code, failed, seconds = pytest(tree, args, m.limit, work / f"{m.id}.log")
        result = Outcome(m.id, m.promise, "", round(seconds), failed, files=files)
        if code is None:
            result.status, result.note = "timeout", f"no result within {m.limit:g} s"
        elif code == 0:
            result.status = "survived"
        elif code in (1, 2) and failed:
            result.status = "caught"
            confirm(result, ref, work, clean)
        else:
            tail = (work / f"{m.id}.log").read_text(errors="replace").strip().splitlines()[-1:]
            result.status, result.note = "error", f"pytest exit {code}: {' '.join(tail)[:120]}"
        return result
    finally:
        shutil.rmtree(tree, ignore_errors=True)


def confirm(result: Outcome, ref: str, work: Path, clean: dict) -> None:
    """Run the test that failed on an unmutated copy: if it fails there too, the catch proves nothing."""
    if "::" not in result.first_failure:
        return  # a collection error: nothing to re-run on its own
    if "tree" not in clean:
        clean["tree"] = unpack(ref, work / "clean")
    code, _, _ = pytest(clean["tree"], [result.first_failure], 600, work / f"{result.id}.clean.log")
    if code != 0:
        result.status = "flaky"
        result.note = "the same test fails without the mutation" if code else "the same test hangs unmutated"


# -- main ------------------------------------------------------------------------------------------------

def table(results: list[Outcome]) -> str:
    width = max(len(r.id) for r in results)
    lines = [f"{'id':<{width}}  {'result':<8}  {'s':>5}  promise / first failing test or note"]
    for r in results:
        lines.append(f"{r.id:<{width}}  {r.status:<8}  {r.seconds:>5.0f}  {r.promise}")
        detail = r.first_failure if r.status == "caught" else (r.note or r.first_failure)
        if detail:
            lines.append(f"{'':<{width}}  {'':<8}  {'':>5}    -> {detail}")
    return "\n".join(lines)


def score(results: list[Outcome]) -> dict:
    counted = [r for r in results if r.id != "canary"]
    caught = sum(r.status == "caught" for r in counted)
    applicable = sum(r.status != "n/a" for r in counted)
    by = {s: sum(r.status == s for r in counted) for s in ("caught", "survived", "timeout", "flaky", "n/a", "error")}
    return {"caught": caught, "total": len(counted), "applicable": applicable, **by}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ref", default="HEAD", help="the commit to test (default HEAD)")
    parser.add_argument("--only", help="comma-separated mutation ids")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--list", action="store_true", help="only check that every snippet is found once")
    parser.add_argument("--logs", type=Path, help="keep each run's pytest output in this folder")
    opts = parser.parse_args(argv)
    wanted = MUTATIONS
    if opts.only:
        ids = [i.strip() for i in opts.only.split(",") if i.strip()]
        unknown = sorted(set(ids) - {m.id for m in MUTATIONS})
        if unknown:
            parser.error(f"unknown mutation id(s): {', '.join(unknown)}")
        wanted = [m for m in MUTATIONS if m.id in ids]
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", opts.ref], capture_output=True,
                            text=True, check=True).stdout.strip()

    def end(signum, _frame):  # SIGTERM/SIGHUP: clean up as for Ctrl-C
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, end)
    signal.signal(signal.SIGHUP, end)
    work = Path(tempfile.mkdtemp(prefix="ipyskills-mutation-"))
    work.chmod(0o755)
    results: list[Outcome] = []
    began = time.monotonic()
    try:
        if opts.list:
            tree = unpack(opts.ref, work / "tree")
            for m in wanted:
                where = [locate(tree, old) for old, _ in m.edits]
                bad = [why for path, why in where if path is None]
                files = ", ".join(sorted({str(p.relative_to(tree)) for p, _ in where if p}))
                print(f"{m.id:<24} {'n/a: ' + bad[0] if bad else 'ok: ' + files}")
            return 0
        check_import(unpack(opts.ref, work / "probe"))
        shutil.rmtree(work / "probe")
        clean: dict = {}
        for m in wanted:
            if not opts.json:
                print(f"[{time.strftime('%H:%M:%S')}] {m.id} ...", file=sys.stderr, flush=True)
            results.append(check(m, opts.ref, work, clean))
            if m.id == "canary" and results[-1].status != "caught":
                raise SystemExit("the canary mutation was not caught: the tests do not import the copy")
    except KeyboardInterrupt:
        print("interrupted; removing the copies", file=sys.stderr)
        return 130
    finally:
        if opts.logs:
            opts.logs.mkdir(parents=True, exist_ok=True)
            for log in work.glob("*.log"):
                shutil.copy(log, opts.logs / log.name)
        forget_cached_venvs(work)
        shutil.rmtree(work, ignore_errors=True)
    wall = time.monotonic() - began
    summary = {"ref": opts.ref, "commit": commit, "wall_seconds": round(wall), **score(results)}
    if opts.json:
        print(json.dumps({"summary": summary, "results": [r.__dict__ for r in results]}, indent=2))
    else:
        print(f"ref {opts.ref} ({commit}), {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
        print(table(results))
        s = summary
        print(f"score: {s['caught']}/{s['total']} caught ({s['applicable']} applicable; survived {s['survived']}, "
              f"timeout {s['timeout']}, flaky {s['flaky']}, n/a {s['n/a']}, error {s['error']}); "
              f"wall time {wall / 60:.1f} min")
    return 0


if __name__ == "__main__":
    sys.exit(main())
