"""A warm container's pre-started interpreter (prestarted.py) is the same process a fresh `python3 script.py`
would be: everything a script can see of its own start, its exceptions and its exit, compared field by
field between a warm run (pre-started) and a fresh one, on the real engine, under the test runtime."""

from __future__ import annotations

import json
import textwrap

import pytest
from conftest import test_runtime

from ipyskills.sandbox.docker import pool as pool_mod
from ipyskills.sandbox.docker.backend import DockerBackend
from ipyskills.sandbox.request import RunRequest

docker = pytest.mark.docker

# What a script sees of how it was started; printed before it imports anything of its own.
SEEN = r"""
_globals_at_start = list(globals())
import sys
_modules_at_start = sorted(sys.modules)
import json, os, resource, signal
def sig(n):
    try:
        h = signal.getsignal(n)
    except (ValueError, OSError):
        return "n/a"
    return h if isinstance(h, int) else "handler"
print(json.dumps({
    "globals": _globals_at_start, "modules": _modules_at_start, "argv": sys.argv, "orig_argv": sys.orig_argv,
    "path": sys.path, "file": __file__, "name": __name__, "doc": __doc__, "package": __package__,
    "spec": repr(__spec__), "loader": [type(__loader__).__name__, __loader__.name, __loader__.path],
    "cached": __cached__, "cwd": os.getcwd(), "env": dict(os.environ), "flags": list(sys.flags),
    "executable": sys.executable, "fds": sorted(os.listdir("/proc/self/fd")),
    "signals": {n: sig(n) for n in range(1, signal.NSIG)}, "umask": os.umask(0o22),
    "rlimits": {k: resource.getrlimit(getattr(resource, k)) for k in dir(resource) if k.startswith("RLIMIT_")},
    "ids": [os.getuid(), os.getgid(), os.getgroups()], "parent": os.getppid(), "pgrp": os.getpgrp() == os.getpid(),
    "stdio": [sys.stdin.encoding, sys.stdout.encoding, sys.stdout.line_buffering, sys.stdin.isatty()],
    "bytecode": sys.dont_write_bytecode, "stdin": sys.stdin.read(),
}, sort_keys=True))
"""

ENDINGS = {
    "uncaught": "def f():\n    raise ValueError('boom')\nf()\n",
    "chained": "try:\n    1 / 0\nexcept ZeroDivisionError as e:\n    raise KeyError('k') from e\n",
    "interrupt": "raise KeyboardInterrupt\n",
    "exit-message": "import sys\nsys.exit('bye')\n",
    "exit-code": "import sys\nsys.exit(3)\n",
    "syntax": "def (:\n",
    "own-hook": textwrap.dedent("""\
        import sys, traceback
        sys.excepthook = lambda k, v, tb: print("hook saw", [f.name for f in traceback.extract_tb(tb)])
        def g():
            raise RuntimeError("x")
        g()
        """),
    "atexit-and-thread": textwrap.dedent("""\
        import atexit, threading, time
        atexit.register(print, "at exit")
        threading.Thread(target=lambda: (time.sleep(0.2), print("thread done"))).start()
        print("main done")
        """),
    "sibling-import": "import helper\nprint(helper.VALUE, __name__)\n",
}


@pytest.fixture
def backends(docker_backend):
    """(warm, fresh): one backend with a warm pool of 1 under the test runtime, one without a pool."""
    runtime = test_runtime()
    warm = DockerBackend(image=docker_backend.image, client=docker_backend.client(), pool_size=1, runtime=runtime)
    fresh = DockerBackend(image=docker_backend.image, client=docker_backend.client(), pool_size=0, runtime=runtime)
    pool = warm.pool(warm.client(), warm.image)
    assert pool.warm(wait=60) == 1, pool.status()
    yield warm, fresh, pool
    pool_mod.drain_all()


def both(backends, skill, script, **kw):
    warm, fresh, pool = backends
    assert pool.warm(wait=60) >= 1, pool.status()  # refilled after the last run
    request = RunRequest(skill.name, skill, script, **kw)
    got_warm, got_fresh = warm.run(request), fresh.run(request)
    assert got_warm.isolation.startswith("docker (warm pool)"), got_warm.isolation
    assert got_fresh.isolation.startswith(("docker: ", "docker, gVisor"))
    return got_warm, got_fresh


def started_by(result_stdout: str) -> str:
    return result_stdout.splitlines()[0]


CMDLINE = "print(open('/proc/self/cmdline').read().split(chr(0))[1])\n"


@docker
def test_a_warm_run_of_a_python_script_is_the_pre_started_interpreter(backends, make_skill):
    skill = make_skill({"scripts/cmd.py": CMDLINE})
    warm, fresh = both(backends, skill, "scripts/cmd.py")
    assert started_by(warm.stdout) == "-c"  # the interpreter was there before the job
    assert started_by(fresh.stdout) == "/skill/scripts/cmd.py"


@docker
def test_the_script_sees_exactly_what_a_fresh_start_shows(backends, make_skill):
    skill = make_skill({"scripts/seen.py": SEEN})
    warm, fresh = both(backends, skill, "scripts/seen.py", args=["a b", "-x"], stdin="é\nline".encode())
    assert warm.exit_code == fresh.exit_code == 0, (warm.stderr, fresh.stderr)
    seen_warm, seen_fresh = json.loads(warm.stdout), json.loads(fresh.stdout)
    for seen in (seen_warm, seen_fresh):
        assert len(seen["env"].pop("HOSTNAME")) == 12  # each container's own id
    for key in seen_fresh:
        assert seen_warm[key] == seen_fresh[key], key
    assert seen_warm["argv"] == ["/skill/scripts/seen.py", "a b", "-x"] and seen_warm["stdin"] == "é\nline"
    assert seen_warm["path"][0] == "/skill/scripts" and seen_warm["doc"] is None
    assert seen_warm["fds"] == ["0", "1", "2", "3"]  # 3: the listing's own; the job's pipe is closed


@docker
@pytest.mark.parametrize("ending", sorted(ENDINGS))
def test_exceptions_exits_and_endings_are_python_s_own(backends, make_skill, ending):
    skill = make_skill({"scripts/end.py": ENDINGS[ending], "scripts/helper.py": "VALUE = 42\n"})
    warm, fresh = both(backends, skill, "scripts/end.py")
    assert (warm.exit_code, warm.stdout, warm.stderr) == (fresh.exit_code, fresh.stdout, fresh.stderr)
    expected_exit = {"uncaught": 1, "chained": 1, "interrupt": 130, "exit-message": 1, "exit-code": 3,
                     "syntax": 1, "own-hook": 1, "atexit-and-thread": 0, "sibling-import": 0}[ending]
    assert warm.exit_code == expected_exit, warm.stderr
    assert "<string>" not in warm.stderr + warm.stdout  # none of the pre-started code's frames
    if ending == "own-hook":
        assert warm.stdout == "hook saw ['<module>', 'g']\n"
    if ending == "atexit-and-thread":
        assert warm.stdout == "main done\nthread done\nat exit\n"


@docker
def test_jobs_that_do_not_fit_get_a_fresh_process_in_the_warm_container(backends, make_skill):
    skill = make_skill({"scripts/cmd.py": CMDLINE, "scripts/cmd.sh": "echo shell $0\n"})
    hashed, _ = both(backends, skill, "scripts/cmd.py", env={"PYTHONHASHSEED": "0"})
    assert started_by(hashed.stdout) == "/skill/scripts/cmd.py"  # a start-up variable differs
    other_home, _ = both(backends, skill, "scripts/cmd.py", env={"HOME": "/work"})
    assert started_by(other_home.stdout) == "/skill/scripts/cmd.py"
    shell, _ = both(backends, skill, "scripts/cmd.sh")
    assert shell.stdout == "shell /skill/scripts/cmd.sh\n" and shell.exit_code == 0
    plain, _ = both(backends, skill, "scripts/cmd.py", env={"MY_SETTING": "1"})
    assert started_by(plain.stdout) == "-c"  # a variable Python does not read at start-up still fits
