"""`ipyskills list | prompt | load`, through a real subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


def write(path: Path, data: bytes | str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


@pytest.fixture
def env(tmp_path):
    """A clean environment: no configured roots, an empty HOME, a working folder with nothing in it."""
    home = tmp_path / "home"
    home.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    e = {k: v for k, v in os.environ.items() if not k.startswith("IPYSKILLS_")}
    e.update(HOME=str(home), IPYSKILLS_BUNDLED_SKILLS="0", PYTHONIOENCODING="utf-8")
    return e, work


def cli(env, *args, input=None):
    e, work = env
    return subprocess.run([sys.executable, "-m", "ipyskills", *map(str, args)], check=False, cwd=work, env=e,
                          input=input, capture_output=True, text=True, timeout=60)


@pytest.fixture
def root(tmp_path) -> Path:
    r = tmp_path / "skills"
    write(r / "pdf-processing" / "SKILL.md",
          "---\nname: pdf-processing\ndescription: Extract PDF text, fill forms, merge files. Use when: "
          "handling PDFs or anything that is a very long description going on and on past the width\n---\n"
          "# PDF\n\nSteps.\n")
    write(r / "pdf-processing" / "references" / "spec.md", "the spec\n")
    write(r / "pdf-processing" / "references" / "gbk.md", bytes([0xD6, 0xD0, 0xCE, 0xC4]))
    write(r / "Odd_Name" / "SKILL.md", "---\nname: Odd_Name\ndescription: Loads with problems.\n---\nx\n")
    write(r / "nodesc" / "SKILL.md", "---\nname: nodesc\n---\nx\n")
    write(tmp_path / "outside.txt", "SENTINEL-CLI-OUTSIDE")
    return r


# --- list -----------------------------------------------------------------------------------------------

def test_list_text(env, root):
    p = cli(env, "list", "--dir", root)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert [line.split()[0] for line in lines] == ["Odd_Name", "pdf-processing"]
    # the unquoted colon in the description loads, with a warning
    assert lines[0].split()[1] == "invalid" and lines[1].split()[1] == "warnings"
    assert lines[1].endswith("…") and len(lines[1]) < 120
    assert f"skipped: {root / 'nodesc'}" in p.stderr and "description" in p.stderr


def test_list_json(env, root):
    p = cli(env, "list", "--dir", root, "--json")
    assert p.returncode == 0
    data = json.loads(p.stdout)
    assert [d["name"] for d in data] == ["Odd_Name", "pdf-processing"]
    pdf = data[1]
    assert pdf["path"] == str(root / "pdf-processing") and pdf["description"].startswith("Extract PDF text")
    assert pdf["status"] == "warnings" and any("': '" in w for w in pdf["warnings"])
    assert data[0]["status"] == "invalid" and data[0]["warnings"]


def test_list_shadowed_and_missing_root_on_stderr(env, root, tmp_path):
    write(tmp_path / "other" / "pdf-processing" / "SKILL.md", "---\nname: pdf-processing\ndescription: 2nd\n---\n")
    p = cli(env, "list", "--dir", root, "--dir", tmp_path / "other", "--dir", tmp_path / "absent")
    assert p.returncode == 0
    assert "shadowed: 'pdf-processing'" in p.stderr and str(tmp_path / "other") in p.stderr
    assert "absent" in p.stderr and "does not exist" in p.stderr
    assert "2nd" not in p.stdout


def test_list_uses_configured_and_default_roots(env, root):
    e, work = env
    write(work / ".agents" / "skills" / "local-one" / "SKILL.md", "---\nname: local-one\ndescription: d\n---\n")
    e = dict(e, IPYSKILLS_SKILL_DIRS=str(root))
    p = cli((e, work), "list")
    assert [line.split()[0] for line in p.stdout.splitlines()] == ["Odd_Name", "local-one", "pdf-processing"]


# --- prompt ---------------------------------------------------------------------------------------------

def test_prompt(env, root):
    p = cli(env, "prompt", "--dir", root)
    assert p.returncode == 0
    assert p.stdout.startswith("<available_skills>\n  <skill>\n    <name>Odd_Name</name>")
    assert f"    <location>{root / 'pdf-processing' / 'SKILL.md'}</location>" in p.stdout
    assert p.stdout.endswith("</available_skills>\n")


def test_prompt_with_no_skills_prints_nothing(env, tmp_path):
    (tmp_path / "empty").mkdir()
    p = cli(env, "prompt", "--dir", tmp_path / "empty")
    assert p.returncode == 0 and p.stdout == "" and "no skills" in p.stderr


def test_prompt_with_instructions(env, root):
    p = cli(env, "prompt", "--dir", root, "--instructions", "tool")
    assert p.stdout.startswith("The following skills") and "activate_skill" in p.stdout


# --- load -----------------------------------------------------------------------------------------------

def test_load_activation_exact(env, root):
    p = cli(env, "load", "pdf-processing", "--dir", root)
    assert p.returncode == 0 and p.stderr == ""
    assert p.stdout == (
        '<skill_content name="pdf-processing">\n# PDF\n\nSteps.\n\n'
        f"Skill directory: {root / 'pdf-processing'}\n"
        "Relative paths in this skill are relative to the skill directory.\n\n"
        "<skill_resources>\n  <file>references/gbk.md</file>\n  <file>references/spec.md</file>\n"
        "</skill_resources>\n</skill_content>\n"
    )


def test_load_resource_exact(env, root):
    p = cli(env, "load", "pdf-processing/references/./spec.md", "--dir", root)
    assert p.returncode == 0
    assert p.stdout == '<skill_resource skill="pdf-processing" path="references/spec.md">\nthe spec\n</skill_resource>\n'


@pytest.mark.parametrize("locator,reason", [
    ("pdf-processing/../outside.txt", "invalid skill resource path"),
    ("pdf-processing/references/../../../outside.txt", "invalid skill resource path"),
    ("pdf-processing//etc/passwd", "invalid skill resource path"),
    ("pdf-processing/C:/x", "invalid skill resource path"),
    ("pdf-processing/references/leak.md", "escapes skill directory"),
    ("pdf-processing/references/gbk.md", "not valid UTF-8"),
    ("pdf-processing/references/nope.md", "no file"),
    ("pdf-processing/references", "is a folder"),
    ("pdf-procesing", "did you mean 'pdf-processing'"),
])
def test_load_refusals(env, root, tmp_path, locator, reason):
    os.symlink(tmp_path / "outside.txt", root / "pdf-processing" / "references" / "leak.md")
    p = cli(env, "load", locator, "--dir", root)
    assert p.returncode == 1
    assert p.stdout == ""
    assert reason in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1
    assert "SENTINEL" not in p.stderr and "Traceback" not in p.stderr


def test_load_read_cap_option(env, root):
    write(root / "pdf-processing" / "references" / "big.md", "a" * 70000)
    p = cli(env, "load", "pdf-processing/references/big.md", "--dir", root)
    assert p.returncode == 1 and "65536 byte limit" in p.stderr
    p = cli(env, "load", "pdf-processing/references/big.md", "--dir", root, "--read-cap", "80000")
    assert p.returncode == 0 and "a" * 70000 in p.stdout


def test_unicode_output(env, tmp_path):
    write(tmp_path / "u" / "uni" / "SKILL.md", "---\nname: uni\ndescription: Résumé 处理 ✓\n---\n中文正文\n")
    p = cli(env, "load", "uni", "--dir", tmp_path / "u")
    assert p.returncode == 0 and "中文正文" in p.stdout
    assert "Résumé 处理 ✓" in cli(env, "list", "--dir", tmp_path / "u").stdout
