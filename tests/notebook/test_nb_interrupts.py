"""Ctrl-C pressed twice in a real kernel: the second interrupt, arriving while the first one's clean-up
runs, neither prints a KeyboardInterrupt traceback nor loses the output so far, and leaves no container or
process behind; the kernel answers the next cell. Both backends; twice, and five times in half a second."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from ipyskills.sandbox.interrupts import ESCAPE_AFTER, InterruptShield, shield_repeated_interrupts

pytestmark = pytest.mark.slow

TICKS = "import sys, time\nfor i in range(int(sys.argv[1])):\n    print(f'tick {i}', flush=True); time.sleep(0.1)\n"


def _docker_ready() -> None:
    from ipyskills.sandbox.docker.backend import DockerBackend

    ready, reason = DockerBackend().readiness()
    if not ready:
        if os.environ.get("IPYSKILLS_REQUIRE_DOCKER") == "1":
            pytest.fail(f"Docker is required here but not ready: {reason}")
        pytest.skip(f"Docker not ready: {reason}")


@pytest.fixture
def kernel(tmp_path):
    """A real ipykernel in a scratch folder holding ./skills/flow; shut down afterwards, whatever happens."""
    from jupyter_client.manager import start_new_kernel

    skill = tmp_path / "skills" / "flow"
    (skill / "scripts").mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: flow\ndescription: Counts slowly. Use to try interrupts.\n---\n")
    (skill / "scripts" / "ticks.py").write_text(TICKS)
    env = {k: v for k, v in os.environ.items() if not k.startswith("IPYSKILLS_")}
    env.update(HOME=str(tmp_path), IPYTHONDIR=str(tmp_path / "ipython"))
    km, kc = start_new_kernel(kernel_name="python3", cwd=str(tmp_path), env=env, startup_timeout=120)
    try:
        yield km, kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def _execute(kc, code: str, timeout: float = 90, on_message=None) -> list[dict]:
    """Run `code`; the iopub messages of that request until the kernel is idle again."""
    msg_id = kc.execute(code)
    messages, deadline = [], time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        assert left > 0, f"no idle within {timeout} s: {messages[-3:]}"
        msg = kc.get_iopub_msg(timeout=left)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        messages.append(msg)
        if on_message:
            on_message(msg)
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return messages


def _text(messages: list[dict]) -> str:
    parts = []
    for msg in messages:
        content = msg["content"]
        if msg["msg_type"] == "stream":
            parts.append(content["text"])
        elif msg["msg_type"] == "error":
            parts.append("ERROR " + content["ename"] + "\n" + "\n".join(content["traceback"]))
        elif "data" in content:
            parts.append(content["data"].get("text/plain", ""))
    return "\n".join(parts)


@pytest.mark.parametrize("gaps", [[0.05], [0.02, 0.05, 0.1, 0.2, 0.4]], ids=["twice", "five-times"])
@pytest.mark.parametrize("backend", [pytest.param("docker", marks=pytest.mark.docker), "local"])
def test_a_second_interrupt_during_the_clean_up_changes_nothing(kernel, backend, gaps):
    if backend == "docker":
        _docker_ready()
    km, kc = kernel
    setup = _text(_execute(kc, "%load_ext ipyskills\n%config IPySkills.pool_size = 0\nimport os\nprint(os.getpid())"))
    pid = int(setup.split()[-1])
    sent = []

    def interrupt_twice(msg):
        data = msg["content"].get("data", {})
        if not sent and "tick 5" in data.get("text/plain", ""):  # the live display: the script is running
            km.interrupt_kernel()
            for gap in gaps:  # more while the first one's clean-up runs, as an impatient user does
                time.sleep(gap)
                km.interrupt_kernel()
            sent.append(time.monotonic())

    messages = _execute(kc, f"%skill_run --backend {backend} --timeout 60 -o r flow scripts/ticks.py 1000",
                        on_message=interrupt_twice)
    assert sent, "the live output never showed tick 5"
    text = _text(messages)
    assert not [m for m in messages if m["msg_type"] == "error"], text
    assert "Traceback" not in text and "KeyboardInterrupt" not in text, text
    assert "before the script started" not in text, text
    last = [m for m in messages if m["msg_type"] in ("display_data", "update_display_data")][-1]
    final = last["content"]["data"]["text/plain"]
    assert "interrupted after" in final and final.rstrip().splitlines()[0].endswith("s; sandbox removed"), final
    assert "tick 0\ntick 1\n" in final and "tick 5" in final, final

    answer = _text(_execute(kc, "print('alive', r.interrupted, r.stdout.splitlines()[0])"))
    assert answer.strip() == "alive True tick 0", answer
    if backend == "docker":
        left = subprocess.run(["docker", "ps", "-aq", "--filter", f"label=ipyskills.pid={pid}"], check=False,
                              capture_output=True, text=True, timeout=30)
        assert left.returncode == 0 and left.stdout.split() == [], left
    else:  # no script process of this kernel is left
        children = subprocess.run(["pgrep", "-f", "ticks.py 1000"], check=False, capture_output=True, text=True)
        assert not [p for p in children.stdout.split() if _descends_from(int(p), pid)], children.stdout


def _descends_from(child: int, ancestor: int) -> bool:
    while child > 1:
        if child == ancestor:
            return True
        try:
            with open(f"/proc/{child}/stat") as fh:
                child = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return False
    return False


def test_the_shield_lets_the_first_interrupt_through_and_one_after_the_escape_time():
    now = [0.0]
    raised = []

    def previous(signum, frame):
        raised.append(now[0])
        raise KeyboardInterrupt

    shield = InterruptShield(previous, clock=lambda: now[0])
    with pytest.raises(KeyboardInterrupt):
        shield(2, None)
    now[0] = 1.0
    assert shield(2, None) is None and shield(2, None) is None  # swallowed during the clean-up
    assert shield.ignored == 2 and not shield.escaped
    now[0] = ESCAPE_AFTER + 0.1  # a clean-up that hangs: the user can still get out
    with pytest.raises(KeyboardInterrupt):
        shield(2, None)
    assert shield.escaped and raised == [0.0, ESCAPE_AFTER + 0.1]


def test_the_shield_restores_the_handler_and_stays_out_of_other_threads():
    import signal
    import threading

    before = signal.getsignal(signal.SIGINT)
    with shield_repeated_interrupts() as shield:
        assert isinstance(signal.getsignal(signal.SIGINT), InterruptShield) and shield is not None
    assert signal.getsignal(signal.SIGINT) is before
    seen = []

    def in_a_thread():
        with shield_repeated_interrupts() as inner:  # signal handlers belong to the main thread
            seen.append((inner, signal.getsignal(signal.SIGINT)))

    thread = threading.Thread(target=in_a_thread)
    thread.start()
    thread.join()
    assert seen == [(None, before)]
