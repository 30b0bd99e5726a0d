"""Level-3 resources: locators, confinement (symlinks included), manifest, capped UTF-8 reads.

Ports SiYuan's resource tests (kernel/util/skill_test.go, kernel/mcp/tools/skill_test.go) to our API.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ipyskills.core import resources as R
from ipyskills.errors import ResourceError, SkillError

from .files import write


@pytest.fixture
def skill(tmp_path) -> Path:
    d = tmp_path / "skills" / "safe"
    write(d / "SKILL.md", "---\nname: safe\ndescription: d\n---\nbody\n")
    write(d / "references" / "spec.md", "spec text\n")
    write(d / "scripts" / "run.py", "print(1)\n")
    write(tmp_path / "skills" / "outside.txt", "SECRET-OUTSIDE")
    return d


# --- locators -------------------------------------------------------------------------------------------

def test_split_locator():
    assert R.split_locator("pdf") == ("pdf", None)
    assert R.split_locator("pdf/references/a.md") == ("pdf", "references/a.md")
    assert R.split_locator("pdf/") == ("pdf", "")
    with pytest.raises(ResourceError):
        R.split_locator("/etc/passwd")
    with pytest.raises(ResourceError):
        R.split_locator("")


@pytest.mark.parametrize("path", [
    "../outside.txt",                  # SiYuan: safe/../outside.txt
    "references/../../../outside.txt",  # SiYuan: safe/references/../../../outside.txt
    "/absolute.txt",                   # SiYuan: safe//absolute.txt
    "C:/absolute.txt",                 # SiYuan: safe/C:/absolute.txt
    "c:absolute.txt",
    "\\\\server\\share\\x",
    "references\\spec.md",
    "references//spec.md",
    "references/",
    "",
    ".",
    "references/..",
    "a\x00b",
])
def test_bad_paths_are_refused(path):
    with pytest.raises(ResourceError) as err:
        R.normalize_resource_path(path)
    assert "invalid skill resource path" in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("path,expected", [
    ("references/./spec.md", "references/spec.md"),
    ("./references/spec.md", "references/spec.md"),
    ("references/../scripts/run.py", "scripts/run.py"),  # a '..' that stays inside is applied
    ("a/b/../../c", "c"),
    ("SKILL.md", "SKILL.md"),
])
def test_paths_are_normalised(path, expected):
    assert R.normalize_resource_path(path) == expected


# --- reads ----------------------------------------------------------------------------------------------

def test_read_text(skill):
    assert R.read_resource_text(skill, "references/spec.md") == "spec text\n"


def test_invalid_utf8_is_refused(skill):
    write(skill / "references" / "gbk.md", bytes([0xD6, 0xD0, 0xCE, 0xC4]))  # GBK for "中文"
    with pytest.raises(ResourceError, match="not valid UTF-8") as err:
        R.read_resource_text(skill, "references/gbk.md")
    assert "0xd6" in str(err.value)


def test_nul_bytes_are_refused(skill):
    write(skill / "references" / "nul.txt", b"abc\x00def")
    with pytest.raises(ResourceError, match="NUL"):
        R.read_resource_text(skill, "references/nul.txt")


def test_binary_by_type_is_refused_but_readable_as_bytes(skill):
    png = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16
    write(skill / "assets" / "logo.png", png)
    with pytest.raises(ResourceError, match=r"binary file \(image/png\)"):
        R.read_resource_text(skill, "assets/logo.png")
    data, mime = R.read_resource_bytes(skill, "assets/logo.png")
    assert data == png and mime == "image/png"


def test_svg_counts_as_text(skill):
    write(skill / "assets" / "a.svg", "<svg/>")
    assert R.read_resource_text(skill, "assets/a.svg") == "<svg/>"


def test_read_cap_boundary(skill):
    write(skill / "references" / "ok.md", b"a" * 65536)
    write(skill / "references" / "big.md", b"a" * 65537)
    assert len(R.read_resource_text(skill, "references/ok.md")) == 65536
    with pytest.raises(ResourceError, match="65536 byte limit") as err:
        R.read_resource_text(skill, "references/big.md")
    assert "read_cap" in str(err.value)
    assert "aaaa" not in str(err.value)


def test_read_cap_is_configurable(skill):
    write(skill / "references" / "big.md", b"a" * 100)
    with pytest.raises(ResourceError, match="10 byte limit"):
        R.read_resource_text(skill, "references/big.md", cap=10)
    assert R.read_resource_text(skill, "references/big.md", cap=100) == "a" * 100


def test_huge_file_is_not_read_whole(skill, monkeypatch):
    big = skill / "references" / "huge.md"
    with open(big, "wb") as fh:  # sparse: 1 GiB of apparent size, no disk cost
        fh.truncate(1 << 30)
    requested = []
    real_read = os.read

    def counting_read(fd, n):
        requested.append(n)
        return real_read(fd, n)

    monkeypatch.setattr(R.os, "read", counting_read)
    with pytest.raises(ResourceError, match="byte limit"):
        R.read_resource_text(skill, "references/huge.md")
    assert sum(requested) <= 65537


def test_missing_file_and_folder(skill):
    with pytest.raises(ResourceError, match="no file 'references/nope.md'"):
        R.read_resource_text(skill, "references/nope.md")
    with pytest.raises(ResourceError, match="is a folder") as err:
        R.read_resource_text(skill, "references")
    assert "references/spec.md" in str(err.value)


def test_fifo_is_refused_without_hanging(skill):
    os.mkfifo(skill / "references" / "pipe")
    with pytest.raises(ResourceError, match="not a regular file"):
        R.read_resource_text(skill, "references/pipe")


# --- symlinks -------------------------------------------------------------------------------------------

def test_symlinked_file_escaping_is_refused(skill):
    os.symlink(skill.parent / "outside.txt", skill / "references" / "leak.md")
    with pytest.raises(ResourceError, match="escapes skill directory") as err:
        R.read_resource_text(skill, "references/leak.md")
    assert "SECRET-OUTSIDE" not in str(err.value)


def test_symlink_to_absolute_system_path_is_refused(skill):
    os.symlink("/etc/hostname", skill / "host.txt")
    with pytest.raises(ResourceError, match="escapes skill directory"):
        R.read_resource_text(skill, "host.txt")


def test_symlinked_folder_escaping_is_refused(skill):
    os.symlink(skill.parent, skill / "up")
    with pytest.raises(ResourceError, match="escapes skill directory"):
        R.read_resource_text(skill, "up/outside.txt")


def test_symlink_chain_ending_outside_is_refused(skill):
    os.symlink(skill.parent / "outside.txt", skill / "hop2")
    os.symlink("hop2", skill / "hop1")
    with pytest.raises(ResourceError, match="escapes skill directory"):
        R.read_resource_text(skill, "hop1")


def test_symlink_chain_staying_inside_is_allowed(skill):
    os.symlink("references/spec.md", skill / "hop2")
    os.symlink("hop2", skill / "hop1")
    assert R.read_resource_text(skill, "hop1") == "spec text\n"


def test_symlink_loop_is_refused_cleanly(skill):
    os.symlink("loop-b", skill / "loop-a")
    os.symlink("loop-a", skill / "loop-b")
    with pytest.raises(SkillError):
        R.read_resource_text(skill, "loop-a")


def test_symlinked_skill_root_is_allowed(skill, tmp_path):
    link = tmp_path / "Linked"
    os.symlink(skill, link)
    assert R.read_resource_text(link, "references/spec.md") == "spec text\n"
    assert R.list_resources(link).files == ["references/spec.md", "scripts/run.py"]


# --- manifest -------------------------------------------------------------------------------------------

def test_manifest_lists_sorted_files_and_skips_vcs_and_caches(skill):
    write(skill / ".git" / "config", "[core]")
    write(skill / ".venv" / "pyvenv.cfg", "home=/usr")
    write(skill / "node_modules" / "x" / "index.js", "")
    write(skill / "scripts" / "__pycache__" / "run.cpython-311.pyc", b"\x00")
    write(skill / ".ipynb_checkpoints" / "a.ipynb", "{}")
    m = R.list_resources(skill)
    assert m.files == ["references/spec.md", "scripts/run.py"]
    assert m.truncated is False


def test_manifest_excludes_escaping_symlinks_and_does_not_follow_folder_links(skill):
    os.symlink(skill.parent / "outside.txt", skill / "references" / "leak.md")
    os.symlink("spec.md", skill / "references" / "alias.md")
    os.symlink(skill.parent, skill / "up")
    os.symlink(skill, skill / "self")  # a loop if followed
    assert R.list_resources(skill).files == ["references/alias.md", "references/spec.md", "scripts/run.py"]


def test_manifest_caps_at_200(tmp_path):
    d = tmp_path / "big"
    write(d / "SKILL.md", "---\n---\n")
    for i in range(201):
        write(d / "references" / f"{i:03d}.md", "")
    m = R.list_resources(d)
    assert len(m.files) == 200
    assert m.files[0] == "references/000.md" and m.files[-1] == "references/199.md"
    assert m.truncated is True


def test_manifest_visit_cap_with_empty_folders(tmp_path):
    d = tmp_path / "wide"
    write(d / "SKILL.md", "---\n---\n")
    for i in range(50):
        (d / f"empty{i:02d}").mkdir()
    m = R.list_resources(d, visit_cap=50)
    assert m.files == [] and m.truncated is True
    assert R.list_resources(d, visit_cap=500).truncated is False


def test_manifest_thousands_of_assets_is_bounded(tmp_path):
    d = tmp_path / "assets-skill"
    write(d / "SKILL.md", "---\n---\n")
    for i in range(3000):
        write(d / "assets" / f"icon{i:04d}.svg", "")
    m = R.list_resources(d)
    assert len(m.files) == 200 and m.truncated


def test_a_folder_swapped_for_a_symlink_after_the_check_is_still_refused(tmp_path, monkeypatch):
    """The race resolve-then-open leaves: the path was checked, then a folder on it became a symlink."""
    from ipyskills.core import resources

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("TOP-SECRET")
    skill = tmp_path / "skill"
    skill.mkdir()
    (skill / "refs").symlink_to(outside, target_is_directory=True)  # the swapped-in link
    # resolve_in_skill ran before the swap: it returns the path as it was checked, unresolved now
    monkeypatch.setattr(resources, "resolve_in_skill", lambda skill_dir, rel: Path(skill_dir) / rel)
    with pytest.raises(ResourceError, match="escapes skill directory") as info:
        resources.read_resource_text(skill, "refs/secret.txt")
    assert "TOP-SECRET" not in str(info.value)


def test_resolve_in_skill_confines_every_kind_of_link(tmp_path):
    # resolve_in_skill on its own (the read path checks the opened file again, which would hide a break
    # here): links out by folder, dangling, absolute, or to the root itself, under a skill reached by a link.
    outside = tmp_path / "outside"
    write(outside / "x.py", "print('outside')")
    real = tmp_path / "real-skill"
    write(real / "scripts" / "ok.py", "print('inside')")
    (real / "out-dir").symlink_to(outside, target_is_directory=True)
    (real / "scripts" / "dangling.py").symlink_to(outside / "not-there-yet.py")
    (real / "system").symlink_to("/etc", target_is_directory=True)
    (real / "here").symlink_to(".", target_is_directory=True)
    skill = tmp_path / "linked-skill"
    skill.symlink_to(real, target_is_directory=True)
    for rel in ("out-dir/x.py", "out-dir", "scripts/dangling.py", "system/passwd", "here/../outside/x.py"):
        with pytest.raises(ResourceError, match="escapes skill directory"):
            R.resolve_in_skill(skill, rel)
    inside = real.resolve() / "scripts" / "ok.py"
    assert R.resolve_in_skill(skill, "scripts/ok.py") == inside
    assert R.resolve_in_skill(skill, "here/here/scripts/ok.py") == inside
    assert R.resolve_in_skill(skill, "here") == real.resolve()
