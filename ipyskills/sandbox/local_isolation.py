"""The child-side half of the local backend: confine this process, then exec the script.

Run as a file, not imported: `python -I -S local_isolation.py SPEC_JSON -- PROGRAM ARGS...`.
It uses the standard library only, so it starts in ~15 ms and runs whatever Python hosts ipyskills.

Steps, each attempted and reported, never assumed:
1. new namespaces: network (no interfaces but a down loopback) and pid (so every process the script starts
   dies with it), plus a user namespace when we are not root (that is what lets an unprivileged user create
   the other two). Kernels or containers that forbid this get a report saying so, and the run goes on.
2. fork a reaper: pid 1 of the new pid namespace (like `docker run --init`). It drops to the unprivileged
   uid (when root), sets rlimits, no-new-privileges and a parent-death signal, forks the script, reaps
   orphans and exits with the script's status (128 + signal when a signal killed it). When it exits, the
   kernel kills everything left in the namespace. This process waits for it and ends the same way: with
   the script's exit code, or killed by the script's signal, which the reaper passes on through a pipe (pid 1
   of a namespace cannot die of its own signal), so the host tells `exit(152)` from a SIGXCPU.
3. the script process writes one JSON line saying what was enforced to the status pipe and execs. The
   status pipe is close-on-exec, so the host sees EOF exactly when the script starts.
"""

import ctypes
import errno
import json
import os
import resource
import signal
import sys

CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_NO_NEW_PRIVS = 38

_libc = ctypes.CDLL(None, use_errno=True)


def _prctl(option, value):
    """True when the option took; False where there is no prctl (not Linux)."""
    prctl = getattr(_libc, "prctl", None)
    return prctl is not None and prctl(option, value, 0, 0, 0) == 0


def _unshare(flags):
    if not hasattr(_libc, "unshare"):
        raise OSError(errno.ENOSYS, "namespaces need Linux")
    if _libc.unshare(ctypes.c_int(flags)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def _write_file(path, text):
    with open(path, "w") as fh:
        fh.write(text)


def _map_ids(target_uid, target_gid):
    """Id maps for a fresh user namespace: ourselves (and the target uid when we are root)."""
    uid, gid = os.geteuid(), os.getegid()
    if uid == 0:
        extra_uid = f"{target_uid} {target_uid} 1\n" if target_uid not in (None, 0) else ""
        extra_gid = f"{target_gid} {target_gid} 1\n" if target_gid not in (None, 0) else ""
        _write_file("/proc/self/uid_map", f"0 0 1\n{extra_uid}")
        _write_file("/proc/self/gid_map", f"0 0 1\n{extra_gid}")
    else:
        _write_file("/proc/self/setgroups", "deny")  # required before an unprivileged gid_map
        _write_file("/proc/self/uid_map", f"{uid} {uid} 1\n")
        _write_file("/proc/self/gid_map", f"{gid} {gid} 1\n")


def enter_namespaces(want_net, target_uid, target_gid):
    """Try the strongest set first, then weaker ones. Returns (net, pid, user, reason_if_none)."""
    net = CLONE_NEWNET if want_net else 0
    candidates = [net | CLONE_NEWPID, CLONE_NEWUSER | net | CLONE_NEWPID]
    if net:
        candidates += [CLONE_NEWUSER | net, net]
    candidates += [CLONE_NEWPID, CLONE_NEWUSER | CLONE_NEWPID]
    last_error = "not attempted"
    for flags in candidates:
        if not flags:
            continue
        try:
            _unshare(flags)
        except OSError as exc:
            last_error = exc.strerror or str(exc)
            continue
        if flags & CLONE_NEWUSER:
            try:
                _map_ids(target_uid, target_gid)
            except OSError as exc:
                # The namespace exists but we are nobody in it; that is unusable, so stop here.
                return False, False, True, f"user namespace id map failed: {exc.strerror or exc}"
        return bool(flags & CLONE_NEWNET), bool(flags & CLONE_NEWPID), bool(flags & CLONE_NEWUSER), ""
    return False, False, False, last_error


def confine_child(spec, report):
    uid, gid = spec.get("uid"), spec.get("gid")
    if uid is not None:
        try:
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
        except OSError as exc:
            report["user_error"] = exc.strerror or str(exc)
    report["uid"], report["gid"] = os.getuid(), os.getgid()
    failed = []
    for name, (soft, hard) in spec["rlimits"].items():
        try:
            resource.setrlimit(getattr(resource, name), (soft, hard))
        except (OSError, ValueError, AttributeError):
            failed.append(name)
    report["rlimits_failed"] = failed
    report["no_new_privs"] = _prctl(PR_SET_NO_NEW_PRIVS, 1)
    # Set after the uid change (which clears it): if the waiting parent dies, so does everything below.
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def exit_status(status):
    """A wait status as a shell would report it: the exit code, or 128 + the signal that killed it."""
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status)
    return 128 + os.WTERMSIG(status)


def end_like(status, signal_r):
    """Exit as the script ended: killed by its signal (as the reaper reported it, or the reaper's own
    when something killed the reaper), else with its exit code. Never returns."""
    signum = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
    if signum is None:
        os.set_blocking(signal_r, False)
        try:
            signum = int(os.read(signal_r, 16) or 0) or None
        except (OSError, ValueError):
            pass
    if signum is not None:
        try:
            _prctl(PR_SET_DUMPABLE, 0)  # the script's crash is not this process's: no core dump for it
            signal.signal(signum, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, [signum])
            os.kill(os.getpid(), signum)
        except (OSError, ValueError):
            pass
        os._exit(128 + signum)  # a signal whose default is not to end the process
    os._exit(exit_status(status))


def let_go_of_pipes():
    """Point 0, 1 and 2 at /dev/null, so the host sees EOF (and its stdin writer a closed pipe) only
    through the script itself."""
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)


def start_script(spec, report, program):
    """In the forked script process: write the report, then exec. Never returns."""
    status_fd = spec["status_fd"]
    try:
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # fork cleared it
        exe = spec["exe"]
        fallback = spec.get("exe_fallback")
        if fallback and not os.access(exe, os.X_OK):
            # The host's interpreter lives where the unprivileged user cannot reach (e.g. under /root).
            report["exe_fallback"] = exe = program[0] = fallback
        os.write(status_fd, b"report " + json.dumps(report).encode() + b"\n")
        os.execve(exe, program, dict(os.environ))
    except BaseException as exc:  # noqa: BLE001 - anything here must reach the host as text
        message = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        os.write(status_fd, b"error " + json.dumps(message).encode() + b"\n")
    os._exit(127)


def reap(spec, report, program, signal_w):
    """The first process of the pid namespace, like `docker run --init`: confine, start the script, reap
    orphans until the script ends, exit with its status (the kernel then kills whatever is left). The
    signal that killed the script goes to `signal_w` (close-on-exec, so the script never holds it)."""
    try:
        confine_child(spec, report)
        script = os.fork()
    except BaseException as exc:  # noqa: BLE001
        os.write(spec["status_fd"], b"error " + json.dumps(str(exc)).encode() + b"\n")
        os._exit(127)
    if script == 0:
        start_script(spec, report, program)
    os.close(spec["status_fd"])
    let_go_of_pipes()
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(127)
        if pid == script:
            if os.WIFSIGNALED(status):
                os.write(signal_w, b"%d" % os.WTERMSIG(status))
            os._exit(exit_status(status))


def main(argv):
    spec = json.loads(argv[1])
    program = argv[3:]
    status_fd = spec["status_fd"]
    os.set_inheritable(status_fd, False)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    net, pid, user, ns_error = enter_namespaces(spec["block_network"], spec.get("uid"), spec.get("gid"))
    report = {"netns": net, "pidns": pid, "userns": user, "ns_error": ns_error}

    signal_r, signal_w = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(signal_r)
        reap(spec, report, program, signal_w)
    os.close(signal_w)
    os.write(status_fd, b"child %d\n" % child)
    os.close(status_fd)
    let_go_of_pipes()
    while True:
        try:
            _, status = os.waitpid(child, 0)
            break
        except ChildProcessError:
            os._exit(127)
    end_like(status, signal_r)


if __name__ == "__main__":
    main(sys.argv)
