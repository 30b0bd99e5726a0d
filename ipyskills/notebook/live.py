"""Live output of a running script in the notebook: one display, updated in place, showing the head and
the tail of what the script printed so far (stderr lines marked). It appears only once a run has lasted
LIVE_AFTER seconds, so quick runs show just their final result; when the run ends the live display is
emptied and the final result is rendered as usual (so the output is stored once in the notebook).

Outside a kernel (terminal IPython) nothing can be updated in place: the text is written through to
stdout/stderr as it arrives instead, as `!cmd` does.

Output that comes before it is due to be shown (within LIVE_AFTER of the start, or within REFRESH_EVERY of
the last redraw) is shown by a timer once it is due, not only when the script prints again: a warm pool's
container prints its first line within LIVE_AFTER, and a script may then be silent until it ends."""

from __future__ import annotations

import contextvars
import sys
import threading
import time

from .primitives import esc, wrap

LIVE_AFTER = 0.5  # seconds a run must last before its live display appears
REFRESH_EVERY = 0.25  # seconds between redraws of the live display
LIVE_HEAD = 2_000  # characters kept from the start of the output
LIVE_TAIL = 8_000  # characters kept from the end


def in_kernel(shell) -> bool:
    """True in a Jupyter kernel (displays can be updated in place)."""
    return shell is not None and type(shell).__module__.startswith("ipykernel")


class LiveOutput:
    """on_output callback for reg.run: `live(stream, text)`."""

    def __init__(self, title: str, shell=None, clock=time.monotonic):
        self.title = title
        self.kernel = in_kernel(shell)
        self.clock = clock
        self.started = clock()
        self.head = ""
        self.tail = ""
        self.total = 0
        self.handle = None
        self.pending: list[tuple[str, str]] = []  # before the display appears / the terminal writes
        self.streaming = False
        self.last_draw = 0.0
        self.lock = threading.RLock()  # the run's thread and the timer both show output
        self.timer: threading.Timer | None = None  # shows held-back output once it is due
        self.done = False  # finished or interrupted: nothing more is shown live

    def __call__(self, stream: str, text: str) -> None:
        marked = text if stream == "stdout" else _mark_stderr(text)
        with self.lock:
            if len(self.head) < LIVE_HEAD:
                room = LIVE_HEAD - len(self.head)
                self.head += marked[:room]
            self.tail = (self.tail + marked)[-LIVE_TAIL:]
            self.total += len(marked)
            if not self.kernel:
                self.pending.append((stream, text))
            self._show_when_due()

    def _show_when_due(self) -> None:
        """Show the output so far now if that is due, else start a timer that shows it when it is."""
        if self.done:
            return
        if self.streaming:  # the terminal, once writing through: no throttling
            due = 0.0
        elif self.handle is not None:
            due = self.last_draw + REFRESH_EVERY
        else:
            due = self.started + LIVE_AFTER
        wait = due - self.clock()
        if wait <= 0:
            self._cancel_timer()
            self._show()
        elif self.timer is None:
            # Run in a copy of this context: ipykernel keeps the cell's parent header in a contextvar,
            # so the timer's display goes to this cell's output.
            self.timer = threading.Timer(wait, contextvars.copy_context().run, args=(self._on_timer,))
            self.timer.daemon = True
            self.timer.start()

    def _on_timer(self) -> None:
        with self.lock:
            self.timer = None
            if not self.done:
                self._show()

    def _cancel_timer(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def _show(self) -> None:
        if self.kernel:
            self.draw()
        else:
            self.streaming = True
            self._write_through()

    def _stop(self) -> None:
        """The run is over: no timer may show anything after the result (called under the lock)."""
        self.done = True
        self._cancel_timer()

    def _write_through(self) -> None:
        for stream, text in self.pending:
            target = sys.stdout if stream == "stdout" else sys.stderr
            target.write(text)
            target.flush()
        self.pending.clear()

    def text(self) -> str:
        """The head and the tail of the output so far (all of it when short)."""
        if self.total <= LIVE_HEAD + LIVE_TAIL:
            return (self.head + self.tail[len(self.tail) - (self.total - len(self.head)):]
                    if self.total > len(self.head) else self.head)
        cut = self.total - len(self.head) - len(self.tail)
        return f"{self.head}\n[ipyskills: {cut:,} characters not shown while running]\n{self.tail}"

    def bundle(self, footer: str = "") -> dict:
        body = self.text()
        seconds = self.clock() - self.started
        head = f"{self.title} · running {seconds:.1f} s" if not footer else f"{self.title} · {footer}"
        colour = ' style="color:#9a6700"' if footer else ""  # interrupted: the warning colour
        # The box stays scrolled to its end (column-reverse), so the newest lines are the ones in view.
        return {"text/plain": f"{head}\n{body}",
                "text/html": wrap(f'<div class="card"><b{colour}>{esc(head)}</b></div>'
                                  '<div class="live" style="display:flex;flex-direction:column-reverse;'
                                  'overflow:auto;max-height:32em">'
                                  f'<pre style="max-height:none;overflow:visible">{esc(body)}</pre></div>')}

    def draw(self) -> None:
        from IPython.display import display

        self.last_draw = self.clock()
        if self.handle is None:
            self.handle = display(self.bundle(), raw=True, display_id=True)
        else:
            self.handle.update(self.bundle(), raw=True)

    def finish(self) -> None:
        """The run ended with a result: empty the live display (the result is rendered on its own)."""
        with self.lock:
            self._stop()
            if self.handle is not None:
                self.handle.update({"text/plain": ""}, raw=True)

    def interrupted(self, line: str, result) -> None:
        """The run was interrupted: leave one display with the output so far and the one line."""
        with self.lock:
            self._stop()
            self._interrupted(line, result)

    def _interrupted(self, line: str, result) -> None:
        if not self.kernel:
            if self.streaming:
                self._write_through()
            else:
                _write_all(result)
            sys.stderr.write(line + "\n")
            sys.stderr.flush()
            return
        from IPython.display import display

        if not self.total:  # nothing arrived through the callback (e.g. interrupted before the start)
            for stream in ("stdout", "stderr"):
                text = getattr(result, stream, "")
                if text:
                    self(stream, text)
        bundle = self.bundle(footer=line)
        if self.handle is None:
            display(bundle, raw=True)
        else:
            self.handle.update(bundle, raw=True)


def _mark_stderr(text: str) -> str:
    return text  # stderr is shown inline, in arrival order; the final result separates the streams


def _write_all(result) -> None:
    if result.stdout:
        sys.stdout.write(result.stdout)
        sys.stdout.flush()
    if result.stderr:
        sys.stderr.write(result.stderr)
        sys.stderr.flush()
