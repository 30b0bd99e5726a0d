"""Discovery at scale, as behaviour (no timings): what a scan opens, what it re-reads, what the caps count.

Opens are counted with an audit hook, which sees every `open()`, `os.open()` and `Path.open()` alike.
"""

from __future__ import annotations

import os
import sys
import threading
from contextlib import contextmanager
from pathlib import Path

import pytest

from ipyskills.core import parse
from ipyskills.core.discover import Discovery, make_root
from ipyskills.core.registry import SkillRegistry
from ipyskills.core.validate import body_advice, load_meta, validate_path

_opened: list[str] | None = None


def _audit(event, args):
    if event == "open" and _opened is not None and isinstance(args[0], (str, bytes, os.PathLike)):
        _opened.append(os.fsdecode(args[0]))


sys.addaudithook(_audit)  # cannot be removed; it records only inside `opens()`


@contextmanager
def opens():
    global _opened
    _opened = seen = []
    try:
        yield seen
    finally:
        _opened = None


def skill_md_opens(paths: list[str]) -> list[str]:
    return [p for p in paths if os.path.basename(p) in ("SKILL.md", "skill.md")]


def make_skill(folder: Path, description: str = "Does a thing.", body: str = "Body.\n") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(f"---\nname: {folder.name}\ndescription: {description}\n---\n{body}",
                                     encoding="utf-8")
    return folder


@pytest.fixture
def flat_root(tmp_path):
    root = tmp_path / "skills"
    for i in range(120):
        make_skill(root / f"skill-{i:03d}")
    return root


class RecordingLoader:
    """The default loader, noting which folders it was asked to read."""

    def __init__(self):
        self.folders: list[str] = []

    def __call__(self, folder, root):
        self.folders.append(Path(folder).name)
        return load_meta(folder, root, scan_body=False)


# --- cold and warm scans --------------------------------------------------------------------------------

def test_cold_scan_opens_each_skill_md_once(flat_root):
    disc = Discovery()
    with opens() as seen:
        result = disc.scan([make_root(flat_root)])
    assert len(result.skills) == 120
    opened = skill_md_opens(seen)
    assert len(opened) == 120 and len(set(opened)) == 120  # no second pass over the body


def test_warm_rescan_opens_no_skill_md_and_keeps_the_objects(flat_root):
    disc = Discovery()
    first = disc.scan([make_root(flat_root)])
    with opens() as seen:
        second = disc.scan([make_root(flat_root)])
    assert skill_md_opens(seen) == []
    assert disc.loads == 120
    assert all(a is b for a, b in zip(first.skills, second.skills))  # served from the cache


def test_one_changed_skill_is_reread_alone(flat_root):
    loader = RecordingLoader()
    disc = Discovery(loader=loader)
    roots = [make_root(flat_root)]
    before = {m.name: m for m in disc.scan(roots).skills}
    loader.folders.clear()
    make_skill(flat_root / "skill-042", description="Now does another thing.")
    with opens() as seen:
        after = {m.name: m for m in disc.scan(roots).skills}
    assert loader.folders == ["skill-042"]
    assert [os.path.basename(os.path.dirname(p)) for p in skill_md_opens(seen)] == ["skill-042"]
    assert after["skill-042"].description == "Now does another thing."
    assert all(after[n] is before[n] for n in before if n != "skill-042")


def test_same_size_rewrite_with_restored_mtime_is_noticed(flat_root):
    disc = Discovery()
    roots = [make_root(flat_root)]
    disc.scan(roots)
    md = flat_root / "skill-007" / "SKILL.md"
    st = md.stat()
    md.write_text(md.read_text().replace("Does a thing.", "Does a thang."), encoding="utf-8")
    os.utime(md, ns=(st.st_atime_ns, st.st_mtime_ns))  # as rsync -t or touch -r would
    assert md.stat().st_size == st.st_size and md.stat().st_mtime_ns == st.st_mtime_ns
    by_name = {m.name: m for m in disc.scan(roots).skills}
    assert by_name["skill-007"].description == "Does a thang."


def test_removed_and_added_skills_follow_the_folder(flat_root):
    reg = SkillRegistry([flat_root])
    assert len(reg) == 120
    import shutil

    shutil.rmtree(flat_root / "skill-000")
    make_skill(flat_root / "zz-new")
    reg.refresh()
    assert "skill-000" not in reg and "zz-new" in reg
    assert reg.names()[-1] == "zz-new" and len(reg.list()) == 120


# --- listing reads only the frontmatter -----------------------------------------------------------------

def test_listing_leaves_body_advice_to_validate_and_body_advice(tmp_path):
    long_body = "line\n" * 700 + "caf\xe9\n"  # over 500 lines; the last line is Latin-1, not UTF-8
    folder = tmp_path / "root" / "long-one"
    make_skill(folder)
    md = folder / "SKILL.md"
    md.write_bytes(md.read_bytes().replace(b"Body.\n", long_body.encode("latin-1")))
    [meta] = Discovery().scan([make_root(tmp_path / "root")]).skills
    assert meta.status == "valid" and meta.problems == []
    advice = {p.code for p in body_advice(meta.skill_md)}
    assert advice == {"body-too-long", "body-not-utf8"}
    assert advice <= {p.code for p in validate_path(folder).problems}


def test_body_advice_of_a_missing_or_broken_file_is_empty(tmp_path):
    assert body_advice(tmp_path / "nope" / "SKILL.md") == []
    (tmp_path / "SKILL.md").write_text("no frontmatter\n")
    assert body_advice(tmp_path / "SKILL.md") == []


def test_lowercase_skill_md_keeps_its_warning_when_listed(tmp_path):
    folder = tmp_path / "root" / "lower"
    folder.mkdir(parents=True)
    (folder / "skill.md").write_text("---\nname: lower\ndescription: d\n---\nB\n")
    [meta] = Discovery().scan([make_root(tmp_path / "root")]).skills
    assert meta.skill_md.name == "skill.md"
    assert [p.code for p in meta.problems] == ["skill-md-name"]


def test_skill_md_hard_linked_as_both_names_lists_the_uppercase_one(tmp_path):
    folder = make_skill(tmp_path / "root" / "twin")
    os.link(folder / "SKILL.md", folder / "skill.md")  # what a case-insensitive file system looks like
    [meta] = Discovery().scan([make_root(tmp_path / "root")]).skills
    assert meta.skill_md.name == "SKILL.md" and meta.problems == []


def test_a_fifo_named_skill_md_never_blocks(tmp_path):
    folder = tmp_path / "root" / "pipe"
    folder.mkdir(parents=True)
    os.mkfifo(folder / "SKILL.md")
    make_skill(tmp_path / "root" / "fine")
    outcome = {}
    worker = threading.Thread(target=lambda: outcome.update(r=Discovery().scan([make_root(tmp_path / "root")])),
                              daemon=True)
    worker.start()
    worker.join(10)
    assert not worker.is_alive(), "the scan blocked on a FIFO"
    assert [m.name for m in outcome["r"].skills] == ["fine"]
    with pytest.raises(parse.SkillMdError) as err:  # and reading it directly refuses at once
        parse.parse_skill_md(folder / "SKILL.md")
    assert err.value.problem.code == "skill-md-not-file"


# --- the walk's caps count listed folders, not skills ---------------------------------------------------

def test_flat_root_with_more_skills_than_the_folder_cap_is_listed_whole(flat_root):
    result = Discovery(max_dirs=2).scan([make_root(flat_root)])
    assert len(result.skills) == 120 and result.diagnostics == []


def test_grouped_skills_count_one_folder_per_group(tmp_path):
    for g in range(6):
        for s in range(5):
            make_skill(tmp_path / f"group-{g}" / f"s-{g}-{s}")
    whole = Discovery(max_dirs=7).scan([make_root(tmp_path)])  # the root and six groups are listed
    assert len(whole.skills) == 30 and whole.diagnostics == []
    capped = Discovery(max_dirs=4).scan([make_root(tmp_path)])
    assert len(capped.skills) == 15  # the root and three groups
    assert [p.code for p in capped.diagnostics] == ["walk-capped"]


def test_same_skill_through_a_link_and_an_overlapping_root_is_listed_once(tmp_path):
    make_skill(tmp_path / "store" / "real-one")
    (tmp_path / "root").mkdir()
    os.symlink(tmp_path / "store" / "real-one", tmp_path / "root" / "linked")
    result = Discovery().scan([make_root(tmp_path / "root"), make_root(tmp_path / "store")])
    assert [m.path for m in result.skills] == [tmp_path / "root" / "linked"]
    assert result.shadowed == []


# --- the registry at scale ------------------------------------------------------------------------------

def test_registry_lookups_by_name_and_folder(flat_root, tmp_path):
    make_skill(flat_root / "folder-name").joinpath("SKILL.md").write_text(
        "---\nname: other-name\ndescription: d\n---\nB\n")
    reg = SkillRegistry([flat_root])
    assert reg.get("other-name") is reg.get("folder-name")
    assert "folder-name" in reg and "missing" not in reg and 42 not in reg
    listed = reg.list()
    listed.clear()  # callers get their own list
    assert len(reg.list()) == 121 and reg.names() == sorted(reg.names())


def test_registry_refresh_keeps_its_indexes_only_while_nothing_changed(flat_root):
    reg = SkillRegistry([flat_root])
    before = reg.get("skill-005")
    reg.refresh()
    assert reg.get("skill-005") is before and reg.list()[5] is before
    make_skill(flat_root / "skill-005", description="Edited.")
    reg.refresh()
    assert reg.get("skill-005").description == "Edited." and reg.list()[5].description == "Edited."
