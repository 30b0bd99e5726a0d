"""The dispatcher: exact texts on success, a readable error for every failure, never an exception.

Runs use the real registry and the local backend on real skill folders (see conftest.py).
"""

from __future__ import annotations

import json
import re

import pytest

from ipyskills.agent import tools
from ipyskills.agent.tools import AgentView, run_report
from ipyskills.sandbox.result import ExecuteResult


@pytest.fixture
def view(reg):
    return AgentView(reg)


def _error(result, kind):
    assert result.is_error, result.text
    assert result.error == kind, result.text
    assert result.text.startswith("Error: ")
    return result.text


# ----------------------------------------------------------------------------------- read_skill


def test_activation_returns_exactly_the_skill_content(view, reg):
    result = view.dispatch("read_skill", {"skill_name": "data-tool"})
    assert not result.is_error and result.error == ""
    assert result.text == str(reg.load("data-tool"))
    assert result.text.startswith('<skill_content name="data-tool">')
    assert str(result) == result.text


def test_file_path_and_locator_form_return_the_same_resource(view, reg):
    by_arg = view.dispatch("read_skill", {"skill_name": "data-tool", "file_path": "references/guide.md"})
    by_locator = view.dispatch("read_skill", json.dumps({"skill_name": "data-tool/references/guide.md"}))
    assert by_arg.text == by_locator.text == str(reg.load("data-tool/references/guide.md"))
    assert "Use --to csv" in by_arg.text


def test_optional_arguments_sent_as_null_or_empty_are_ignored(view, reg):
    result = view.dispatch("read_skill", {"skill_name": "pdf-processing", "file_path": None})
    assert result.text == str(reg.load("pdf-processing"))
    view.reset()
    assert view.dispatch("read_skill", {"skill_name": "pdf-processing", "file_path": ""}).text == result.text


def test_path_given_twice_is_refused(view):
    text = _error(view.dispatch("read_skill", {"skill_name": "data-tool/references/guide.md",
                                               "file_path": "references/guide.md"}), "bad_arguments")
    assert "give the file once" in text


# ------------------------------------------------------------------------------ activation dedupe


def test_second_activation_gets_a_short_note_until_reset(view):
    first = view.dispatch("read_skill", {"skill_name": "data-tool"})
    again = view.dispatch("read_skill", {"skill_name": "data-tool"})
    assert not again.is_error
    assert "already active in this conversation" in again.text
    assert "Run scripts/echo.py" not in again.text and len(again.text) < 300
    same_via_skill_md = view.dispatch("read_skill", {"skill_name": "data-tool", "file_path": "SKILL.md"})
    assert same_via_skill_md.text == again.text
    _error(view.dispatch("read_skill", {"skill_name": "data-tool", "file_path": "/SKILL.md"}), "resource")
    assert view.tracker.active == ["data-tool"]
    view.reset()
    assert view.dispatch("read_skill", {"skill_name": "data-tool"}).text == first.text


def test_resources_and_runs_are_never_deduplicated(view):
    args = {"skill_name": "data-tool", "file_path": "references/guide.md"}
    assert view.dispatch("read_skill", args).text == view.dispatch("read_skill", args).text
    run = {"skill_name": "data-tool", "script_path": "scripts/echo.py", "input": "same"}
    first, second = view.dispatch("execute_skill_script", run), view.dispatch("execute_skill_script", run)
    assert "stdin: same" in first.text and "stdin: same" in second.text


def test_failed_activation_is_not_tracked_and_disable_forgets(view):
    view.dispatch("read_skill", {"skill_name": "pdf-processing"})
    view.disable("pdf-processing")
    view.enable("pdf-processing")
    assert view.dispatch("read_skill", {"skill_name": "pdf-processing"}).text.startswith("<skill_content")
    view.dispatch("read_skill", {"skill_name": "nope"})
    assert view.tracker.active == ["pdf-processing"]


def test_module_level_dispatch_is_stateless(reg):
    one = tools.dispatch(reg, "read_skill", {"skill_name": "data-tool"})
    two = tools.dispatch(reg, "read_skill", {"skill_name": "data-tool"})
    assert one.text == two.text == str(reg.load("data-tool"))


# ------------------------------------------------------------------------------- argument errors


def test_unknown_tool(view):
    text = _error(view.dispatch("delete_everything", {}), "unknown_tool")
    assert "'delete_everything'" in text and "read_skill, execute_skill_script" in text


def test_unknown_tool_name_of_the_wrong_type(view):
    _error(view.dispatch(None, {}), "unknown_tool")


def test_skill_tools_with_no_visible_skills(empty_reg):
    text = _error(AgentView(empty_reg).dispatch("read_skill", {"skill_name": "x"}), "unknown_tool")
    assert "no skills are available" in text


@pytest.mark.parametrize("raw", ['{"skill_name": "data-tool"', "{'skill_name': 'data-tool'}", "nope"])
def test_malformed_json_arguments(view, raw):
    text = _error(view.dispatch("read_skill", raw), "bad_arguments")
    assert "not valid JSON" in text and '{"skill_name": "<skill>"}' in text


@pytest.mark.parametrize("raw, kind", [("[1, 2]", "an array"), ('"data-tool"', "a string"), ("7", "a number")])
def test_arguments_that_are_not_an_object(view, raw, kind):
    text = _error(view.dispatch("execute_skill_script", raw), "bad_arguments")
    assert f"must be a JSON object, got {kind}" in text


@pytest.mark.parametrize("arguments", [None, "", "  ", {}])
def test_missing_required_skill_name(view, arguments):
    text = _error(view.dispatch("read_skill", arguments), "bad_arguments")
    assert "skill_name is required" in text


def test_missing_script_path(view):
    text = _error(view.dispatch("execute_skill_script", {"skill_name": "data-tool"}), "bad_arguments")
    assert "script_path is required" in text


def test_extra_arguments_are_named(view):
    text = _error(view.dispatch("read_skill", {"skill_name": "data-tool", "verbose": True, "mode": 1}),
                  "bad_arguments")
    assert "unexpected argument(s) mode, verbose" in text and "skill_name, file_path" in text


@pytest.mark.parametrize("arguments, expected", [
    ({"skill_name": 5}, "skill_name must be a string, got a number"),
    ({"skill_name": True}, "skill_name must be a string, got a boolean"),
    ({"skill_name": "data-tool", "script_path": "scripts/echo.py", "args": "--to csv"},
     "args must be an array of strings, got a string"),
    ({"skill_name": "data-tool", "script_path": "scripts/echo.py", "args": ["--limit", 10]},
     "args[1] must be a string, got a number"),
    ({"skill_name": "data-tool", "script_path": "scripts/echo.py", "input": {"a": 1}},
     "input must be a string, got an object"),
    ({"skill_name": "data-tool", "script_path": ["scripts/echo.py"]}, "script_path must be a string, got an array"),
])
def test_mistyped_arguments(view, arguments, expected):
    assert expected in _error(view.dispatch("execute_skill_script", arguments), "bad_arguments")


# ---------------------------------------------------------------------------------- unknown skills


def test_unknown_skill_suggests_close_visible_names(view):
    text = _error(view.dispatch("read_skill", {"skill_name": "data-tol"}), "unknown_skill")
    assert "unknown skill 'data-tol'. Did you mean 'data-tool'?" in text
    assert "Available skills: data-tool, pdf-processing, secret-ops." in text
    case = _error(view.dispatch("read_skill", {"skill_name": "PDF-Processing"}), "unknown_skill")
    assert "'pdf-processing'" in case


def test_a_hidden_skill_reads_exactly_like_a_missing_one(reg):
    view = AgentView(reg, allow=["data-tool", "pdf-processing"])
    for tool, extra in (("read_skill", {}), ("execute_skill_script", {"script_path": "scripts/echo.py"})):
        hidden = view.dispatch(tool, {"skill_name": "secret-ops", **extra})
        missing = view.dispatch(tool, {"skill_name": "zzz-nothing", **extra})
        assert hidden.error == missing.error == "unknown_skill"
        assert hidden.text == missing.text.replace("zzz-nothing", "secret-ops")
    near = view.dispatch("read_skill", {"skill_name": "secret-opz"}).text
    assert "secret-ops" not in near  # no suggestion of a hidden name
    for text in (hidden.text, near):
        assert "forbidden" not in text.lower() and "not allowed" not in text.lower()


def test_hidden_skill_files_cannot_be_reached_by_locator_or_traversal(reg):
    view = AgentView(reg, disabled=["secret-ops"])
    attempts = [
        ("read_skill", {"skill_name": "secret-ops/references/secret.md"}),
        ("read_skill", {"skill_name": "data-tool", "file_path": "../secret-ops/references/secret.md"}),
        ("read_skill", {"skill_name": "data-tool/../secret-ops/SKILL.md"}),
        ("execute_skill_script", {"skill_name": "secret-ops/scripts/echo.py"}),
        ("execute_skill_script", {"skill_name": "data-tool", "script_path": "../secret-ops/scripts/echo.py"}),
    ]
    for tool, arguments in attempts:
        result = view.dispatch(tool, arguments)
        assert result.is_error, (tool, arguments, result.text)
        assert "TOP-SECRET" not in result.text
        assert "args:" not in result.text  # nothing ran


def test_disabled_opt_out_skill_is_unknown_until_enabled(view):
    _error(view.dispatch("read_skill", {"skill_name": "quiet"}), "unknown_skill")
    view.enable("quiet")
    assert view.dispatch("read_skill", {"skill_name": "quiet"}).text.startswith('<skill_content name="quiet">')


# ---------------------------------------------------------------------------------- refused paths


@pytest.mark.parametrize("path, says", [
    ("/etc/passwd", "must be relative to the skill folder"),
    ("../../../etc/passwd", "leaves the skill folder"),
    ("assets/logo.png", "binary file"),
    ("notes/latin1.txt", "not valid UTF-8"),
    ("references/missing.md", "no file 'references/missing.md'"),
    ("references", "is a folder"),
])
def test_refused_resource_paths_say_why(view, path, says):
    text = _error(view.dispatch("read_skill", {"skill_name": "data-tool", "file_path": path}), "resource")
    assert says in text
    assert "root:" not in text  # /etc/passwd content never appears


def test_symlink_out_of_the_skill_is_refused(view, skills_root, tmp_path):
    (tmp_path / "outside.txt").write_text("OUTSIDE-CONTENT")
    (skills_root / "data-tool" / "references" / "link.md").symlink_to(tmp_path / "outside.txt")
    text = _error(view.dispatch("read_skill", {"skill_name": "data-tool", "file_path": "references/link.md"}),
                  "resource")
    assert "escapes skill directory" in text and "OUTSIDE-CONTENT" not in text


def test_bad_script_paths_are_the_callers_problem(view):
    missing = _error(view.dispatch("execute_skill_script", {"skill_name": "data-tool",
                                                            "script_path": "scripts/nope.py"}), "bad_arguments")
    assert "no file 'scripts/nope.py'" in missing and "scripts/echo.py" in missing
    outside = _error(view.dispatch("execute_skill_script", {"skill_name": "data-tool",
                                                            "script_path": "/bin/sh"}), "bad_arguments")
    assert "script path refused" in outside


# ------------------------------------------------------------------------------------------- runs


def test_successful_run_report(view):
    result = view.dispatch("execute_skill_script", {
        "skill_name": "data-tool", "script_path": "scripts/echo.py",
        "args": ["--to", "csv"], "input": '{"items": [1, 2]}'})
    assert not result.is_error, result.text
    text = result.text
    assert text.startswith('<script_result skill="data-tool" script="scripts/echo.py" exit_code="0">')
    assert "Status: completed, exit code 0, in " in text
    assert 'Arguments: ["--to", "csv"]' in text
    assert "Backend: local" in text
    assert "<stdout>\nargs: ['--to', 'csv']\nstdin: {\"items\": [1, 2]}\n</stdout>" in text
    assert "<stderr></stderr>" in text
    assert text.endswith("</script_result>")


def test_locator_form_runs_the_script_too(view):
    result = view.dispatch("execute_skill_script", {"skill_name": "data-tool/scripts/echo.py", "args": ["x"]})
    assert not result.is_error and "args: ['x']" in result.text


def test_non_zero_exit_is_reported_with_stderr(view):
    result = view.dispatch("execute_skill_script", {"skill_name": "data-tool", "script_path": "scripts/fail.py"})
    assert result.is_error and result.error == "exit_code"
    assert 'exit_code="3"' in result.text and "FAILED with exit code 3" in result.text
    assert "<stderr>\nbad input: expected JSON\n" in result.text
    assert "about to fail" in result.text


def test_flood_is_capped_at_30000_characters_with_the_cut_marked(view):
    result = view.dispatch("execute_skill_script", {"skill_name": "data-tool", "script_path": "scripts/flood.py"})
    assert not result.is_error
    assert len(result.text) <= 30_000
    assert "START-OF-OUTPUT" in result.text and "END-OF-OUTPUT" in result.text
    cut = int(re.search(r"\[ipyskills: (\d+) characters cut here; a tool result is capped at 30000 characters\]",
                        result.text).group(1))
    assert cut > 70_000
    assert result.text.endswith("</script_result>")


def test_cap_is_configurable(reg):
    result = AgentView(reg, output_cap=5000).dispatch(
        "execute_skill_script", {"skill_name": "data-tool", "script_path": "scripts/flood.py"})
    assert len(result.text) <= 5000 and "capped at 5000 characters" in result.text
    assert "START-OF-OUTPUT" in result.text and "END-OF-OUTPUT" in result.text


def test_artifacts_are_listed_by_name_and_size(view):
    result = view.dispatch("execute_skill_script", {"skill_name": "data-tool", "script_path": "scripts/artifact.py"})
    assert not result.is_error, result.text
    assert '<artifacts>\n  <file size="8">result.csv</file>\n</artifacts>' in result.text


def test_timeout_is_reported_with_partial_output(reg):
    view = AgentView(reg, timeout=1.5)
    result = view.dispatch("execute_skill_script", {"skill_name": "data-tool", "script_path": "scripts/slow.py"})
    assert result.is_error and result.error == "timed_out"
    assert 'exit_code="none"' in result.text and "Status: TIMED OUT after " in result.text
    assert "<stdout>\nSLOW-STARTED\n" in result.text and "SLOW-DONE" not in result.text


def test_out_of_memory_is_reported(reg, new_skill, skills_root):
    new_skill(skills_root, "hungry", "Allocates too much.", "# Hungry\n",
              {"scripts/eat.py": "blocks = [bytearray(64 * 1024 * 1024) for _ in range(64)]\n"})
    reg.refresh()
    result = AgentView(reg, memory="128m").dispatch(
        "execute_skill_script", {"skill_name": "hungry", "script_path": "scripts/eat.py"})
    assert result.is_error and result.error == "out_of_memory", result.text
    assert "OUT OF MEMORY" in result.text and "MemoryError" in result.text


def test_guard_block_names_the_rule_and_line(view):
    result = view.dispatch("execute_skill_script", {"skill_name": "data-tool", "script_path": "scripts/danger.py"})
    text = _error(result, "guard_blocked")
    assert "line 3: rule py-eval-input" in text
    assert "was not run" in text
    assert "<script_result" not in text


def test_sandbox_unavailable_is_an_environment_error(reg):
    # Docker with an image that cannot exist: either the engine or the image is missing; both are
    # problems of this environment that the model should pass on, not retry.
    reg.settings = reg.settings.with_overrides(image="ipyskills-test-no-such-image:never")
    result = AgentView(reg, backend="docker").dispatch(
        "execute_skill_script", {"skill_name": "data-tool", "script_path": "scripts/echo.py"})
    text = _error(result, "sandbox")
    assert "tell the user" in text


def test_unexpected_failure_inside_becomes_an_error_text(reg, monkeypatch, caplog):
    def broken(locator, **kw):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(reg, "load", broken)
    text = _error(AgentView(reg).dispatch("read_skill", {"skill_name": "data-tool"}), "internal")
    assert "RuntimeError: disk on fire" in text
    assert "failed unexpectedly" in caplog.text


# -------------------------------------------------------------------------------- report rendering


def test_report_for_an_oom_result_and_its_frame():
    result = ExecuteResult(exit_code=137, stdout="", stderr="Killed\n", duration_ms=812.0, oom_killed=True,
                           backend="docker", isolation="container", skill="a&b", script="scripts/x.py",
                           args=["<x>"])
    text = run_report(result)
    assert text.startswith('<script_result skill="a&amp;b" script="scripts/x.py" exit_code="137">')
    assert "OUT OF MEMORY after 0.81 s" in text
    assert 'Arguments: ["<x>"]' in text and "Backend: docker (container)" in text


def test_report_shares_the_cap_between_stdout_and_stderr():
    result = ExecuteResult(exit_code=1, stdout="o" * 50_000, stderr="E" * 50_000, duration_ms=5.0)
    text = run_report(result, cap=10_000)
    assert len(text) <= 10_000
    assert text.count("characters cut here") == 2
    assert 3000 < text.count("o") and 3000 < text.count("E")  # neither stream starves the other
    short = run_report(ExecuteResult(exit_code=1, stdout="o" * 50_000, stderr="short error", duration_ms=5.0),
                       cap=10_000)
    assert "<stderr>\nshort error\n</stderr>" in short and len(short) <= 10_000


def test_a_file_path_that_repeats_the_skill_name_is_read_as_meant(reg, skills_root):
    """Small models write file_path="data-tool/SKILL.md" (seen from Gemma 3 270M): the skill has no folder of
    its own name, so the path is read inside the skill, and SKILL.md counts as the activation it is."""
    from ipyskills.agent.loop import call_target

    view = AgentView(reg)
    slip = view.dispatch("read_skill", {"skill_name": "data-tool", "file_path": "data-tool/SKILL.md"})
    assert not slip.is_error and slip.text == str(reg.load("data-tool"))
    assert call_target("read_skill", {"skill_name": "data-tool", "file_path": "data-tool/SKILL.md"}) == ("data-tool", 2)
    guide = view.dispatch("read_skill", {"skill_name": "data-tool", "file_path": "./data-tool/references/guide.md"})
    assert guide.text == str(reg.load("data-tool/references/guide.md"))
    # A skill that does have a folder of its own name keeps the path as written.
    (skills_root / "pdf-processing" / "pdf-processing").mkdir()
    (skills_root / "pdf-processing" / "pdf-processing" / "note.md").write_text("INNER NOTE\n")
    inner = view.dispatch("read_skill", {"skill_name": "pdf-processing", "file_path": "pdf-processing/note.md"})
    assert "INNER NOTE" in inner.text
    still_wrong = view.dispatch("read_skill", {"skill_name": "data-tool", "file_path": "data-tool/nope.md"})
    assert still_wrong.is_error and "nope.md" in still_wrong.text
