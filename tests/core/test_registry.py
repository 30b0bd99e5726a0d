"""SkillRegistry: list/get/catalog/load/validate/add/refresh, and building script runs.

Includes SiYuan's activation and resource tests ported to the registry (kernel/util/skill_test.go 5-10,
kernel/mcp/tools/skill_test.go 11).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ipyskills import SkillError, SkillRegistry
from ipyskills.errors import ConfigError, ResourceError, SandboxError, SkillNotFound
from ipyskills.settings import Settings

from .files import write


def make_skill(folder: Path, name: str | None = None, description: str = "Does a thing.",
               body: str = "# Title\n\nBody text.\n") -> Path:
    name = folder.name if name is None else name
    write(folder / "SKILL.md", f"---\nname: {name}\ndescription: {description}\n---\n{body}")
    return folder


@pytest.fixture
def root(tmp_path) -> Path:
    r = tmp_path / "skills"
    s = make_skill(r / "skill-dir", body="\n# Skill\n\nbody {{vars.VALUE}}\n")
    write(s / "references" / "spec.md", "spec content\n")
    write(s / "scripts" / "run.py", "import sys\nprint('args', sys.argv[1:])\nprint(sys.stdin.read().upper())\n")
    write(s / ".git" / "config", "[core]")
    write(s / ".venv" / "pyvenv.cfg", "home = /usr")
    make_skill(r / "pdf-processing", description="Extract PDF text. Use when: handling PDFs")
    write(tmp_path / "outside.txt", "SENTINEL-OUTSIDE-CONTENT")
    return r


@pytest.fixture
def reg(root) -> SkillRegistry:
    return SkillRegistry([root])


# --- level 1 --------------------------------------------------------------------------------------------

def test_list_get_and_catalog(reg, root):
    assert [m.name for m in reg.list()] == ["pdf-processing", "skill-dir"]
    assert reg.get("pdf-processing").path == root / "pdf-processing"
    cat = reg.catalog()
    assert cat.startswith("<available_skills>\n  <skill>\n    <name>pdf-processing</name>")
    assert f"<location>{root / 'skill-dir' / 'SKILL.md'}</location>" in cat
    assert "Use when: handling PDFs" in cat


def test_empty_registry(tmp_path):
    reg = SkillRegistry([tmp_path])
    assert reg.list() == [] and reg.catalog() == "" and len(reg) == 0
    with pytest.raises(SkillNotFound, match="no skills were found"):
        reg.get("x")


def test_unknown_skill_names_close_matches(reg):
    with pytest.raises(SkillNotFound) as err:
        reg.load("pdf-procesing")
    msg = str(err.value)
    assert "'pdf-processing'" in msg and "did you mean" in msg and "\n" not in msg


def test_explicit_roots_only(tmp_path, monkeypatch, root):
    monkeypatch.chdir(tmp_path)
    make_skill(tmp_path / ".agents" / "skills" / "default-one")
    assert "default-one" not in SkillRegistry([root]).names()
    assert "default-one" in SkillRegistry(settings=Settings(bundled_skills=False)).names()


def test_roots_none_uses_configured_then_defaults(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    make_skill(tmp_path / "conf" / "shared", description="configured")
    make_skill(tmp_path / "skills" / "shared", description="project")
    reg = SkillRegistry(settings=Settings(skill_dirs=(str(tmp_path / "conf"),), bundled_skills=False))
    assert reg.get("shared").description == "configured"
    assert reg.shadowed[0][1].description == "project"


def test_lookup_by_folder_name_when_name_differs(tmp_path):
    make_skill(tmp_path / "folder-name", name="declared-name")
    reg = SkillRegistry([tmp_path])
    assert reg.get("folder-name").name == "declared-name"
    assert str(reg.load("folder-name")).startswith('<skill_content name="declared-name">')


# --- level 2 --------------------------------------------------------------------------------------------

def test_activation_lists_resources_and_excludes_vcs(reg, root):
    c = reg.load("skill-dir")
    assert c.name == "skill-dir"
    assert c.body == "# Skill\n\nbody {{vars.VALUE}}"
    assert c.resources == ["references/spec.md", "scripts/run.py"] and not c.resources_truncated
    assert str(c) == (
        '<skill_content name="skill-dir">\n'
        "# Skill\n\nbody {{vars.VALUE}}\n\n"
        f"Skill directory: {root / 'skill-dir'}\n"
        "Relative paths in this skill are relative to the skill directory.\n\n"
        "<skill_resources>\n  <file>references/spec.md</file>\n  <file>scripts/run.py</file>\n</skill_resources>\n"
        "</skill_content>"
    )


@pytest.mark.parametrize("locator", ["skill-dir/SKILL.md", "skill-dir/./SKILL.md", "skill-dir/references/../SKILL.md"])
def test_skill_md_locator_means_activation(reg, locator):
    assert str(reg.load(locator)) == str(reg.load("skill-dir"))


@pytest.mark.parametrize("locator", ["low/SKILL.md", "low/skill.md", "low/./SKILL.md"])
def test_skill_md_locator_activates_whatever_the_stored_case(tmp_path, locator):
    folder = tmp_path / "low"
    write(folder / "skill.md", "---\nname: low\ndescription: Lowercase file name.\n---\nLow body.\n")
    reg = SkillRegistry([tmp_path])
    assert reg.get("low").skill_md.name == "skill.md"
    loaded = reg.load(locator)
    assert "Low body." in str(loaded) and str(loaded) == str(reg.load("low"))


def test_lowercase_skill_md_locator_activates_an_uppercase_skill(reg):
    assert str(reg.load("skill-dir/skill.md")) == str(reg.load("skill-dir"))


def test_body_is_read_on_demand(reg, root):
    before = str(reg.load("skill-dir"))
    make_skill(root / "skill-dir", body="Fresh body.\n")
    after = str(reg.load("skill-dir"))
    assert "Fresh body." in after and "Fresh body." not in before


def test_manifest_cap_from_settings(tmp_path):
    s = make_skill(tmp_path / "big")
    for i in range(201):
        write(s / "references" / f"{i:03d}.md", "")
    c = SkillRegistry([tmp_path]).load("big")
    assert len(c.resources) == 200 and c.resources[-1] == "references/199.md" and c.resources_truncated
    assert '<skill_resources truncated="true">' in str(c)
    c = SkillRegistry([tmp_path], settings=Settings(manifest_cap=10)).load("big")
    assert len(c.resources) == 10


# --- level 3 --------------------------------------------------------------------------------------------

def test_resource_with_dot_segment_is_normalised(reg):
    r = reg.load("skill-dir/references/./spec.md")
    assert (r.skill, r.path, r.text) == ("skill-dir", "references/spec.md", "spec content\n")
    assert str(r) == '<skill_resource skill="skill-dir" path="references/spec.md">\nspec content\n</skill_resource>'
    assert "<skill_resources" not in str(r)


@pytest.mark.parametrize("locator", [
    "skill-dir/../outside.txt",
    "skill-dir/references/../../../outside.txt",
    "skill-dir//absolute.txt",
    "skill-dir/C:/absolute.txt",
    "skill-dir/",
    "skill-dir/references/\x00x",
])
def test_siyuan_bad_locators(reg, locator):
    with pytest.raises(ResourceError, match="invalid skill resource path") as err:
        reg.load(locator)
    assert "SENTINEL" not in str(err.value)


def test_escaping_symlink_refused_without_content(reg, root, tmp_path):
    os.symlink(tmp_path / "outside.txt", root / "skill-dir" / "references" / "leak.md")
    with pytest.raises(ResourceError, match="escapes skill directory") as err:
        reg.load("skill-dir/references/leak.md")
    assert "SENTINEL" not in str(err.value)
    assert "references/leak.md" not in reg.load("skill-dir").resources


def test_symlinked_skill_dir_reads_inside(tmp_path, root):
    linked_root = tmp_path / "linked-root"
    linked_root.mkdir()
    os.symlink(root / "skill-dir", linked_root / "skill-dir")
    reg = SkillRegistry([linked_root])
    assert reg.load("skill-dir/references/spec.md").text == "spec content\n"
    assert f"Skill directory: {linked_root / 'skill-dir'}" in str(reg.load("skill-dir"))


def test_read_cap_boundary_through_registry(reg, root):
    write(root / "skill-dir" / "references" / "ok.md", b"a" * 65536)
    write(root / "skill-dir" / "references" / "big.md", b"a" * 65537)
    assert len(reg.load("skill-dir/references/ok.md").text) == 65536
    with pytest.raises(ResourceError, match="65536 byte limit"):
        reg.load("skill-dir/references/big.md")
    assert len(reg.load("skill-dir/references/big.md", read_cap=70000).text) == 65537
    small = SkillRegistry([root], settings=Settings(read_cap=100))
    with pytest.raises(ResourceError, match="100 byte limit"):
        small.load("skill-dir/references/ok.md")


def test_invalid_utf8_through_registry(reg, root):
    write(root / "skill-dir" / "references" / "gbk.md", bytes([0xD6, 0xD0, 0xCE, 0xC4]))
    with pytest.raises(ResourceError, match="not valid UTF-8"):
        reg.load("skill-dir/references/gbk.md")


def test_escaping_of_names_and_paths(tmp_path):
    s = make_skill(tmp_path / "skill-dir", name='"A&B"', body="body resolved\n")
    write(s / "references" / "spec&notes.md", "{{vars.VALUE}}\n")
    reg = SkillRegistry([tmp_path])
    act = str(reg.load("A&B"))
    assert '<skill_content name="A&amp;B">' in act
    assert "<file>references/spec&amp;notes.md</file>" in act
    res = str(reg.load("A&B/references/spec&notes.md"))
    assert '<skill_resource skill="A&amp;B" path="references/spec&amp;notes.md">' in res
    assert "{{vars.VALUE}}" in res and "resolved" not in res and "<skill_resources" not in res
    assert "<name>A&amp;B</name>" in reg.catalog()


def test_read_bytes_for_display(reg, root):
    write(root / "skill-dir" / "assets" / "dot.png", b"\x89PNG\r\n\x1a\n\x00\x00")
    data, mime = reg.read_bytes("skill-dir/assets/dot.png")
    assert data.startswith(b"\x89PNG") and mime == "image/png"
    with pytest.raises(ResourceError, match="binary"):
        reg.load("skill-dir/assets/dot.png")


# --- add / refresh / validate ---------------------------------------------------------------------------

def test_added_root_wins_and_refresh_picks_up_changes(reg, tmp_path):
    extra = tmp_path / "extra"
    make_skill(extra / "skill-dir", description="added copy")
    reg.add(extra)
    assert reg.get("skill-dir").description == "added copy"
    assert reg.shadowed[0][1].description == "Does a thing."
    assert reg.roots[0] == extra
    make_skill(extra / "brand-new")
    assert "brand-new" not in reg.names()
    reg.refresh()
    assert "brand-new" in reg.names()
    with pytest.raises(ConfigError):
        reg.add(tmp_path / "missing")


def test_a_skill_copied_in_after_the_scan_is_found_by_name_without_refresh(reg, root):
    assert "late-arrival" not in reg.names()
    make_skill(root / "late-arrival", description="Copied in later.")
    assert reg.get("late-arrival").description == "Copied in later."  # the miss re-scanned once
    assert "late-arrival" in reg.names()
    with pytest.raises(SkillNotFound, match="no skill named 'still-missing'"):
        reg.get("still-missing")


def test_add_single_skill_folder(tmp_path):
    reg = SkillRegistry([])
    reg.add(make_skill(tmp_path / "solo"))
    assert reg.names() == ["solo"]


def test_validate_by_name_and_path(reg, root, tmp_path):
    assert reg.validate("skill-dir").valid
    assert reg.validate(root / "pdf-processing").path is not None
    bad = make_skill(tmp_path / "Bad_Name", name="Bad_Name")
    assert not reg.validate(bad).valid
    with pytest.raises(SkillNotFound):
        reg.validate("no-such-skill-or-path")


def test_skipped_and_diagnostics(tmp_path):
    write(tmp_path / "r" / "nodesc" / "SKILL.md", "---\nname: nodesc\n---\n")
    reg = SkillRegistry([tmp_path / "r", tmp_path / "absent"])
    assert reg.list() == []
    assert [p.name for p, _ in reg.skipped] == ["nodesc"]
    assert [d.code for d in reg.diagnostics] == ["root-missing"]


def test_a_path_the_os_refuses_is_a_missing_root_not_a_crash(reg, tmp_path):
    # A name over NAME_MAX makes stat() fail with ENAMETOOLONG, which pathlib does not swallow.
    overlong = tmp_path / ("a" * 5000)
    other = SkillRegistry([overlong])
    assert other.list() == []
    assert [d.code for d in other.diagnostics] == ["root-missing"]
    with pytest.raises(ConfigError, match="not a folder"):
        reg.add(overlong)
    with pytest.raises(SkillNotFound):
        reg.validate(str(overlong))


def test_validate_an_unknown_users_home_is_not_found(reg):
    # Path.expanduser raises RuntimeError for ~nosuchuser; that is a path that does not exist.
    with pytest.raises(SkillNotFound, match="nor is it an existing path"):
        reg.validate("~no-such-user-ipyskills/skill")


# --- run ------------------------------------------------------------------------------------------------

def test_run_request_is_built_confined(reg, root):
    req = reg.run_request("skill-dir", "./scripts/run.py", args=["-x", "--y"], stdin="héllo", timeout=5,
                          memory="128m", pids=32)
    assert req.skill_name == "skill-dir" and req.script == "scripts/run.py"
    assert req.skill_dir == (root / "skill-dir").resolve()
    assert req.args == ["-x", "--y"] and req.stdin == "héllo".encode()
    assert req.limits.timeout == 5 and req.limits.memory == 128 * 1024**2 and req.limits.pids == 32
    assert req.argv == ["python3", "scripts/run.py", "-x", "--y"]


@pytest.mark.parametrize("script,match", [
    ("../outside.txt", "refused"),
    ("/etc/passwd", "refused"),
    ("scripts/nope.py", "no file 'scripts/nope.py'.*scripts/run.py"),
])
def test_run_request_refuses_bad_scripts(reg, script, match):
    with pytest.raises(SandboxError, match=match):
        reg.run_request("skill-dir", script)


def test_run_request_refuses_escaping_symlinked_script(reg, root, tmp_path):
    write(tmp_path / "evil.py", "print('outside')")
    os.symlink(tmp_path / "evil.py", root / "skill-dir" / "scripts" / "evil.py")
    with pytest.raises(SandboxError, match="escapes skill directory"):
        reg.run_request("skill-dir", "scripts/evil.py")


def test_run_request_refuses_a_script_under_a_folder_linked_out(reg, root, tmp_path):
    # Another input class than the linked file above: the folder on the path is the link.
    write(tmp_path / "elsewhere" / "tool.py", "print('outside')")
    os.symlink(tmp_path / "elsewhere", root / "skill-dir" / "tools", target_is_directory=True)
    with pytest.raises(SandboxError, match="script path refused: 'tools/tool.py' escapes skill directory"):
        reg.run_request("skill-dir", "tools/tool.py")


def test_run_request_with_an_overlong_script_name_is_a_sandbox_error(reg):
    # The OS refuses a path component over NAME_MAX (ENAMETOOLONG); that is the caller's mistake.
    with pytest.raises(SandboxError, match="no file"):
        reg.run_request("skill-dir", "scripts/" + "a" * 5000 + ".py")


@pytest.mark.parametrize("kwargs", [
    {"args": "one string"}, {"args": [1]}, {"stdin": 5}, {"timeout": -1}, {"memory": "lots"}, {"bogus": 1},
])
def test_run_request_bad_parameters_are_skill_errors(reg, kwargs):
    with pytest.raises(SkillError):
        reg.run_request("skill-dir", "scripts/run.py", **kwargs)


def test_run_end_to_end_on_local_backend(reg):
    result = reg.run("skill-dir", "scripts/run.py", args=["-v", "a b"], stdin="piped", backend="local",
                     guard=False, timeout=30)
    assert result.exit_code == 0, result.stderr
    assert "args ['-v', 'a b']" in result.stdout and "PIPED" in result.stdout
    assert result.backend == "local" and result.skill == "skill-dir" and result.script == "scripts/run.py"
