"""`ipyskills validate`, run as a real subprocess."""

from __future__ import annotations

import json
import subprocess
import sys

GOOD = "name: {name}\ndescription: Does a thing. Use when a thing is needed.\n"


def ipyskills(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "ipyskills", *map(str, args)], check=False,
                          capture_output=True, text=True, encoding="utf-8", cwd=cwd, timeout=60)


def test_valid_skill(make_skill):
    folder = make_skill("my-skill", GOOD.format(name="my-skill"))
    result = ipyskills("validate", folder)
    assert result.returncode == 0
    assert result.stdout == f"Valid skill: {folder}\n"
    assert result.stderr == ""


def test_invalid_skill_skills_ref_layout(make_skill):
    folder = make_skill("wrong", GOOD.format(name="My_Skill"))
    result = ipyskills("validate", folder)
    assert result.returncode == 1
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert lines[0] == f"Validation failed for {folder}:"
    assert len(lines) == 4 and all(line.startswith("  - ") for line in lines[1:])
    assert "must be lowercase" in lines[1] and "invalid characters" in lines[2] and "Directory name" in lines[3]


def test_skill_md_path_and_warnings(make_skill):
    folder = make_skill("my-skill", GOOD.format(name="my-skill"), body="line\n" * 600)
    result = ipyskills("validate", folder / "SKILL.md")
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    assert lines[0] == f"Valid skill: {folder / 'SKILL.md'}"
    assert lines[1].startswith("  ! SKILL.md has 604 lines")


def test_several_paths_exit_1_when_any_is_invalid(make_skill, tmp_path):
    good = make_skill("my-skill", GOOD.format(name="my-skill"))
    missing = tmp_path / "nope"
    result = ipyskills("validate", good, missing)
    assert result.returncode == 1
    assert result.stdout == f"Valid skill: {good}\n"
    assert result.stderr == f"Validation failed for {missing}:\n  - Path does not exist: {missing}\n"


def test_json_output(make_skill, tmp_path):
    good = make_skill("my-skill", GOOD.format(name="my-skill") + "license:\n  id: MIT\n")
    bad = make_skill("other", "name: other\n")
    result = ipyskills("validate", "--json", good, bad, tmp_path / "nope")
    assert result.returncode == 1
    data = json.loads(result.stdout)
    assert [d["valid"] for d in data] == [True, False, False]
    assert data[0]["path"] == str(good) and data[0]["errors"] == []
    assert data[0]["warnings"][0]["code"] == "license-not-string"
    (error,) = data[1]["errors"]
    assert error["code"] == "description-missing" and error["field"] == "description"
    assert error["message"].startswith("Missing required field in frontmatter: description")
    assert data[2]["errors"][0]["code"] == "path-missing"


def test_uppercase_anywhere_in_the_name_is_the_one_error(make_skill):
    # A second, independent check of the lowercase rule (tests/core/test_validate.py has the first): through
    # the CLI, with the capital after the first letter and at both ends of A-Z, in folders named exactly like
    # the skill so no other rule fires.
    names = {"dataProcessor": "dataprocessor", "pdf-Z": "pdf-z", "alphA": "alpha"}
    folders = [make_skill(name, GOOD.format(name=name)) for name in names]
    result = ipyskills("validate", "--json", *folders)
    assert result.returncode == 1
    for report, (name, suggestion) in zip(json.loads(result.stdout), names.items()):
        assert report["valid"] is False and [e["code"] for e in report["errors"]] == ["name-uppercase"]
        assert f"Skill name '{name}' must be lowercase; use '{suggestion}'" in report["errors"][0]["message"]


def test_json_valid_exit_0(make_skill):
    folder = make_skill("my-skill", GOOD.format(name="my-skill"))
    result = ipyskills("validate", "--json", folder)
    assert result.returncode == 0 and json.loads(result.stdout)[0]["valid"] is True


def test_usage_error_exit_2():
    result = ipyskills("validate")
    assert result.returncode == 2 and "PATH" in result.stderr


def test_relative_path_and_non_ascii_output(make_skill, tmp_path):
    make_skill("技能", GOOD.format(name="技能"))
    result = ipyskills("validate", "技能", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.startswith("Validation failed for 技能:\n")
    assert "non-ASCII" in result.stderr


def test_broken_file_is_one_clear_line(make_skill):
    folder = make_skill("my-skill", raw=b"\xef\xbb\xbf---\nname: my-skill\ndescription: caf\xe9\n---\n")
    result = ipyskills("validate", folder)
    assert result.returncode == 1
    assert result.stderr.splitlines()[1:] == [
        "  - SKILL.md is not valid UTF-8 (byte 0xe9 on line 3); save the file as UTF-8.",
    ]
    assert "Traceback" not in result.stderr
