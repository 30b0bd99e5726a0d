"""Helpers shared by the test folders, and suite hygiene for every test:

- a per-test timeout (pytest-timeout) so a hang fails fast with a message: the global default is in
  pyproject.toml; `pytest_collection_modifyitems` gives the pure-Python folders a shorter limit and the
  known long kinds of test a longer one, unless a test has its own `@pytest.mark.timeout(N)`;
- after every test, no process it started is still alive and no sandbox container it started is left
  (`no_sandbox_left`)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

# Seconds. The global default (pyproject.toml, `timeout`) is 300: a Docker test on a loaded machine, with
# scripts that may use their 120-180 s limits, fits; a hang still fails within five minutes.
PURE_PYTHON_FOLDERS = {"core", "cli", "agent"}  # no engine, no image: a test here takes seconds
PURE_PYTHON_TIMEOUT = 60
SLOW_TIMEOUT = 600  # marked slow: cold provisioning (uv downloads, an image build), notebooks, installs
BROWSER_TIMEOUT = 600  # JupyterLab start (up to 90 s) and a headless Chromium session
PRIVATE_ENGINE_TIMEOUT = 900  # the first user of `private_engine` pays for dockerd's start and an image load


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("timeout") is not None:
            continue  # the test's own limit wins
        try:
            folder = Path(str(item.path)).resolve().relative_to(TESTS).parts[0]
        except ValueError:
            continue
        if "private_engine" in item.fixturenames:
            limit = PRIVATE_ENGINE_TIMEOUT
        elif folder == "browser":
            limit = BROWSER_TIMEOUT
        elif item.get_closest_marker("slow") is not None:
            limit = SLOW_TIMEOUT
        elif folder in PURE_PYTHON_FOLDERS:
            limit = PURE_PYTHON_TIMEOUT
        else:
            continue  # the global default
        item.add_marker(pytest.mark.timeout(limit))


@pytest.fixture(autouse=True)
def _failed_builds_of_this_test(tmp_path_factory):
    """Failed source builds are remembered per test, not in the user's cache: a test that builds the same
    sdist again must build it, and the suite must leave the real cache as it found it. (Not through
    `monkeypatch`: an autouse monkeypatch would undo the tests' own patches after the hygiene checks.)"""
    from ipyskills.sandbox.provision import sdist

    folder = tmp_path_factory.mktemp("sdist-failures")
    saved = sdist.failures_dir
    sdist.failures_dir = lambda: folder
    yield
    sdist.failures_dir = saved


@pytest.fixture
def make_skill(tmp_path):
    """`make_skill(folder, frontmatter_text, body)` writes tmp_path/folder/SKILL.md and returns the folder.

    `frontmatter_text` goes between the `---` lines as is; pass `raw=b"..."` to write exact bytes instead.
    """

    def make(folder: str, frontmatter_text: str = "", body: str = "# Skill\n\nDo the thing.\n", *,
             raw: bytes | None = None, filename: str = "SKILL.md") -> Path:
        path = tmp_path / folder
        path.mkdir(parents=True, exist_ok=True)
        data = raw if raw is not None else f"---\n{frontmatter_text}---\n{body}".encode()
        (path / filename).write_bytes(data)
        return path

    return make


# ---------------------------------------------------------------------------------------------------------
# Leftover processes
#
# A process is identified by (pid, start time), so a reused pid is never mistaken for the one seen before.
# The snapshot is taken when the test's call starts, after its fixtures are set up, so processes of
# fixtures (a session's Jupyter server or private dockerd, a function fixture's server that its teardown
# stops) count as already there. A new process whose parent was already there belongs to that parent (a
# kernel of a running server, a shim of an engine), not to the test.

_BEFORE = pytest.StashKey[dict]()
PROCESS_GRACE = 5.0  # seconds a finishing child gets to exit before it counts as left behind


def _processes() -> dict[tuple[int, int], tuple[int, str]]:
    """(pid, start time) -> (parent pid, name) of every live process on the machine, from /proc.
    Zombies are left out: they run nothing, and their parent reaps them."""
    found = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for name in entries:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", encoding="utf-8", errors="replace") as fh:
                stat = fh.read()
        except OSError:
            continue  # it ended while we looked
        comm = stat[stat.find("(") + 1:stat.rfind(")")]  # the name may hold spaces and parentheses
        fields = stat[stat.rfind(")") + 2:].split()
        if fields[0] == "Z":
            continue
        found[(int(name), int(fields[19]))] = (int(fields[1]), comm)
    return found


def _new_descendants(before: dict, allowed: set[int]) -> dict[tuple[int, int], str]:
    """Processes that descend from this one through processes that are all new since `before`."""
    now = _processes()
    children: dict[int, list[tuple[int, int]]] = {}
    for key, (ppid, _) in now.items():
        children.setdefault(ppid, []).append(key)
    found, todo = {}, [os.getpid()]
    while todo:
        for key in children.get(todo.pop(), []):
            if key in before or key[0] in allowed:
                continue  # there before the test (or a session fixture's): its children are its business
            found[key] = now[key][1]
            todo.append(key[0])
    return found


def _session_fixture_pids(item) -> set[int]:
    """Pids of processes held by session-scoped fixtures this test uses (`fixture.proc` or a Popen), e.g. a
    private dockerd a fault test restarted: the fixture's teardown ends it, not the test's."""
    pids = set()
    defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    for name, value in (getattr(item, "funcargs", None) or {}).items():
        fixturedefs = defs.get(name) or ()
        if not fixturedefs or fixturedefs[-1].scope != "session":
            continue
        proc = value if isinstance(value, subprocess.Popen) else getattr(value, "proc", None)
        if isinstance(proc, subprocess.Popen):
            pids.add(proc.pid)
    return pids


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    item.stash[_BEFORE] = _processes()
    yield


def _describe(pid: int, name: str) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            argv = fh.read().split(b"\0")
        return f"{pid} {b' '.join(argv).decode(errors='replace').strip()[:200]}"
    except OSError:
        return f"{pid} {name}"


def _check_processes(item) -> None:
    before = item.stash.get(_BEFORE, None)
    if before is None:
        return  # the test never ran (its setup failed or it was skipped)
    allowed = _session_fixture_pids(item)
    deadline = time.monotonic() + PROCESS_GRACE
    left = _new_descendants(before, allowed)
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = _new_descendants(before, allowed)
    described = [_describe(pid, name) for (pid, _start), name in left.items()]
    for pid, _start in left:  # end them so one failure does not cascade into the next tests
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    assert not left, f"processes the test started are still running (now killed): {described}"


# ---------------------------------------------------------------------------------------------------------
# Leftover sandbox containers (on the engine DOCKER_HOST names when the session starts; a test that points
# DOCKER_HOST at a private engine checks that engine itself). A sandbox container carries its owner's pid
# (ipyskills.pid). The test's containers are those owned by this process, or by a process the test started
# (`python -m ipyskills run`, a notebook kernel): their pids are recorded as subprocess starts them. Other
# processes on the machine (another test run sharing the engine) own the rest, and they are not looked at.

CONTAINER_GRACE = 10.0  # seconds a finished run's container, or one whose owner ended, gets to remove itself
_started: list[int] = []  # pids subprocess.Popen started during the current test


def _record_children() -> None:
    """Record the pid of every child subprocess.Popen starts (asyncio's and jupyter_client's go through
    it too), so a container labelled with it is known to be the test's."""
    execute_child = subprocess.Popen._execute_child
    if getattr(execute_child, "records_pids", False):
        return

    def recording(self, *args, **kwargs):
        execute_child(self, *args, **kwargs)
        _started.append(self.pid)

    recording.records_pids = True
    subprocess.Popen._execute_child = recording


_record_children()


@pytest.fixture(scope="session")
def _shared_engine():
    """A docker-py client for the engine of the session, or None when none answers (nothing to check)."""
    try:
        import docker

        client = docker.from_env(timeout=30)
        client.ping()
    except Exception:  # noqa: BLE001 - no engine, no library: no container can be left on it
        yield None
        return
    yield client
    client.close()


def _leftover_containers(client, owners: set[str]) -> list[dict]:
    from ipyskills.sandbox.docker.cleanup import LABEL, LABEL_PID

    listed = client.api.containers(all=True, filters={"label": f"{LABEL}=1"})
    return [c for c in listed if (c.get("Labels") or {}).get(LABEL_PID) in owners]


def _check_containers(client, owners: set[str]) -> None:
    import sys

    from ipyskills.sandbox.docker.cleanup import LABEL_PID
    from ipyskills.sandbox.owners import pid_alive

    if "ipyskills.sandbox.docker.pool" in sys.modules:  # a warm pool holds containers on purpose: empty it
        sys.modules["ipyskills.sandbox.docker.pool"].drain_all()
    if "ipyskills.sandbox.docker.backend" in sys.modules:
        assert sys.modules["ipyskills.sandbox.docker.backend"].flush_removals(timeout=30), \
            "finished runs' containers were not removed within 30 s"
    import docker.errors

    def ending(c: dict) -> bool:  # stopped (AutoRemove follows), or its owner is gone (the launcher exits)
        owner = c["Labels"][LABEL_PID]
        return c.get("State") not in ("running", "created") or not (owner.isdigit() and pid_alive(int(owner)))

    deadline = time.monotonic() + CONTAINER_GRACE
    left = _leftover_containers(client, owners)
    while left and time.monotonic() < deadline and all(ending(c) for c in left):
        time.sleep(0.2)
        left = _leftover_containers(client, owners)
    for container in left:  # remove them so one failure does not cascade into the next tests
        try:
            client.api.remove_container(container["Id"], force=True)
        except docker.errors.APIError:
            pass  # already being removed
    assert not left, f"sandbox containers left behind: {[(c['Id'][:12], c.get('Labels')) for c in left]}"


@pytest.fixture(autouse=True)
def no_sandbox_left(request, _shared_engine):
    """After every test: no process it started still runs, and no sandbox container it started is left.
    Autouse, so it is set up first and torn down last: the test's own fixtures have cleaned up by then."""
    _started.clear()
    yield
    _check_processes(request.node)
    if _shared_engine is not None:
        _check_containers(_shared_engine, {str(os.getpid()), *map(str, _started)})
