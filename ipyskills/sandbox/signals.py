"""SIGTERM and SIGHUP end this process's sandbox runs and drain the warm pool, as Ctrl-C and normal exit do.

`docker stop`, systemd, `timeout`, CI cancellation and JupyterHub culling send SIGTERM; a closed terminal
sends SIGHUP. Python's default action for both ends the process without running `atexit` or `finally`, so
in-flight containers and the pool's started containers would stay, and so would a local run's folder (and,
outside a pid namespace, what its script started in its own session). `install()` (called when a backend
is set up, Docker or local) puts a handler in front of whatever was there:

- only from the main thread (Python allows no other), and only once per signal;
- a signal that is ignored (`SIG_IGN`, e.g. SIGHUP under `nohup`) stays ignored: nothing is installed;
- on the signal, in-flight local runs are ended (each registered its own `end` with `ended_on_signal`:
  process group killed, run folder removed), the pool is drained and every container of this process
  removed (in a helper thread, bounded by `CLEANUP_TIMEOUT`, so a lock held by the interrupted main thread
  cannot hang it), then the previous disposition runs: a Python handler (ipykernel's, Jupyter's, the
  user's) is called with the same arguments; the default is restored and the signal sent again, so the
  process still dies *by that signal* (exit status and parent's view unchanged).
- a handler installed after ours (which may chain to ours) is left alone.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import threading
from collections.abc import Callable, Iterator

CLEANUP_TIMEOUT = 10.0  # seconds the handler spends removing containers before passing the signal on
SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))

_installed: dict[int, object] = {}  # signal number -> the disposition we replaced
_lock = threading.Lock()
# id -> how to end one in-flight run (local backend). No lock: the handler may interrupt the main thread
# anywhere, and a lock it held would stop the clean-up thread; a dict's set, pop and copy are atomic.
_enders: dict[int, Callable[[], None]] = {}


def install() -> list[int]:
    """Install the handlers (idempotent); returns the signals newly handled. Does nothing outside the
    main thread or for ignored signals."""
    if threading.current_thread() is not threading.main_thread():
        return []
    done = []
    with _lock:
        for signum in SIGNALS:
            if signum in _installed:
                continue
            try:
                previous = signal.getsignal(signum)
                if previous == signal.SIG_IGN:
                    continue  # e.g. nohup: the user asked for this signal to be ignored
                signal.signal(signum, _handle)
            except (ValueError, OSError):  # not the main interpreter, or not allowed here
                continue
            _installed[signum] = previous
            done.append(signum)
    return done


def uninstall() -> None:
    """Put back the previous dispositions where our handler is still the current one (tests, unload)."""
    if threading.current_thread() is not threading.main_thread():
        return
    with _lock:
        for signum, previous in list(_installed.items()):
            try:
                if signal.getsignal(signum) is _handle:
                    signal.signal(signum, previous if previous is not None else signal.SIG_DFL)
            except (ValueError, OSError):
                continue
            del _installed[signum]


_ids = itertools.count()


@contextlib.contextmanager
def ended_on_signal(end: Callable[[], None]) -> Iterator[None]:
    """While the block runs, SIGTERM/SIGHUP call `end()` (from the clean-up thread) before the signal is
    passed on: the process usually dies next, so the block's own `finally` never runs."""
    key = next(_ids)
    _enders[key] = end
    try:
        yield
    finally:
        _enders.pop(key, None)


def end_runs(timeout: float = CLEANUP_TIMEOUT) -> None:
    """End in-flight local runs, drain every warm pool and remove every container of this process, within
    `timeout` seconds."""
    worker = threading.Thread(target=_end_runs, name="ipyskills-signal-cleanup", daemon=True)
    worker.start()
    worker.join(timeout)


def _end_runs() -> None:
    import sys

    for end in list(_enders.values()):  # first: killing a process group takes milliseconds, removing containers longer
        with contextlib.suppress(Exception):
            end()
    pool = sys.modules.get("ipyskills.sandbox.docker.pool")
    cleanup = sys.modules.get("ipyskills.sandbox.docker.cleanup")  # loaded with the Docker backend
    try:
        if pool is not None:
            pool.drain_all(timeout=CLEANUP_TIMEOUT / 2)
    finally:
        if cleanup is not None:
            cleanup.end_all(timeout=CLEANUP_TIMEOUT / 2)


def _handle(signum, frame):
    previous = _installed.get(signum, signal.SIG_DFL)
    with contextlib.suppress(Exception):  # the signal must still be passed on
        end_runs()
    if callable(previous):
        return previous(signum, frame)
    if previous == signal.SIG_IGN:
        return None
    # SIG_DFL (or None: set from C code we cannot call): die by the signal, as without us.
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
    return None
