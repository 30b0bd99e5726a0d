"""A local run's own uid (when we are root): choosing one no account or process uses, and ending every
process and removing every file it left behind once the run is over."""

from __future__ import annotations

import errno
import grp
import os
import pwd
import secrets
import signal
import time
from pathlib import Path

from ...errors import SandboxError
from .run_files import remove_tree

RUN_IDS = range(1_900_000_000, 1_901_000_000)  # far above distributions' account and subuid ranges
SWEPT_DIRS = ("/tmp", "/var/tmp", "/dev/shm")  # world-writable places a run uid may leave files in


def _target_ids() -> tuple[int | None, int | None]:
    """A uid (and equal gid) for this run alone, when we are root; an ordinary user cannot switch."""
    if os.geteuid() != 0:
        return None, None
    busy = _uids_of_processes()
    for _ in range(100):
        uid = RUN_IDS[secrets.randbelow(len(RUN_IDS))]
        if uid in busy or _has_account(uid):
            continue
        return uid, uid
    raise SandboxError("the local backend found no free uid for the run; try again")


def _has_account(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
        return True
    except KeyError:
        pass
    try:
        grp.getgrgid(uid)
        return True
    except KeyError:
        return False


def _uids_of_processes() -> set[int]:
    uids = set()
    try:
        entries = os.listdir("/proc")
    except OSError:
        return uids
    for entry in entries:
        if entry.isdigit():
            try:
                uids.add(os.stat(f"/proc/{entry}").st_uid)
            except OSError:
                continue
    return uids


def kill_processes_of(uid: int, rounds: int = 50) -> None:
    """SIGKILL every process owned by `uid` (a uid only this run uses), until none is left."""
    for _ in range(rounds):
        found = False
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                if os.stat(f"/proc/{entry}").st_uid != uid:
                    continue
                with open(f"/proc/{entry}/stat", "rb") as fh:
                    if fh.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                        continue  # already dead, waiting for its parent
                os.kill(int(entry), signal.SIGKILL)
                found = True
            except (OSError, IndexError):
                continue
        if not found:
            return
        time.sleep(0.01)


def sweep_files_of(uid: int, dirs=SWEPT_DIRS) -> None:
    """Remove what `uid` left at the top of the shared world-writable folders (links are not followed)."""
    for folder in dirs:
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.stat(follow_symlinks=False).st_uid != uid:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    remove_tree(Path(entry.path))
                else:
                    os.unlink(entry.path)
            except OSError:
                continue


def _wait_group_gone(pgid: int, timeout: float = 5.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            os.killpg(pgid, 0)
        except OSError as exc:
            if exc.errno == errno.ESRCH:
                return
        time.sleep(0.01)


