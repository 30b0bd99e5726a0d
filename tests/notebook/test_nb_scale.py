"""The notebook side at scale, as behaviour: a cheap %load_ext, bounded tables and lists, body advice on cards."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from ipyskills.core.model import Problem
from ipyskills.core.registry import SkillRegistry
from ipyskills.notebook import browser as browser_module
from ipyskills.notebook.display import NOTE_ROWS, SkillTable, meta_bundle


def make_skill(folder: Path, body: str = "Body.\n") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(f"---\nname: {folder.name}\ndescription: About {folder.name}.\n---\n{body}",
                                     encoding="utf-8")
    return folder


LOAD_EXT = """
import json, sys
from IPython.core.interactiveshell import InteractiveShell
ip = InteractiveShell.instance()
before = set(sys.modules)
ip.run_line_magic("load_ext", "ipyskills")
print(json.dumps(sorted(set(sys.modules) - before)))
"""


def test_load_ext_imports_no_yaml_registry_or_widgets(tmp_path):
    proc = subprocess.run([sys.executable, "-c", LOAD_EXT], capture_output=True, text=True, cwd=tmp_path, check=False,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    loaded = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "ipyskills.notebook.magics" in loaded  # the extension did load
    heavy = [m for m in loaded if m.split(".")[0] in ("yaml", "ipywidgets", "docker", "mistune")
             or m in ("ipyskills.core.registry", "ipyskills.core.discover", "ipyskills.core.parse")]
    assert heavy == []  # discovery and its imports wait for the first magic that needs skills


def test_card_shows_body_advice_that_listing_left_out(tmp_path):
    make_skill(tmp_path / "long-one", body="line\n" * 600)
    meta = SkillRegistry([tmp_path]).get("long-one")
    assert meta.status == "valid"  # listing read only the frontmatter
    bundle = meta_bundle(meta)
    assert "[warnings]" in bundle["text/plain"] and "[body-too-long]" in bundle["text/plain"]
    assert "body-too-long" in bundle["text/html"]


def test_table_notes_are_bounded(tmp_path):
    skills = SkillRegistry([make_skill(tmp_path / "one")]).list()
    skipped = [(tmp_path / f"bad-{i}", [Problem("yaml-invalid", None, "bad")]) for i in range(NOTE_ROWS + 30)]
    text = SkillTable(skills, skipped=skipped).mimebundle()["text/plain"]
    assert f"{NOTE_ROWS + 30} skipped:" in text and "… and 30 more" in text
    assert "bad-19" in text and f"bad-{NOTE_ROWS + 29}" not in text


def test_browser_lists_a_bounded_window_and_the_filter_reaches_the_rest(tmp_path, monkeypatch):
    for i in range(12):
        make_skill(tmp_path / f"skill-{i:02d}")
    monkeypatch.setattr(browser_module, "MAX_OPTIONS", 5)
    b = browser_module.SkillBrowser(SkillRegistry([tmp_path]))
    assert [value for _, value in b.skills.options] == [f"skill-{i:02d}" for i in range(5)]
    assert "12 of 12" in b.count.value and "first 5" in b.count.value
    b.filter.value = "skill-11"
    assert [value for _, value in b.skills.options] == ["skill-11"]
    assert b.skills.value == "skill-11" and "first" not in b.count.value


def test_pages_of_the_table_and_a_page_past_the_end(tmp_path):
    for i in range(7):
        make_skill(tmp_path / f"skill-{i}")
    table = SkillTable(SkillRegistry([tmp_path]).list(), limit=3)
    assert table.page(3).mimebundle()["text/plain"].splitlines()[1].split()[1] == "skill-6"
    past = table.page(9).mimebundle()
    assert "no rows on this page (7 skills in all)" in past["text/plain"]
