"""The container's command: receives one job on stdin, runs it, then reports after a secret marker.

This file is never imported on the host. Its source is passed to `python3 -I -S -c` as the container's
command, so it must only use the standard library of the image's Python (3.8 or newer).

Protocol (host -> container, on stdin):
    one JSON line {"argv", "env", "cwd", "skill_dir", "stdin", "skill_tar", "output", "workspace",
                   "inputs_dir", "inputs_tar", "home_seed", "marker", "artifact_cap", "artifact_files",
                   "deadline", "nproc"}
    then `skill_tar` bytes (a tar of the skill when it is copied instead of mounted, unpacked into
    `skill_dir`), then `inputs_tar` bytes (the staged inputs, unpacked into `inputs_dir`), then `stdin`.
    The output files are those under `output`, then those under `workspace` (the working directory) that
    are not staged inputs left unchanged; a workspace file whose name an output file already has is
    returned as `workspace/NAME`.
Container -> host: the script writes straight to the container's stdout/stderr (the launcher copies
nothing). When it has exited, every other process is killed, and the launcher writes the marker to stderr
(everything the script wrote to stderr came before it), then to stdout:
    marker, one JSON line {"exit", "signal", "duration_ms", "oom_kills", "files": [{"path", "size",
    "returned"}], "omitted": {...}, "artifacts_error", "deadline"}, then a tar of the returned output
    files, then the marker again. `omitted` counts what the listing left out and why (files past the file
    cap, files over the byte cap, folders past the depth cap, a walk stopped by its entry cap, unreadable
    files); `artifacts_error` is set when collecting the files failed (the exit code stays the script's).
So the host knows the run is over as soon as both markers have arrived, without waiting for the container
to stop. The marker is random per run and only known to the host and this process (which is made
non-dumpable), so a script cannot end its own output early. `oom_kills` counts the kernel's out-of-memory
kills in the container's cgroup (None when the cgroup files are not visible). The container's exit code is
the script's (128+N for a signal), so the host can fall back to it when the report never comes.

The launcher cannot be signalled by the script: it ignores every signal it can (a no-op handler, which
exec resets, so the script starts with default dispositions). It enforces the run's own deadline
(`deadline`: the host's timeout plus a grace) and, once the job has arrived, watches its stdin: when the
host's attach stream closes (the owner died; the container is created with StdinOnce), or the deadline
passes, it kills everything and exits, and the engine removes the container (AutoRemove).

A pooled container starts the launcher ahead of time; `--idle-exit SECONDS` makes it give up and exit if
no job arrives in that time (so a container whose owner died does not wait forever). With `--prestart
JSON` ({"source", "env", "cwd", "home_seed", "nproc"}) it also seeds HOME and starts the script's Python
interpreter ahead of time (prestarted.py), which becomes the script's process when the job is a Python
script that fits (`Prestarted.fits`); any other job gets a fresh process, as without it.
"""

# Everything a run needs is imported at start-up, while a warm container still waits for its job (an import
# from the image costs 10-30 ms more under gVisor than under runc).
import contextlib
import io
import json
import marshal
import os
import resource
import select
import shutil
import signal
import stat
import subprocess
import sys
import tarfile
import threading
import time

CHUNK = 65536
WALK_DEPTH = 32  # folders below $IPYSKILLS_OUTPUT walked at most this deep
WALK_ENTRIES = 100000  # directory entries looked at, at most, while listing the output folder
_SYNCHRONOUS = ("SIGSEGV", "SIGBUS", "SIGFPE", "SIGILL", "SIGTRAP", "SIGSYS", "SIGABRT")


def _ignore(_signum, _frame):
    return None


def ignore_signals():
    """Ignore every signal that can be ignored. A Python no-op handler, not SIG_IGN, because exec resets
    handlers (the script starts with default dispositions) but keeps SIG_IGN. Fault signals stay at their
    default: raised by a real fault they must end the process, and sent by another process in the
    container they are dropped by the kernel (pid 1 of a pid namespace gets no default-action signal from
    inside it). SIGCHLD keeps its default so children can be waited for; SIGPIPE stays ignored (Python's
    own setting; subprocess restores it for the child)."""
    skip = {signal.SIGKILL, signal.SIGSTOP, signal.SIGCHLD, signal.SIGPIPE}
    skip |= {getattr(signal, name) for name in _SYNCHRONOUS if hasattr(signal, name)}
    for sig in signal.valid_signals():
        if sig in skip:
            continue
        try:
            signal.signal(sig, _ignore)
        except (OSError, ValueError, RuntimeError):
            continue  # e.g. signals reserved by the C library


class JobStream:
    """The launcher's stdin: the job's header line, then the tars, then the script's stdin bytes. Read in
    chunks, not a byte at a time (a system call per byte of the header cost 13-57 ms under gVisor), so
    what arrived past the header is kept for the readers after it."""

    def __init__(self, fd):
        self.fd, self.pending = fd, b""

    def read(self, n):
        """Up to n bytes; b"" at the end of the stream."""
        if self.pending:
            piece, self.pending = self.pending[:n], self.pending[n:]
            return piece
        return os.read(self.fd, n)

    def line(self, limit):
        """The next line without its newline, or None if the stream ends or the line passes `limit`."""
        while b"\n" not in self.pending:
            piece = os.read(self.fd, CHUNK)
            if not piece or len(self.pending) > limit:
                return None
            self.pending += piece
        line, _, self.pending = self.pending.partition(b"\n")
        return line


def read_exact(stream, n):
    parts, left = [], n
    while left > 0:
        piece = stream.read(min(CHUNK, left))
        if not piece:
            break
        parts.append(piece)
        left -= len(piece)
    return b"".join(parts)


def wait_for_job(fd, idle_exit):
    if idle_exit is None:
        return
    try:
        ready = select.select([fd], [], [], idle_exit)[0]
    except InterruptedError:
        ready = [fd]
    if not ready:
        sys.stderr.write("ipyskills launcher: no job arrived in time\n")
        sys.exit(125)


def idle_exit_from(argv):
    if "--idle-exit" in argv[:-1]:
        return float(argv[argv.index("--idle-exit") + 1])
    return None


def read_header(stream):
    line = stream.line(1 << 20)
    if line is None:
        sys.stderr.write("ipyskills launcher: no job received\n")
        sys.exit(125)
    return json.loads(line.decode("utf-8"))


def hide_from_other_processes():
    # Non-dumpable: a script running as the same uid cannot read this process's memory or fds (/proc/1/...).
    try:
        import ctypes

        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 4
    except (ImportError, OSError, AttributeError):
        return  # best effort: the marker stays secret from casual reads either way


def unpack_skill(stream, size, dest):
    """Extract the skill tar (regular files and folders only), then make it read-only."""
    data = read_exact(stream, size)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        for member in tar:
            name = os.path.normpath(member.name)
            if name.startswith(("/", "..")) or "/../" in name:
                continue
            target = os.path.join(dest, name)
            if member.isdir():
                os.makedirs(target, exist_ok=True)
            elif member.isfile():
                os.makedirs(os.path.dirname(target), exist_ok=True)
                with open(target, "wb") as out:
                    out.write(tar.extractfile(member).read())
                os.chmod(target, 0o555 if member.mode & 0o111 else 0o444)
    for dirpath, _dirs, _files in os.walk(dest):
        os.chmod(dirpath, 0o555)


def seed_home(src, home):
    """Copy the image's prepared home files (e.g. matplotlib's font cache) into the fresh HOME."""
    if not src or not os.path.isdir(src):
        return
    try:
        shutil.copytree(src, home, dirs_exist_ok=True)
    except OSError:
        pass


def feed_stdin(stream, size, proc, wake_fd):
    """Copy the job's stdin bytes to the script, then keep reading our stdin: end of file there means the
    host's attach stream closed (its owner is gone), and the main thread is woken to end the run."""
    left = size
    try:
        while left > 0:
            piece = stream.read(min(CHUNK, left))
            if not piece:
                break
            left -= len(piece)
            proc.stdin.write(piece)
    except (BrokenPipeError, OSError):
        pass  # the script stopped reading; the rest is dropped, as with any pipe
    try:
        proc.stdin.close()
    except (BrokenPipeError, OSError):
        pass
    try:
        while left > 0:  # what the script did not read is still on its way: drain it
            piece = stream.read(min(CHUNK, left))
            if not piece:
                break
            left -= len(piece)
        while stream.read(CHUNK):
            pass  # nothing more is ever sent; only the end of the stream matters
    except OSError:
        pass
    _wake(wake_fd, b"h")


def wait_child(proc, wake_fd):
    proc.wait()
    _wake(wake_fd, b"x")


def _wake(fd, what):
    try:
        os.write(fd, what)
    except OSError:
        pass


def wait_for_end(wake_fd, deadline):
    """'exit' when the script exited, 'host' when the host went away, 'deadline' when time ran out."""
    seen = b""
    while True:
        remaining = None if deadline is None else deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            return "deadline"
        ready = select.select([wake_fd], [], [], remaining)[0]
        if ready:
            seen += os.read(wake_fd, 16)
        if b"x" in seen:
            return "exit"
        if b"h" in seen:
            return "host"


def kill_everything_else():
    """After the script exits, stop anything it left running so nothing writes after the marker."""
    if os.getpid() != 1:  # only inside the container's own pid namespace is kill(-1) confined to it
        return
    try:
        os.kill(-1, signal.SIGKILL)
    except OSError:
        pass
    while True:
        try:
            os.wait()
        except ChildProcessError:
            return
        except InterruptedError:
            continue


def list_outputs(root, cap, max_files, skip=None, prefix=""):
    """The output files in a stable order (files of a folder, then its subfolders, by name), walked without
    recursion: (files, omitted). `files` holds at most `max_files` entries with `returned` set while the
    byte cap allows; `omitted` counts what was left out and why. Hard links are the files they are."""
    files, total = [], 0
    omitted = {"more_files": 0, "more_bytes": 0, "over_cap_files": 0, "over_cap_bytes": 0,
               "deep_folders": 0, "walk_stopped": False, "unreadable": 0, "depth_cap": WALK_DEPTH,
               "walk_cap": WALK_ENTRIES}
    visited = 0
    stack = [(root, prefix, 0)]
    while stack:
        folder, prefix, depth = stack.pop()
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            omitted["unreadable"] += 1
            continue
        subfolders = []
        for entry in entries:
            visited += 1
            if visited > WALK_ENTRIES:
                omitted["walk_stopped"] = True
                return files, omitted
            rel = prefix + entry.name
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                omitted["unreadable"] += 1
                continue
            if stat.S_ISDIR(st.st_mode):
                if depth + 1 > WALK_DEPTH:
                    omitted["deep_folders"] += 1
                else:
                    subfolders.append((entry.path, rel + "/", depth + 1))
                continue
            if not stat.S_ISREG(st.st_mode):  # symlinks and devices are never returned
                continue
            if skip and skip.get(rel) == [st.st_size, st.st_mtime_ns]:
                continue  # a staged input the script left as it was
            if len(files) >= max_files:
                omitted["more_files"] += 1
                omitted["more_bytes"] += st.st_size
                continue
            returned = total + st.st_size <= cap
            if returned:
                total += st.st_size
            else:
                omitted["over_cap_files"] += 1
                omitted["over_cap_bytes"] += st.st_size
            files.append({"path": rel, "size": st.st_size, "returned": returned, "full": entry.path})
        stack.extend(reversed(subfolders))
    return files, omitted


def unpack_inputs(stream, size, dest):
    """Extract the staged inputs (folders and regular files) into the workspace; returns {path: [size,
    mtime_ns]} of each file, so the ones the script leaves unchanged are not returned as artifacts."""
    data = read_exact(stream, size)
    staged = {}
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        for member in tar:
            name = os.path.normpath(member.name)
            if name.startswith(("/", "..")) or "/../" in name or name == ".":
                continue
            target = os.path.join(dest, name)
            if member.isdir():
                os.makedirs(target, exist_ok=True)
            elif member.isfile():
                os.makedirs(os.path.dirname(target), exist_ok=True)
                with open(target, "wb") as out:
                    src = tar.extractfile(member)
                    while True:
                        piece = src.read(CHUNK)
                        if not piece:
                            break
                        out.write(piece)
                st = os.stat(target)
                staged[name] = [st.st_size, st.st_mtime_ns]
    return staged


def list_all(job, staged):
    """The output folder's files, then the workspace's new or changed ones, under one pair of caps."""
    cap, max_files = job["artifact_cap"], job["artifact_files"]
    files, omitted = list_outputs(job["output"], cap, max_files)
    ws = job.get("workspace")
    if not ws:
        return files, omitted
    used = sum(f["size"] for f in files if f["returned"])
    more, extra = list_outputs(ws, cap - used, max(0, max_files - len(files)), skip=staged)
    taken = {f["path"] for f in files}
    for f in more:
        if f["path"] in taken:
            f["path"] = "workspace/" + f["path"]
    for key, value in extra.items():
        if key in ("depth_cap", "walk_cap"):
            continue
        if isinstance(value, bool):
            omitted[key] = omitted.get(key, False) or value
        else:
            omitted[key] = omitted.get(key, 0) + value
    return files + more, omitted


def open_returned(files, omitted):
    """Open each returned file now (no link followed), so a file that cannot be read is reported as not
    returned in the listing, and the tar that follows holds exactly what the listing says."""
    for f in files:
        if not f["returned"]:
            continue
        try:
            fd = os.open(f["full"], os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
        except OSError:
            f["returned"] = False
            omitted["unreadable"] += 1
            continue
        f["fd"] = fd


def write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


class FdWriter:
    def __init__(self, fd):
        self.fd = fd

    def write(self, data):
        write_all(self.fd, data)
        return len(data)


def oom_kills():
    """Out-of-memory kills in this container's cgroup so far (cgroup v2, then v1), or None."""
    for path in ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control"):
        try:
            with open(path) as fh:
                for line in fh:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        return int(value)
        except (OSError, ValueError):
            continue
    return None


def send_trailer(job, exit_code, sig, duration_ms, deadline=False, staged=None):
    """The report after the marker. Whatever goes wrong while collecting the output files is reported
    in `artifacts_error`; it never changes the script's exit code, stdout or stderr."""
    files, omitted, error = [], {}, None
    if job.get("output") and not deadline:
        try:
            files, omitted = list_all(job, staged or {})
            open_returned(files, omitted)
        except BaseException as exc:  # noqa: BLE001 - nothing may take the script's result down
            files, error = [f for f in files if "fd" in f], f"{type(exc).__name__}: {exc}"[:500]
    try:
        kills = oom_kills()
    except BaseException:  # noqa: BLE001
        kills = None
    summary = {"exit": exit_code, "signal": sig, "duration_ms": duration_ms, "oom_kills": kills,
               "files": [{k: f[k] for k in ("path", "size", "returned")} for f in files],
               "omitted": omitted, "artifacts_error": error, "deadline": deadline}
    marker = job["marker"].encode()
    write_all(2, marker)
    write_all(1, marker + json.dumps(summary).encode() + b"\n")
    with tarfile.open(fileobj=FdWriter(1), mode="w|", format=tarfile.PAX_FORMAT) as tar:
        for f in files:
            fd = f.pop("fd", None)
            if fd is None:
                continue
            with os.fdopen(fd, "rb") as fh:
                info = tarfile.TarInfo(f["path"])
                info.size, info.mode, info.type = f["size"], 0o644, tarfile.REGTYPE
                tar.addfile(info, _Exactly(fh, f["size"]))
    write_all(1, marker)


class _Exactly:
    """A file read as exactly `size` bytes (zero-padded if it shrank), so the tar stays well-formed."""

    def __init__(self, fh, size):
        self.fh, self.left = fh, size

    def read(self, n=-1):
        n = self.left if n is None or n < 0 else min(n, self.left)
        data = b""
        if n:
            try:
                data = self.fh.read(n)
            except OSError:
                data = b""
            data += b"\0" * (n - len(data))
        self.left -= len(data)
        return data


# What Python reads from the environment while it starts: a pre-started interpreter only takes a job whose
# values for these are the ones it was started with (exact names, then prefixes).
STARTUP_NAMES = ("HOME", "PATH", "LANG", "LANGUAGE")
STARTUP_PREFIXES = ("PYTHON", "LC_")


def set_nproc(nproc):
    # Under gVisor the engine's pids limit counts gVisor's own threads, not the script's processes;
    # gVisor keeps a process table per sandbox and enforces RLIMIT_NPROC in it (on runc this limit
    # would count every process of uid 1000 on the host, so it is only sent for gVisor runs).
    if nproc:
        with contextlib.suppress(ValueError, OSError):  # only raising a lower one set earlier can fail
            resource.setrlimit(resource.RLIMIT_NPROC, (int(nproc), int(nproc)))


class Prestarted:
    """The script's interpreter, started while a warm container waits for its job (prestarted.py)."""

    def __init__(self, spec):
        self.env = dict(os.environ)
        self.env.update(spec["env"])
        self.nproc = spec.get("nproc")
        seed_home(spec.get("home_seed"), self.env.get("HOME", "/tmp"))
        set_nproc(self.nproc)
        job_r, self.job_w = os.pipe()
        try:
            self.proc = subprocess.Popen(["python3", "-c", spec["source"], str(job_r)], stdin=subprocess.PIPE,
                                         cwd=spec["cwd"], env=self.env, pass_fds=(job_r,))
        finally:
            os.close(job_r)

    def fits(self, job, env):
        argv, startup = job["argv"], lambda k: k in STARTUP_NAMES or k.startswith(STARTUP_PREFIXES)
        return (len(argv) >= 2 and argv[0] == "python3" and argv[1].startswith("/") and argv[1].endswith(".py")
                and os.path.isfile(argv[1]) and os.access(argv[1], os.R_OK)
                and job.get("nproc") == self.nproc
                and all(env.get(k) == self.env.get(k) for k in set(env) | set(self.env) if startup(k))
                and self.proc.poll() is None)

    def hand_over(self, job, env):
        """The script's process if the job fits (it runs from here on), else None (this one exits)."""
        fits = self.fits(job, env)
        try:
            if fits:
                write_all(self.job_w, marshal.dumps((list(job["argv"]), env, job["cwd"])))
        except OSError:
            fits = False
        os.close(self.job_w)
        if fits:
            return self.proc
        with contextlib.suppress(OSError):
            self.proc.stdin.close()
        self.proc.wait()
        return None


def prestart_from(argv):
    if "--prestart" in argv[:-1]:
        try:
            return Prestarted(json.loads(argv[argv.index("--prestart") + 1]))
        except (OSError, ValueError, KeyError):
            return None  # the run starts its interpreter itself
    return None


def main():
    ignore_signals()
    hide_from_other_processes()
    prestarted = prestart_from(sys.argv)
    wait_for_job(0, idle_exit_from(sys.argv))
    stream = JobStream(0)
    job = read_header(stream)
    deadline = time.monotonic() + float(job["deadline"]) if job.get("deadline") else None
    if job.get("skill_tar"):
        unpack_skill(stream, job["skill_tar"], job.get("skill_dir") or job["cwd"])
    staged = {}
    if job.get("inputs_tar"):
        try:
            staged = unpack_inputs(stream, job["inputs_tar"], job["inputs_dir"])
        except (OSError, ValueError) as exc:  # e.g. the workspace is full
            sys.stderr.write(f"ipyskills: the inputs could not be staged in the workspace: {exc}\n")
            sys.stderr.flush()
    env = dict(os.environ)  # the image's environment only; the host's never reaches the container
    env.update(job["env"])
    started = time.monotonic()
    proc = prestarted.hand_over(job, env) if prestarted is not None else None
    try:
        if proc is None:
            seed_home(job.get("home_seed"), env.get("HOME", "/tmp"))
            set_nproc(job.get("nproc"))
            proc = subprocess.Popen(job["argv"], stdin=subprocess.PIPE, cwd=job["cwd"], env=env)
    except OSError as exc:
        sys.stderr.write(f"ipyskills: cannot start {job['argv'][0]!r} in the sandbox image: {exc.strerror}\n")
        sys.stderr.flush()
        exit_code, sig = 127, 0
    else:
        wake_r, wake_w = os.pipe()
        threading.Thread(target=feed_stdin, args=(stream, job["stdin"], proc, wake_w), daemon=True).start()
        threading.Thread(target=wait_child, args=(proc, wake_w), daemon=True).start()
        why = wait_for_end(wake_r, deadline)
        if why != "exit":
            kill_everything_else()  # the script and all it started
            if why == "host":
                os._exit(125)  # nobody is reading; the engine removes the container
            duration_ms = (time.monotonic() - started) * 1000.0
            with contextlib.suppress(BaseException):
                send_trailer(job, None, 9, duration_ms, deadline=True)
            os._exit(124)
        rc = proc.returncode
        exit_code, sig = (rc, 0) if rc >= 0 else (128 - rc, -rc)
    duration_ms = (time.monotonic() - started) * 1000.0
    with contextlib.suppress(BaseException):  # the exit code stays the script's whatever happens here
        kill_everything_else()
        send_trailer(job, exit_code, sig, duration_ms, staged=staged)
    os._exit(exit_code)


if __name__ == "__main__":
    sys.exit(main())
