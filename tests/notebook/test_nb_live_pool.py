"""Live output streams on every path: in a real kernel, the same `%%skill_run` cell run twice (a fresh
container, then one from the warm pool) shows its first line long before the script ends both times.

A warm container prints its first line within LIVE_AFTER of the start, before the live display may
appear; that line must still be shown once it is due, not only when the script prints again (here: at
its end). The fast tests below check the same thing on LiveOutput alone, with a fake display."""

from __future__ import annotations

import os
import time

import pytest

from ipyskills.notebook import live as live_mod

SLEEP = 4.0  # seconds between the script's two lines
STREAM = f"import time\nprint('early', flush=True)\ntime.sleep({SLEEP})\nprint('late', flush=True)\n"


def _docker_ready() -> None:
    from ipyskills.sandbox.docker.backend import DockerBackend

    ready, reason = DockerBackend().readiness()
    if not ready:
        if os.environ.get("IPYSKILLS_REQUIRE_DOCKER") == "1":
            pytest.fail(f"Docker is required here but not ready: {reason}")
        pytest.skip(f"Docker not ready: {reason}")


@pytest.fixture
def kernel(tmp_path):
    """A real ipykernel in a scratch folder holding ./skills/flow; default settings (the warm pool is on)."""
    from jupyter_client.manager import start_new_kernel

    skill = tmp_path / "skills" / "flow"
    (skill / "scripts").mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: flow\ndescription: Prints, waits, prints. Use to try live "
                                    "output.\n---\n")
    (skill / "scripts" / "stream.py").write_text(STREAM)
    env = {k: v for k, v in os.environ.items() if not k.startswith("IPYSKILLS_")}
    env.update(HOME=str(tmp_path), IPYTHONDIR=str(tmp_path / "ipython"))
    km, kc = start_new_kernel(kernel_name="python3", cwd=str(tmp_path), env=env, startup_timeout=120)
    try:
        yield kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=False)  # a polite shutdown: the kernel drains its warm pool at exit


def _execute(kc, code: str, timeout: float = 120) -> list[tuple[float, dict]]:
    """Run `code`; (seconds since it was sent, message) for its iopub messages until the kernel is idle."""
    msg_id = kc.execute(code)
    start = time.monotonic()
    messages = []
    while True:
        left = start + timeout - time.monotonic()
        assert left > 0, f"no idle within {timeout} s: {messages[-3:]}"
        msg = kc.get_iopub_msg(timeout=left)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        messages.append((time.monotonic() - start, msg))
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return messages


def _text(msg: dict) -> str:
    content = msg["content"]
    if msg["msg_type"] == "stream":
        return content["text"]
    if msg["msg_type"] == "error":
        return "ERROR " + content["ename"] + ": " + content["evalue"]
    return content.get("data", {}).get("text/plain", "")


@pytest.mark.docker
@pytest.mark.slow
def test_a_pooled_container_streams_like_a_fresh_one(kernel):
    _docker_ready()
    setup = _execute(kernel, "%load_ext ipyskills\nprint('pool_size', get_ipython().config.IPySkills.get("
                             "'pool_size', 'default'))")
    assert "pool_size default" in "".join(_text(m) for _, m in setup), setup  # the default: a warm pool
    runs = []
    for _ in range(2):
        messages = _execute(kernel, "%%skill_run --backend docker -o r flow scripts/stream.py\n\n")
        displays = ("display_data", "update_display_data")
        shown = [(t, _text(m)) for t, m in messages if m["msg_type"] in displays]
        ended = next((t for t, m in messages if m["msg_type"] == "execute_result"), None)
        assert ended is not None, [_text(m) for _, m in messages]
        first = next((t for t, text in shown if "early" in text), None)
        asked = _execute(kernel, "print(r.ok, r.stdout.split(), r.isolation)")
        isolation = "".join(_text(m) for _, m in asked if m["msg_type"] == "stream")
        assert isolation.startswith("True ['early', 'late']"), isolation
        runs.append((first, ended, isolation, shown))
    (first1, end1, iso1, shown1), (first2, end2, iso2, shown2) = runs
    assert "docker (warm pool):" in iso2, iso2  # the second run really came from the pool
    # The first line is on screen while the script sleeps, not only with the last one at its end.
    assert first1 is not None and end1 - first1 > SLEEP - 1.5, (first1, end1, iso1, shown1)
    assert first2 is not None and end2 - first2 > SLEEP - 1.5, (first2, end2, iso2, shown2)
    assert first2 < live_mod.LIVE_AFTER + 1.0, (first2, shown2)  # warm: once the display may appear


class _FakeDisplay:
    def __init__(self, monkeypatch):
        import IPython.display

        self.shown: list[tuple[float, str]] = []
        monkeypatch.setattr(IPython.display, "display", self.display)

    def display(self, bundle, raw=True, display_id=False):
        self.shown.append((time.monotonic(), bundle["text/plain"]))
        return self

    def update(self, bundle, raw=True):
        self.shown.append((time.monotonic(), bundle["text/plain"]))

    def wait_for(self, text: str, timeout: float = 3.0) -> float | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            hit = next((t for t, shown in self.shown if text in shown), None)
            if hit is not None:
                return hit
            time.sleep(0.01)
        return None


def test_output_before_the_display_may_appear_is_shown_when_it_may(monkeypatch):
    screen = _FakeDisplay(monkeypatch)
    live = live_mod.LiveOutput("flow/scripts/stream.py")
    live.kernel = True
    live("stdout", "early\n")  # within LIVE_AFTER (a warm container's first line), then nothing more
    assert screen.shown == []
    at = screen.wait_for("early")
    assert at is not None and at - live.started >= live_mod.LIVE_AFTER - 0.01, screen.shown
    live.finish()
    assert screen.shown[-1][1] == ""


def test_a_line_between_redraws_is_shown_without_waiting_for_the_next(monkeypatch):
    screen = _FakeDisplay(monkeypatch)
    monkeypatch.setattr(live_mod, "LIVE_AFTER", 0.0)
    live = live_mod.LiveOutput("flow/scripts/stream.py")
    live.kernel = True
    live("stdout", "tick 0\n")  # drawn at once
    live("stdout", "tick 1\n")  # within REFRESH_EVERY of that draw: held back, then drawn by the timer
    assert len(screen.shown) == 1 and "tick 1" not in screen.shown[0][1]
    assert screen.wait_for("tick 1") is not None, screen.shown
    live.finish()


def test_nothing_is_shown_after_the_run_ended(monkeypatch):
    screen = _FakeDisplay(monkeypatch)
    live = live_mod.LiveOutput("flow/scripts/stream.py")
    live.kernel = True
    live("stdout", "quick\n")
    live.finish()  # a quick run: its result is rendered on its own, no live display at all
    time.sleep(live_mod.LIVE_AFTER + 0.3)
    assert screen.shown == []


def test_the_terminal_writes_early_output_through_once_it_is_due(capsys):
    live = live_mod.LiveOutput("flow/scripts/stream.py")  # no kernel: written through to stdout
    live("stdout", "early\n")
    assert capsys.readouterr().out == ""
    time.sleep(live_mod.LIVE_AFTER + 0.3)
    assert capsys.readouterr().out == "early\n"
    live("stdout", "late\n")  # streaming now: at once
    assert capsys.readouterr().out == "late\n"
    live.finish()
