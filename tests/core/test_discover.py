"""Discovery: roots, precedence, bounded walks, symlinks, the stat-keyed cache."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ipyskills.core import discover as D
from ipyskills.core.discover import Discovery, find_skill_folders, make_root
from ipyskills.settings import DEFAULT_ROOTS, Settings


def make_skill(folder: Path, name: str | None = None, description: str = "Does a thing.", extra: str = "",
               body: str = "Body.\n") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    name = folder.name if name is None else name
    fm = f"name: {name}\n" + (f"description: {description}\n" if description is not None else "") + extra
    (folder / "SKILL.md").write_text(f"---\n{fm}---\n{body}", encoding="utf-8")
    return folder


def scan(*roots, **kw):
    return Discovery(**kw).scan([make_root(r) for r in roots])


def names(result):
    return [m.name for m in result.skills]


# --- walking --------------------------------------------------------------------------------------------

def test_root_of_skill_folders(tmp_path):
    make_skill(tmp_path / "b-skill")
    make_skill(tmp_path / "a-skill")
    (tmp_path / "README.md").write_text("not a skill")
    (tmp_path / "notes").mkdir()
    r = scan(tmp_path)
    assert names(r) == ["a-skill", "b-skill"]
    m = r.skills[0]
    assert m.path == tmp_path / "a-skill" and m.skill_md == tmp_path / "a-skill" / "SKILL.md"
    assert m.root == tmp_path
    assert r.skipped == [] and r.shadowed == [] and r.diagnostics == []


def test_single_skill_folder_and_skill_md_path_as_root(tmp_path):
    make_skill(tmp_path / "solo")
    assert names(scan(tmp_path / "solo")) == ["solo"]
    assert names(scan(tmp_path / "solo" / "SKILL.md")) == ["solo"]


def test_skills_do_not_nest(tmp_path):
    make_skill(tmp_path / "outer")
    make_skill(tmp_path / "outer" / "inner")
    make_skill(tmp_path / "group" / "grouped")
    assert names(scan(tmp_path)) == ["outer", "grouped"]  # shallowest first


def test_skip_folders(tmp_path):
    for skip in (".git", "node_modules", ".venv", "__pycache__", ".ipynb_checkpoints"):
        make_skill(tmp_path / skip / f"hidden-{skip.strip('._')}")
    make_skill(tmp_path / "visible")
    assert names(scan(tmp_path)) == ["visible"]


def test_depth_cap_is_reported(tmp_path):
    make_skill(tmp_path / "l1" / "l2" / "l3" / "deep4")
    make_skill(tmp_path / "m1" / "m2" / "m3" / "m4" / "deep5")
    r = scan(tmp_path)
    assert names(r) == ["deep4"]
    assert [p.code for p in r.diagnostics] == ["walk-depth"]
    assert "4 levels" in r.diagnostics[0].message


def test_folder_count_cap_is_reported(tmp_path):
    for i in range(10):
        (tmp_path / f"d{i}" / "x").mkdir(parents=True)
    make_skill(tmp_path / "d9" / "x" / "late")
    found, notes = find_skill_folders(tmp_path, max_dirs=5)
    assert found == []
    assert [p.code for p in notes] == ["walk-capped"]
    assert "5 folders" in notes[0].message
    found, notes = find_skill_folders(tmp_path, max_dirs=2000)
    assert [f.name for f in found] == ["late"] and notes == []


def test_symlinked_skill_folder_is_found_under_its_link_name(tmp_path):
    make_skill(tmp_path / "store" / "real-skill")
    (tmp_path / "root").mkdir()
    os.symlink(tmp_path / "store" / "real-skill", tmp_path / "root" / "linked")
    r = scan(tmp_path / "root")
    assert names(r) == ["real-skill"]
    assert r.skills[0].path == tmp_path / "root" / "linked"


def test_symlink_loops_do_not_hang(tmp_path):
    (tmp_path / "a").mkdir()
    os.symlink(tmp_path, tmp_path / "a" / "back")
    make_skill(tmp_path / "a" / "s")
    assert names(scan(tmp_path)) == ["s"]


# --- precedence and diagnostics -------------------------------------------------------------------------

def test_earlier_root_wins_and_loser_is_reported(tmp_path):
    first = make_skill(tmp_path / "one" / "shared", description="from one")
    second = make_skill(tmp_path / "two" / "shared", description="from two")
    make_skill(tmp_path / "two" / "only-two")
    r = scan(tmp_path / "one", tmp_path / "two")
    assert names(r) == ["shared", "only-two"]
    assert r.skills[0].description == "from one"
    [(winner, loser)] = r.shadowed
    assert winner.path == first and loser.path == second and loser.description == "from two"


def test_collision_inside_one_root_first_found_wins(tmp_path):
    make_skill(tmp_path / "a-folder", name="same")
    make_skill(tmp_path / "b-folder", name="same")
    r = scan(tmp_path)
    assert [m.path.name for m in r.skills] == ["a-folder"]
    assert r.shadowed[0][1].path.name == "b-folder"


def test_duplicate_and_overlapping_roots_scan_once(tmp_path):
    make_skill(tmp_path / "skills" / "s")
    os.symlink(tmp_path / "skills", tmp_path / "alias")
    r = scan(tmp_path / "skills", tmp_path / "alias", tmp_path / "skills" / "s")
    assert names(r) == ["s"] and r.shadowed == []


def test_missing_explicit_root_is_a_diagnostic_default_one_is_quiet(tmp_path):
    r = Discovery().scan([make_root(tmp_path / "nope"), make_root(tmp_path / "quiet", explicit=False)])
    assert [p.code for p in r.diagnostics] == ["root-missing"]
    assert "nope" in r.diagnostics[0].message and "does not exist" in r.diagnostics[0].message


def test_unloadable_skills_are_skipped_with_reasons(tmp_path):
    make_skill(tmp_path / "no-desc", description=None)
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "SKILL.md").write_text("---\nname: [unclosed\n---\n")
    (tmp_path / "nofm").mkdir()
    (tmp_path / "nofm" / "SKILL.md").write_text("# just markdown\n")
    make_skill(tmp_path / "good")
    r = scan(tmp_path)
    assert names(r) == ["good"]
    skipped = {p.name: probs for p, probs in r.skipped}
    assert set(skipped) == {"no-desc", "broken", "nofm"}
    assert all(probs and all(p.message for p in probs) for probs in skipped.values())
    assert any("description" in p.message.lower() for p in skipped["no-desc"])


def test_default_roots_order(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    roots = D.default_roots(Settings(skill_dirs=("conf",), bundled_skills=False))
    expected = [tmp_path / "conf"] + [Path(os.path.abspath(os.path.expanduser(p))) for p in DEFAULT_ROOTS]
    assert [r.path for r in roots] == expected
    assert roots[0].explicit and not any(r.explicit for r in roots[1:])
    assert D.default_roots(Settings(default_roots=False, bundled_skills=False)) == []


def test_project_skills_beat_user_skills(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    make_skill(tmp_path / "home" / ".agents" / "skills" / "shared", description="user")
    make_skill(tmp_path / ".claude" / "skills" / "shared", description="project")
    r = Discovery().scan(D.default_roots(Settings(bundled_skills=False)))
    assert [m.description for m in r.skills] == ["project"]
    assert r.shadowed[0][1].description == "user"
    assert r.diagnostics == []  # the absent default roots are not reported


# --- cache ----------------------------------------------------------------------------------------------

def test_rescan_reads_only_what_changed(tmp_path):
    for n in ("a", "b", "c"):
        make_skill(tmp_path / n)
    disc = Discovery()
    roots = [make_root(tmp_path)]
    disc.scan(roots)
    assert disc.loads == 3
    r = disc.scan(roots)
    assert disc.loads == 3 and len(r.skills) == 3
    make_skill(tmp_path / "b", description="Changed and longer.")
    r = disc.scan(roots)
    assert disc.loads == 4
    assert [m.description for m in r.skills if m.name == "b"] == ["Changed and longer."]


def test_rescan_with_nothing_changed_opens_no_file(tmp_path, monkeypatch):
    make_skill(tmp_path / "a")
    disc = Discovery()
    disc.scan([make_root(tmp_path)])
    import builtins

    def no_open(*a, **k):
        raise AssertionError(f"opened {a[0]!r}")

    monkeypatch.setattr(builtins, "open", no_open)
    monkeypatch.setattr(Path, "open", no_open)
    assert names(disc.scan([make_root(tmp_path)])) == ["a"]


# --- published-skill shapes -----------------------------------------------------------------------------

def test_real_world_frontmatter_shapes_load(tmp_path):
    make_skill(tmp_path / "folded", extra="license: MIT\n", description=">\n  Long folded description\n"
               "  that spans lines and says when to use it.")
    make_skill(tmp_path / "colon", description="Use this skill when: the user asks about PDFs")
    make_skill(tmp_path / "ext", extra="disable-model-invocation: true\nargument-hint: '[file]'\n"
               "metadata:\n  author: someone\n")
    (tmp_path / "crlf").mkdir()
    (tmp_path / "crlf" / "SKILL.md").write_bytes(b"---\r\nname: crlf\r\ndescription: Windows endings\r\n---\r\nB\r\n")
    make_skill(tmp_path / "unicode", description="Résumé 处理 — emoji ✓")
    make_skill(tmp_path / "mismatch", name="other-name")
    r = scan(tmp_path)
    by = {m.name: m for m in r.skills}
    assert set(by) == {"folded", "colon", "ext", "crlf", "unicode", "other-name"}, r.skipped
    assert by["folded"].description.startswith("Long folded description that spans")
    assert by["colon"].description == "Use this skill when: the user asks about PDFs"
    assert by["crlf"].description == "Windows endings"
    assert by["unicode"].description == "Résumé 处理 — emoji ✓"
    assert by["other-name"].problems  # loaded with a warning, not dropped
    assert by["ext"].problems


@pytest.mark.slow
def test_many_skills_rescan_is_fast(tmp_path):
    import time

    for i in range(300):
        make_skill(tmp_path / f"skill-{i:03d}")
    disc = Discovery()
    roots = [make_root(tmp_path)]
    t0 = time.perf_counter()
    disc.scan(roots)
    cold = time.perf_counter() - t0
    t0 = time.perf_counter()
    disc.scan(roots)
    warm = time.perf_counter() - t0
    assert disc.loads == 300
    assert warm < cold


def test_bundled_skills_come_last(tmp_path, monkeypatch):
    bundled = tmp_path / "bundled"
    make_skill(bundled / "shared", description="bundled copy")
    make_skill(bundled / "only-bundled")
    make_skill(tmp_path / "conf" / "shared", description="configured copy")
    monkeypatch.setattr(D, "bundled_skills_dir", lambda: bundled)
    roots = D.default_roots(Settings(skill_dirs=(str(tmp_path / "conf"),), default_roots=False))
    assert [(r.path, r.origin) for r in roots] == [(tmp_path / "conf", "configured"), (bundled, "bundled")]
    r = Discovery().scan(roots)
    assert {m.name: m.description for m in r.skills} == {"shared": "configured copy", "only-bundled": "Does a thing."}
    assert D.default_roots(Settings(default_roots=False, bundled_skills=False)) == []


def test_bundled_skills_dir_is_found():
    found = D.bundled_skills_dir()
    assert found is not None and found.is_dir() and found.name in ("skills", "_bundled_skills")


def test_a_skill_md_linked_outside_its_folder_is_skipped_not_listed(tmp_path):
    from ipyskills import SkillRegistry

    outside = tmp_path / "secret.md"
    outside.write_text("---\nname: leaked\ndescription: SECRET-DESCRIPTION from outside.\n---\nBody.\n")
    root = tmp_path / "skills"
    (root / "leaked").mkdir(parents=True)
    (root / "leaked" / "SKILL.md").symlink_to(outside)
    real = tmp_path / "src" / "linked-folder"
    real.mkdir(parents=True)
    (real / "SKILL.md").write_text("---\nname: linked-folder\ndescription: A folder reached by a link.\n---\nB.\n")
    (root / "linked-folder").symlink_to(real, target_is_directory=True)
    reg = SkillRegistry([str(root)], settings=Settings(default_roots=False, bundled_skills=False))
    assert reg.names() == ["linked-folder"]  # a linked skill folder is fine
    assert "SECRET-DESCRIPTION" not in reg.catalog()
    [(folder, problems)] = reg.skipped
    assert folder.name == "leaked" and problems[0].code == "skill-md-outside"
