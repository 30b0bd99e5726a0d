"""Is the process that owns a leftover (a container, a local run folder) still alive? One answer for both
backends' clean-up of what dead owners left."""

from __future__ import annotations

import os


def pid_alive(pid: int) -> bool:
    """True when a process with this pid exists on this machine. A process we may not signal (another
    user's) counts as alive: its leftovers are not ours to remove."""
    if pid <= 0:
        return False  # 0 and negatives would address process groups, not one process
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
