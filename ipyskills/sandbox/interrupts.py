"""One Ctrl-C stops a run; pressing it again while the run is being cleaned up does not break the clean-up.

The first SIGINT raises KeyboardInterrupt as usual: the backend stops and removes the sandbox and raises
RunInterrupted with the output so far. A second SIGINT arriving during that clean-up (people press Ctrl-C
or ■ twice) would raise a fresh KeyboardInterrupt from the middle of it: the removal cut short, the partial
output and the one-line summary lost, a traceback instead. Inside `shield_repeated_interrupts()` SIGINTs
after the first are counted and ignored, unless the clean-up has already taken ESCAPE_AFTER seconds (an
engine that hangs): then one goes through, so the user is never locked in.

Only the signal module: the runner uses it for every caller (notebook, CLI, plain Python).
"""

from __future__ import annotations

import signal
import threading
import time
from contextlib import contextmanager

ESCAPE_AFTER = 10.0  # seconds after the first Ctrl-C from which another one is let through


class InterruptShield:
    """The SIGINT handler while a run is in progress."""

    def __init__(self, previous, clock=time.monotonic):
        self.previous = previous
        self.clock = clock
        self.first: float | None = None  # when the first SIGINT arrived
        self.ignored = 0  # SIGINTs swallowed while the first was being handled
        self.escaped = False  # a later SIGINT was let through (the clean-up took too long)

    def __call__(self, signum, frame):
        now = self.clock()
        if self.first is None:
            self.first = now
            return self.previous(signum, frame)  # the usual KeyboardInterrupt
        if now - self.first >= ESCAPE_AFTER:
            self.escaped = True
            return self.previous(signum, frame)
        self.ignored += 1
        return None


@contextmanager
def shield_repeated_interrupts():
    """Within the block, only the first Ctrl-C interrupts (see the module). Yields the InterruptShield, or
    None where it cannot be installed (not the main thread, or SIGINT ignored / left to the default action)."""
    if threading.current_thread() is not threading.main_thread():
        yield None
        return
    previous = signal.getsignal(signal.SIGINT)
    if not callable(previous):  # SIG_IGN, SIG_DFL or set outside Python: not ours to change
        yield None
        return
    shield = InterruptShield(previous)
    signal.signal(signal.SIGINT, shield)
    try:
        yield shield
    finally:
        signal.signal(signal.SIGINT, previous)
