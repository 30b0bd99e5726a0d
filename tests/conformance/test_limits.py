"""What every backend holds a run to: its timeout, memory and pids limits, the output and artifact caps,
nothing left behind afterwards, and limits it cannot hold refused rather than silently dropped. Small
limits and short scripts; where a backend differs by design the test states the documented difference."""

from __future__ import annotations

import re
import time
import uuid

from ipyskills.errors import SandboxError
from ipyskills.sandbox.docker.containers import DEADLINE_GRACE
from ipyskills.sandbox.result import TRUNCATION_MARK

from .backends import expect_difference, not_enforced, unenforced_limits

MIB = 1024**2


def test_limits_are_enforced_or_the_run_is_refused_saying_what_to_do(backend):
    """Without any opt-in a backend runs with its limits enforced, or refuses before anything starts with a
    SandboxError that says why and what to do (rootless Podman on cgroup v1: the README's Podman part)."""
    try:
        result = backend.run({"scripts/x.py": "print('ran')\n"}, opt_in=False)
    except SandboxError as refused:
        message = str(refused)
        assert "cannot enforce" in message and "memory" in message and "pids" in message, message
        assert "use Docker" in message and re.search(r"set IPYSKILLS_\w+=1 to run anyway", message), message
        return
    assert result.stdout == "ran\n", result.stderr
    assert unenforced_limits(result) == "", result.isolation


SLEEPER = r'''
import subprocess, sys, time
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", sys.argv[1]])  # a child, marked
print("asleep", flush=True)
time.sleep(60)
'''


def test_the_timeout_ends_a_sleeping_script_and_says_so(backend):
    began = time.monotonic()
    result = backend.run({"scripts/x.py": SLEEPER}, args=[uuid.uuid4().hex], timeout=2)
    took = time.monotonic() - began
    assert result.timed_out and result.exit_code is None and not result.ok, result.to_dict()
    assert "asleep" in result.stdout and "TIMED OUT" in result.status_line()
    assert 1.5 <= result.duration <= 3.5, result.duration  # the run's own clock
    # the caller's wait, well inside the launcher's own deadline (timeout + DEADLINE_GRACE) plus the start
    # (Podman's: a Python started as uid 1000 besides); under gVisor, a stopped sandbox's 5 s to go by itself
    # is spent after the result is known
    assert took < 2 + DEADLINE_GRACE + (4 if backend.id == "podman" else 2), took


HOLD = "import sys\nb = bytearray(int(sys.argv[1]) * 1024 * 1024)\nb[::4096] = b'\\x01' * len(b[::4096])\nprint('held', sys.argv[1])\n"
CLIMB = r'''
held = []
while len(held) < 64:  # up to 512 MiB, 8 MiB at a time, every page written
    held.append(b"\x01" * (8 * 1024 * 1024))
    print(len(held) * 8, flush=True)
print("held all")
'''


def test_memory_below_the_limit_is_usable(backend):
    result = backend.run({"scripts/x.py": HOLD}, args=["32"], memory="128m")
    assert (result.exit_code, result.stdout, result.oom_killed) == (0, "held 32\n", False), result.to_dict()


# exit code and oom_killed of a run that went past its memory limit, as each backend documents it
OVERRUN_REPORTED = {
    "docker": (137, True),  # README: "killed by the kernel at 256 MiB, reported as oom_killed"
    "podman": (137, True),  # as Docker, where it enforces the limit at all
    # README's gVisor table: "ended before 256 MiB ... with exit 1, not reported as oom_killed" (a climb);
    # measured here: one allocation far past the limit is killed and reported as on runc
    "docker-gvisor": (137, True),
    # the local backend's docs: RLIMIT_AS makes Python raise MemoryError (exit 1), and "oom_killed is
    # reported when the script exits non-zero and one of its last error lines says it ran out of memory"
    "local": (1, True),
}
CLIMB_REPORTED = {**OVERRUN_REPORTED, "docker-gvisor": (1, False)}


def _memory_run(backend, script, args):
    result = backend.run({"scripts/x.py": script}, args=args, memory="128m")
    stopped = result.exit_code != 0 and "held" not in result.stdout
    reason = not_enforced(result, "memory")
    if reason:
        expect_difference(stopped, reason)
    assert stopped, result.to_dict()
    return result


def test_memory_far_above_the_limit_fails_and_is_reported(backend):
    result = _memory_run(backend, HOLD, ["1024"])
    assert (result.exit_code, result.oom_killed) == OVERRUN_REPORTED[backend.id], result.to_dict()
    assert "OUT OF MEMORY" in result.status_line() or not result.oom_killed


def test_memory_climbing_past_the_limit_is_stopped_below_it(backend):
    result = _memory_run(backend, CLIMB, [])
    reached = max([int(n) for n in result.stdout.split() if n.isdigit()] or [0])
    assert 32 <= reached < 128, reached  # MiB held when it was stopped
    assert (result.exit_code, result.oom_killed) == CLIMB_REPORTED[backend.id], result.to_dict()


FORKS = r'''
import errno, os
r, w = os.pipe()
made, failure = 0, "none"
while made < 64:
    try:
        pid = os.fork()
    except OSError as exc:
        failure = errno.errorcode.get(exc.errno, str(exc.errno))
        break
    if pid == 0:  # each child waits for the pipe to close, then leaves
        os.close(w)
        os.read(r, 1)
        os._exit(0)
    made += 1
os.close(w)
for _ in range(made):
    os.wait()
print(made, failure)
'''


def test_the_pids_limit_stops_a_fork_loop_and_the_run_returns(backend):
    result = backend.run({"scripts/x.py": FORKS}, pids=16, timeout=30)
    made, failure = result.stdout.split() if result.exit_code == 0 else (0, "")
    reason = not_enforced(result, "pids")
    if reason:
        expect_difference(failure == "EAGAIN", reason)
    assert result.exit_code == 0 and not result.timed_out, result.to_dict()
    assert failure == "EAGAIN" and 8 <= int(made) < 16, result.stdout  # the script and launcher hold some


def test_huge_stdout_is_cut_and_says_so(backend):
    flood = "import sys\nsys.stdout.write('o' * (1024 * 1024))\nsys.stdout.flush()\nprint('small', file=sys.stderr)\n"
    result = backend.run({"scripts/x.py": flood}, output_cap=64 * 1024)
    assert result.exit_code == 0, result.stderr
    assert result.stdout_truncated and not result.stderr_truncated and result.stderr == "small\n"
    assert result.stdout == "o" * 65536 + TRUNCATION_MARK.format(dropped=1024 * 1024 - 65536)
    assert "output truncated" in result.status_line()


WRITE = r'''
import os, sys
count, size = int(sys.argv[1]), int(sys.argv[2])
for i in range(count):
    with open(os.path.join(os.environ["IPYSKILLS_OUTPUT"], f"f{i}.bin"), "wb") as fh:
        fh.write(bytes([i]) * size)
'''


def test_the_artifact_file_cap(backend):
    result = backend.run({"scripts/x.py": WRITE}, args=["8", "10"], artifact_files=5)
    assert result.exit_code == 0, result.stderr
    assert len(result.artifacts) == 5 and all(a.data == bytes([int(a.path[1])]) * 10 for a in result.artifacts)
    assert result.artifacts_truncated and "3 more files (30 bytes) not returned: file cap 5" in result.artifacts_note


def test_the_artifact_byte_cap(backend):
    result = backend.run({"scripts/x.py": WRITE}, args=["3", str(60 * 1024)], artifact_cap=100 * 1024)
    assert result.exit_code == 0, result.stderr
    returned = [a for a in result.artifacts if a.data is not None]
    assert sum(len(a.data) for a in returned) <= 100 * 1024 and len(returned) == 1, result.artifacts
    assert all(a.data == bytes([int(a.path[1])]) * 60 * 1024 for a in returned)
    assert result.artifacts_truncated and "byte cap 100.0 KiB" in result.artifacts_note, result.artifacts_note


def test_nothing_is_left_behind(backend):
    """After a run and a timed-out run whose child sleeps on: no process (the child's command line carries a
    marker), no temp folder, no container (with its shim or runsc) is left."""
    marker, since = f"conformance-{uuid.uuid4().hex}", time.time()
    assert backend.run({"scripts/x.py": "print('ok')\n"}, args=[marker]).stdout == "ok\n"
    assert backend.run({"scripts/x.py": SLEEPER}, args=[marker], timeout=1).timed_out
    assert backend.leftovers(marker, since) == []
