"""Processes that leave the run's process group still end with the run, without a pid namespace.

Used by the local backend's helper (sandbox/local/isolation.py). Both the helper and its reaper become
child subreapers (PR_SET_CHILD_SUBREAPER): a process whose parent dies is handed to the nearest one instead
of the host's init, so a double fork or setsid() cannot take a process out of the run's tree. When the
script ends (or the host kills the reaper), the subreaper SIGKILLs every process still below it, found by
parent links in /proc, and reaps them until it has no child left. A stopped process dies of SIGKILL too.
Standard library only: the helper imports nothing else.
"""

import ctypes
import os
import signal
import time

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper():
    """True when orphans below this process now come to it."""
    libc = ctypes.CDLL(None, use_errno=True)
    prctl = getattr(libc, "prctl", None)
    return prctl is not None and prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0


def _children(pid):
    """The children of `pid` from /proc/PID/task/*/children, or None where the kernel has no such file."""
    found = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []  # gone
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children", "rb") as fh:
                found += [int(x) for x in fh.read().split()]
        except FileNotFoundError:
            if task == str(pid) and os.path.isdir(f"/proc/{pid}/task/{task}"):
                return None
        except (OSError, ValueError):
            continue
    return found


def _scan_parents():
    children = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return children
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                ppid = int(fh.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    return children


def descendants(root):
    """The pids below `root` (not `root` itself): from the kernel's children lists where it has them
    (cheap: only the run's own processes are read), else from the parent links of every process."""
    table = None
    found, todo, seen = [], [root], {root}
    while todo:
        pid = todo.pop()
        kids = _children(pid) if table is None else table.get(pid, [])
        if kids is None:
            table = _scan_parents()
            kids = table.get(pid, [])
        for kid in kids:
            if kid not in seen:
                seen.add(kid)
                found.append(kid)
                todo.append(kid)
    return found


def end_descendants(timeout=5.0):
    """SIGKILL everything below this process and reap it, until no child is left (or `timeout` passes:
    a process stuck in the kernel). Returns how many processes were killed."""
    me, killed = os.getpid(), set()
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        pids = descendants(me)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except OSError:
                pass
        while True:  # reap what is ours; the killed grandchildren come to us as they are orphaned
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                if not descendants(me):
                    return len(killed)
                break
            if pid == 0:
                break
        time.sleep(0.005)
    return len(killed)
