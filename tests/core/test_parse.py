"""SKILL.md parsing: delimiters, encodings, YAML safety, bounded reads, and skills-ref's parser cases (P*)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from ipyskills.core import parse as P
from ipyskills.core.parse import SkillMdError, find_skill_md, parse_skill_md, read_body
from ipyskills.core.validate import PROBLEM_CODES, load_meta
from ipyskills.errors import InvalidSkill

GOOD = "name: my-skill\ndescription: A test skill\n"


def parse_bytes(tmp_path: Path, data: bytes, *, lenient: bool = True):
    folder = tmp_path / "my-skill"
    folder.mkdir(exist_ok=True)
    (folder / "SKILL.md").write_bytes(data)
    return parse_skill_md(folder / "SKILL.md", lenient=lenient)


def parse_error(tmp_path: Path, data: bytes, *, lenient: bool = True) -> SkillMdError:
    with pytest.raises(SkillMdError) as info:
        parse_bytes(tmp_path, data, lenient=lenient)
    assert isinstance(info.value, InvalidSkill)
    assert info.value.problem.code in PROBLEM_CODES and str(info.value) == info.value.problem.message
    return info.value


def codes(problems) -> list[str]:
    found = [p.code for p in problems]
    assert set(found) <= set(PROBLEM_CODES), "every code is documented in PROBLEM_CODES"
    return found


# --- skills-ref parser cases (tests/test_parser.py) ------------------------------------------------------

def test_p1_valid_frontmatter(tmp_path):
    parsed = parse_bytes(tmp_path, b"---\nname: my-skill\ndescription: A test skill\n---\n# My Skill\n\n"
                                   b"Instructions here.\n")
    assert parsed.frontmatter == {"name": "my-skill", "description": "A test skill"}
    assert parsed.problems == ()
    assert "# My Skill" in read_body(parsed.path, parsed.body_offset)


def test_p2_missing_frontmatter(tmp_path):
    err = parse_error(tmp_path, b"# No frontmatter here")
    assert err.problem.code == "no-frontmatter"
    assert "must start with YAML frontmatter" in str(err)


def test_p3_unclosed_frontmatter(tmp_path):
    err = parse_error(tmp_path, b"---\nname: my-skill\ndescription: A test skill\n")
    assert err.problem.code == "frontmatter-unclosed"
    assert "not closed" in str(err)


@pytest.mark.parametrize("lenient", [True, False])
def test_p4_invalid_yaml(tmp_path, lenient):
    err = parse_error(tmp_path, b"---\nname: [invalid\ndescription: broken\n---\nBody\n", lenient=lenient)
    assert (err.problem.code, err.problem.field) == ("yaml-invalid", "name")
    assert "Invalid YAML" in str(err) and "line " in str(err)


def test_p5_non_mapping_frontmatter(tmp_path):
    err = parse_error(tmp_path, b"---\n- just\n- a\n- list\n---\nBody\n")
    assert err.problem.code == "frontmatter-not-mapping"
    assert "must be a YAML mapping" in str(err) and "list" in str(err)


def test_p6_read_valid_skill(make_skill, tmp_path):
    folder = make_skill("my-skill", GOOD + "license: MIT\n")
    meta, problems = load_meta(folder, tmp_path)
    assert (meta.name, meta.description, meta.frontmatter["license"]) == ("my-skill", "A test skill", "MIT")
    assert problems == [] and meta.status == "valid"


def test_p7_metadata_unquoted_number_becomes_text_when_loading(make_skill, tmp_path):
    """skills-ref (strictyaml) reads every scalar as a string; PyYAML reads `1.0` as a float. Lenient
    loading gives back the text as written; strict validation says to quote it (the specification:
    metadata is "a map from string keys to string values")."""
    folder = make_skill("my-skill", GOOD + "metadata:\n  author: Test Author\n  version: 1.0\n")
    meta, problems = load_meta(folder, tmp_path)
    assert meta.frontmatter["metadata"] == {"author": "Test Author", "version": "1.0"}
    assert codes(problems) == ["metadata-value-not-string"]
    assert 'version: "1.0"' in problems[0].message


def test_p8_missing_skill_md(tmp_path):
    (tmp_path / "empty").mkdir()
    meta, problems = load_meta(tmp_path / "empty", tmp_path)
    assert meta is None and codes(problems) == ["skill-md-missing"]
    assert "SKILL.md" in problems[0].message


def test_p9_missing_name_loads_under_folder_name(make_skill, tmp_path):
    """skills-ref's read_properties raises; the client guide says to load when possible, so lenient
    loading uses the folder name, and the missing name stays recorded as a specification error."""
    folder = make_skill("my-skill", "description: A test skill\n")
    meta, problems = load_meta(folder, tmp_path)
    assert meta.name == "my-skill"
    assert codes(problems) == ["name-missing", "name-from-folder"]
    assert meta.status == "invalid"


def test_p10_missing_description_skips(make_skill, tmp_path):
    folder = make_skill("my-skill", "name: my-skill\n")
    meta, problems = load_meta(folder, tmp_path)
    assert meta is None
    assert codes(problems) == ["description-missing", "skipped-no-description"]


def test_p11_find_skill_md_prefers_uppercase(tmp_path):
    (tmp_path / "SKILL.md").write_text("x")
    (tmp_path / "skill.md").write_text("y")
    assert find_skill_md(tmp_path).name == "SKILL.md"


def test_p12_find_skill_md_accepts_lowercase(tmp_path):
    (tmp_path / "skill.md").write_text("x")
    assert find_skill_md(tmp_path).name == "skill.md"


def test_p13_find_skill_md_none_when_missing(tmp_path):
    assert find_skill_md(tmp_path) is None
    assert find_skill_md(tmp_path / "nope") is None
    (tmp_path / "Skill.md").write_text("x")  # other spellings are not looked for
    assert find_skill_md(tmp_path) is None


def test_p14_lowercase_skill_md_loads_with_warning(make_skill, tmp_path):
    """Accepted like skills-ref does, but with a warning: the client guide says clients scan for "a file
    named exactly `SKILL.md`", so other clients may not see this skill."""
    folder = make_skill("my-skill", GOOD, filename="skill.md")
    meta, problems = load_meta(folder, tmp_path)
    assert meta.name == "my-skill" and meta.skill_md.name == "skill.md"
    assert codes(problems) == ["skill-md-name"] and problems[0].severity == "warning"
    assert meta.status == "warnings"


def test_p15_allowed_tools_string(make_skill, tmp_path):
    folder = make_skill("my-skill", GOOD + "allowed-tools: Bash(jq:*) Bash(git:*)\n")
    meta, problems = load_meta(folder, tmp_path)
    assert meta.frontmatter["allowed-tools"] == "Bash(jq:*) Bash(git:*)"
    assert problems == []


# --- delimiters and line endings -------------------------------------------------------------------------

def test_dashes_inside_a_value_are_content(tmp_path):
    """skills-ref splits on the first `---` anywhere and reads `a---b` as `a`; delimiters are lines."""
    parsed = parse_bytes(tmp_path, b"---\nname: my-skill\ndescription: a---b\n---\nBody\n")
    assert parsed.frontmatter["description"] == "a---b"


def test_dashes_in_body_are_content(tmp_path):
    parsed = parse_bytes(tmp_path, b"---\n" + GOOD.encode() + b"---\nIntro\n---\nMore\n---\n")
    assert read_body(parsed.path, parsed.body_offset) == "Intro\n---\nMore\n---"


def test_indented_dashes_in_block_scalar_are_content(tmp_path):
    parsed = parse_bytes(tmp_path, b"---\nname: my-skill\ndescription: |\n  one\n  ---\n  two\n---\nBody\n")
    assert parsed.frontmatter["description"] == "one\n---\ntwo\n"


def test_delimiters_with_trailing_spaces(tmp_path):
    parsed = parse_bytes(tmp_path, b"---  \n" + GOOD.encode() + b"--- \t\nBody\n")
    assert parsed.frontmatter["name"] == "my-skill"
    assert read_body(parsed.path, parsed.body_offset) == "Body"


def test_four_dashes_are_not_a_delimiter(tmp_path):
    err = parse_error(tmp_path, b"---\n" + GOOD.encode() + b"----\nBody\n")
    assert err.problem.code == "frontmatter-unclosed"


def test_opening_must_be_first_line(tmp_path):
    assert parse_error(tmp_path, b"\n---\n" + GOOD.encode() + b"---\n").problem.code == "no-frontmatter"
    assert parse_error(tmp_path, b"--- x\n" + GOOD.encode() + b"---\n").problem.code == "no-frontmatter"


def test_crlf(tmp_path):
    data = b"---\r\nname: my-skill\r\ndescription: >\r\n  line one\r\n  line two\r\n---\r\n# Title\r\n\r\nText\r\n"
    parsed = parse_bytes(tmp_path, data)
    assert parsed.frontmatter == {"name": "my-skill", "description": "line one line two\n"}
    assert read_body(parsed.path, parsed.body_offset) == "# Title\n\nText"
    assert data[parsed.body_offset:].startswith(b"# Title")


def test_closing_delimiter_at_end_of_file_with_lone_cr(tmp_path):
    parsed = parse_bytes(tmp_path, b"---\r\nname: my-skill\r\ndescription: d\r\n---\r")
    assert parsed.frontmatter["description"] == "d"
    assert read_body(parsed.path, parsed.body_offset) == ""


def test_closing_delimiter_without_newline(tmp_path):
    parsed = parse_bytes(tmp_path, b"---\n" + GOOD.encode() + b"---")
    assert parsed.frontmatter["name"] == "my-skill"


def test_cr_only_line_endings(tmp_path):
    parsed = parse_bytes(tmp_path, b"---\rname: my-skill\rdescription: d\r---\rBody\rmore\r")
    assert parsed.frontmatter == {"name": "my-skill", "description": "d"}
    assert read_body(parsed.path, parsed.body_offset) == "Body\nmore"


def test_bom_accepted_with_warning(tmp_path):
    """skills-ref rejects a BOM ("must start with YAML frontmatter"); editors on Windows add one, and
    it is not content, so it is accepted with a warning."""
    parsed = parse_bytes(tmp_path, b"\xef\xbb\xbf---\n" + GOOD.encode() + b"---\nBody\n")
    assert parsed.frontmatter["name"] == "my-skill"
    assert codes(parsed.problems) == ["bom"] and parsed.problems[0].severity == "warning"


def test_block_scalars(tmp_path):
    fm = (b"name: my-skill\ndescription: >\n  folded\n  text\nlicense: |-\n  keep\n  lines\n"
          b"compatibility: |\n  literal\n")
    parsed = parse_bytes(tmp_path, b"---\n" + fm + b"---\nBody\n")
    assert parsed.frontmatter["description"] == "folded text\n"
    assert parsed.frontmatter["license"] == "keep\nlines"
    assert parsed.frontmatter["compatibility"] == "literal\n"


def test_comments_are_ignored(tmp_path):
    parsed = parse_bytes(tmp_path, b"---\n# a comment\nname: my-skill  # trailing\ndescription: d\n---\n")
    assert parsed.frontmatter == {"name": "my-skill", "description": "d"}


def test_empty_frontmatter(tmp_path):
    err = parse_error(tmp_path, b"---\n---\nBody\n")
    assert err.problem.code == "frontmatter-empty"


def test_scalar_frontmatter(tmp_path):
    err = parse_error(tmp_path, b"---\njust text\n---\nBody\n")
    assert err.problem.code == "frontmatter-not-mapping" and "string" in str(err)


def test_body_offset_points_after_closing_line(tmp_path):
    data = b"---\n" + GOOD.encode() + b"---\n  \nBody text\n\n"
    parsed = parse_bytes(tmp_path, data)
    assert parsed.body_offset == len(b"---\n" + GOOD.encode() + b"---\n")
    assert read_body(parsed.path, parsed.body_offset) == "Body text"


def test_read_body_cap(tmp_path):
    parsed = parse_bytes(tmp_path, b"---\n" + GOOD.encode() + b"---\n" + b"x" * 100)
    assert read_body(parsed.path, parsed.body_offset, max_bytes=100) == "x" * 100
    with pytest.raises(SkillMdError) as info:
        read_body(parsed.path, parsed.body_offset, max_bytes=99)
    assert info.value.problem.code == "body-over-cap"


# --- encodings -----------------------------------------------------------------------------------------

def test_gbk_frontmatter_is_a_clear_error(tmp_path):
    data = "---\nname: my-skill\ndescription: 处理中文文档\n---\nBody\n".encode("gbk")
    err = parse_error(tmp_path, data)
    assert err.problem.code == "not-utf8"
    assert "UTF-8" in str(err) and "line 3" in str(err)


def test_gbk_body_is_a_clear_error_on_read(tmp_path):
    data = b"---\n" + GOOD.encode() + b"---\n" + "正文".encode("gbk")
    parsed = parse_bytes(tmp_path, data)
    with pytest.raises(SkillMdError) as info:
        read_body(parsed.path, parsed.body_offset)
    assert info.value.problem.code == "not-utf8"


def test_unicode_description(tmp_path):
    parsed = parse_bytes(tmp_path, "---\nname: my-skill\ndescription: Résumé 文档 — ✓\n---\n".encode())
    assert parsed.frontmatter["description"] == "Résumé 文档 — ✓"


def test_nul_byte_in_frontmatter(tmp_path):
    err = parse_error(tmp_path, b"---\nname: my\x00skill\ndescription: d\n---\n")
    assert err.problem.code == "yaml-invalid"


# --- YAML safety and typing ------------------------------------------------------------------------------

BILLION_LAUGHS = b"""---
name: my-skill
description: d
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
metadata:
  x: *i
---
Body
"""


# In a child process with a memory cap and a deadline: if aliases were ever let through, the expansion
# (9**9 items) would otherwise eat this process's memory and time, inside C code no per-test timeout
# can interrupt, instead of failing this test in seconds.
BILLION_LAUGHS_CHILD = """
import sys, time
from pathlib import Path
from ipyskills.core.parse import SkillMdError, parse_skill_md
from ipyskills.core.validate import load_meta, validate_path
folder = Path(sys.argv[1])
start = time.perf_counter()
try:
    parse_skill_md(folder / "SKILL.md", lenient=True)
    print("PARSED")
except SkillMdError as exc:
    print(exc.problem.code)
meta, problems = load_meta(folder, folder.parent)
report = validate_path(folder)
print(meta is None, [p.code for p in problems], [p.code for p in report.errors])
print(round(time.perf_counter() - start, 3))
"""


def test_billion_laughs_is_refused_fast(tmp_path):
    import resource
    import subprocess
    import sys

    folder = tmp_path / "my-skill"
    folder.mkdir()
    (folder / "SKILL.md").write_bytes(BILLION_LAUGHS)

    def cap_memory():
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    try:
        child = subprocess.run([sys.executable, "-c", BILLION_LAUGHS_CHILD, str(folder)], capture_output=True,
                               text=True, timeout=15, preexec_fn=cap_memory, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail("parsing the billion-laughs frontmatter did not end within 15 s: aliases are expanded")
    assert child.returncode == 0, f"the parse blew up (exit {child.returncode}): {child.stderr[-500:]}"
    code, listed, seconds = child.stdout.splitlines()
    assert code == "yaml-alias"
    assert listed == "True ['yaml-alias'] ['yaml-alias']"
    assert float(seconds) < 2


def test_single_alias_is_refused(tmp_path):
    err = parse_error(tmp_path, b"---\nname: &n my-skill\ndescription: *n\n---\n")
    assert err.problem.code == "yaml-alias" and "*name" in str(err)


def test_deep_nesting_is_refused(tmp_path):
    fm = "name: my-skill\ndescription: d\nmetadata:\n" + "".join(" " * i + f"k{i}:\n" for i in range(1, 80))
    err = parse_error(tmp_path, ("---\n" + fm + " " * 80 + "v: x\n---\n").encode())
    assert err.problem.code == "yaml-too-deep"


def test_deep_flow_nesting_is_an_error_not_a_crash(tmp_path):
    err = parse_error(tmp_path, b"---\nname: x\ndescription: " + b"[" * 30000 + b"]" * 30000 + b"\n---\n")
    assert err.problem.code in ("yaml-invalid", "yaml-too-deep")


def test_python_tags_are_refused(tmp_path):
    err = parse_error(tmp_path, b"---\nname: !!python/object/apply:os.system ['true']\ndescription: d\n---\n")
    assert err.problem.code == "yaml-invalid"


def test_impossible_date_is_an_error(tmp_path):
    err = parse_error(tmp_path, b"---\nname: x\ndescription: d\nmetadata:\n  released: 2024-13-45\n---\n")
    assert err.problem.code == "yaml-invalid"


def test_duplicate_key_is_reported_with_lines(tmp_path):
    """skills-ref (strictyaml) rejects duplicate keys as invalid YAML; PyYAML silently keeps the last.
    YAML requires unique keys, so this is an error-severity problem, but the skill still parses."""
    parsed = parse_bytes(tmp_path, b"---\nname: my-skill\ndescription: d\nname: other\n---\n")
    assert parsed.frontmatter["name"] == "other"
    (dup,) = parsed.problems
    assert (dup.code, dup.field, dup.severity) == ("duplicate-key", "name", "error")
    assert "lines 2 and 4" in dup.message


def test_duplicate_nested_key(tmp_path):
    parsed = parse_bytes(tmp_path, b"---\nname: x\ndescription: d\nmetadata:\n  a: '1'\n  a: '2'\n---\n")
    assert [(p.code, p.field) for p in parsed.problems] == [("duplicate-key", "metadata.a")]


def test_typed_scalars_as_loaded(tmp_path):
    parsed = parse_bytes(tmp_path, b"---\nname: 123\ndescription: true\nmetadata:\n  version: 1.10\n---\n")
    assert parsed.frontmatter == {"name": 123, "description": True, "metadata": {"version": 1.1}}
    assert P.string_view(parsed) == {"name": "123", "description": "true", "metadata": {"version": "1.10"}}


# --- unquoted colons ------------------------------------------------------------------------------------

COLON = b"---\nname: my-skill\ndescription: Use this skill when: the user asks about PDFs\n---\nBody\n"


def test_unquoted_colon_retry_in_lenient_mode(tmp_path):
    parsed = parse_bytes(tmp_path, COLON)
    assert parsed.frontmatter["description"] == "Use this skill when: the user asks about PDFs"
    (note,) = parsed.problems
    assert (note.code, note.field, note.severity) == ("yaml-unquoted-colon", "description", "warning")


def test_unquoted_colon_is_an_error_in_strict_mode(tmp_path):
    err = parse_error(tmp_path, COLON, lenient=False)
    assert err.problem.code == "yaml-invalid" and "line 3" in str(err)
    assert err.problem.field == "description"


def test_unquoted_colon_multiline_value_and_block_scalar_untouched(tmp_path):
    data = (b"---\nname: my-skill\ndescription: Use when: the user\n  asks about \"PDFs\" # note\n"
            b"license: |\n  Terms: see LICENSE\n  more: lines\nmetadata:\n  author: Jane: Doe\n---\nBody\n")
    parsed = parse_bytes(tmp_path, data)
    assert parsed.frontmatter["description"] == 'Use when: the user asks about "PDFs"'
    assert parsed.frontmatter["license"] == "Terms: see LICENSE\nmore: lines\n"
    assert parsed.frontmatter["metadata"] == {"author": "Jane: Doe"}
    assert codes(parsed.problems) == ["yaml-unquoted-colon", "yaml-unquoted-colon"]


def test_unfixable_yaml_reports_the_original_error(tmp_path):
    err = parse_error(tmp_path, b"---\nname: my-skill\ndescription: a: b\nmetadata: [broken\n---\n")
    assert err.problem.code == "yaml-invalid"


# --- bounded reads ---------------------------------------------------------------------------------------

def test_frontmatter_over_cap_is_one_error(tmp_path):
    big = b"---\nname: x\ndescription: d\n" + b"# padding\n" * (P.FRONTMATTER_CAP // 10 + 10) + b"---\nBody\n"
    err = parse_error(tmp_path, big)
    assert err.problem.code == "frontmatter-too-large"


def test_frontmatter_just_under_cap_parses(tmp_path):
    fm = b"name: x\ndescription: d\n"
    pad = P.FRONTMATTER_CAP - len(fm)
    data = b"---\n" + fm + b"#" * (pad - 1) + b"\n---\nBody\n"
    assert parse_bytes(tmp_path, data).frontmatter == {"name": "x", "description": "d"}


def _bytes_read() -> int:
    with open("/proc/self/io") as f:
        return int(next(line for line in f if line.startswith("rchar:")).split()[1])


@pytest.mark.skipif(not os.path.exists("/proc/self/io"), reason="needs Linux /proc/self/io")
def test_listing_a_50mb_skill_md_reads_a_bounded_prefix(tmp_path):
    folder = tmp_path / "big-skill"
    folder.mkdir()
    path = folder / "SKILL.md"
    with path.open("wb") as f:
        f.write(b"---\nname: big-skill\ndescription: A large one.\n---\n# Body\n")
        f.truncate(50 * 1024 * 1024)  # sparse: quick to create, 50 MB to read
    before = _bytes_read()
    start = time.perf_counter()
    meta, problems = load_meta(folder, tmp_path)
    elapsed = time.perf_counter() - start
    read = _bytes_read() - before
    assert meta.name == "big-skill"
    assert "body-too-large" in codes(problems)
    assert read < 1024 * 1024, f"listing read {read} bytes"
    assert elapsed < 1.0
