"""The widget browser with ipywidgets' test comm: filter, select, files, agent text, Run."""

from __future__ import annotations

import pytest

from ipyskills.notebook.browser import LEVELS, SkillBrowser


@pytest.fixture(autouse=True)
def test_comm():
    from ipywidgets.widgets.tests.utils import setup_test_comm, teardown_test_comm

    setup_test_comm()
    yield
    teardown_test_comm()


@pytest.fixture
def browser(ip, magics):
    magics.sandbox_backend = "local"
    return ip.run_line_magic("skills", "browse")


def test_lists_skills_with_status_and_filters(browser):
    assert isinstance(browser, SkillBrowser)
    assert [v for _, v in browser.skills.options] == ["Bad_Skill", "hello"]
    assert browser.skills.options[0][0].startswith("✗")
    browser.filter.value = "greets"
    assert [v for _, v in browser.skills.options] == ["hello"]
    assert browser.skills.value == "hello"
    assert "1 of 2" in browser.count.value
    browser.filter.value = "zzz"
    assert browser.skills.options == () and "no skill selected" in browser.details.value


def test_details_files_and_agent_text(browser, magics):
    browser.skills.value = "hello"
    assert "<h1>Hello</h1>" in browser.details.value and "Apache-2.0" in browser.details.value
    assert "references/guide.md" in browser.files.options
    browser.files.value = "references/guide.md"
    assert "<h1>Guide</h1>" in browser.file_view.value
    browser.files.value = "assets/logo.png"
    assert "data:image/png;base64," in browser.file_view.value
    assert "skill_content" in browser.agent_text.value  # level 2 by default
    browser.level.value = LEVELS[0]
    assert "&lt;available_skills&gt;" in browser.agent_text.value
    browser.files.value = "references/guide.md"
    browser.level.value = LEVELS[2]
    expected = str(magics.registry.load("hello/references/guide.md"))
    assert expected.split("\n")[0].replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;") \
        in browser.agent_text.value


def test_run_button_fills_the_output_area(browser):
    browser.skills.value = "hello"
    browser.script.value = "scripts/hi.py"
    browser.args.value = "Ada 'Grace Hopper'"
    browser.stdin.value = "typed input"
    browser.run_button.click()
    assert browser.last_result.ok
    assert browser.last_result.stdout.strip() == "hi ['Ada', 'Grace Hopper'] 'typed input'"
    (out,) = browser.output.outputs
    assert out["output_type"] == "display_data" and "backend=local" in out["data"]["text/plain"]
    assert "text/html" in out["data"]


def test_run_errors_go_to_the_output_area(browser, workdir):
    browser.skills.value = "hello"
    (workdir / "skills" / "hello" / "scripts" / "evil.py").write_text("import sys\neval(sys.argv[1])\n")
    browser.refresh()
    browser.script.value = "scripts/evil.py"
    browser.run_button.click()
    (out,) = browser.output.outputs
    assert out["name"] == "stderr" and "GuardBlocked" in out["text"]
    browser.args.value = "'unclosed"
    browser.run_button.click()
    assert "close the quote" in browser.output.outputs[0]["text"]
    assert not browser.run_button.disabled


def test_static_fallback_has_the_catalog(browser):
    from ipywidgets.widgets.tests.utils import setup_test_comm, teardown_test_comm

    teardown_test_comm()  # the test comm replaces _repr_mimebundle_; use the real one here
    try:
        data = browser._repr_mimebundle_()
    finally:
        setup_test_comm()
    assert "application/vnd.jupyter.widget-view+json" in data
    assert "Greets people" in data["text/html"]


def test_browse_function(ip):
    import ipyskills

    b = ipyskills.browse()
    assert "hello" in [v for _, v in b.skills.options]


def test_an_interrupted_run_shows_the_output_so_far(browser, monkeypatch):
    from ipyskills.errors import RunInterrupted
    from ipyskills.sandbox.result import ExecuteResult

    def interrupted(*args, **kwargs):
        raise RunInterrupted(ExecuteResult(exit_code=None, stdout="tick 0\ntick 1\n", stderr="",
                                           duration_ms=2500.0, backend="local", interrupted=True))

    monkeypatch.setattr(browser.registry, "run", interrupted)
    browser.skills.value = "hello"
    browser.script.value = "scripts/hi.py"
    browser.run_button.click()
    shown, line = browser.output.outputs
    assert "tick 1" in shown["data"]["text/plain"]
    assert line["name"] == "stderr" and line["text"] == "interrupted after 2.5 s; sandbox removed\n"
    assert browser.last_result.interrupted and not browser.run_button.disabled
