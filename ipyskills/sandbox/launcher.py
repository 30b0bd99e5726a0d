"""The container's command: receives one job on stdin, runs it, then reports after a secret marker.

This file is never imported on the host. Its source is passed to `python3 -I -S -c` as the container's
command, so it must only use the standard library of the image's Python (3.8 or newer).

Protocol (host -> container, on stdin):
    one JSON line {"argv", "env", "cwd", "stdin", "skill_tar", "output", "home_seed", "marker",
                   "artifact_cap", "artifact_files"}
    then `skill_tar` bytes (a tar of the skill when it is copied instead of mounted), then `stdin` bytes.
Container -> host: the script writes straight to the container's stdout/stderr (the launcher copies
nothing). When it has exited, every other process is killed, and the launcher writes the marker to stderr
(everything the script wrote to stderr came before it), then to stdout:
    marker, one JSON line {"exit", "signal", "duration_ms", "oom_kills", "files": [{"path", "size",
    "returned"}]}, then a tar of the returned output files, then the marker again.
So the host knows the run is over as soon as both markers have arrived, without waiting for the container
to stop. The marker is random per run and only known to the host and this process (which is made
non-dumpable), so a script cannot end its own output early. `oom_kills` counts the kernel's out-of-memory
kills in the container's cgroup (None when the cgroup files are not visible). The container's exit code is
the script's (128+N for a signal), so the host can fall back to it when the report never comes.

A pooled container starts the launcher ahead of time; `--idle-exit SECONDS` makes it give up and exit if
no job arrives in that time (so a container whose owner died does not wait forever).
"""

import json
import os
import select
import signal
import stat
import sys
import time

CHUNK = 65536


def read_exact(fd, n):
    parts, left = [], n
    while left > 0:
        piece = os.read(fd, min(CHUNK, left))
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


def read_header(fd):
    line = bytearray()
    while not line.endswith(b"\n"):
        ch = os.read(fd, 1)
        if not ch or len(line) > 1 << 20:
            sys.stderr.write("ipyskills launcher: no job received\n")
            sys.exit(125)
        line += ch
    return json.loads(line.decode("utf-8"))


def hide_from_other_processes():
    # Non-dumpable: a script running as the same uid cannot read this process's memory or fds (/proc/1/...).
    try:
        import ctypes

        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 4
    except (ImportError, OSError, AttributeError):
        return  # best effort: the marker stays secret from casual reads either way


def unpack_skill(fd, size, dest):
    """Extract the skill tar (regular files and folders only), then make it read-only."""
    import io
    import tarfile

    data = read_exact(fd, size)
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
    import shutil

    try:
        shutil.copytree(src, home, dirs_exist_ok=True)
    except OSError:
        pass


def feed_stdin(src_fd, size, proc):
    left = size
    try:
        while left > 0:
            piece = os.read(src_fd, min(CHUNK, left))
            if not piece:
                break
            left -= len(piece)
            proc.stdin.write(piece)
    except BrokenPipeError:
        pass  # the script stopped reading; the rest is dropped, as with any pipe
    try:
        proc.stdin.close()
    except BrokenPipeError:
        pass


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


def list_outputs(root, cap, max_files):
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            if stat.S_ISREG(st.st_mode):  # symlinks and devices are never returned
                found.append((os.path.relpath(full, root).replace(os.sep, "/"), full, st.st_size))
    files, total = [], 0
    for rel, full, size in found[:max_files]:
        returned = total + size <= cap
        total += size if returned else 0
        files.append({"path": rel, "size": size, "returned": returned, "full": full})
    return files


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


def send_trailer(job, exit_code, sig, duration_ms):
    import tarfile

    marker = job["marker"].encode()
    write_all(2, marker)
    files = list_outputs(job["output"], job["artifact_cap"], job["artifact_files"]) if job.get("output") else []
    summary = {"exit": exit_code, "signal": sig, "duration_ms": duration_ms, "oom_kills": oom_kills(),
               "files": [{k: f[k] for k in ("path", "size", "returned")} for f in files]}
    write_all(1, marker + json.dumps(summary).encode() + b"\n")
    with tarfile.open(fileobj=FdWriter(1), mode="w|", format=tarfile.PAX_FORMAT) as tar:
        for f in files:
            if f["returned"]:
                try:
                    tar.add(f["full"], arcname=f["path"], recursive=False)
                except OSError:
                    pass
    write_all(1, marker)


def main():
    import subprocess

    hide_from_other_processes()
    wait_for_job(0, idle_exit_from(sys.argv))
    job = read_header(0)
    if job.get("skill_tar"):
        unpack_skill(0, job["skill_tar"], job["cwd"])
    env = dict(os.environ)  # the image's environment only; the host's never reaches the container
    env.update(job["env"])
    seed_home(job.get("home_seed"), env.get("HOME", "/tmp"))
    started = time.monotonic()
    try:
        proc = subprocess.Popen(job["argv"], stdin=subprocess.PIPE, cwd=job["cwd"], env=env)
    except OSError as exc:
        sys.stderr.write(f"ipyskills: cannot start {job['argv'][0]!r} in the sandbox image: {exc.strerror}\n")
        sys.stderr.flush()
        exit_code, sig = 127, 0
    else:
        feed_stdin(0, job["stdin"], proc)
        rc = proc.wait()
        exit_code, sig = (rc, 0) if rc >= 0 else (128 - rc, -rc)
    duration_ms = (time.monotonic() - started) * 1000.0
    kill_everything_else()
    send_trailer(job, exit_code, sig, duration_ms)
    return exit_code


if __name__ == "__main__":
    sys.exit(main())
