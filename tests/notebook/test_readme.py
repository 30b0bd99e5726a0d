"""Every code example in README.md is executed here, so the README cannot drift from the code.

The blocks are read out of README.md itself: every ```python block runs, in README order, as one cell each
of a notebook in a real kernel; every ```bash block runs with bash -e; the command-line synopsis is checked
against each command's --help. A block that is none of these must be listed in NOT_RUN with the reason, and
an entry there that no longer matches a block fails too: a new example cannot go untested unnoticed.

The scratch folder the examples run in stands for the checkout the README is read in (./skills and
./examples/skills/chart-maker copied from the repository) plus what the examples name as the reader's own:
./my-skills, visitors.csv, an inputs folder for the agent. The model
of the prompt-lab examples is a local server speaking the OpenAI wire format (tests/agent/fake_api.py),
found by the real `openai` SDK through OPENAI_BASE_URL: not a model, a fixed responder.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.agent.fake_api import FakeAPI, last_user_text, openai_completion

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
VENV_BIN = Path(sys.executable).parent

# Blocks not executed here, by their first line, and why. Keep this short and every reason true.
NOT_RUN = {
    "docker context create sandbox-engine \\":
        "needs a remote engine and its certificates; tests/sandbox/test_remote_engine_tls.py runs this very "
        "block against a private TLS engine, with its address and certificate paths put in",
    "bash scripts/demo.sh     # set up everything and run the demo (executes the example notebooks)":
        "installs system packages and Docker as root; its notebooks run in tests/notebook/test_examples.py, "
        "and its second line, scripts/test.sh, is what CI runs",
    "bash scripts/local_model.sh serve    # prepare what is missing, then serve http://127.0.0.1:8080/v1 (Ctrl-C stops it)":
        "builds llama-cpp-python once (about 8 minutes) and then serves until stopped; "
        "tests/notebook/test_nb_local_model.py runs the same script (prepare) and the same server and magics "
        "in a real kernel",
    "{": "the mcpServers JSON of the MCP section; tests/mcp/test_readme_mcp.py checks it against "
         "`ipyskills mcp --config` and starts the server it names with the SDK's client",
    "-> initialize": "the MCP transcript; tests/mcp/test_readme_mcp.py makes the same session again "
                     "(scripts/mcp_transcript.py) and compares",
    "bash scripts/test.sh                         # everything, as CI runs it":
        "is the test suite itself (CI runs it); the other lines start the tests again and run the "
        "benchmarks, which are not tests (the published file tasks run in tests/published/test_real_tasks.py)",
}


@dataclass
class Block:
    lang: str
    text: str
    line: int  # of the opening fence

    @property
    def first(self) -> str:
        return self.text.splitlines()[0].strip() if self.text.strip() else ""


def readme_blocks() -> list[Block]:
    blocks, lines = [], README.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        match = re.match(r"^```(\w*)\s*$", lines[i])
        if match:
            end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
            blocks.append(Block(match.group(1), "\n".join(lines[i + 1:end]) + "\n", i + 1))
            i = end
        i += 1
    return blocks


BLOCKS = readme_blocks()
PYTHON = [b for b in BLOCKS if b.lang == "python"]
BASH = [b for b in BLOCKS if b.lang == "bash" and b.first not in NOT_RUN]
SYNOPSIS = [b for b in BLOCKS if b.lang == "" and b.first.startswith("ipyskills ")]


def test_every_block_is_run_or_says_why_not():
    covered = PYTHON + BASH + SYNOPSIS
    left = [f"README.md:{b.line} ```{b.lang} {b.first!r}" for b in BLOCKS if b not in covered
            and b.first not in NOT_RUN]
    assert not left, "README examples no test runs (run them here, or say why in NOT_RUN):\n" + "\n".join(left)
    stale = [first for first in NOT_RUN if first not in {b.first for b in BLOCKS}]
    assert not stale, f"NOT_RUN names blocks the README no longer has: {stale}"
    assert len(PYTHON) >= 8 and SYNOPSIS, "the README's examples were not found; is the parser still right?"


# ------------------------------------------------------------------------------------------ workspace


def _fake_model(path: str, body: dict):
    """The stand-in model: the README's conversation (load, run, answer) and its trigger eval."""
    question = last_user_text(body)
    results = [m for m in body.get("messages", []) if m.get("role") == "tool"]
    if "mean and median" in question:
        if not results:
            return 200, openai_completion(None, [("read_skill", {"skill_name": "data-processor"})])
        if len(results) == 1:
            return 200, openai_completion(None, [("execute_skill_script", {
                "skill_name": "data-processor", "script_path": "scripts/analyze.py",
                "input": '{"items": [12, 15, 9, 22, 17]}'})])
        return 200, openai_completion("README-ANSWER: the mean is 15.0 and the median 15.")
    if any(word in question.lower() for word in ("tl;dr", "summar")):
        return 200, openai_completion(None, [("read_skill", {"skill_name": "summary-generator"})])
    return 200, openai_completion("I can answer that directly.")


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    """The reader's folder: what the examples name, an empty HOME, no IPYSKILLS_* settings."""
    for key in list(os.environ):
        if key.startswith(("IPYSKILLS_", "OPENAI_")):
            monkeypatch.delenv(key)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    # Every line's value is shown (not only the last one's), so each line of a block can be checked.
    profile = tmp_path / "ipython" / "profile_default"
    profile.mkdir(parents=True)
    (profile / "ipython_kernel_config.py").write_text('c.InteractiveShell.ast_node_interactivity = "all"\n')
    monkeypatch.setenv("PATH", f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    work = tmp_path / "work"
    team = work / "my-skills" / "team-notes"
    team.mkdir(parents=True)
    (team / "SKILL.md").write_text("---\nname: team-notes\ndescription: Our meeting-note conventions. Use when "
                                   "writing up a team meeting.\n---\nUse the template.\n")
    # The README is read in a checkout: ./skills and ./examples/skills are the repository's.
    shutil.copytree(REPO / "skills", work / "skills", ignore=shutil.ignore_patterns("__pycache__", "output"))
    shutil.copytree(REPO / "examples" / "skills" / "chart-maker", work / "examples" / "skills" / "chart-maker",
                    ignore=shutil.ignore_patterns("__pycache__", "output"))
    (work / "visitors.csv").write_text("city,visitors\nOslo,1200\nBergen,640\nTromso,410\n")
    (work / "agent-inputs").mkdir()
    (work / "agent-inputs" / "measurements.json").write_text('{"items": [12, 15, 9, 22, 17]}')
    return work


def _docker_ready() -> bool:
    from ipyskills.sandbox.docker.backend import DockerBackend

    ready, reason = DockerBackend().readiness()
    if not ready and os.environ.get("IPYSKILLS_REQUIRE_DOCKER") == "1":
        pytest.fail(f"Docker is required here but not ready: {reason}")
    return ready


# ------------------------------------------------------------------------------------- python blocks


def _cell_text(cell) -> str:
    parts = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            parts.append(out.get("text", ""))
        elif out.get("output_type") == "error":
            parts.append(f"{out['ename']}: {out['evalue']}")
        else:
            parts.append(out.get("data", {}).get("text/plain", ""))
    return "\n".join(parts)


@pytest.mark.slow
@pytest.mark.timeout(900)  # every Python example in one kernel, each cell allowed 240 s
def test_python_examples_run_in_a_kernel(workspace, monkeypatch):
    import nbformat

    from tests.notebook.test_examples import runner

    _docker_ready()
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(block.text.rstrip("\n")) for block in PYTHON]
    path = workspace / "readme.ipynb"
    nbformat.write(nb, path)
    with FakeAPI(_fake_model) as api:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-readme-test")
        monkeypatch.setenv("OPENAI_BASE_URL", api.url + "/v1")
        done, error = runner.execute(path, cwd=workspace, timeout=240)
    ran = [c for c in done.cells if c.get("execution_count") is not None]
    where = f"README.md:{PYTHON[len(ran) - 1].line}" if ran else "the first block"
    assert error is None, f"the example at {where} failed: {error}\n{_cell_text(ran[-1]) if ran else ''}"
    out = {block.line: _cell_text(cell) for block, cell in zip(PYTHON, done.cells)}
    html = {block.line: "\n".join(o.get("data", {}).get("text/html", "") for o in cell.get("outputs", []))
            for block, cell in zip(PYTHON, done.cells)}
    for block in PYTHON:  # no error shown as text either (a magic's one-line error, a traceback)
        assert not re.search(r"Traceback|^\w*(Error|Exception)\b", out[block.line], re.MULTILINE), \
            f"README.md:{block.line}:\n{out[block.line]}"

    def text_of(start: str) -> str:
        found = [b for b in PYTHON if b.text.lstrip().startswith(start)]
        assert len(found) == 1, start
        return out[found[0].line]

    # What each example promises, seen in its output or on disk.
    first = text_of("%load_ext ipyskills")
    for seen in ("data-processor", "team-notes", "<available_skills>", '<skill_content name="data-processor">',
                 '<skill_resource skill="data-processor" path="references/output-formats.md">', "SkillBrowser"):
        assert seen in first, seen
    assert "exit=0" in text_of("%%skill_run -o result data-processor")
    chart = next(b for b in PYTHON if b.text.startswith("%skills add ./examples/skills/chart-maker"))
    assert "exit=0" in out[chart.line] and "results/chart.png" in out[chart.line]
    assert "<img" in html[chart.line], "the chart is shown inline"
    assert (workspace / "results" / "chart.png").read_bytes()[:4] in (b"\x89PNG", b"<?xm", b"<svg")
    assert (workspace / "skills" / "my-skill" / "SKILL.md").is_file()
    assert "Valid skill" in text_of("%%skill my-skill")
    conversation = text_of("%%skill_agent")
    assert "README-ANSWER: the mean is 15.0" in conversation and "data-processor" in conversation
    assert "summary-generator" in text_of("queries = [")
    python_api = text_of("from ipyskills import SkillRegistry")
    assert (workspace / "copy.png").is_file() and "results/chart" in python_api
    assert '"mcpServers"' in text_of("%skills mcp") and "-m ipyskills mcp --dir" in text_of("%skills mcp")
    agent_inputs = text_of("view = reg.for_agent(inputs_dir=")
    assert 'Inputs in the working folder: ["measurements.json"]' in agent_inputs
    assert '"mean": 15.0' in agent_inputs and "exit_code=\"0\"" in agent_inputs
    assert len([r for r in api.requests if "mean and median" in last_user_text(r["body"])]) == 3
    # What the README says every call carries: an output cap, and tool_choice "auto" with the tools.
    conversation_calls = [r["body"] for r in api.requests if "mean and median" in last_user_text(r["body"])]
    assert all(b["max_tokens"] == 4096 and b["tool_choice"] == "auto" for b in conversation_calls)
    eval_calls = [r["body"] for r in api.requests if "TL;DR" in last_user_text(r["body"])]
    assert eval_calls and all(b["max_tokens"] == 1024 and b["tool_choice"] == "auto" for b in eval_calls)


# --------------------------------------------------------------------------------------- bash blocks


@pytest.mark.slow
@pytest.mark.timeout(1200)  # provisioning and an sdist built in a container, each block allowed 600 s
def test_shell_examples_run(workspace):
    if not BASH:
        pytest.skip("the README has no shell examples to run")
    _docker_ready()
    for block in BASH:
        proc = subprocess.run(["bash", "-e", "-c", block.text], cwd=workspace, capture_output=True, text=True,
                              timeout=600, check=False)
        assert proc.returncode == 0, (f"README.md:{block.line} exited {proc.returncode}\n--- stdout\n"
                                      f"{proc.stdout[-3000:]}\n--- stderr\n{proc.stderr[-3000:]}")


# ---------------------------------------------------------------------------------------- synopsis


def test_command_line_synopsis_matches_help():
    entries: list[tuple[list[str], str]] = []
    for line in SYNOPSIS[0].text.splitlines():
        if line.startswith("ipyskills "):
            usage = line.split("  ", 1)[0]  # the description column starts after two spaces
            words = usage.split()[1:]
            command = [words[0]] + ([words[1]] if words[0] == "sandbox" else [])
            entries.append((command, usage))
        elif entries and line.startswith(" ") and line.strip().startswith("["):
            entries[-1] = (entries[-1][0], entries[-1][1] + " " + line.strip())
    assert {e[0][0] for e in entries} >= {"validate", "list", "prompt", "load", "run", "deps", "guard", "sandbox"}
    for command, usage in entries:
        if command[0] == "sandbox":  # one line for its three subcommands
            helps = "".join(_help(["sandbox", sub]) for sub in ("build", "status", "cleanup"))
        else:
            helps = _help(command)
        for option in re.findall(r"--[a-z][a-z-]*", usage):
            assert option in helps, f"README synopsis {usage!r}: {option} is not in `ipyskills {command[0]} --help`"


def _help(command: list[str]) -> str:
    proc = subprocess.run([str(VENV_BIN / "ipyskills"), *command, "--help"], capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 0, (command, proc.stderr)
    return proc.stdout
