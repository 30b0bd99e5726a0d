"""The child-side half of the local backend: confine this process, then exec the script.

Run as a file, not imported by the backend: `python -I -S isolation.py SPEC_JSON -- PROGRAM ARGS...`
(the spec is made by sandbox/local/backend.py, the Landlock plan in it by sandbox/local/confine.py). It uses
the standard library only, so it starts in ~15 ms and runs whatever Python hosts ipyskills.

Steps, each attempted and reported, never assumed (the host builds the isolation line from the report):
1. a parent-death signal, so the helper dies with its owner; joining the run's memory cgroup when the host
   made one.
2. new namespaces: network (no interfaces but a down loopback) and pid (so every process the script starts
   dies with it), plus a user namespace when we are not root (that is what lets an unprivileged user create
   the others), then a mount namespace of the run's own. Kernels or containers that forbid any of them get
   a report saying so, and the run goes on with what held.
3. fork a reaper: pid 1 of the new pid namespace (like `docker run --init`). In the run's mount namespace
   it mounts a size-capped tmpfs on /dev/shm and a fresh /proc (private_mounts), then drops to the
   unprivileged uid (when root), sets rlimits, no-new-privileges and a parent-death signal, forks the
   script, reaps orphans and exits with the script's status (128 + signal when a signal killed it). When it
   exits, the kernel kills everything left in the namespace, and the mounts go with the namespace. This
   process waits for it and ends the same way: with the script's exit code, or killed by the script's
   signal, which the reaper passes on through a pipe (pid 1 of a namespace cannot die of its own signal),
   so the host tells `exit(152)` from a SIGXCPU.
4. the script process applies Landlock (the highest ABI the kernel offers, feature by feature: reads,
   writes, TCP bind/connect, signal and abstract-socket scoping), writes one JSON line saying what was
   enforced to the status pipe and execs. The status pipe is close-on-exec, so the host sees EOF exactly
   when the script starts.
"""

import ctypes
import errno
import json
import os
import resource
import signal
import stat
import sys
import time

# The helper's own modules beside it (standard library only): run as a file with -I, its folder is not on
# the path by itself.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import netfilter  # noqa: E402
import reaper as subreaper  # noqa: E402
import shm as shm_folder  # noqa: E402

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


def _map_ids(target_uid, target_gid, uid, gid):
    """Id maps for a fresh user namespace: ourselves (and the target uid when we are root). `uid` and `gid`
    are read before the unshare: inside the unmapped namespace they read as the overflow id (65534)."""
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
    uid, gid = os.geteuid(), os.getegid()
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
                _map_ids(target_uid, target_gid, uid, gid)
            except OSError as exc:
                # The namespace exists but we are nobody in it; that is unusable, so stop here.
                return False, False, True, f"user namespace id map failed: {exc.strerror or exc}"
        return bool(flags & CLONE_NEWNET), bool(flags & CLONE_NEWPID), bool(flags & CLONE_NEWUSER), ""
    return False, False, False, last_error


# Landlock (linux/landlock.h). The ABI the kernel reports decides which rights can be handled at all.
SYS_LANDLOCK = {"x86_64": (444, 445, 446), "aarch64": (444, 445, 446)}
LL_CREATE_RULESET_VERSION = 1
LL_RULE_PATH_BENEATH = 1
LL_EXECUTE, LL_WRITE_FILE, LL_READ_FILE, LL_READ_DIR = 1, 2, 4, 8
LL_FS_ABI1 = (1 << 13) - 1  # execute .. make_sym
LL_REFER, LL_TRUNCATE, LL_IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
LL_FILE_RIGHTS = LL_EXECUTE | LL_WRITE_FILE | LL_READ_FILE | LL_TRUNCATE | LL_IOCTL_DEV
LL_READ = LL_EXECUTE | LL_READ_FILE | LL_READ_DIR
LL_NET_BIND_TCP, LL_NET_CONNECT_TCP = 1, 2
LL_SCOPE_ABSTRACT_UNIX, LL_SCOPE_SIGNAL = 1, 2
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC, MS_PRIVATE = 2, 4, 8, 1 << 14, 1 << 18
CLONE_NEWNS = 0x00020000


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed", ctypes.c_uint64), ("fd", ctypes.c_int32)]


def _syscall(number, *args):
    _libc.syscall.restype = ctypes.c_long
    result = _libc.syscall(ctypes.c_long(number), *args)
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return result


def landlock_abi():
    """The kernel's Landlock ABI version, 0 when there is none (or not Linux, or an unknown architecture)."""
    numbers = SYS_LANDLOCK.get(os.uname().machine)
    if numbers is None or not hasattr(_libc, "syscall"):
        return 0
    try:
        return _syscall(numbers[0], None, ctypes.c_size_t(0), ctypes.c_uint32(LL_CREATE_RULESET_VERSION))
    except OSError:
        return 0


def landlock(plan, report):
    """Restrict this process (and all it will start) to `plan`: read (and execute) under plan["read"], read
    and write under plan["write"], TCP bind/connect denied when plan["block_tcp"], signals and abstract unix
    sockets scoped to the run. /dev/shm is writable when it is the run's own tmpfs, or, without one, when
    the script runs as plan["run_uid"] (a uid of its own, whose files the host finds and removes afterwards);
    otherwise it stays unreachable. Each part is reported as held only when the kernel took it."""
    abi = landlock_abi()
    held = {"abi": abi, "fs": False, "tcp": False, "scoped": False, "proc": "", "shm": "", "error": ""}
    report["landlock"] = held
    if abi < 1:
        held["error"] = "not offered by this kernel"
        return
    numbers = SYS_LANDLOCK[os.uname().machine]
    fs = LL_FS_ABI1 | (LL_REFER if abi >= 2 else 0) | (LL_TRUNCATE if abi >= 3 else 0)
    fs |= LL_IOCTL_DEV if abi >= 5 else 0
    net = (LL_NET_BIND_TCP | LL_NET_CONNECT_TCP) if abi >= 4 and plan.get("block_tcp") else 0
    scoped = (LL_SCOPE_ABSTRACT_UNIX | LL_SCOPE_SIGNAL) if abi >= 6 else 0
    attr = _RulesetAttr(fs, net, scoped)
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    try:
        ruleset = _syscall(numbers[0], ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    except OSError as exc:
        held["error"] = exc.strerror or str(exc)
        return
    try:
        rules = [(path, LL_READ) for path in plan.get("read", [])]
        rules += [(path, fs) for path in plan.get("write", [])]
        rules += [(path, LL_READ_FILE | LL_WRITE_FILE | LL_TRUNCATE | LL_IOCTL_DEV) for path in plan.get("devices", [])]
        # /proc: all of it when it is this run's own mount, else only the script's own entry (Python starts
        # without /proc; other processes' command lines stay unreadable).
        private_proc = report.get("proc") == "private"
        rules.append(("/proc" if private_proc else "/proc/self", LL_READ))
        held["proc"] = "all" if private_proc else "self"
        if report.get("shm") == "private":
            held["shm"] = "private"
        elif plan.get("run_uid") is not None and report.get("uid") == plan["run_uid"]:
            held["shm"] = "shared"
        if held["shm"]:
            rules.append(("/dev/shm", fs))
        for path, rights in rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # a folder this machine does not have
            try:
                if not stat.S_ISDIR(os.fstat(fd).st_mode):
                    rights &= LL_FILE_RIGHTS
                rule = _PathBeneath(rights & fs, fd)
                _syscall(numbers[1], ctypes.c_int(ruleset), ctypes.c_int(LL_RULE_PATH_BENEATH), ctypes.byref(rule),
                         ctypes.c_uint32(0))
            finally:
                os.close(fd)
        if not _prctl(PR_SET_NO_NEW_PRIVS, 1):
            raise OSError(errno.EPERM, "no-new-privileges could not be set")
        _syscall(numbers[2], ctypes.c_int(ruleset), ctypes.c_uint32(0))
    except OSError as exc:
        held["error"] = exc.strerror or str(exc)
        held["proc"] = held["shm"] = ""
        return
    finally:
        os.close(ruleset)
    held.update(fs=True, tcp=bool(net), scoped=bool(scoped))


def _spent(report, step, started):
    """Milliseconds a confinement step took, for the report (benchmarks/local_overhead.py reads them)."""
    report.setdefault("steps_ms", {})[step] = round((time.perf_counter() - started) * 1000, 3)


def _mount(source, target, fstype, flags, data=None):
    if _libc.mount(source, target, fstype, ctypes.c_ulong(flags), data) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def private_mounts(spec, report):
    """In the first process of the new pid namespace (before any uid change), in a mount namespace of the
    run's own (made by the parent): a fresh size-capped tmpfs on /dev/shm, so POSIX semaphores and shared
    memory (multiprocessing) work and vanish with the run, and a fresh /proc that shows this pid namespace
    only. Each is reported as held only when its mount took."""
    if not report.get("mountns"):
        report["proc_error"] = report["shm_error"] = report.get("mountns_error") or "no mount namespace"
        return
    try:
        # Nothing mounted here may reach the host's mount table (and the host's later mounts stay out).
        _mount(None, b"/", None, MS_REC | MS_PRIVATE)
    except OSError as exc:
        report["proc_error"] = report["shm_error"] = exc.strerror or str(exc)
        return
    if spec.get("shm_size"):
        try:
            options = f"size={spec['shm_size']},nr_inodes=4096,mode=1777".encode()
            _mount(b"tmpfs", b"/dev/shm", b"tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, options)
            report["shm"] = "private"
        except OSError as exc:
            report["shm_error"] = exc.strerror or str(exc)
    if not report.get("pidns"):
        report["proc_error"] = "no pid namespace"
        return
    try:
        _mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        report["proc"] = "private"
    except OSError as exc:
        report["proc_error"] = exc.strerror or str(exc)


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
        shm_site = shm_folder.site_text() if spec.get("work") else None
        if spec.get("landlock") is not None:
            started = time.perf_counter()
            landlock(spec["landlock"], report)
            _spent(report, "landlock", started)
        env = dict(os.environ)
        if spec.get("work") and report.get("shm") != "private" and (report.get("landlock") or {}).get("shm") != "shared":
            # No /dev/shm for the run: Python's multiprocessing gets a folder in the run's (sandbox/local/shm.py).
            report["shm_python_error"] = shm_folder.prepare(spec["work"], env, shm_site)
            report["shm_python"] = not report["shm_python_error"]
        if spec.get("netfilter") and not report.get("netns"):
            # No network namespace: refuse every socket but AF_UNIX (sandbox/local/netfilter.py).
            report["netfilter_error"] = netfilter.install()
            report["netfilter"] = not report["netfilter_error"]
        os.write(status_fd, b"report " + json.dumps(report).encode() + b"\n")
        os.execve(exe, program, env)
    except BaseException as exc:  # noqa: BLE001 - anything here must reach the host as text
        message = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        os.write(status_fd, b"error " + json.dumps(message).encode() + b"\n")
    os._exit(127)


def reap(spec, report, program, signal_w):
    """The first process of the pid namespace, like `docker run --init`: confine, start the script, reap
    orphans until the script ends, exit with its status (the kernel then kills whatever is left). The
    signal that killed the script goes to `signal_w` (close-on-exec, so the script never holds it)."""
    try:
        if spec.get("private_mounts"):
            started = time.perf_counter()
            private_mounts(spec, report)
            _spent(report, "mounts", started)
        confine_child(spec, report)
        # Orphans of the script come to this process, not the host's init (sandbox/local/reaper.py).
        report["subreaper"] = subreaper.become_subreaper()
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
            if not report.get("pidns"):
                subreaper.end_descendants()  # what left the process group ends with the script too
            os._exit(exit_status(status))


def main(argv):
    spec = json.loads(argv[1])
    program = argv[3:]
    status_fd = spec["status_fd"]
    os.set_inheritable(status_fd, False)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    # Die with the owner (it kills the run on every path it lives to see); the reaper and the script
    # below die with this process in turn. SIGTERM, not SIGKILL: this process first kills the reaper and
    # whatever left the run's process group (it is their child subreaper), then exits.
    running = {"reaper": 0}

    def owner_gone(signum, _frame):
        if running["reaper"]:
            try:
                os.kill(running["reaper"], signal.SIGKILL)
            except OSError:
                pass
        subreaper.end_descendants()
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, owner_gone)
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if spec.get("owner") and os.getppid() != spec["owner"]:
        os._exit(125)  # the owner died before the line above took
    cgroup = ""
    if spec.get("cgroup_procs"):
        try:
            _write_file(spec["cgroup_procs"], str(os.getpid()))
        except OSError as exc:
            cgroup = exc.strerror or str(exc)
    net, pid, user, ns_error = enter_namespaces(spec["block_network"], spec.get("uid"), spec.get("gid"))
    report = {"netns": net, "pidns": pid, "userns": user, "ns_error": ns_error, "cgroup_error": cgroup,
              "cgroup_held": bool(spec.get("cgroup_procs")) and not cgroup}
    if spec.get("private_mounts"):
        try:
            started = time.perf_counter()
            _unshare(CLONE_NEWNS)
            _spent(report, "mountns", started)
            report["mountns"] = True
        except OSError as exc:
            report["mountns"], report["mountns_error"] = False, exc.strerror or str(exc)

    # When the reaper is killed (timeout, memory), what it had collected comes here, and is ended below.
    subreaper.become_subreaper()
    signal_r, signal_w = os.pipe()
    child = os.fork()
    if child == 0:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.close(signal_r)
        reap(spec, report, program, signal_w)
    running["reaper"] = child
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
    if not report.get("pidns"):
        subreaper.end_descendants()
    end_like(status, signal_r)


if __name__ == "__main__":
    main(sys.argv)
