"""%%skill_agent, %skills eval and %skills budget in a real InteractiveShell, with deterministic stand-in
clients (ScriptedClient, MatchingClient: NOT models) and a client that fails like an SDK does."""

from __future__ import annotations

from typing import ClassVar

import pytest

from ipyskills.agent.loop import ClientError, MatchingClient, ScriptedClient


class AuthFailure(Exception):
    """Shaped like an SDK's 401 error (status_code and body), without importing an SDK."""

    status_code = 401
    body: ClassVar[dict] = {"error": {"message": "Incorrect API key provided: sk-bad."}}


class Failing:
    def __init__(self):
        from types import SimpleNamespace

        self.chat = SimpleNamespace(completions=SimpleNamespace(create=self.create))

    def create(self, **kwargs):
        raise AuthFailure("401")


def shown(ip, code: str):
    """(ExecutionResult, the text/plain of everything displayed, last state of each display, and output)."""
    from IPython.utils.capture import capture_output

    from .conftest import strip_ansi

    with capture_output() as cap:
        result = ip.run_cell(code)
    texts = [o.data.get("text/plain", "") for o in cap.outputs]
    return result, strip_ansi("\n".join(texts) + cap.stdout + cap.stderr), cap.outputs


def test_skill_agent_runs_the_loop_and_keeps_the_transcript(ip):
    ip.user_ns["client"] = ScriptedClient([[("read_skill", {"skill_name": "hello"})],
                                           [("read_skill", {"skill_name": "hello", "file_path": "references/guide.md"})],
                                           "Hi there!"])
    result, printed, outputs = shown(ip, "%%skill_agent --client client --model scripted -o t\nSay hi to Ada")
    assert result.success, printed
    assert len(outputs) >= 2  # the first display, then updates in place as the loop went
    t = ip.user_ns["t"]
    assert t.final == "Hi there!" and t.activated == [("hello", 3)]
    assert t.messages[0] == {"role": "user", "content": "Say hi to Ada"}
    assert "skills activated: hello (level 3)" in printed and "final answer: Hi there!" in printed
    assert "references/guide.md" in printed


def test_transcript_html_escapes_and_collapses_the_system_prompt(ip):
    from ipyskills.notebook.lab_display import TranscriptView

    ip.user_ns["client"] = ScriptedClient([[("read_skill", "{bad json")], "<script>alert(1)</script>"])
    ip.run_cell("%%skill_agent --client client --model m -o t\nhello <b>")
    bundle = TranscriptView(ip.user_ns["t"], "hello <b>").mimebundle()
    html = bundle["text/html"]
    assert "<script>alert" not in html and "&lt;script&gt;" in html
    assert "<details><summary>system prompt" in html and "error (bad_arguments)" in html
    assert "hello &lt;b&gt;" in html


def test_config_default_client_and_model(ip, cell):
    ip.user_ns["stand_in"] = MatchingClient(style="anthropic")
    ip.run_line_magic("config", "IPySkills.agent_client = 'stand_in'")
    ip.run_line_magic("config", "IPySkills.agent_model = 'stand-in'")
    result, printed = cell("%%skill_agent -o t\nsomeone says hi, greet people")
    assert result.success, printed
    assert ip.user_ns["t"].activated == [("hello", 2)] and ip.user_ns["t"].model == "stand-in"


def test_client_errors_are_one_line(ip, cell):
    ip.user_ns["bad"] = Failing()
    result, printed = cell("%%skill_agent --client bad --model gpt-x -o t\nhi")
    assert not result.success and isinstance(result.error_in_exec.original, ClientError)
    assert "Traceback" not in printed
    assert "ClientError: openai API: authentication failed (401): Incorrect API key provided: sk-bad; check" in printed
    assert ip.user_ns["t"].error  # the transcript so far is kept


@pytest.mark.parametrize("line, words", [
    ("%%skill_agent --model m\nhi", "no chat client"),
    ("%%skill_agent --client nope --model m\nhi", "no variable named 'nope'"),
    ("%%skill_agent --client c\nhi", "no model"),
    ("%%skill_agent --client c --model m\n  \n\t", "the cell is the user's message"),
    ("%%skill_agent --client c --model m --max-turns 0\nhi", "--max-turns"),
])
def test_skill_agent_usage_errors(ip, cell, line, words):
    ip.user_ns["c"] = MatchingClient()
    result, printed = cell(line)
    assert not result.success and words in printed


def test_skills_eval_and_variants(ip):
    ip.user_ns["c"] = MatchingClient()
    ip.user_ns["Q"] = [("someone says hi, greet people", True), ("convert my data", False)]
    result, printed, _ = shown(ip, "r = %skills eval hello --queries Q --client c --model m --runs 2 "
                                   "--description 'Does things.' -o rep")
    assert result.success, printed
    view = ip.user_ns["r"]
    report = ip.user_ns["rep"]
    assert report is view.report and report.done == 8
    assert [v.label for v in report.ranked()] == ["current", "variant 1"]
    html = view.mimebundle()["text/html"]
    assert "<svg" in html and "Does things." in html and "should trigger" in html
    assert "trigger eval of hello with m: 8/8 runs, 2 with a tool call" in printed


def test_skills_eval_csv_and_errors(ip, cell, workdir):
    (workdir / "q.csv").write_text("query,should_trigger\nsomeone says hi greet people,yes\n")
    ip.user_ns["c"] = MatchingClient()
    result, printed = cell("%skills eval hello --queries q.csv --client c --model m --runs 1")
    assert result.success, printed
    for line, words in [("%skills eval hello --client c --model m", "needs --queries"),
                        ("%skills eval --queries Q", "needs a skill"),
                        ("%skills eval hello --queries nothing --client c --model m", "no such variable"),
                        ("%skills list --runs 3", "--runs applies to %skills eval"),
                        ("%skills eval nope --queries q.csv --client c --model m", "does not exist")]:
        result, printed = cell(line)
        assert not result.success and words in printed, (line, printed)
        assert "Traceback" not in printed


def test_skills_budget(ip, cell):
    result, printed = cell("b = %skills budget hello")
    assert result.success, printed
    report = ip.user_ns["b"].report
    assert report.method.startswith("estimate") and report.skills[0].name == "hello"
    html = ip.user_ns["b"].mimebundle()["text/html"]
    assert "characters / 4" in html and "largest level-3 files" in html
    result, printed = cell("%skills budget")
    assert result.success and "catalog total" in printed


def test_request_options_from_the_line_over_the_config(ip, cell):
    ip.user_ns["c"] = ScriptedClient([[("read_skill", {"skill_name": "hello"})], "Hi"])
    ip.run_line_magic("config", "IPySkills.agent_options = {'temperature': 0, 'max_tokens': 100}")
    result, printed = cell("%%skill_agent --client c --model m --option max_tokens=64 --option tool_choice=read_skill "
                           "--option 'stop=[\"END\"]' -o t\nhi")
    assert result.success, printed
    sent = [{k: r.get(k) for k in ("temperature", "max_tokens", "tool_choice", "stop")} for r in ip.user_ns["c"].requests]
    assert sent == [{"temperature": 0, "max_tokens": 64, "stop": ["END"],
                     "tool_choice": {"type": "function", "function": {"name": "read_skill"}}}] * 2
    assert ip.user_ns["t"].options["max_tokens"] == 64
    ip.user_ns["m"] = MatchingClient()
    ip.user_ns["Q"] = [("someone says hi, greet people", True)]
    result, printed = cell("%skills eval hello --queries Q --client m --model m --runs 2 --option seed=3 -o rep")
    assert result.success, printed
    assert [(r["seed"], r["temperature"], r["max_tokens"], r["tool_choice"]) for r in ip.user_ns["m"].requests] == [
        (3, 0, 100, "auto")] * 2
    assert "request options: temperature=0, seed=3, max_tokens=100, tool_choice=auto" in str(ip.user_ns["rep"])


@pytest.mark.parametrize("line, words", [
    ("%%skill_agent --client c --model m --option nonsense\nhi", "--option needs KEY=VALUE"),
    ("%%skill_agent --client c --model m --option max_turns=3\nhi", "'max_turns' is not a request option here: "
                                                                   "the magic sets it (use --max-turns)"),
    ("%%skill_agent --client c --model m --option stream=true\nhi", "ConfigError: streaming is not supported"),
    ("%%skill_agent --client c --model m --option tool_choice=maybe\nhi", "tool_choice must be auto, none"),
    ("%skills eval hello --queries Q --client c --model m --option runs=9", "(use --runs)"),
    ("%skills list --option temperature=0", "--option applies to %skills eval"),
])
def test_bad_request_options_are_one_line(ip, cell, line, words):
    ip.user_ns["c"] = ScriptedClient(["never"])
    ip.user_ns["Q"] = [("hi", True)]
    result, printed = cell(line)
    assert not result.success and words in printed and "Traceback" not in printed, printed
    assert ip.user_ns["c"].requests == []
