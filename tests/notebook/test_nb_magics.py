"""The magics through a real InteractiveShell: every command, every error path, load/unload/reload."""

from __future__ import annotations

import pytest
from IPython.core.error import UsageError

from ipyskills.errors import SkillError
from ipyskills.notebook.display import AgentText, ImageResource, ReportList, SkillTable
from ipyskills.notebook.magics import IPySkills, MagicError

LINE = ("skills", "skill_load", "skill_run", "skill")
CELL = ("skill_run", "skill")


def test_load_registers_magics_and_unload_removes_them(ip):
    for name in LINE:
        assert ip.find_line_magic(name) is not None
    for name in CELL:
        assert ip.find_cell_magic(name) is not None
    assert sum(isinstance(c, IPySkills) for c in ip.configurables) == 1
    matchers = list(ip.Completer.custom_matchers)

    ip.run_line_magic("unload_ext", "ipyskills")
    for name in LINE:
        assert ip.find_line_magic(name) is None
    for name in CELL:
        assert ip.find_cell_magic(name) is None
    assert not any(isinstance(c, IPySkills) for c in ip.configurables)
    assert len(ip.Completer.custom_matchers) == len(matchers) - 1
    assert "IPySkills" not in ip.magics_manager.registry


def test_reload_gives_one_working_instance(ip):
    ip.run_line_magic("reload_ext", "ipyskills")
    assert sum(isinstance(c, IPySkills) for c in ip.configurables) == 1
    assert "hello" in ip.run_line_magic("skills", "").names
    ours = [m for m in ip.Completer.custom_matchers if getattr(m, "matcher_identifier", "") == "ipyskills"]
    assert len(ours) == 1


def test_unload_leaves_other_magics_alone(ip):
    ip.run_line_magic("unload_ext", "ipyskills")
    assert ip.find_line_magic("timeit") is not None
    assert ip.find_cell_magic("writefile") is not None


def test_load_is_lazy_no_discovery_until_first_use(ip, magics):
    assert magics._registry is None
    ip.run_line_magic("skills", "")
    assert magics._registry is not None


def test_skills_catalog_table(ip):
    table = ip.run_line_magic("skills", "")
    assert isinstance(table, SkillTable)
    assert table.names == ["Bad_Skill", "hello"]
    bundle = ip.display_formatter.format(table)[0]
    assert "Greets people" in bundle["text/html"]
    assert "invalid" in bundle["text/html"] and "valid" in bundle["text/plain"]
    assert "hello" in bundle["text/plain"]


def test_skills_filter_and_rows(ip):
    assert ip.run_line_magic("skills", "--filter greets").names == ["hello"]
    assert ip.run_line_magic("skills", "-f 'naming rules'").names == ["Bad_Skill"]
    table = ip.run_line_magic("skills", "-n 1")
    assert "showing 1–1 of 2" in table.mimebundle()["text/plain"]


def test_skills_add_dir(ip, tmp_path):
    extra = tmp_path / "elsewhere" / "extra"
    extra.mkdir(parents=True)
    (extra / "SKILL.md").write_text("---\nname: extra\ndescription: An extra skill.\n---\nBody\n")
    table = ip.run_line_magic("skills", f"add '{extra.parent}'")
    assert "extra" in table.names


def test_skills_add_missing_dir_is_one_line(ip, cell):
    with pytest.raises(MagicError, match="not a folder"):
        ip.run_line_magic("skills", "add ./no-such-dir")
    result, out = cell("%skills add ./no-such-dir")
    assert not result.success
    assert "ConfigError: cannot add" in out
    assert "Traceback" not in out and "File " not in out


@pytest.mark.parametrize("line, message", [
    ("frobnicate", "unknown command 'frobnicate'"),
    ("add", "needs a folder"),
    ("prompt extra", "takes no argument"),
    ("--rows 0", "at least 1"),
    ("--bogus", "unrecognized arguments"),
])
def test_skills_misuse_is_usage_error(ip, cell, line, message):
    with pytest.raises(UsageError, match=message):
        ip.run_line_magic("skills", line)
    _result, out = cell(f"%skills {line}")
    assert "UsageError" in out and "Traceback" not in out


def test_skills_validate_one_and_all(ip):
    report = ip.run_line_magic("skills", "validate hello")
    assert report.valid
    bad = ip.run_line_magic("skills", "validate skills/bad-skill")
    assert not bad.valid
    text = ip.display_formatter.format(bad)[0]["text/plain"]
    assert text.startswith("Invalid skill") and "name" in text
    everything = ip.run_line_magic("skills", "validate")
    assert isinstance(everything, ReportList) and len(everything) == 2 and not everything.valid
    text = everything.mimebundle()["text/plain"]
    assert "2 skill(s) validated: 1 invalid" in text
    assert "bad-skill" in text and "Valid skill" not in text  # valid ones are counted, not printed in full


def test_validate_all_caps_the_full_reports(tmp_path):
    from ipyskills import SkillRegistry
    from ipyskills.notebook.display import REPORT_ROWS

    for i in range(REPORT_ROWS + 5):
        folder = tmp_path / f"skill-{i}"
        folder.mkdir()
        (folder / "SKILL.md").write_text(f"---\nname: Skill-{i}\ndescription: d\n---\nbody\n")
    reg = SkillRegistry([tmp_path])
    reports = ReportList([reg.validate(str(m.path)) for m in reg.list()])
    text = reports.mimebundle()["text/plain"]
    assert text.count("Invalid skill") == REPORT_ROWS
    assert "… and 5 more report(s)" in text


def test_skills_validate_unknown_is_one_line(ip, cell):
    with pytest.raises(MagicError, match="no skill named 'nope'"):
        ip.run_line_magic("skills", "validate nope")


def test_skills_prompt_is_the_exact_catalog(ip, magics):
    text = ip.run_line_magic("skills", "prompt")
    assert isinstance(text, AgentText)
    assert text == magics.registry.catalog()
    assert ip.display_formatter.format(text)[0] == {"text/plain": str(text)}


def test_skill_load_rich_and_raw(ip, magics):
    view = ip.run_line_magic("skill_load", "hello")
    html = view.mimebundle()["text/html"]
    assert "<h1>Hello</h1>" in html  # body rendered as Markdown
    assert "Apache-2.0" in html  # frontmatter
    assert "references/guide.md" in html  # the file tree
    assert "&lt;skill_content name=&quot;hello&quot;&gt;" in html  # agent text one click away
    raw = ip.run_line_magic("skill_load", "hello --raw")
    assert raw == str(magics.registry.load("hello"))
    assert str(view) == raw


def test_skill_load_resource_and_image(ip, magics):
    res = ip.run_line_magic("skill_load", "hello/references/guide.md")
    assert res.text.startswith("# Guide")
    bundle = ip.display_formatter.format(res)[0]
    assert "<em>advice</em>" in bundle["text/html"]
    assert bundle["text/plain"] == str(res)
    image = ip.run_line_magic("skill_load", "hello/assets/logo.png")
    assert isinstance(image, ImageResource) and image.data.startswith(b"\x89PNG")
    assert "image/png" in image.mimebundle()
    with pytest.raises(MagicError, match="(?i)binary|image|not text"):
        ip.run_line_magic("skill_load", "hello/assets/logo.png --raw")


@pytest.mark.parametrize("locator, message", [
    ("nope", "no skill named 'nope'"),
    ("helo", "did you mean 'hello'"),
    ("hello/../../etc/passwd", "leaves the skill folder"),
    ("hello/missing.md", "no file"),
])
def test_skill_load_errors_are_one_line(ip, cell, locator, message):
    with pytest.raises(MagicError, match=message):
        ip.run_line_magic("skill_load", locator)
    result, out = cell(f"%skill_load {locator}")
    assert message in out and "Traceback" not in out
    assert isinstance(result.error_in_exec, SkillError)


def test_skill_load_needs_a_locator(ip):
    with pytest.raises(UsageError, match="required"):
        ip.run_line_magic("skill_load", "")


def test_help_shows_options(ip, cell):
    for name, option in (("skills", "--filter"), ("skill_load", "--raw"), ("skill_run", "--no-guard"),
                         ("skill", "--force")):
        assert option in ip.find_line_magic(name).__doc__
    _, out = cell("%skills?")
    assert "--filter" in out and "validate" in out


def test_unclosed_quote_is_usage_error(ip):
    with pytest.raises(UsageError, match="quot"):
        ip.run_line_magic("skill_load", "'hello")


@pytest.mark.parametrize("line", ["-h", "--help", "help", "deps -h", "validate --help"])
def test_skills_help_in_every_spelling(ip, capsys, line):
    assert ip.run_line_magic("skills", line) is None
    out = capsys.readouterr().out
    assert "%skills deps NAME" in out and "--filter" in out


def test_help_of_the_other_magics(ip, capsys):
    for name in ("skill_load", "skill"):
        assert ip.run_line_magic(name, "-h") is None, name
        assert "options:" in capsys.readouterr().out
    assert ip.run_cell_magic("skill_call", "--help", "{}") is None
    assert "read_skill or execute_skill_script" in capsys.readouterr().out


def test_did_you_mean_for_commands_and_options(ip):
    with pytest.raises(UsageError, match="did you mean 'validate'"):
        ip.run_line_magic("skills", "valdate")
    with pytest.raises(UsageError, match="did you mean --filter"):
        ip.run_line_magic("skills", "--fitler x")
    with pytest.raises(UsageError, match="did you mean --raw"):
        ip.run_line_magic("skill_load", "hello --rwa")


def test_a_trailing_comment_is_not_an_argument(ip, workdir):
    # As written in the README: `%skills add ./my-skills   # another root`.
    from ipyskills.notebook.magic_args import strip_comment

    (workdir / "more" / "extra").mkdir(parents=True)
    (workdir / "more" / "extra" / "SKILL.md").write_text("---\nname: extra\ndescription: More.\n---\nBody\n")
    ip.run_line_magic("skills", "add ./more   # another root")
    assert "extra" in ip.run_line_magic("skills", "   # catalog table").names
    # Quoted, inside a word, or after an escaped space, '#' is part of the argument (as in a shell).
    result = ip.run_line_magic("skill_run", '--backend local hello scripts/hi.py "#tag" a#b x\\ #y  # why')
    assert result.args == ["#tag", "a#b", "x #y"], result.args
    assert strip_comment("# only a comment") == "" and strip_comment("'#' # c") == "'#' "
