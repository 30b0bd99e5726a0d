"""Live output of a running script in the notebook: one display, updated in place, showing the head and
the tail of what the script printed so far (stderr lines marked). It appears only once a run has lasted
LIVE_AFTER seconds, so quick runs show just their final result; when the run ends the live display is
emptied and the final result is rendered as usual (so the output is stored once in the notebook).

Outside a kernel (terminal IPython) nothing can be updated in place: the text is written through to
stdout/stderr as it arrives instead, as `!cmd` does."""

from __future__ import annotations

import sys
import time

from .display import esc, wrap

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

    def __call__(self, stream: str, text: str) -> None:
        marked = text if stream == "stdout" else _mark_stderr(text)
        if len(self.head) < LIVE_HEAD:
            room = LIVE_HEAD - len(self.head)
            self.head += marked[:room]
        self.tail = (self.tail + marked)[-LIVE_TAIL:]
        self.total += len(marked)
        now = self.clock()
        if not self.kernel:
            self.pending.append((stream, text))
            if self.streaming or now - self.started >= LIVE_AFTER:
                self.streaming = True
                self._write_through()
            return
        if now - self.started < LIVE_AFTER:
            return
        if self.handle is None or now - self.last_draw >= REFRESH_EVERY:
            self.draw()

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
        if self.handle is not None:
            self.handle.update({"text/plain": ""}, raw=True)

    def interrupted(self, line: str, result) -> None:
        """The run was interrupted: leave one display with the output so far and the one line."""
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
