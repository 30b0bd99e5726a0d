"""The run's total memory where no cgroup can be made: a watchdog on the host side of the local backend.

Each process of a run has its address-space limit (RLIMIT_AS), but without a delegated cgroup nothing bounds
the sum: eight workers of 200 MiB each fit under a 256 MiB limit one by one. While a run goes, the backend
asks `RunMemory.over()` every `INTERVAL` seconds: it adds up the resident memory of every process below
the helper (the helper and its reaper are child subreapers, so a process that double-forks or calls
setsid() stays below it), and at the limit the backend ends the run and reports it as out of memory.

What is counted for each process is its private resident memory, RssAnon + RssShmem from
/proc/PID/status (world-readable, read without walking page tables): file-backed pages (the interpreter,
shared libraries) are not the run's to limit. Pages a forked worker still shares with its parent count in
both, so the sum errs on the high side. It samples: between two looks a run can pass the limit by what it
allocates in `INTERVAL`, and a peak shorter than that may go unseen; no single process can pass it, by its
address-space limit.
"""

from __future__ import annotations

import time

from .reaper import descendants

INTERVAL = 0.1


def private_resident(pid: int) -> int:
    """RssAnon + RssShmem of `pid` in bytes (0 when it is gone or a zombie)."""
    total = 0
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            for line in fh:
                if line.startswith((b"RssAnon:", b"RssShmem:")):
                    total += int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return 0
    return total


class RunMemory:
    """The memory of the processes below `root` (the helper itself is not counted), against `limit` bytes."""

    def __init__(self, root: int, limit: int, interval: float = INTERVAL):
        self.root, self.limit, self.interval = root, limit, interval
        self.next_look = 0.0
        self.peak = 0
        self.exceeded = False

    def total(self) -> int:
        return sum(private_resident(pid) for pid in descendants(self.root))

    def over(self, now: float | None = None) -> bool:
        """True (and from then on) once the run's total reached the limit; looks at most every interval."""
        if self.exceeded:
            return True
        now = time.monotonic() if now is None else now
        if now < self.next_look:
            return False
        self.next_look = now + self.interval
        used = self.total()
        self.peak = max(self.peak, used)
        self.exceeded = used >= self.limit
        return self.exceeded
