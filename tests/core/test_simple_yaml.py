"""The fast frontmatter reader must give exactly what PyYAML gives, or step aside (None)."""

from __future__ import annotations

import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ipyskills.core import parse
from ipyskills.core.simple_yaml import load_simple

LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def pyyaml(text: str):
    return yaml.load(text, Loader=LOADER)


# --- the subset it reads ----------------------------------------------------------------------------------

def test_typical_frontmatter_is_read_and_matches_pyyaml():
    text = ("name: pdf-tools\n"
            "description: Extracts text, tables and forms from PDFs (v2, [beta]). Use for C# & résumés — 日本語.\n"
            "# owner: docs team\n"
            "\n"
            "license: 'Apache-2.0'\n"
            'compatibility: "Python 3.10+; no network"\n'
            "allowed-tools: Bash(python:*) Read\n"
            "metadata:\n"
            "  author: example-org\n"
            '  version: "1.0"\n'
            "  # a comment inside the block\n"
            "  url: https://example.org/a:b\n")
    got = load_simple(text)
    assert got is not None
    assert repr(got) == repr(pyyaml(text))  # same keys, order, values and types


def test_bare_key_is_null_like_pyyaml():
    for text in ("name: x\nmetadata:\ndescription: d\n", "name: x\nmetadata:\n", "metadata:   \nname: x\n"):
        assert load_simple(text) == pyyaml(text)
        assert load_simple(text)["metadata"] is None


# --- what it leaves to PyYAML -----------------------------------------------------------------------------

LEFT_TO_PYYAML = [
    "version: 1.0\n",  # a float
    "name: yes\n",  # a boolean (YAML 1.1)
    "on: x\n",  # a boolean key
    "date: 2024-01-01\n",  # a date
    "x: ~\n",  # null
    "description: Use when: asked\n",  # invalid YAML (the lenient colon retry handles it)
    "description: ends with:\n",
    "description: text # comment\n",
    "description: 'it''s'\n",  # an escaped quote
    'description: "tab\\there"\n',  # an escape
    "description: '\n  multi'\n",
    "description: >\n  folded\n",  # block scalars
    "description: |\n  literal\n",
    "description: first\n  continued\n",  # a multi-line plain scalar
    "tags: [a, b]\n",  # flow collections
    "tags:\n  - a\n",  # a block sequence
    "a: &x v\nb: *x\n",  # anchors and aliases
    "a: !!str 1\n",  # tags
    "name: a\nname: b\n",  # a duplicate key (reported by the PyYAML path)
    "metadata:\n  a: x\n   b: y\n",  # uneven indentation
    "metadata:\n   a: x\n  b: y\n",
    "metadata:\n  inner:\n    deep: x\n",  # two levels
    "  name: indented\n",
    "name:\tx\n",  # a tab
    "name: x\u2028y\n",  # a Unicode line separator
    "name: \ufeffx\n",
    "key :x\n",
    "key:value\n",
    "# only a comment\n",
    "",
    "k" * 200 + ": v\n",
    "<<: x\n",
    "- a\n",
]


def test_everything_outside_the_subset_is_left_to_pyyaml():
    for text in LEFT_TO_PYYAML:
        assert load_simple(text) is None, text


# --- the property: never a different answer ---------------------------------------------------------------

KEYS = st.sampled_from(["name", "description", "license", "compatibility", "metadata", "allowed-tools",
                        "version", "on", "yes", "Null", "true", "y", "n", "_x", "a-b", "Name", "1", "x1"])
ALPHABET = st.sampled_from(list("ab -:#'\"\\,[]{}&*!|>%@`?~.+0159eEyYnNtT_=<\t") +
                           ["é", "日", "\x85", "\u2028", "\xa0", "\ufeff", "\x07"])
TEXT = st.text(ALPHABET, max_size=12)
SCALARS = st.one_of(
    TEXT,
    st.sampled_from(["1.0", "1_000", "0x1f", "12:30", ".inf", "2024-01-01", "yes", "No", "null", "~", "=",
                     "<<", "true", "1e3", "-1", "+1", "x: y", "a #b", "'q'", '"q"', "''", '""', "'a'b'"]),
)


@st.composite
def frontmatter(draw):
    lines = []
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["pair", "pair", "bare", "nested", "comment", "blank", "raw"]))
        key = draw(KEYS)
        if kind == "pair":
            lines.append(f"{key}:{draw(st.sampled_from([' ', '  ']))}{draw(SCALARS)}")
        elif kind == "bare":
            lines.append(f"{key}:")
        elif kind == "nested":
            indent = " " * draw(st.integers(1, 3))
            lines.append(f"{indent}{draw(KEYS)}: {draw(SCALARS)}")
        elif kind == "comment":
            lines.append(" " * draw(st.integers(0, 2)) + "#" + draw(TEXT))
        elif kind == "blank":
            lines.append(" " * draw(st.integers(0, 2)))
        else:
            lines.append(draw(TEXT))
    return "\n".join(lines) + draw(st.sampled_from(["", "\n"]))


PLAIN_KEYS = st.sampled_from(["name", "description", "license", "metadata", "allowed-tools", "author",
                              "version", "y", "n", "_x", "a-b", "Name", "x1"])
WORDS = st.text(st.sampled_from(list("abcXY019 -_.:#'\"/()é日")), min_size=1, max_size=10)
SAFE = st.text(st.sampled_from(list("abXY19 ./()é日,-")), max_size=8).map(lambda t: "v" + t)
VALUES = st.one_of(SAFE, SAFE, SAFE, WORDS, SCALARS)


@st.composite
def near_subset(draw):
    """Well-formed blocks of distinct keys whose values are mostly plain text: exercises acceptance."""
    lines = []
    for key in draw(st.lists(PLAIN_KEYS, min_size=1, max_size=5, unique=True)):
        if draw(st.booleans()):
            lines.append(f"{key}: {draw(VALUES)}")
        else:
            lines.append(f"{key}:")
            indent = " " * draw(st.integers(1, 4))
            for child in draw(st.lists(PLAIN_KEYS, max_size=3, unique=True)):
                lines.append(f"{indent}{child}: {draw(VALUES)}")
    return "\n".join(lines) + "\n"


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(frontmatter(), near_subset()))
@example("name: x\nmetadata:\n  a: b\n  c: d\n")
@example("metadata:\n  a: b\nmetadata: c\n")
@example("a: b\nmetadata:\n a: b\n")
def test_fast_reader_agrees_with_pyyaml(text):
    got = load_simple(text)
    if got is None:
        return
    expected, duplicates = parse._load_yaml(text, LOADER)  # raises if PyYAML would refuse the text
    assert duplicates == []
    assert repr(got) == repr(expected)


def test_parse_skill_md_is_the_same_with_and_without_the_fast_reader(tmp_path, monkeypatch):
    sources = [
        "name: a\ndescription: plain\nmetadata:\n  author: me\n  version: '2'\n",
        "name: a\ndescription: Use when: asked\n",  # colon retry, PyYAML path
        "name: a\ndescription: d\nversion: 1.10\n",
    ]
    for i, fm in enumerate(sources):
        path = tmp_path / f"s{i}" / "SKILL.md"
        path.parent.mkdir()
        path.write_text(f"---\n{fm}---\nBody\n", encoding="utf-8")
        fast = parse.parse_skill_md(path)
        with monkeypatch.context() as m:
            m.setattr(parse, "load_simple", lambda text: None)
            slow = parse.parse_skill_md(path)
        assert (repr(fast.frontmatter), fast.problems, fast.body_offset) == (
            repr(slow.frontmatter), slow.problems, slow.body_offset)
