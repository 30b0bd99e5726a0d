"""Real file tasks from published skills (benchmarks/real_tasks.py), one test per task.

- `test_published_task`: every task, on the collections exported under IPYSKILLS_PUBLISHED (default
  /tmp/published; see tests/published/README.md); skipped with the reason when they are not there (CI has no
  GitHub access).
- `test_vendored_task`: the tasks whose skill is committed under tests/published/vendored (Apache-2.0 and MIT
  skills only), so CI runs real published tasks too.
- The vendored copies are checked for their licence and notice, and against the collection when it is present.

A task whose failure was traced to the skill itself or to a package it pulls in (not to ipyskills) carries the
diagnosis in `known_failure` and is an xfail with that reason; it shows as XPASS the day it starts working.
"""

from __future__ import annotations

import filecmp
import importlib.util
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VENDORED = Path(__file__).resolve().parent / "vendored"


def _load_tasks():
    spec = importlib.util.spec_from_file_location("real_tasks", ROOT / "benchmarks" / "real_tasks.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["real_tasks"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


rt = _load_tasks()
PUBLISHED = Path(os.environ.get("IPYSKILLS_PUBLISHED", "/tmp/published"))
VENDORED_TASKS = [t for t in rt.TASKS if t.skill_dir(PUBLISHED, vendored=True).is_dir()]
# What the inputs and checks of the non-vendored tasks import on the host (the `test` extra has them).
HOST_LIBS = ("pypdf", "reportlab", "openpyxl", "docx", "pptx", "pydicom", "PIL")


def _param(task):
    marks = [pytest.mark.xfail(reason=task.known_failure, strict=False)] if task.known_failure else []
    return pytest.param(task, id=task.name, marks=marks)


def _run(task, request, vendored: bool):
    request.getfixturevalue("docker_backend")  # a skip, or a failure under IPYSKILLS_REQUIRE_DOCKER=1
    if task.office:
        request.getfixturevalue("office_image")
    row = rt.run_task(task, PUBLISHED, vendored=vendored)
    assert row["ok"], f"{task.name} ({task.interface}): {row['detail']}"
    assert row["verified"]


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("task", [_param(t) for t in rt.TASKS])
def test_published_task(task, request):
    folder = PUBLISHED / task.collection
    if not folder.is_dir():
        pytest.skip(f"{folder} is not there: export {rt.COLLECTIONS[task.collection]} into it "
                    f"(tests/published/README.md), or set IPYSKILLS_PUBLISHED")
    for name in HOST_LIBS:
        pytest.importorskip(name, reason=f"the task inputs and checks need {name} on the host (the test extra)")
    _run(task, request, vendored=False)


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("task", [_param(t) for t in VENDORED_TASKS])
def test_vendored_task(task, request):
    for name in task.host_libs:
        pytest.importorskip(name, reason=f"the task inputs and checks need {name} on the host (the test extra)")
    _run(task, request, vendored=True)


def test_every_area_and_interface_has_tasks():
    areas = {t.area for t in rt.TASKS}
    assert {"pdf", "docx", "xlsx", "pptx", "developer", "scientific"} <= areas
    assert {t.interface for t in rt.TASKS} == {"run", "cli", "magic"}
    assert {t.interface for t in VENDORED_TASKS} == {"run", "cli", "magic"}  # CI exercises all three
    assert len(rt.TASKS) >= 25 and len({t.name for t in rt.TASKS}) == len(rt.TASKS)


def _licence_of(skill: Path) -> str:
    own = skill / "LICENSE.txt"
    text = own.read_text() if own.is_file() else (skill.parent / "LICENSE.md").read_text()
    if "Apache License" in text and "Version 2.0" in text:
        return "Apache-2.0"
    if text.startswith("MIT License") and "Permission is hereby granted, free of charge" in text:
        return "MIT"
    return "other"


@pytest.mark.parametrize("skill", sorted(p for p in VENDORED.glob("*/*") if p.is_dir()), ids=lambda p: p.name)
def test_vendored_skill_is_apache_or_mit_with_a_notice(skill):
    licence = _licence_of(skill)
    assert licence in ("Apache-2.0", "MIT"), f"{skill}: not Apache-2.0 or MIT"
    if licence == "MIT":  # the repository's licence; the skill must not name another one itself
        frontmatter = (skill / "SKILL.md").read_text().split("---")[1]
        assert "license: MIT" in frontmatter, f"{skill.name} names another licence: {frontmatter[:300]}"
    notice = (skill.parent / "NOTICE").read_text()
    assert f"-> {skill.name}/" in notice and rt.COLLECTIONS[skill.parent.name] in notice
    assert any(len(word) == 40 and all(c in "0123456789abcdef" for c in word) for word in notice.split())


@pytest.mark.parametrize("skill", sorted(p for p in VENDORED.glob("*/*") if p.is_dir()), ids=lambda p: p.name)
def test_vendored_skill_is_verbatim(skill):
    """The same files and bytes as in the collection (skipped when the collection is not exported)."""
    task = next((t for t in VENDORED_TASKS if t.skill_dir(PUBLISHED, vendored=True) == skill), None)
    assert task is not None, f"{skill} is vendored but no task uses it"
    original = task.skill_dir(PUBLISHED)
    if not original.is_dir():
        pytest.skip(f"{original} is not there to compare with")

    def tree(folder: Path) -> list[str]:
        return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()
                      and "__pycache__" not in p.parts)

    assert tree(skill) == tree(original)
    _, mismatch, errors = filecmp.cmpfiles(original, skill, tree(skill), shallow=False)
    assert not mismatch and not errors, (mismatch, errors)
