"""Tab completion through IPython's own completer: names, name/path files, a skill's scripts."""

from __future__ import annotations

import pytest
from IPython.core.completer import provisionalcompleter


def complete(ip, text: str) -> list[str]:
    with provisionalcompleter():
        return sorted({c.text for c in ip.Completer.completions(text, len(text))})


def test_skill_names(ip):
    assert complete(ip, "%skill_load he") == ["hello"]
    assert complete(ip, "%skill_load --raw he") == ["hello"]


def test_a_skill_copied_in_later_completes_and_runs_without_refresh(ip, workdir):
    assert complete(ip, "%skill_load hel") == ["hello"]  # the catalog is scanned now
    copied = workdir / "skills" / "helper-copy"
    copied.mkdir()
    (copied / "SKILL.md").write_text("---\nname: helper-copy\ndescription: A copy. Use for tests.\n---\nBody.\n")
    assert complete(ip, "%skill_load helper") == ["helper-copy"]
    view = ip.run_line_magic("skill_load", "helper-copy")
    assert "Body." in str(view)


def test_resource_paths(ip):
    assert complete(ip, "%skill_load hello/ref") == ["hello/references/guide.md"]
    assert "hello/assets/logo.png" in complete(ip, "%skill_load hello/")


def test_scripts_for_skill_run(ip):
    assert complete(ip, "%%skill_run hello scripts/h") == ["scripts/hi.py"]
    assert complete(ip, "%%skill_run --timeout 5 hello scripts/s") == ["scripts/sleep.py"]
    assert complete(ip, "%skill_run he") == ["hello"]


def test_authoring_names(ip):
    assert complete(ip, "%%skill hel") == ["hello"]


def test_other_lines_are_left_alone(ip):
    ip.user_ns["hello_world"] = 1
    assert "hello_world" in complete(ip, "hello_w")
    assert "hello" not in complete(ip, "print(he")


def test_unknown_skill_gives_nothing_and_no_error(ip):
    assert complete(ip, "%skill_load nope/x") == []


def test_completion_follows_config(ip, tmp_path):
    extra = tmp_path / "extra-root" / "zeta"
    extra.mkdir(parents=True)
    (extra / "SKILL.md").write_text("---\nname: zeta\ndescription: Z.\n---\nBody\n")
    assert complete(ip, "%skill_load ze") == []
    ip.run_line_magic("config", f"IPySkills.skill_dirs = [{str(extra.parent)!r}]")
    assert complete(ip, "%skill_load ze") == ["zeta"]


def test_completion_is_gone_after_unload(ip):
    ip.run_line_magic("unload_ext", "ipyskills")
    assert "hello" not in complete(ip, "%skill_load he")


@pytest.mark.parametrize("text", ["%skill_load hello --r", "%%skill_run --backend l"])
def test_options_are_not_hijacked(ip, text):
    assert "hello" not in complete(ip, text)
