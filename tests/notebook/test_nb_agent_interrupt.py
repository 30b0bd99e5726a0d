"""Ctrl-C during a model call of `%%skill_agent`, in a real kernel with the real openai SDK: one line, no
traceback, the transcript so far kept in -o and marked interrupted, and the kernel answers the next cell.

The model is tests/agent/fake_api.py (not a model): it asks for one tool call, then takes its time over
the second turn, as a slow local model does, until the test ends.
"""

from __future__ import annotations

import os
import threading
import time

import pytest

from tests.agent.fake_api import FakeAPI, openai_client, openai_completion

from .test_nb_interrupts import _execute, _text

pytestmark = pytest.mark.slow

HELLO = "---\nname: hello\ndescription: Greets people. Use when someone says hi.\n---\n# Hello\n\nSay hi back.\n"


@pytest.fixture
def slow_model():
    release = threading.Event()

    def respond(path, body):
        if not any(m["role"] == "tool" for m in body["messages"]):
            return 200, openai_completion(None, [("read_skill", {"skill_name": "hello"})], prompt_tokens=300)
        release.wait(120)  # the second turn "generates" until the test is over
        return 200, openai_completion("too late")

    with FakeAPI(respond) as api:
        yield api
        release.set()


@pytest.fixture
def kernel(tmp_path):
    from jupyter_client.manager import start_new_kernel

    (tmp_path / "skills" / "hello").mkdir(parents=True)
    (tmp_path / "skills" / "hello" / "SKILL.md").write_text(HELLO)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("IPYSKILLS_", "OPENAI_"))}
    env.update(HOME=str(tmp_path), IPYTHONDIR=str(tmp_path / "ipython"))
    km, kc = start_new_kernel(kernel_name="python3", cwd=str(tmp_path), env=env, startup_timeout=120)
    try:
        yield km, kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def test_interrupting_a_model_call_is_one_line_and_keeps_the_transcript(kernel, slow_model):
    km, kc = kernel
    setup = _text(_execute(kc, "%load_ext ipyskills\n%config IPySkills.bundled_skills = False\n"
                               "from openai import OpenAI\n"
                               f"client = OpenAI(api_key='sk-test', base_url='{slow_model.url}/v1', max_retries=0)\n"
                               "print('ready')"))
    assert "ready" in setup, setup
    sent = []

    def interrupt_in_turn_two():
        deadline = time.monotonic() + 60
        while len(slow_model.requests) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        if len(slow_model.requests) >= 2:  # the second model call is under way
            time.sleep(0.3)
            km.interrupt_kernel()
            sent.append(time.monotonic())

    watcher = threading.Thread(target=interrupt_in_turn_two, daemon=True)
    watcher.start()
    messages = _execute(kc, "%%skill_agent --client client --model slow -o t\nsay hi", timeout=90)
    watcher.join(timeout=5)
    assert sent, "the second model call never started"
    text = _text(messages)
    assert not [m for m in messages if m["msg_type"] == "error"], text
    assert "Traceback" not in text and "KeyboardInterrupt" not in text, text
    stderr = "".join(m["content"]["text"] for m in messages if m["msg_type"] == "stream"
                     and m["content"]["name"] == "stderr")
    assert stderr.strip().count("\n") == 0, stderr  # one line
    assert stderr.startswith("interrupted after ") and "during the model call of turn 2" in stderr, stderr
    assert "kept 1 turn(s) and 1 tool call(s); the transcript so far is in t" in stderr, stderr
    shown = [m for m in messages if m["msg_type"] in ("display_data", "update_display_data")][-1]
    assert "stopped: interrupted" in shown["content"]["data"]["text/plain"]

    answer = _text(_execute(kc, "print('alive', t.stop_reason, t.interrupted, t.turns, t.tool_calls[0].name, "
                                "t.running)"))
    assert answer.strip() == "alive interrupted True 1 read_skill False", answer
    assert len(slow_model.requests) == 2  # nothing was sent after the interrupt


def test_the_fake_model_answers_the_sdk(slow_model):
    """The stand-in's first turn is a tool call the SDK parses (so the test above starts from a real turn)."""
    reply = openai_client(slow_model).chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    assert reply.choices[0].message.tool_calls[0].function.name == "read_skill"
