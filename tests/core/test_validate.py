"""Strict validation (the specification text) and lenient loading (the client guide).

The V* tests port skills-ref's tests/test_validator.py; where ipyskills differs on purpose the docstring
quotes the specification sentence behind the difference.
"""

from __future__ import annotations

import pytest

from ipyskills.core.model import Problem
from ipyskills.core.validate import (
    PROBLEM_CODES,
    ValidationReport,
    check_frontmatter,
    load_meta,
    validate_path,
)


def codes(problems) -> list[str]:
    found = [p.code for p in problems]
    assert set(found) <= set(PROBLEM_CODES), "every code is documented in PROBLEM_CODES"
    return found


def fm(name="my-skill", description="A test skill", extra=""):
    text = ""
    if name is not None:
        text += f"name: {name}\n"
    if description is not None:
        text += f"description: {description}\n"
    return text + extra


def messages(report) -> str:
    return "\n".join(p.message for p in report.problems)


# --- skills-ref validator cases (tests/test_validator.py) ----------------------------------------------

def test_v1_valid_skill(make_skill):
    report = validate_path(make_skill("my-skill", fm()))
    assert report.valid and report.problems == []


def test_v2_nonexistent_path(tmp_path):
    report = validate_path(tmp_path / "nope")
    assert codes(report.errors) == ["path-missing"]
    assert "Path does not exist" in report.errors[0].message


def test_v3_not_a_directory(tmp_path):
    (tmp_path / "file.txt").write_text("x")
    report = validate_path(tmp_path / "file.txt")
    assert codes(report.errors) == ["not-a-directory"] and "Not a directory" in messages(report)


def test_v4_missing_skill_md(tmp_path):
    (tmp_path / "my-skill").mkdir()
    report = validate_path(tmp_path / "my-skill")
    assert codes(report.errors) == ["skill-md-missing"]
    assert "Missing required file: SKILL.md" in messages(report)


def test_v5_uppercase_name(make_skill):
    report = validate_path(make_skill("MySkill", fm("MySkill")))
    assert codes(report.errors) == ["name-uppercase"]
    assert "lowercase" in messages(report) and "'myskill'" in messages(report)


def test_v6_name_too_long(make_skill):
    report = validate_path(make_skill("a" * 70, fm("a" * 70)))
    assert codes(report.errors) == ["name-too-long"]
    assert "exceeds 64 character limit (70 chars)" in messages(report)


def test_v7_leading_hyphen(make_skill):
    report = validate_path(make_skill("-my-skill", fm("-my-skill")))
    assert codes(report.errors) == ["name-hyphen-edge"]
    assert "cannot start or end with a hyphen" in messages(report)


def test_v8_consecutive_hyphens(make_skill):
    report = validate_path(make_skill("my--skill", fm("my--skill")))
    assert codes(report.errors) == ["name-double-hyphen"] and "consecutive hyphens" in messages(report)


def test_v9_invalid_characters(make_skill):
    report = validate_path(make_skill("my_skill", fm("my_skill")))
    assert codes(report.errors) == ["name-invalid-chars"]
    assert "invalid characters ('_')" in messages(report)


def test_v10_directory_mismatch(make_skill):
    report = validate_path(make_skill("wrong-name", fm("correct-name")))
    assert codes(report.errors) == ["name-mismatch"]
    assert "Directory name 'wrong-name' must match skill name 'correct-name'" in messages(report)


def test_v11_unexpected_fields(make_skill):
    report = validate_path(make_skill("my-skill", fm(extra="unknown_field: should not be here\n")))
    assert [(p.code, p.field) for p in report.errors] == [("unknown-field", "unknown_field")]
    assert "Unexpected field" in messages(report)


def test_v12_valid_with_license_and_metadata(make_skill):
    report = validate_path(make_skill("my-skill", fm(extra="license: MIT\nmetadata:\n  author: Test\n")))
    assert report.valid and report.problems == []


def test_v13_allowed_tools(make_skill):
    report = validate_path(make_skill("my-skill", fm(extra="allowed-tools: Bash(jq:*) Bash(git:*)\n")))
    assert report.valid and report.problems == []


@pytest.mark.parametrize("name", ["技能", "мой-навык", "навык"])
def test_v14_v15_v16_non_ascii_names_are_errors(make_skill, name):
    """skills-ref accepts these. The specification: "May only contain unicode lowercase alphanumeric
    characters (`a-z`, `0-9`) and hyphens (`-`)" -- the listed set is ASCII, so ipyskills is ASCII-only
    and says so in the message."""
    report = validate_path(make_skill(name, fm(name)))
    assert codes(report.errors) == ["name-non-ascii"]
    assert "non-ASCII" in messages(report) and "a-z" in messages(report)


def test_v17_uppercase_cyrillic_name(make_skill):
    """skills-ref: "must be lowercase". Here the Cyrillic letters are outside `a-z` altogether."""
    report = validate_path(make_skill("НАВЫК", fm("НАВЫК")))
    assert codes(report.errors) == ["name-non-ascii"]
    assert "'Н'" in messages(report)


def test_v18_description_too_long(make_skill):
    report = validate_path(make_skill("my-skill", fm(description="x" * 1100)))
    assert codes(report.errors) == ["description-too-long"]
    assert "exceeds 1024 character limit (1100 chars)" in messages(report)


def test_v19_valid_compatibility(make_skill):
    report = validate_path(make_skill("my-skill", fm(extra="compatibility: Requires Python 3.11+\n")))
    assert report.valid and report.problems == []


def test_v20_compatibility_too_long(make_skill):
    report = validate_path(make_skill("my-skill", fm(extra=f"compatibility: {'x' * 550}\n")))
    assert codes(report.errors) == ["compatibility-too-long"] and "500" in messages(report)


def test_v21_decomposed_name_is_not_normalised(make_skill):
    """skills-ref NFKC-normalises name and folder, so `cafe\\u0301` matches a folder `café`. The
    specification says nothing about normalisation and lists only `a-z`, `0-9`: the name is non-ASCII
    (and the raw strings differ, so they do not "match the parent directory name")."""
    report = validate_path(make_skill("caf\u00e9", fm("cafe\u0301")))
    assert codes(report.errors) == ["name-non-ascii", "name-mismatch"]


# --- boundaries --------------------------------------------------------------------------------------

@pytest.mark.parametrize("length,ok", [(1, True), (64, True), (65, False)])
def test_name_length_boundary(make_skill, length, ok):
    name = "a" * length
    report = validate_path(make_skill(name, fm(name)))
    assert report.valid is ok
    assert codes(report.errors) == ([] if ok else ["name-too-long"])


@pytest.mark.parametrize("length,ok", [(1, True), (1024, True), (1025, False)])
def test_description_length_boundary(make_skill, length, ok):
    report = validate_path(make_skill("my-skill", fm(description="d" * length)))
    assert codes(report.errors) == ([] if ok else ["description-too-long"])
    if not ok:
        assert "(1025 chars)" in messages(report)


@pytest.mark.parametrize("length,ok", [(1, True), (500, True), (501, False)])
def test_compatibility_length_boundary(make_skill, length, ok):
    report = validate_path(make_skill("my-skill", fm(extra=f"compatibility: {'c' * length}\n")))
    assert codes(report.errors) == ([] if ok else ["compatibility-too-long"])


@pytest.mark.parametrize("value", ['""', "", "'   '"])
def test_empty_compatibility_is_an_error(make_skill, value):
    """skills-ref accepts `compatibility: ""`. The specification: "Must be 1-500 characters if provided"."""
    report = validate_path(make_skill("my-skill", fm(extra=f"compatibility: {value}\n")))
    assert codes(report.errors) == ["compatibility-empty"]


@pytest.mark.parametrize("name,code", [
    ("my-skill-", "name-hyphen-edge"), ('"-"', "name-hyphen-edge"), ("my skill", "name-invalid-chars"),
    ("my.skill", "name-invalid-chars"), ('"  my-skill  "', "name-invalid-chars"),
])
def test_name_shapes(make_skill, name, code):
    report = validate_path(make_skill("my-skill", fm(name)))
    assert code in codes(report.errors)


def test_all_name_problems_are_reported_together(make_skill):
    report = validate_path(make_skill("Wrong", fm("-Bad--Name_-", '""', "compatibility: " + "x" * 501
                                                  + "\nextra: 1\n")))
    assert codes(report.errors) == [
        "unknown-field", "name-uppercase", "name-hyphen-edge", "name-double-hyphen", "name-invalid-chars",
        "name-mismatch", "description-empty", "compatibility-too-long",
    ]


@pytest.mark.parametrize("value", ['""', "", '"   "'])
def test_empty_description(make_skill, value):
    report = validate_path(make_skill("my-skill", fm(description=value)))
    assert codes(report.errors) == ["description-empty"]


def test_digits_only_name_must_be_quoted(make_skill):
    """`name: 123` is a number to YAML; skills-ref (strictyaml) reads it as text. The specification says
    name is a string of lowercase letters, digits and hyphens, so the advice is to quote it."""
    report = validate_path(make_skill("123", fm("123")))
    assert codes(report.errors) == ["name-not-string"] and 'name: "123"' in messages(report)
    assert validate_path(make_skill("456", fm('"456"'))).valid


# --- types -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("extra,code", [
    ("description: true\n", "description-not-string"),
    ("description: [a, b]\n", "description-not-string"),
    ("compatibility: 3.11\n", "compatibility-not-string"),
    ("allowed-tools: [Read, Write]\n", "allowed-tools-not-string"),
    ("allowed-tools:\n  - Read\n  - Write\n", "allowed-tools-not-string"),
    ("metadata: foo\n", "metadata-not-mapping"),
    ("metadata:\n  tags: [a, b]\n", "metadata-value-not-string"),
    ("metadata:\n  nested:\n    a: b\n", "metadata-value-not-string"),
    ("metadata:\n  enabled: yes\n", "metadata-value-not-string"),
    ("metadata:\n  1: one\n", "metadata-key-not-string"),
    ("metadata:\n  released: 2024-01-02\n", "metadata-value-not-string"),
])
def test_non_string_fields(make_skill, extra, code):
    description = None if extra.startswith("description") else "d"
    report = validate_path(make_skill("my-skill", fm(description=description, extra=extra)))
    assert code in codes(report.errors)


def test_allowed_tools_list_advice_shows_the_string_form(make_skill):
    report = validate_path(make_skill("my-skill", fm(extra="allowed-tools: [Read, Write]\n")))
    assert "allowed-tools: Read Write" in messages(report)


def test_metadata_float_advice_keeps_the_written_text(make_skill):
    report = validate_path(make_skill("my-skill", fm(extra="metadata:\n  version: 1.10\n")))
    (problem,) = report.errors
    assert (problem.code, problem.field) == ("metadata-value-not-string", "metadata.version")
    assert 'version: "1.10"' in problem.message


def test_license_mapping_is_a_warning(make_skill):
    """The specification gives license no type rule, so a non-string license is advice only."""
    report = validate_path(make_skill("my-skill", fm(extra="license:\n  id: MIT\n")))
    assert report.valid and codes(report.warnings) == ["license-not-string"]


def test_duplicate_key_makes_it_invalid(make_skill):
    report = validate_path(make_skill("my-skill", fm(extra="description: again\n")))
    assert codes(report.errors) == ["duplicate-key"]


# --- unknown and extension keys --------------------------------------------------------------------------

def test_extension_keys_are_errors_with_their_own_code(make_skill):
    extra = "disable-model-invocation: true\nversion: 1.0.0\nargument-hint: '[file]'\n"
    report = validate_path(make_skill("my-skill", fm(extra=extra)))
    assert codes(report.errors) == ["extension-field"] * 3
    assert "client-specific" in messages(report) and "metadata" in messages(report)


def test_case_mismatched_key_gets_a_hint(make_skill):
    report = validate_path(make_skill("my-skill", "Name: my-skill\ndescription: d\n"))
    assert codes(report.errors) == ["unknown-field", "name-missing"]
    assert "did you mean 'name'" in messages(report)


def test_underscore_key_gets_a_hint(make_skill):
    report = validate_path(make_skill("my-skill", fm(extra="allowed_tools: Read\n")))
    assert "did you mean 'allowed-tools'" in messages(report)


# --- paths, files and bodies -----------------------------------------------------------------------------

def test_skill_md_path_is_accepted(make_skill):
    folder = make_skill("my-skill", fm())
    report = validate_path(folder / "SKILL.md")
    assert report.valid and report.path == folder / "SKILL.md"


def test_dot_path_uses_the_real_folder_name(make_skill, monkeypatch):
    folder = make_skill("my-skill", fm())
    monkeypatch.chdir(folder)
    report = validate_path(".")
    assert report.valid and codes(report.problems) == []  # "." is not compared with the name, my-skill is
    monkeypatch.chdir(make_skill("other-folder", fm()))
    report = validate_path(".")
    assert codes(report.problems) == ["name-mismatch"] and "other-folder" in messages(report)


def test_lowercase_skill_md_is_valid_with_warning(make_skill):
    report = validate_path(make_skill("my-skill", fm(), filename="skill.md"))
    assert report.valid and codes(report.warnings) == ["skill-md-name"]


def test_unquoted_colon_is_invalid_when_strict(make_skill):
    report = validate_path(make_skill("my-skill", fm(description="Use when: the user asks")))
    assert codes(report.errors) == ["yaml-invalid"]


def test_long_body_is_a_warning(make_skill):
    report = validate_path(make_skill("my-skill", fm(), body="line\n" * 600))
    assert report.valid and "body-too-long" in codes(report.warnings)
    assert "lines" in messages(report)


def test_body_at_500_lines_has_no_warning(make_skill):
    body = "line\n" * (500 - 4)  # 4 frontmatter lines + body = 500 lines
    report = validate_path(make_skill("my-skill", fm(), body=body))
    assert report.problems == []


def test_large_body_is_a_warning(make_skill):
    report = validate_path(make_skill("my-skill", fm(), body="word " * 5000))
    assert codes(report.warnings) == ["body-too-large"]


def test_empty_body_is_a_warning(make_skill):
    report = validate_path(make_skill("my-skill", fm(), body="\n  \n"))
    assert report.valid and codes(report.warnings) == ["body-empty"]


def test_gbk_body_is_invalid(make_skill):
    folder = make_skill("my-skill", raw=b"---\n" + fm().encode() + b"---\n" + "说明".encode("gbk"))
    report = validate_path(folder)
    assert codes(report.errors) == ["body-not-utf8"]


def test_parse_errors_become_one_problem(make_skill):
    report = validate_path(make_skill("my-skill", raw=b"# nothing"))
    assert codes(report.problems) == ["no-frontmatter"] and not report.valid


def test_report_to_dict(make_skill):
    report = validate_path(make_skill("wrong", fm(extra="license: {id: MIT}\n")))
    d = report.to_dict()
    assert d["valid"] is False and d["path"].endswith("wrong")
    assert d["errors"] == [{"code": "name-mismatch", "field": "name", "message": report.errors[0].message}]
    assert [w["code"] for w in d["warnings"]] == ["license-not-string"]
    assert set(d["errors"][0]) == {"code", "field", "message"}


def test_report_valid_ignores_warnings(tmp_path):
    report = ValidationReport(tmp_path, [Problem("x", None, "advice", "warning")])
    assert report.valid
    report.problems.append(Problem("y", None, "broken"))
    assert not report.valid


def test_check_frontmatter_without_folder_skips_the_name_match():
    assert check_frontmatter({"name": "a", "description": "d"}, None) == []
    assert codes(check_frontmatter({"name": "a", "description": "d"}, "b")) == ["name-mismatch"]


# --- lenient loading ---------------------------------------------------------------------------------------

def test_load_keeps_strict_errors_and_loads(make_skill, tmp_path):
    folder = make_skill("wrong-name", fm("a" * 70, extra="disable-model-invocation: true\n"))
    meta, problems = load_meta(folder, tmp_path)
    assert meta.name == "a" * 70 and meta.status == "invalid"
    assert codes(problems) == ["extension-field", "name-too-long", "name-mismatch"]
    assert meta.problems == problems
    assert meta.frontmatter["disable-model-invocation"] is True


def test_load_paths_are_absolute(make_skill, tmp_path, monkeypatch):
    make_skill("my-skill", fm())
    monkeypatch.chdir(tmp_path)
    meta, _ = load_meta("my-skill", ".")
    assert meta.path == tmp_path / "my-skill" and meta.root == tmp_path
    assert meta.skill_md == tmp_path / "my-skill" / "SKILL.md"


def test_load_strips_and_uses_text_of_scalars(make_skill, tmp_path):
    folder = make_skill("123", "name: 123\ndescription: >\n  Folded\n  text.\nmetadata:\n  on: yes\n  v: 1.10\n")
    meta, problems = load_meta(folder, tmp_path)
    assert (meta.name, meta.description) == ("123", "Folded text.")
    assert meta.frontmatter["metadata"] == {"on": "yes", "v": "1.10"}
    assert "name-not-string" in codes(problems)


def test_load_non_string_description_uses_its_text(make_skill, tmp_path):
    meta, problems = load_meta(make_skill("my-skill", fm(description="true")), tmp_path)
    assert meta.description == "true" and codes(problems) == ["description-not-string"]


@pytest.mark.parametrize("description", ['""', "'   '", "[a, b]", ""])
def test_load_skips_without_usable_description(make_skill, tmp_path, description):
    meta, problems = load_meta(make_skill("my-skill", fm(description=description)), tmp_path)
    assert meta is None and codes(problems)[-1] == "skipped-no-description"


def test_load_unparseable_is_skipped_with_problem(make_skill, tmp_path):
    meta, problems = load_meta(make_skill("my-skill", "name: [x\n"), tmp_path)
    assert meta is None and codes(problems) == ["yaml-invalid"]


def test_load_unquoted_colon(make_skill, tmp_path):
    meta, problems = load_meta(make_skill("my-skill", fm(description="Use when: the user asks")), tmp_path)
    assert meta.description == "Use when: the user asks"
    assert codes(problems) == ["yaml-unquoted-colon"] and meta.status == "warnings"


def test_load_long_body_warning_within_bounded_scan(make_skill, tmp_path):
    meta, problems = load_meta(make_skill("my-skill", fm(), body="x\n" * 700), tmp_path)
    assert meta.status == "warnings" and codes(problems) == ["body-too-long"]


def test_load_folder_that_is_a_file(tmp_path):
    (tmp_path / "f").write_text("x")
    meta, problems = load_meta(tmp_path / "f", tmp_path)
    assert meta is None and codes(problems) == ["skill-md-missing"]


def _without_blocking(fn, *args):
    """fn(*args) in a thread; fails (instead of hanging the suite) if it waits on a FIFO."""
    import threading

    out = []
    worker = threading.Thread(target=lambda: out.append(fn(*args)), daemon=True)
    worker.start()
    worker.join(10)
    assert not worker.is_alive(), f"{fn.__name__} blocked"
    return out[0]


@pytest.mark.parametrize("file_name", ["SKILL.md", "skill.md"])
def test_load_skill_md_that_is_a_fifo(tmp_path, file_name):
    import os

    folder = tmp_path / "my-skill"
    folder.mkdir()
    os.mkfifo(folder / file_name)
    meta, problems = _without_blocking(load_meta, folder, tmp_path)
    assert meta is None and codes(problems) == ["skill-md-not-file"]
    assert f"{folder / file_name} is not a regular file" in problems[0].message


@pytest.mark.parametrize("file_name", ["SKILL.md", "skill.md"])
def test_validate_folder_whose_skill_md_is_a_fifo(tmp_path, file_name):
    import os

    folder = tmp_path / "my-skill"
    folder.mkdir()
    os.mkfifo(folder / file_name)
    for given in (folder, folder / file_name):
        report = _without_blocking(validate_path, given)
        assert codes(report.problems) == ["skill-md-not-file"], given
        message = report.problems[0].message
        assert f"{folder / file_name} is not a regular file" in message and "Missing" not in message


def test_validate_a_fifo_not_named_skill_md(tmp_path):
    import os

    os.mkfifo(tmp_path / "pipe")
    report = _without_blocking(validate_path, tmp_path / "pipe")
    assert codes(report.problems) == ["not-a-directory"]
    assert "Missing" not in report.problems[0].message


def test_unreadable_skill_md(make_skill, tmp_path):
    import os

    if os.geteuid() == 0:
        pytest.skip("root reads files regardless of permissions")
    folder = make_skill("my-skill", fm())
    (folder / "SKILL.md").chmod(0)
    meta, problems = load_meta(folder, tmp_path)
    assert meta is None and codes(problems) == ["skill-md-unreadable"]


# --- real published skills ---------------------------------------------------------------------------------

PUBLISHED = """\
---\r
name: pdf-tools\r
description: >-\r
  Extracts text and tables from PDF files, fills PDF forms, and merges multiple\r
  PDFs. Use when working with PDF documents or when the user mentions PDFs,\r
  forms, or document extraction — also résumés and 日本語 files.\r
# owner: docs team\r
license: Proprietary. LICENSE.txt has complete terms\r
allowed-tools: Bash(python:*) Read\r
metadata:\r
  author: example-org\r
  version: "1.0"\r
---\r
# PDF tools\r
\r
Run `scripts/extract.py FILE`.\r
"""


def test_published_style_skill_is_valid(make_skill):
    report = validate_path(make_skill("pdf-tools", raw=PUBLISHED.encode()))
    assert report.problems == []


def test_published_style_with_colon_and_extensions_loads(make_skill, tmp_path):
    text = ("---\nname: code-review\ndescription: Reviews code. Use when: the user asks for a review\n"
            "user-invocable: true\nargument-hint: '[path]'\n---\n# Review\n")
    meta, problems = load_meta(make_skill("code-review", raw=text.encode()), tmp_path)
    assert meta.description == "Reviews code. Use when: the user asks for a review"
    assert codes(problems) == ["yaml-unquoted-colon", "extension-field", "extension-field"]
