"""Property: any locator either gives text from inside the skill or raises a SkillError; nothing from
outside the skill root ever appears in the result or in an error message."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ipyskills import SkillError, SkillRegistry
from ipyskills.core import resources as R

SENTINEL = "SENTINEL-7f3a-OUTSIDE"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    base = tmp_path_factory.mktemp("props")
    (base / "outside.txt").write_text(SENTINEL)
    (base / "secret").mkdir()
    (base / "secret" / "key.md").write_text(SENTINEL)
    skill = base / "root" / "s"
    (skill / "references" / "deep").mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: s\ndescription: d\n---\nbody\n")
    (skill / "references" / "a.md").write_text("inside a\n")
    (skill / "references" / "deep" / "b.md").write_text("inside b\n")
    os.symlink(base / "outside.txt", skill / "references" / "leak.md")
    os.symlink(base / "secret", skill / "references" / "secretdir")
    os.symlink("/etc", skill / "etc")
    os.symlink("a.md", skill / "references" / "alias.md")
    os.symlink("leak.md", skill / "references" / "chain.md")
    return base, SkillRegistry([base / "root"])


SEGMENTS = st.sampled_from([
    "", ".", "..", "...", "references", "deep", "a.md", "b.md", "leak.md", "alias.md", "chain.md",
    "secretdir", "key.md", "etc", "passwd", "hostname", "outside.txt", "SKILL.md", "C:", "c:", "\\", "\\\\",
    "~", "%2e%2e", "\x00", "s", "root", " ", "..\\..",
])
LOCATORS = st.one_of(
    st.lists(SEGMENTS, min_size=0, max_size=7).map(lambda parts: "s/" + "/".join(parts)),
    st.lists(SEGMENTS, min_size=1, max_size=3).map(lambda parts: "s/references/" + "/".join(parts)),
    st.lists(SEGMENTS, min_size=1, max_size=7).map("/".join),
    st.text(max_size=40).map(lambda t: "s/" + t),
    st.text(max_size=40),
)


KNOWN_ATTACKS = ["s/references/leak.md", "s/references/chain.md", "s/references/secretdir/key.md",
                 "s/etc/hostname", "s/../outside.txt", "s/references/../../outside.txt"]


def with_known_attacks(test):
    for locator in KNOWN_ATTACKS:
        test = example(locator=locator)(test)
    return test


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(locator=LOCATORS)
@with_known_attacks
def test_any_locator_is_confined(world, locator):
    _base, reg = world
    try:
        out = str(reg.load(locator))
    except SkillError as exc:
        assert SENTINEL not in str(exc)
        return
    assert SENTINEL not in out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(locator=LOCATORS)
@with_known_attacks
def test_read_bytes_is_confined(world, locator):
    _base, reg = world
    try:
        data, _mime = reg.read_bytes(locator)
    except SkillError as exc:
        assert SENTINEL not in str(exc)
        return
    assert SENTINEL.encode() not in data


@settings(max_examples=400, deadline=None)
@given(path=st.text(max_size=60))
def test_normalised_paths_are_plain_relative(path):
    try:
        rel = R.normalize_resource_path(path)
    except SkillError:
        return
    parts = rel.split("/")
    assert rel and not rel.startswith("/") and "\\" not in rel and "\x00" not in rel
    assert all(p not in ("", ".", "..") for p in parts)
    assert Path("/base", rel).resolve(strict=False).is_relative_to(Path("/base").resolve())
