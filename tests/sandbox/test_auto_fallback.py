"""`backend="auto"` with no Docker engine: the run falls back to the local backend and says so, on every
surface: the ExecuteResult, `python -m ipyskills run`, a real notebook kernel and the agent tool text.

"No engine" is DOCKER_HOST naming a socket that does not exist or a loopback port nothing listens on, so
these tests run (and mean the same) whether or not this machine has an engine."""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from ipyskills.agent.loop import ANSWERED, ScriptedClient, run_agent
from ipyskills.agent.tools import AgentView
from ipyskills.core.registry import SkillRegistry
from ipyskills.settings import Settings

REPO = Path(__file__).resolve().parents[2]
NO_SOCKET = "unix:///nonexistent/ipyskills-test/docker.sock"
NOTICE_START = "backend auto: Docker not used ("
NOTICE_END = "; ran on the local backend instead"
SKILL_MD = """---
name: fallback-demo
description: Prints a greeting. Use when testing where a script ran.
---
Run `scripts/hello.py NAME`.
"""
HELLO = "import sys\nprint('hello', *sys.argv[1:])\n"


def closed_port() -> str:
    """tcp://127.0.0.1:PORT where nothing listens (bound, then released: the port is refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"tcp://127.0.0.1:{port}"


def assert_fallback_notice(notice: str, host: str) -> None:
    """The notice says auto did not use Docker, why (naming the endpoint it tried), and where it ran."""
    assert notice.startswith(NOTICE_START), notice
    assert notice.rstrip().endswith(NOTICE_END), notice
    assert host.split("://", 1)[1] in notice, notice
    # Said once and in plain words, not as requests' nested exception text.
    assert notice.count("no Docker engine answers") == 1, notice
    reason = "no socket at that path" if host.startswith("unix://") else "connection refused"
    assert f"({reason})" in notice and "Error while fetching" not in notice, notice


@pytest.fixture
def skills_root(tmp_path: Path) -> Path:
    root = tmp_path / "skills"
    (root / "fallback-demo" / "scripts").mkdir(parents=True)
    (root / "fallback-demo" / "SKILL.md").write_text(SKILL_MD)
    (root / "fallback-demo" / "scripts" / "hello.py").write_text(HELLO)
    return root


@pytest.fixture(params=["socket", "port"])
def no_engine(request, monkeypatch) -> str:
    """DOCKER_HOST names an engine that is not there (for this process and every process it starts)."""
    host = NO_SOCKET if request.param == "socket" else closed_port()
    for key in [k for k in os.environ if k.startswith(("IPYSKILLS_", "DOCKER_"))]:
        monkeypatch.delenv(key)  # no TLS settings or context pointing elsewhere
    monkeypatch.setenv("DOCKER_HOST", host)
    return host


def auto_registry(root: Path) -> SkillRegistry:
    return SkillRegistry([root], settings=Settings(default_roots=False, bundled_skills=False, backend="auto",
                                                   pool_size=0, timeout=30.0))


def test_the_result_carries_the_notice_and_the_local_run(no_engine, skills_root):
    result = auto_registry(skills_root).run("fallback-demo", "scripts/hello.py", args=["Ada"])
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "hello Ada\n"
    assert result.backend == "local" and not result.isolation.startswith("docker")
    assert_fallback_notice(result.notice, no_engine)
    assert result.to_dict()["notice"] == result.notice  # what --json and the notebook's -o VAR hold


def test_an_explicit_docker_backend_is_an_error_not_a_fallback(no_engine, skills_root):
    from ipyskills.errors import SandboxError

    with pytest.raises(SandboxError, match="no Docker engine answers"):
        auto_registry(skills_root).run("fallback-demo", "scripts/hello.py", backend="docker")


def _cli(root: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, HOME=str(cwd / "home"), IPYSKILLS_BUNDLED_SKILLS="0", PYTHONIOENCODING="utf-8")
    (cwd / "home").mkdir(exist_ok=True)
    return subprocess.run([sys.executable, "-m", "ipyskills", "run", "--dir", str(root), "--backend", "auto",
                           *args], env=env, cwd=cwd, input="", capture_output=True, text=True, timeout=120,
                          check=False)


def test_cli_prints_the_notice_and_runs_locally(no_engine, skills_root, tmp_path):
    proc = _cli(skills_root, "fallback-demo", "scripts/hello.py", "Grace", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "hello Grace\n"
    notices = [line for line in proc.stderr.splitlines() if line.startswith(f"ipyskills: {NOTICE_START}")]
    assert len(notices) == 1, proc.stderr
    assert_fallback_notice(notices[0].removeprefix("ipyskills: "), no_engine)

    proc = _cli(skills_root, "--json", "fallback-demo", "scripts/hello.py", "Grace", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["backend"] == "local" and data["stdout"] == "hello Grace\n"
    assert_fallback_notice(data["notice"], no_engine)


def test_agent_tool_text_tells_the_model(no_engine, skills_root):
    reg = auto_registry(skills_root)
    call = {"skill_name": "fallback-demo", "script_path": "scripts/hello.py", "args": ["Lin"]}
    result = AgentView(reg).dispatch("execute_skill_script", call)
    assert not result.is_error, result.text
    assert "hello Lin" in result.text
    (line,) = [ln for ln in result.text.splitlines() if ln.startswith("Notice: ")]
    assert_fallback_notice(line.removeprefix("Notice: "), no_engine)

    # Through the tool loop: the text sent back to the model holds the same notice.
    client = ScriptedClient([[("execute_skill_script", call)], "Done."])
    transcript = run_agent(client, reg, "Greet Lin", model="scripted")
    assert transcript.stop_reason == ANSWERED
    (tool_call,) = transcript.tool_calls
    assert line in tool_call.result.text
    sent = [m["content"] for m in client.requests[-1]["messages"] if m.get("role") == "tool"]
    assert len(sent) == 1 and line in sent[0]


def _run_notebooks():
    spec = importlib.util.spec_from_file_location("run_notebooks", REPO / "scripts" / "run_notebooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
@pytest.mark.timeout(300)  # a kernel's start and shutdown on a loaded machine
def test_notebook_kernel_shows_the_notice(skills_root, tmp_path, monkeypatch):
    import nbformat

    host = NO_SOCKET
    for key in [k for k in os.environ if k.startswith(("IPYSKILLS_", "DOCKER_"))]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("DOCKER_HOST", host)  # the kernel inherits this environment
    monkeypatch.setenv("IPYSKILLS_BUNDLED_SKILLS", "0")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    (tmp_path / "home").mkdir()
    cells = [
        "%load_ext ipyskills",
        f"%skills add {skills_root}",
        "%skill_run --backend auto -o r fallback-demo scripts/hello.py Ada",
        "print(r.backend, r.exit_code, repr(r.stdout))\nprint(r.notice)",
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    path = tmp_path / "fallback.ipynb"
    nbformat.write(nb, path)

    executed, error = _run_notebooks().execute(path, cwd=tmp_path, timeout=120)

    assert error is None, error
    shown = executed.cells[2].outputs
    # the result (a live display, emptied when the run ends, may stand before it)
    (display,) = [o for o in shown if o.output_type in ("display_data", "execute_result")
                  and o.data.get("text/plain")]
    plain = display.data["text/plain"]
    (line,) = [ln for ln in plain.splitlines() if ln.startswith("notice: ")]
    assert_fallback_notice(line.removeprefix("notice: "), host)
    assert "backend auto: Docker not used" in display.data["text/html"]
    printed = "".join(o.get("text", "") for o in executed.cells[3].outputs if o.output_type == "stream")
    first, notice = printed.splitlines()[:2]
    assert first == "local 0 'hello Ada\\n'"
    assert_fallback_notice(notice, host)


def test_the_notice_is_only_for_a_fallback(skills_root):
    """Asked for local, nothing fell back: no notice (so the tests above see the fallback's own text)."""
    result = auto_registry(skills_root).run("fallback-demo", "scripts/hello.py", backend="local")
    assert result.exit_code == 0 and result.backend == "local" and result.notice == ""

