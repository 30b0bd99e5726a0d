"""The local backend: run a skill script as a confined subprocess, for machines without Docker (Binder).

This is the host side: it prepares the run folder, starts the helper (sandbox/local/isolation.py, which
confines itself and execs the script), pumps the pipes, enforces the timeout, kills, collects artifacts,
removes everything and writes the isolation line. The Landlock plan, the run cgroup and the removal of
dead owners' run folders are in sandbox/local/confine.py; the skill copy in sandbox/local/skill_copy.py.

What one run gets (and the result's `isolation` line says which of these actually held, every time):
- a run folder of its own (`ipyskills-local-<owner pid>-…` in TMPDIR) holding a throw-away copy of the skill
  (read-only to a run uid; an owner could chmod it, so without root it is only a copy), HOME, TMPDIR, the
  output folder and the workspace, which is the working directory;
- a uid/gid of its own when ipyskills runs as root: a fresh number no account or process uses, so the
  process limit counts this run alone, concurrent runs cannot signal or ptrace each other, and the files
  it leaves in /tmp, /var/tmp and /dev/shm can be found and removed afterwards. Without root, the current
  user, said so plainly;
- a scrubbed environment: PATH, HOME and TMPDIR (private folders), LANG/LC_ALL, PYTHONDONTWRITEBYTECODE,
  MALLOC_ARENA_MAX=1, IPYSKILLS_OUTPUT, plus what the caller passes in `request.env`;
- rlimits: address space = memory, CPU seconds = timeout + 1, file size = tmp_size, processes = pids,
  256 open files, no core dumps; no-new-privileges;
- where the kernel allows them (through a user namespace when not root): new network and pid namespaces
  (no network, not even loopback; every process the script starts dies with the run) and a mount
  namespace with a private /proc (host command lines not visible) and a private /dev/shm (a tmpfs of
  tmp_size, so multiprocessing works and nothing reaches the host's /dev/shm);
- Landlock where the kernel has it: reads only under system, interpreter and dependency folders, writes
  only to the run folder (and its own /dev/shm), TCP connect/bind denied without `network`, signals and
  abstract unix sockets limited to the run;
- a cgroup v2 memory.max for the whole run where the memory controller is delegated to this process,
  else a watchdog on the run's processes' resident memory (sandbox/local/memory_watch.py);
- without namespaces: a seccomp filter allowing unix sockets only (sandbox/local/netfilter.py), child
  subreapers that end what left the process group (sandbox/local/reaper.py), and Python's
  multiprocessing semaphores and shared memory in the run folder (sandbox/local/shm.py);
- a parent-death signal (the run dies with its owner) and a wall-clock timeout enforced from the host,
  then SIGKILL to the namespace and the process group.

Decisions worth knowing:
- `python3` / `python` mean the interpreter running ipyskills (`sys.executable`), because on Binder that is
  where the user's packages are; its folder is put first on PATH so `python3` means the same inside the
  script. When ipyskills runs as root and the run's uid cannot execute that interpreter (say it lives
  under /root), the system python3 runs instead and the isolation line names it. Other programs are looked up
  on the system PATH.
- Every step is tried on every run (a few ms in all, benchmarks/local_overhead.py) rather than probed
  once, so the isolation line reports what held for this very run.
- Without a mount namespace, /dev/shm is the host's: a run with a uid of its own may use it (what that
  uid leaves is removed afterwards, and the line says it is shared); a run as the current user cannot
  reach it under Landlock, since its files could not be told from the user's own (Python's multiprocessing
  then works in the run folder, sandbox/local/shm.py; other users of sem_open fail, and the line says so).
- The per-process memory limit is on address space (RLIMIT_AS), not resident memory: Python raises MemoryError cleanly,
  but runtimes that reserve large virtual ranges up front (Node's V8, the JVM, some BLAS thread pools) may
  not start under a small limit (Node 20 fails at 256m, starts at 1g); raise `memory` for them. One malloc
  arena (MALLOC_ARENA_MAX=1) keeps glibc from reserving 64 MiB of it per contending thread. `oom_killed` is
  reported when the script exits non-zero and one of its last error lines says it ran out of memory
  (MemoryError, std::bad_alloc, "out of memory", "Cannot allocate memory", "OOM"), or when the run cgroup
  counted an OOM kill.
- Output past the cap is read and thrown away while the script keeps running, as with Docker; a script that
  never stops printing ends at the timeout. A process killed by a signal reports exit code 128 + signal.
- Not isolated, and said so: connecting to unix sockets by path, CPU share; and, where the kernel refuses
  Landlock or the namespaces, what they would have covered.
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ...errors import RunInterrupted, SandboxError
from .. import signals
from ..request import RunRequest
from ..result import Artifact, ExecuteResult, OutputBuffer, artifacts_note
from . import confine as local_confine
from .memory_watch import RunMemory
from .run_files import collect_artifacts, remove_tree  # remove_tree: callers import it from here too
from .run_uids import _target_ids, _wait_group_gone, kill_processes_of, sweep_files_of
from .skill_copy import copy_skill

SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
OPEN_FILES = 256
HELPER = str(Path(__file__).with_name("isolation.py"))
HELPER_STARTUP_SECONDS = 10.0  # the helper reports within this or the run is abandoned
EXIT_GRACE_SECONDS = 1.0  # after the script exits, how long its pipes may stay open
_READ_SIZE = 256 * 1024
_OOM_LINE = re.compile(rb"^MemoryError\b|std::bad_alloc|[Oo]ut of memory|Cannot allocate memory|\bOOM\b")
_OOM_LINES_READ = 5  # runtimes print a banner after the cause (Node ends its report with "#" lines)
# Landlock, the run's mount namespace (private /proc and /dev/shm) and the run cgroup. Off only for
# benchmarks/local_overhead.py, which measures what these steps add to a run; never off otherwise.
CONFINEMENT = True


class LocalBackend:
    name = "local"

    def __init__(self):
        signals.install()  # SIGTERM/SIGHUP end local runs too (their process group, their folder)

    def readiness(self) -> tuple[bool, str]:
        return True, ""

    def ensure_ready(self) -> None:
        """Nothing to prepare: the local backend needs only this Python and a POSIX system."""

    def run(self, request: RunRequest) -> ExecuteResult:
        if os.name != "posix":
            raise SandboxError("the local backend needs Linux or macOS; on Windows use the Docker backend")
        argv = request.argv
        temp_root = _temp_root()
        local_confine.remove_stale_once(remove_tree)
        try:
            work = Path(tempfile.mkdtemp(prefix=local_confine.run_folder_prefix(), dir=temp_root))
        except OSError as exc:
            raise SandboxError(f"the local backend could not create its run folder: {_full_or(exc, temp_root)}; "
                               "check that the temp dir (TMPDIR) exists and has free space") from None
        run = None

        def end() -> None:  # on SIGTERM/SIGHUP: the process dies next, so the finally below never runs
            if run is not None:
                run.kill()
            remove_tree(work)

        try:
            with signals.ended_on_signal(end):
                run = _Run(request, argv, work)
                return run.execute()
        except OSError as exc:
            raise SandboxError(f"the local backend could not prepare the run: {_full_or(exc, str(work.parent))}") from None
        finally:
            remove_tree(work)
            if run is not None and run.uid is not None:
                sweep_files_of(run.uid)


MIN_TEMP_FREE = 8 * 1024**2  # bytes a temp dir must have free for a run's copy of a skill to start


def _temp_root() -> str | None:
    """The folder runs are made in: TMPDIR when set, used as it is. (tempfile.gettempdir() quietly moves
    on to /tmp when TMPDIR cannot be written, e.g. when it is full; a run says so instead.)"""
    wanted = os.environ.get("TMPDIR")
    root = wanted or tempfile.gettempdir()
    label = f"{root} (TMPDIR)" if wanted else root
    try:
        st = os.statvfs(root)
    except OSError as exc:
        raise SandboxError(f"the temp dir {label} cannot be used ({exc.strerror}): create it, or point TMPDIR "
                           "at a folder with free space") from None
    if st.f_bavail * st.f_frsize < MIN_TEMP_FREE:
        raise SandboxError(f"the temp dir {label} is full ({st.f_bavail * st.f_frsize // 1024} KiB free): free "
                           "some space there, or point TMPDIR at a folder with free space")
    return wanted or None


def _full_or(exc: OSError, where: str | None) -> str:
    if exc.errno == errno.ENOSPC:
        return f"the temp dir {where or tempfile.gettempdir()} is full ({exc.strerror})"
    return str(exc)


class _Run:
    """One run: prepare the folders, start the helper, pump the pipes, kill, collect."""

    def __init__(self, request: RunRequest, argv: list[str], work: Path):
        self.request = request
        self.limits = request.limits
        self.work = work
        self.skill = work / "skill"
        self.home = work / "home"
        self.tmp = work / "tmp"
        self.out = work / "out"
        # The working directory: writable, inside the run folder (so Landlock's write rule covers it);
        # the script is called by its path in the skill's copy, as agent clients call it.
        self.workspace = work / "workspace"
        self.in_workspace = getattr(request, "workdir", "workspace") != "skill"
        self.argv = request.argv_at(str(self.skill)) if hasattr(request, "argv_at") else argv
        self.staged: dict[str, tuple[int, int]] = {}  # input path -> (size, mtime_ns) after staging
        self.uid, self.gid = _target_ids()
        self.proc: subprocess.Popen | None = None
        self.child_pid: int | None = None
        self.report: dict | None = None
        self.start_error = ""
        self.stderr_tail = b""
        self.started = time.monotonic()
        self.dropped: list[str] = []
        self.user_error = ""
        self.cgroup: local_confine.RunCgroup | None = None
        self.cgroup_oom = False
        self.memory_watch: RunMemory | None = None  # the run's total memory where no cgroup holds it

    # -- preparation -------------------------------------------------------------------------------
    def prepare(self) -> None:
        # A run as another uid (root's case) cannot write a root-owned copy whatever its modes.
        copy = copy_skill(self.request.skill_dir, self.skill, owner_writable=self.uid is not None)
        self.dropped = copy.dropped
        script = self.skill / self.request.script
        if not script.is_file():
            raise SandboxError(
                f"script {self.request.script!r} is not a regular file inside the skill "
                "(links that leave the skill are not copied to the local sandbox)"
            )
        for folder in (self.home, self.tmp, self.out, self.workspace):
            folder.mkdir(mode=0o700)
        self.stage_inputs()
        if self.uid is not None:
            try:
                for folder in (self.home, self.tmp, self.out):
                    os.chown(folder, self.uid, self.gid)
                for dirpath, _dirs, files in os.walk(self.workspace):  # the inputs are the run's to change
                    os.chown(dirpath, self.uid, self.gid)
                    for name in files:
                        os.chown(os.path.join(dirpath, name), self.uid, self.gid)
            except OSError as exc:
                # e.g. root inside a user namespace that maps no other uid: run unswitched, and say so
                self.user_error = f"uid {self.uid} is not usable here: {exc.strerror}"
                self.uid = self.gid = None
        if self.uid is not None:
            os.chmod(self.work, 0o711)  # the run's user may pass through, not list

    def stage_inputs(self) -> None:
        inputs = getattr(self.request, "inputs", None)
        if not inputs:
            return
        try:
            inputs.copy_into(self.workspace)
        except OSError as exc:
            raise SandboxError(f"the inputs could not be staged in the workspace: {_full_or(exc, str(self.work))}") from None
        for f in inputs.files:
            if f.source is not None:
                st = os.stat(self.workspace / f.rel)
                self.staged[f.rel] = (st.st_size, st.st_mtime_ns)

    def environment(self) -> dict[str, str]:
        interpreter_dir = os.path.dirname(_python())
        path = SYSTEM_PATH
        if interpreter_dir and interpreter_dir not in SYSTEM_PATH.split(":"):
            path = interpreter_dir + ":" + path
        env = {
            "PATH": path,
            "HOME": str(self.home),
            "TMPDIR": str(self.tmp),
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
            "IPYSKILLS_OUTPUT": str(self.out),
            # The memory limit is on address space, and glibc reserves 64 MiB of it for each extra malloc
            # arena, made when threads happen to contend (numpy's BLAS threads at import): one arena keeps
            # the same script's footprint the same from run to run.
            "MALLOC_ARENA_MAX": "1",
        }
        env.update({str(k): str(v) for k, v in self.request.env.items()})
        return env

    def program(self, env: dict[str, str]) -> list[str]:
        first, rest = self.argv[0], self.argv[1:]
        if first in ("python3", "python"):
            return [_python(), *rest]
        found = shutil.which(first, path=env["PATH"])
        if not found:
            raise SandboxError(
                f"{first!r} is not installed on this machine (searched {env['PATH']}); install it, "
                "or run this script with the Docker backend"
            )
        return [found, *rest]

    def python_fallback(self, exe: str) -> str | None:
        """The system python3, for when the run's user cannot execute the host's interpreter."""
        if exe != _python() or self.uid is None:
            return None
        system = shutil.which("python3", path=SYSTEM_PATH)
        return system if system and system != exe else None

    def rlimits(self) -> dict[str, list[int]]:
        cpu = math.ceil(self.limits.timeout) + 1
        return {
            "RLIMIT_AS": [self.limits.memory, self.limits.memory],
            "RLIMIT_CPU": [cpu, cpu + 1],
            "RLIMIT_FSIZE": [self.limits.tmp_size, self.limits.tmp_size],
            "RLIMIT_NPROC": [self.limits.pids, self.limits.pids],
            "RLIMIT_NOFILE": [OPEN_FILES, OPEN_FILES],
            "RLIMIT_CORE": [0, 0],
        }

    # -- the run -----------------------------------------------------------------------------------
    def execute(self) -> ExecuteResult:
        self.prepare()
        env = self.environment()
        program = self.program(env)
        status_r, status_w = os.pipe()
        spec = {
            "status_fd": status_w,
            "exe": program[0],
            "exe_fallback": self.python_fallback(program[0]),
            "uid": self.uid,
            "gid": self.gid,
            "block_network": not self.limits.network,
            "rlimits": self.rlimits(),
            "owner": os.getpid(),
            "private_mounts": CONFINEMENT,
            "shm_size": self.limits.tmp_size,
            "landlock": local_confine.landlock_plan(self.work, env, [program[0], self.python_fallback(program[0])],
                                                    block_tcp=not self.limits.network, run_uid=self.uid)
            if CONFINEMENT else None,
            # Without namespaces: Python's multiprocessing in the run folder, a socket filter (isolation.py)
            "work": str(self.work) if CONFINEMENT else None,
            "netfilter": CONFINEMENT and not self.limits.network,
        }
        self.cgroup = local_confine.RunCgroup(self.limits.memory if CONFINEMENT else 0, self.work.name)
        spec["cgroup_procs"] = self.cgroup.procs
        listen = getattr(self.request, "listener", lambda _stream: None)
        stdout = OutputBuffer(self.limits.output_cap, listen("stdout"))
        stderr = OutputBuffer(self.limits.output_cap, listen("stderr"))
        started = self.started = time.monotonic()
        try:
            try:
                self.proc = subprocess.Popen(
                    [sys.executable, "-I", "-S", HELPER, json.dumps(spec), "--", *program],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                    env=env, cwd=self.workspace if self.in_workspace else self.skill, start_new_session=True,
                    pass_fds=(status_w,),
                )
            except OSError as exc:
                raise SandboxError(f"the local backend could not start a process: {exc}") from None
            finally:
                os.close(status_w)
            if CONFINEMENT and self.cgroup.procs is None:
                self.memory_watch = RunMemory(self.proc.pid, self.limits.memory)
            timed_out = self.pump(status_r, stdout, stderr, started + self.limits.timeout)
        except KeyboardInterrupt:
            self.kill()  # Ctrl-C: stop everything, then hand back what was printed so far
            raise RunInterrupted(ExecuteResult(
                exit_code=None, stdout=stdout.text(), stderr=stderr.text(),
                duration_ms=(time.monotonic() - started) * 1000.0, backend="local", interrupted=True,
                stdout_truncated=stdout.truncated, stderr_truncated=stderr.truncated,
                isolation=self.isolation())) from None
        except BaseException:
            self.kill()  # anything else: nothing may outlive the call
            raise
        finally:
            os.close(status_r)
            self.kill()
            self.cgroup_oom = self.cgroup.oom_killed()
            self.cgroup.remove()
        duration_ms = (time.monotonic() - started) * 1000.0
        if self.start_error:
            raise SandboxError(f"the local backend could not start {self.argv[0]!r}: {self.start_error}")
        return self.result(stdout, stderr, timed_out, duration_ms)

    def pump(self, status_r: int, stdout: OutputBuffer, stderr: OutputBuffer, deadline: float) -> bool:
        """Feed stdin and drain stdout, stderr and the status pipe until the script ends or time runs out."""
        proc = self.proc
        sel = selectors.DefaultSelector()
        status_lines = bytearray()
        sinks = {proc.stdout.fileno(): stdout, proc.stderr.fileno(): stderr}
        for fd in sinks:
            sel.register(fd, selectors.EVENT_READ)
        sel.register(status_r, selectors.EVENT_READ)
        data = self.request.stdin or b""
        pending = memoryview(data.encode("utf-8") if isinstance(data, str) else bytes(data))
        stdin_fd = proc.stdin.fileno()
        if pending:
            os.set_blocking(stdin_fd, False)
            sel.register(stdin_fd, selectors.EVENT_WRITE)
        else:
            proc.stdin.close()
        exited_at = None
        try:
            while sel.get_map():
                now = time.monotonic()
                if now >= deadline:
                    return True
                if exited_at is None and proc.poll() is not None:
                    exited_at = now
                    self.kill_group()  # leftovers in the group would hold the pipes open
                if exited_at is not None and now - exited_at > EXIT_GRACE_SECONDS:
                    break  # something outside our reach still holds a pipe; stop listening
                if exited_at is None and self.memory_over(now):
                    self.end_reaper()  # the run's total passed the limit: ended as out of memory
                if self.report is None and not self.start_error and now - self.started > HELPER_STARTUP_SECONDS:
                    self.start_error = "the sandbox helper did not report within 10 s"
                    return False
                for key, _ in sel.select(timeout=min(0.1, max(0.0, deadline - now))):
                    fd = key.fd
                    if fd == stdin_fd:
                        try:
                            written = os.write(fd, pending[:65536])
                            pending = pending[written:]
                        except (BrokenPipeError, OSError):
                            pending = pending[:0]  # the script closed stdin; it did not want the rest
                        if not pending:
                            sel.unregister(fd)
                            proc.stdin.close()
                        continue
                    data = os.read(fd, _READ_SIZE)
                    if not data:
                        sel.unregister(fd)
                        if fd == status_r:
                            self.parse_status(bytes(status_lines))
                        continue
                    if fd == status_r:
                        status_lines += data
                        self.parse_status(bytes(status_lines))
                    else:
                        sinks[fd].write(data)
                        if sinks[fd] is stderr:
                            self.stderr_tail = (self.stderr_tail + data)[-4096:]
            # Pipes are closed; the helper exits right after the script (and its namespace) are gone.
            remaining = deadline - time.monotonic()
            try:
                proc.wait(timeout=max(0.0, remaining))
            except subprocess.TimeoutExpired:
                return True
            return False
        finally:
            sel.close()
            if not proc.stdin.closed:
                try:
                    proc.stdin.close()
                except OSError:
                    pass

    def parse_status(self, data: bytes) -> None:
        for line in data.splitlines():
            word, _, rest = line.partition(b" ")
            if word == b"child" and self.child_pid is None:
                self.child_pid = int(rest)
            elif word == b"report" and self.report is None:
                self.report = json.loads(rest)
            elif word == b"error":
                self.start_error = json.loads(rest)

    # -- stopping ----------------------------------------------------------------------------------
    def memory_over(self, now: float) -> bool:
        watch = self.memory_watch
        return watch is not None and not watch.exceeded and self.child_pid is not None and watch.over(now)

    def end_reaper(self) -> None:
        """SIGKILL the reaper: with a pid namespace everything goes with it; without one the helper, a child
        subreaper, ends what the reaper had collected (sandbox/local/reaper.py)."""
        try:
            os.kill(self.child_pid, signal.SIGKILL)
        except OSError:
            pass

    def kill_group(self) -> None:
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass

    def kill(self) -> None:
        """Stop everything the run started and wait until it is gone.

        SIGKILL to the reaper (pid 1 of the run's pid namespace) makes the kernel kill every process in
        the namespace; the helper stays alive to collect the reaper, so nothing is left as a zombie for
        the host's init. Then SIGKILL to the process group catches whatever ran outside a namespace."""
        proc = self.proc
        if proc is None:
            return
        if proc.poll() is None and self.child_pid:
            try:
                os.kill(self.child_pid, signal.SIGKILL)
                proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill_group()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        for stream in (proc.stdout, proc.stderr):
            if stream is not None and not stream.closed:
                stream.close()
        _wait_group_gone(proc.pid)
        if self.owns_uid():
            kill_processes_of(self.uid)  # whatever left the group, where no pid namespace caught it

    def cgroup_held(self, report: dict) -> bool:
        return bool(report.get("cgroup_held"))

    def owns_uid(self) -> bool:
        """True when the script really runs under the run's own uid (so every process of it is ours)."""
        return self.uid is not None and self.report is not None and self.report.get("uid") == self.uid

    # -- the result --------------------------------------------------------------------------------
    def result(self, stdout: OutputBuffer, stderr: OutputBuffer, timed_out: bool, duration_ms: float):
        code = self.proc.returncode
        # The helper dies of the signal that killed the script, so a negative code is a real signal and
        # a script's own `exit(152)` stays an exit code.
        if code is not None and code < 0:
            if code == -signal.SIGXCPU:
                timed_out = True  # the CPU-seconds limit fired before the wall clock did
            code = 128 - code
        last_lines = [line for line in self.stderr_tail.splitlines() if line.strip()][-_OOM_LINES_READ:]
        oom = not timed_out and code not in (0, None) and any(_OOM_LINE.search(line) for line in last_lines)
        oom = oom or (not timed_out and self.cgroup_oom)
        oom = oom or (not timed_out and self.memory_watch is not None and self.memory_watch.exceeded)
        return ExecuteResult(
            exit_code=None if timed_out else code,
            stdout=stdout.text(), stderr=stderr.text(),
            duration_ms=duration_ms,
            timed_out=timed_out,
            oom_killed=oom,
            stdout_truncated=stdout.truncated, stderr_truncated=stderr.truncated,
            backend="local",
            isolation=self.isolation(),
            artifacts=self.artifacts(omitted := {}),  # the caps' omissions said as Docker says them
            artifacts_truncated=bool(omitted), artifacts_note=artifacts_note(
                omitted, files_cap=self.limits.artifact_files, bytes_cap=self.limits.artifact_cap),
        )

    def artifacts(self, omitted: dict) -> list[Artifact]:
        """Files under the output folder, then the workspace's new or changed ones, under one pair of caps (a
        workspace file whose name an output file has comes back as `workspace/NAME`), counting into `omitted`."""
        cap, max_files = self.limits.artifact_cap, self.limits.artifact_files
        found = collect_artifacts(self.out, cap, max_files, omitted=omitted)
        if not self.in_workspace:
            return found
        used = sum(len(a.data) for a in found if a.data is not None)
        taken = {a.path for a in found}
        for a in collect_artifacts(self.workspace, cap - used, max_files - len(found), self.staged, omitted):
            found.append(Artifact(f"workspace/{a.path}", a.size, a.data) if a.path in taken else a)
        return found

    def isolation(self) -> str:
        r = self.report
        if r is None:
            return "local: NOT isolated: the sandbox helper did not report what it enforced"
        switched = self.uid is not None and r.get("uid") == self.uid
        # Read-only holds only against another uid: an owner can chmod, root ignores mode bits.
        held = ["local: read-only copy of the skill" if switched else "local: throw-away copy of the skill"]
        missing = []
        if r.get("uid", 0) == 0:
            held.append("uid 0 (root)")
            reason = r.get("user_error") or self.user_error
            missing.append("user: still root" + (f" (could not switch: {reason})" if reason else ""))
            missing.append("nproc may not hold for root")
        elif switched:
            held.append(f"uid {r['uid']} (unprivileged, this run's own)")
        else:
            held.append(f"runs as the current user (uid {r.get('uid')})")
        mib = 1024**2
        names = {"RLIMIT_AS": "as", "RLIMIT_CPU": "cpu", "RLIMIT_FSIZE": "fsize", "RLIMIT_NPROC": "nproc",
                 "RLIMIT_NOFILE": "nofile", "RLIMIT_CORE": "core"}
        shown = {
            "RLIMIT_AS": f"{self.limits.memory // mib} MiB",
            "RLIMIT_CPU": f"{self.rlimits()['RLIMIT_CPU'][0]} s",
            "RLIMIT_FSIZE": f"{self.limits.tmp_size // mib} MiB",
            "RLIMIT_NPROC": str(self.limits.pids),
            "RLIMIT_NOFILE": str(OPEN_FILES),
            "RLIMIT_CORE": "0",
        }
        failed = set(r.get("rlimits_failed", []))
        held.append("rlimits (" + ", ".join(f"{names[k]} {v}" for k, v in shown.items() if k not in failed) + ")")
        if failed:
            missing.append("rlimits " + ", ".join(names[k] for k in sorted(failed)))
        if r.get("no_new_privs"):
            held.append("no-new-privileges")
        held.append("scrubbed env")
        if r.get("exe_fallback"):
            held.append(f"python: {r['exe_fallback']} (uid {r.get('uid')} cannot run {_python()})")
        ll = r.get("landlock") or {}
        ll_note = f"Landlock ABI {ll.get('abi')}"
        if self.limits.network:
            held.append("network: allowed (requested)")
        elif r.get("netns"):
            held.append("network: none (" + ("user+net" if r.get("userns") else "net") + " namespace)")
        elif r.get("netfilter"):
            also = f"; TCP connect and bind also denied by {ll_note}" if ll.get("tcp") else ""
            held.append("network: none, no socket but AF_UNIX can be made (seccomp filter: inet and inet6 "
                        f"of every type, UDP included, netlink, packet and the rest refused{also})")
        elif ll.get("tcp"):
            held.append(f"network: TCP connect and bind denied ({ll_note})")
            missing.append(f"network other than TCP, e.g. UDP ({r.get('ns_error') or 'no namespace'}; seccomp: "
                           f"{r.get('netfilter_error') or 'not tried'})")
        else:
            missing.append(f"network: NOT blocked ({r.get('ns_error') or 'no namespace'})")
        if r.get("pidns"):
            held.append("processes: pid namespace, all killed at the end")
        elif switched:
            held.append("processes: every process of the run's uid killed at the end")
        elif r.get("subreaper"):
            held.append("processes: all killed at the end, those that leave the process group too (child "
                        "subreaper)")
        else:
            missing.append("processes that leave the process group may outlive the run")
        if r.get("proc") == "private":
            held.append("host processes: not visible (private /proc)")
        elif ll.get("proc") == "self":
            held.append(f"host processes: /proc not readable but for the script's own entry ({ll_note})")
        else:
            reason = r.get("proc_error") or "no pid and mount namespace"
            missing.append(f"host processes: command lines readable in /proc ({reason})")
        if ll.get("fs"):
            held.append(f"files: reads only system, interpreter and dependency folders, writes only the run "
                        f"folder ({ll_note})")
        elif switched:
            missing.append(f"filesystem reads (wherever any user may read; Landlock: {ll.get('error') or 'not tried'})")
            missing.append("writes to world-writable places (what it leaves in /tmp, /var/tmp, /dev/shm "
                           "is removed afterwards)")
        else:
            missing.append("filesystem reads and writes (as the current user; Landlock: "
                           f"{ll.get('error') or 'not tried'})")
        if r.get("shm") == "private":
            held.append(f"/dev/shm: the run's own ({self.limits.tmp_size // mib} MiB tmpfs, gone with the run)")
        elif ll.get("shm") == "shared":
            missing.append(f"/dev/shm shared with the host (no private one: {r.get('shm_error') or 'not tried'}; "
                           "what the run's uid leaves there is removed afterwards)")
        elif r.get("shm_python"):
            held.append(("/dev/shm: not reachable; " if ll.get("fs") else "") + "Python's multiprocessing semaphores "
                        "and shared memory in the run folder instead (gone with the run)")
            missing.append(f"sem_open/shm_open outside Python's multiprocessing (no private /dev/shm: "
                           f"{r.get('shm_error') or 'not tried'})")
        elif ll.get("fs"):
            missing.append(f"/dev/shm: not reachable, so multiprocessing locks fail (no private one: "
                           f"{r.get('shm_error') or 'not tried'}"
                           + (f"; none in the run folder: {r['shm_python_error']}" if r.get("shm_python_error") else "")
                           + ")")
        if ll.get("scoped"):
            held.append(f"signals and abstract unix sockets: the run's own only ({ll_note})")
        else:
            missing.append("signals and abstract unix sockets outside the run (Landlock scoping "
                           + ("needs ABI 6)" if ll.get("fs") else "not in force)"))
        if ll.get("fs"):
            missing.append("connecting to unix sockets by path")
        if self.cgroup_held(r):
            held.append(f"total memory: {self.limits.memory // mib} MiB (cgroup v2)")
        elif self.memory_watch is not None:
            held.append(f"total memory: {self.limits.memory // mib} MiB (all the run's processes' resident "
                        f"memory, watched every {self.memory_watch.interval:g} s)")
        else:
            reason = r.get("cgroup_error") or (self.cgroup.error if self.cgroup else "") or "no cgroup"
            missing.append(f"total memory: NOT limited (per process {self.limits.memory // mib} MiB address "
                           f"space; {reason})")
        missing.append(f"cpu share (cpus={self.limits.cpus:g})")
        if self.dropped:
            held.append(f"{len(self.dropped)} link(s)/special file(s) not copied")
        return ", ".join(held) + " | NOT isolated: " + ", ".join(missing)


def _python() -> str:
    return sys.executable or shutil.which("python3", path=SYSTEM_PATH) or "/usr/bin/python3"
