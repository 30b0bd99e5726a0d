"""Agent text: catalog (skills-ref's prompt tests R1-R4, adapted), activation and resource formats."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from ipyskills.core.prompt import SkillContent, SkillResource, catalog


def meta(name, description, path="/home/u/.agents/skills"):
    folder = Path(path) / name
    return SimpleNamespace(name=name, description=description, path=folder, skill_md=folder / "SKILL.md")


def test_r1_no_skills_gives_no_catalog_at_all():
    assert catalog([]) == ""
    assert catalog([], instructions="tool") == ""


def test_r2_single_skill_exact_layout():
    text = catalog([meta("my-skill", "A test skill")])
    assert text == (
        "<available_skills>\n"
        "  <skill>\n"
        "    <name>my-skill</name>\n"
        "    <description>A test skill</description>\n"
        "    <location>/home/u/.agents/skills/my-skill/SKILL.md</location>\n"
        "  </skill>\n"
        "</available_skills>"
    )


def test_r3_multiple_skills_in_given_order():
    text = catalog([meta("skill-a", "A"), meta("skill-b", "B")])
    assert text.count("<skill>") == 2 and text.count("</skill>") == 2
    assert text.index("skill-a") < text.index("skill-b")


def test_r4_special_characters_escaped():
    text = catalog([meta("a&b", "Use <foo> & <bar> tags, \"q\" it's", path="/tmp/x&y")])
    assert "&lt;foo&gt;" in text and "&amp;" in text and "&lt;bar&gt;" in text
    assert "<foo>" not in text and "<bar>" not in text
    assert "&quot;q&quot; it&#x27;s" in text
    assert "<name>a&amp;b</name>" in text
    assert "<location>/tmp/x&amp;y/a&amp;b/SKILL.md</location>" in text


def test_folded_description_is_one_line():
    text = catalog([meta("s", "line one\nline two\n")])
    assert "<description>line one line two</description>" in text


def test_catalog_with_instructions():
    text = catalog([meta("s", "d")], instructions="file-read")
    assert text.startswith("The following skills provide specialized instructions")
    assert text.endswith("</available_skills>")


def test_activation_exact_layout():
    c = SkillContent("pdf-processing", "\n# PDF Processing\n\nDo things.\n\n", Path("/s/pdf-processing"),
                     ["references/spec.md", "scripts/extract.py"])
    assert str(c) == (
        '<skill_content name="pdf-processing">\n'
        "# PDF Processing\n\nDo things.\n\n"
        "Skill directory: /s/pdf-processing\n"
        "Relative paths in this skill are relative to the skill directory.\n\n"
        "<skill_resources>\n"
        "  <file>references/spec.md</file>\n"
        "  <file>scripts/extract.py</file>\n"
        "</skill_resources>\n"
        "</skill_content>"
    )


def test_activation_without_resources_has_no_block():
    text = str(SkillContent("s", "body", Path("/s")))
    assert "<skill_resources" not in text
    assert text.endswith("relative to the skill directory.\n</skill_content>")


def test_activation_truncated_empty_manifest_still_says_so():
    text = str(SkillContent("truncated", "body", Path("/s"), [], True))
    assert '<skill_resources truncated="true">\n</skill_resources>' in text


def test_activation_escapes_name_and_files_but_not_body():
    text = str(SkillContent("A&B", "use <b> & {{vars.X}}", Path("/s"), ["references/spec&notes.md"]))
    assert '<skill_content name="A&amp;B">' in text
    assert "<file>references/spec&amp;notes.md</file>" in text
    assert "use <b> & {{vars.X}}" in text


def test_activation_crlf_body_uses_lf():
    text = str(SkillContent("s", "\r\n# T\r\n\r\nline\r\n", Path("/s")))
    assert "\r" not in text and "# T\n\nline\n" in text


def test_resource_layout_and_escaping():
    r = SkillResource("A&B", "references/spec&notes.md", "raw {{vars.VALUE}} <x>\n")
    assert str(r) == (
        '<skill_resource skill="A&amp;B" path="references/spec&amp;notes.md">\n'
        "raw {{vars.VALUE}} <x>\n"
        "</skill_resource>"
    )
    assert "<skill_resources" not in str(r)
    assert str(SkillResource("s", "a", "no newline")).endswith("no newline\n</skill_resource>")
