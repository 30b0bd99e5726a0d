"""Property tests: whatever bytes a SKILL.md holds, the library answers with a SkillError or a result."""

from __future__ import annotations

import atexit
import json
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ipyskills.core.model import SkillMeta
from ipyskills.core.parse import parse_skill_md, read_body
from ipyskills.core.validate import PROBLEM_CODES, ValidationReport, load_meta, validate_path
from ipyskills.errors import SkillError

# Bytes that look like a SKILL.md often enough to reach the YAML and body code, plus raw noise.
FRAGMENTS = [
    b"---", b"---\n", b"---\r\n", b"\r", b"\n", b"\xef\xbb\xbf", b"name: my-skill\n", b"name: ",
    b"description: ", b"a: b: c\n", b"metadata:\n  ", b"  version: 1.0\n", b"&a ", b"*a", b"[", b"]",
    b"{", b"}", b"|\n  ", b">-\n  ", b"!!python/object:os.system", b"- ", b"#", b"\x00", b"\xff\xfe",
    "é技".encode(), "技".encode("gbk"), b"2024-13-45", b'"', b"'", b"\t", b"? ", b"%YAML 1.1\n",
]
skill_md_bytes = st.one_of(
    st.binary(max_size=600),
    st.lists(st.sampled_from(FRAGMENTS) | st.binary(max_size=12), max_size=40).map(b"".join),
    st.lists(st.sampled_from(FRAGMENTS), max_size=30).map(lambda parts: b"---\n" + b"".join(parts)),
)
COMMON = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


_BASE = Path(tempfile.mkdtemp(prefix="ipyskills-prop-"))
atexit.register(shutil.rmtree, _BASE, True)


def _write(data: bytes) -> Path:
    """The one skill folder these tests reuse, holding `data` as its SKILL.md."""
    folder = _BASE / "my-skill"
    folder.mkdir(exist_ok=True)
    (folder / "SKILL.md").write_bytes(data)
    return folder


@COMMON
@given(skill_md_bytes, st.booleans())
def test_parse_raises_only_skill_errors(data, lenient):
    folder = _write(data)
    try:
        parsed = parse_skill_md(folder / "SKILL.md", lenient=lenient)
    except SkillError:
        return
    assert isinstance(parsed.frontmatter, dict)
    assert 0 < parsed.body_offset <= len(data)
    try:
        body = read_body(parsed.path, parsed.body_offset)
    except SkillError:
        return
    assert body == body.strip() and "\r" not in body


@COMMON
@given(skill_md_bytes)
def test_load_meta_never_raises(data):
    folder = _write(data)
    meta, problems = load_meta(folder, folder.parent)
    assert {p.code for p in problems} <= set(PROBLEM_CODES)
    if meta is None:
        assert problems, "a skipped skill must say why"
    else:
        assert isinstance(meta, SkillMeta) and meta.description.strip() and meta.name
        assert meta.problems == problems


@COMMON
@given(skill_md_bytes)
def test_validate_path_never_raises(data):
    report = validate_path(_write(data))
    assert isinstance(report, ValidationReport)
    assert all(p.severity in ("error", "warning") and p.code in PROBLEM_CODES and p.message
               for p in report.problems)
    report.to_dict()


# Characters YAML may carry in a double-quoted scalar without changing them (no controls, surrogates,
# non-characters or the extra line breaks NEL, LS, PS).
yaml_text = st.text(
    st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp"), blacklist_characters="\ufffe\uffff"),
    max_size=200,
)


@COMMON
@given(yaml_text, yaml_text)
def test_any_text_values_round_trip_when_quoted(name, description):
    """Values written as JSON strings (valid YAML) come back unchanged, whatever their characters."""
    quoted_name, quoted_description = (json.dumps(v, ensure_ascii=False) for v in (name, description))
    text = f"---\nname: {quoted_name}\ndescription: {quoted_description}\n---\nBody\n"
    parsed = parse_skill_md(_write(text.encode()) / "SKILL.md", lenient=False)
    assert parsed.frontmatter == {"name": name, "description": description}
