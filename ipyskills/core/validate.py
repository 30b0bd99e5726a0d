"""Checking a skill against the Agent Skills specification (strict) and loading it for discovery (lenient).

Strict (`check_frontmatter`, `validate_path`) follows the specification text, including rules skills-ref
leaves out: `compatibility` must be 1-500 characters when present, `metadata` must map strings to
strings, `allowed-tools` must be a string, `name` and `description` must be strings. Keys other than the
six the specification lists are errors (client extensions belong under `metadata`).

The name character set is ASCII: lowercase `a-z`, digits `0-9` and hyphens. The specification's prose
says "unicode lowercase alphanumeric characters" but its parenthesis lists exactly `a-z` and `0-9`, and
its other rules and examples are ASCII; ASCII names also work in every client and file system. So `技能`,
`мой-навык` and a decomposed `cafe\\u0301` are errors here (skills-ref accepts them), with a message that
names the non-ASCII characters. Names are not Unicode-normalised and must equal the folder name exactly.

Lenient (`load_meta`) follows the client guide: a skill loads despite name problems, a missing name (the
folder name is used), extension keys and unquoted-colon YAML; it is skipped, with a recorded problem, only
when its frontmatter cannot be read or it has no usable description. Everything strict finds is kept on
the loaded skill as severity "error" problems (it loads but is not spec-valid), next to "warning" advice.
Discovery lists from the frontmatter alone; body advice (a SKILL.md over 500 lines, a non-UTF-8 body) is
read on demand by `validate_path` and `body_advice`. Scalar metadata values are turned into the text
written in the file.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

from ..errors import InvalidSkill
from .model import HasProblems, Problem, SkillMeta
from .parse import (
    SkillMdError,
    body_offset,
    body_scan,
    find_skill_md,
    kind_of,
    parse_skill_md,
    string_view,
)

MAX_NAME_LENGTH = 64
MAX_DESCRIPTION_LENGTH = 1024
MAX_COMPATIBILITY_LENGTH = 500
ALLOWED_FIELDS = ("allowed-tools", "compatibility", "description", "license", "metadata", "name")
# Keys some clients read (Claude Code, Cursor, ...) that the specification does not define.
EXTENSION_FIELDS = frozenset({
    "disable-model-invocation", "user-invocable", "argument-hint", "model", "context", "agent", "hooks",
    "version", "when_to_use", "mode",
})
MAX_LINES = 500  # "Keep your main SKILL.md under 500 lines"
MAX_BODY_TOKENS = 5000  # "< 5000 tokens recommended"
BYTES_PER_TOKEN = 4  # rough estimate, enough for advice
LISTING_SCAN_CAP = 256 * 1024  # body bytes read to give advice when listing
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-")
_VALID_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")  # passes every name rule below

# Every `Problem.code` the parser and the validator produce. Codes are stable: tools may match on them.
PROBLEM_CODES = {
    # the path and the file
    "path-missing": "the given path does not exist",
    "path-unreadable": "the given path cannot be examined (permissions)",
    "not-a-directory": "the path is a file other than SKILL.md",
    "folder-unreadable": "the skill folder cannot be listed",
    "skill-md-missing": "the folder has no SKILL.md",
    "skill-md-name": "warning: the file is a lowercase skill.md",
    "skill-md-not-file": "SKILL.md is not a regular file",
    "skill-md-outside": "SKILL.md is a link to a file outside the skill folder",
    "skill-md-unreadable": "SKILL.md cannot be read",
    "not-utf8": "the frontmatter (or, from read_body, the body) is not UTF-8",
    "bom": "warning: the file starts with a UTF-8 byte order mark",
    # frontmatter and YAML
    "no-frontmatter": "the first line is not ---",
    "frontmatter-unclosed": "no closing --- line",
    "frontmatter-too-large": "the frontmatter is over FRONTMATTER_CAP bytes",
    "frontmatter-empty": "nothing between the --- lines",
    "frontmatter-not-mapping": "the YAML is a list or a scalar, not key: value lines",
    "yaml-invalid": "the YAML does not parse",
    "yaml-alias": "the YAML uses an alias (*name)",
    "yaml-too-deep": "the YAML nests deeper than MAX_DEPTH",
    "yaml-unquoted-colon": "warning: a value with an unquoted ': ' was read as a string (lenient only)",
    "duplicate-key": "a key appears twice",
    # fields (strict rules)
    "unknown-field": "a top-level key the specification does not define",
    "extension-field": "a known client-specific key (disable-model-invocation, version, ...)",
    "name-missing": "no name",
    "name-not-string": "name is a number, boolean, list, ...",
    "name-empty": "name is empty",
    "name-too-long": "name is over 64 characters",
    "name-uppercase": "name has A-Z",
    "name-hyphen-edge": "name starts or ends with -",
    "name-double-hyphen": "name contains --",
    "name-non-ascii": "name has characters outside ASCII",
    "name-invalid-chars": "name has ASCII characters other than a-z, 0-9, -",
    "name-mismatch": "name differs from the folder name",
    "description-missing": "no description",
    "description-not-string": "description is not a string",
    "description-empty": "description is empty or blank",
    "description-too-long": "description is over 1024 characters",
    "compatibility-empty": "compatibility is present but empty",
    "compatibility-not-string": "compatibility is not a string",
    "compatibility-too-long": "compatibility is over 500 characters",
    "license-not-string": "warning: license is not a string",
    "metadata-not-mapping": "metadata is not a mapping",
    "metadata-key-not-string": "a metadata key is not a string",
    "metadata-value-not-string": "a metadata value is not a string",
    "allowed-tools-not-string": "allowed-tools is not a string",
    # body (advice, except encoding)
    "body-not-utf8": "the body is not UTF-8",
    "body-too-long": "warning: SKILL.md is over 500 lines",
    "body-too-large": "warning: the body is over about 5000 tokens",
    "body-empty": "warning: no Markdown after the frontmatter",
    "body-over-cap": "read_body(max_bytes=...) refused a larger body",
    # lenient loading
    "name-from-folder": "warning: loaded under the folder name",
    "skipped-no-description": "skipped by lenient loading: no usable description",
    "invalid-skill": "any other InvalidSkill",
}


@dataclass
class ValidationReport(HasProblems):
    path: Path
    problems: list[Problem] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        return not self.errors

    def to_dict(self) -> dict:
        def brief(p: Problem) -> dict:
            return {"code": p.code, "field": p.field, "message": p.message}

        return {
            "path": str(self.path),
            "valid": self.valid,
            "errors": [brief(p) for p in self.errors],
            "warnings": [brief(p) for p in self.warnings],
        }


# -- strict rules -------------------------------------------------------------------------------------


def check_frontmatter(
    frontmatter: dict, folder_name: str | None, *, written: dict | None = None
) -> list[Problem]:
    """Every way `frontmatter` breaks the specification. The name/folder check is skipped without a folder.

    `written` (optional, from `parse.string_view`) holds scalars as typed in the file, so advice can say
    `version: "1.10"` rather than the float's `1.1`.
    """
    written = written or {}
    problems = _check_keys(frontmatter)
    problems += _check_name(frontmatter, folder_name, written)
    problems += _check_description(frontmatter, written)
    problems += _check_compatibility(frontmatter, written)
    problems += _check_license(frontmatter)
    problems += _check_metadata(frontmatter, written)
    problems += _check_allowed_tools(frontmatter)
    return problems


def _check_keys(frontmatter: dict) -> list[Problem]:
    problems = []
    allowed = ", ".join(ALLOWED_FIELDS)
    for key in frontmatter:
        if key in ALLOWED_FIELDS:
            continue
        label = str(key)
        near = label.strip().lower().replace("_", "-")
        if label in EXTENSION_FIELDS:
            problems.append(_error(
                "extension-field", label,
                f"Unexpected field in frontmatter: '{label}' is a client-specific extension, not part of the "
                f"specification (allowed: {allowed}). Move it under 'metadata' as a string, or remove it.",
            ))
        elif near in ALLOWED_FIELDS:
            problems.append(_error(
                "unknown-field", label,
                f"Unexpected field in frontmatter: '{label}'; did you mean '{near}'? Keys are "
                "case-sensitive and use hyphens.",
            ))
        else:
            problems.append(_error(
                "unknown-field", label,
                f"Unexpected field in frontmatter: '{label}'. Only {allowed} are allowed; put other "
                "information under 'metadata' as strings.",
            ))
    return problems


def _check_name(frontmatter: dict, folder_name: str | None, written: dict) -> list[Problem]:
    if "name" not in frontmatter:
        return [_error("name-missing", "name", "Missing required field in frontmatter: name. Add "
                       f"'name: {folder_name or 'my-skill'}' (the folder's name).")]
    name = frontmatter["name"]
    if (isinstance(name, str) and len(name) <= MAX_NAME_LENGTH and _VALID_NAME.fullmatch(name)
            and folder_name in (None, name)):
        return []  # the common case, decided by one regex
    if name is None:
        name = ""
    if not isinstance(name, str):
        return [_error("name-not-string", "name",
                       f"Field 'name' must be a string, but it is a {kind_of(name)}; "
                       f"{_quote_hint('name', name, written.get('name'))}.")]
    if not name.strip():
        return [_error("name-empty", "name", "Field 'name' must not be empty; use the folder's name.")]
    problems = []
    if len(name) > MAX_NAME_LENGTH:
        problems.append(_error(
            "name-too-long", "name",
            f"Skill name '{name}' exceeds {MAX_NAME_LENGTH} character limit ({len(name)} chars); shorten it "
            "and rename the folder to match.",
        ))
    if any("A" <= c <= "Z" for c in name):
        problems.append(_error(
            "name-uppercase", "name",
            f"Skill name '{name}' must be lowercase; use '{suggest_name(name)}' (and the same folder name).",
        ))
    if name.startswith("-") or name.endswith("-"):
        problems.append(_error("name-hyphen-edge", "name",
                               f"Skill name '{name}' cannot start or end with a hyphen; remove it."))
    if "--" in name:
        problems.append(_error("name-double-hyphen", "name",
                               f"Skill name '{name}' cannot contain consecutive hyphens; use a single '-'."))
    non_ascii = _unique(c for c in name if ord(c) > 127)
    if non_ascii:
        problems.append(_error(
            "name-non-ascii", "name",
            f"Skill name '{name}' contains non-ASCII characters ({_show(non_ascii)}). The specification "
            "allows only lowercase a-z, digits 0-9 and hyphens; transliterate the name (and the folder).",
        ))
    invalid = _unique(c for c in name if ord(c) <= 127 and c not in _NAME_CHARS and not "A" <= c <= "Z")
    if invalid:
        problems.append(_error(
            "name-invalid-chars", "name",
            f"Skill name '{name}' contains invalid characters ({_show(invalid)}). Only lowercase letters "
            "a-z, digits 0-9 and hyphens are allowed; use '-' between words.",
        ))
    if folder_name is not None and folder_name != name:
        problems.append(_error(
            "name-mismatch", "name",
            f"Directory name '{folder_name}' must match skill name '{name}'; rename the folder or change "
            "the name.",
        ))
    return problems


def _check_description(frontmatter: dict, written: dict) -> list[Problem]:
    if "description" not in frontmatter:
        return [_error("description-missing", "description",
                       "Missing required field in frontmatter: description. Add a description of what the "
                       "skill does and when to use it.")]
    text = frontmatter["description"]
    if text is None:
        text = ""
    if not isinstance(text, str):
        return [_error("description-not-string", "description",
                       f"Field 'description' must be a string, but it is a {kind_of(text)}; "
                       f"{_quote_hint('description', text, written.get('description'))}.")]
    if not text.strip():
        return [_error("description-empty", "description",
                       "Field 'description' must be a non-empty string; say what the skill does and when "
                       "to use it.")]
    length = len(text.strip())  # a block scalar's final newline is layout, not content
    if length > MAX_DESCRIPTION_LENGTH:
        return [_error("description-too-long", "description",
                       f"Description exceeds {MAX_DESCRIPTION_LENGTH} character limit ({length} chars); "
                       "shorten it and move details into the body.")]
    return []


def _check_compatibility(frontmatter: dict, written: dict) -> list[Problem]:
    if "compatibility" not in frontmatter:
        return []
    text = frontmatter["compatibility"]
    if text is None or (isinstance(text, str) and not text.strip()):
        return [_error("compatibility-empty", "compatibility",
                       "Field 'compatibility' must be 1-500 characters when present; describe the "
                       "requirements or remove the field.")]
    if not isinstance(text, str):
        return [_error("compatibility-not-string", "compatibility",
                       f"Field 'compatibility' must be a string, but it is a {kind_of(text)}; "
                       f"{_quote_hint('compatibility', text, written.get('compatibility'))}.")]
    if len(text) > MAX_COMPATIBILITY_LENGTH:
        return [_error("compatibility-too-long", "compatibility",
                       f"Compatibility exceeds {MAX_COMPATIBILITY_LENGTH} character limit ({len(text)} "
                       "chars); shorten it.")]
    return []


def _check_license(frontmatter: dict) -> list[Problem]:
    # The specification gives no type rule for license, so a non-string is advice, not an error.
    if "license" not in frontmatter or isinstance(frontmatter["license"], str):
        return []
    value = frontmatter["license"]
    return [Problem("license-not-string", "license",
                    f"Field 'license' is a {kind_of(value)}; write a license name or the name of a bundled "
                    "license file as a string.", "warning")]


def _check_metadata(frontmatter: dict, written: dict) -> list[Problem]:
    if "metadata" not in frontmatter:
        return []
    data = frontmatter["metadata"]
    if not isinstance(data, dict):
        return [_error("metadata-not-mapping", "metadata",
                       f"Field 'metadata' must be a mapping of string keys to string values, but it is a "
                       f"{kind_of(data)}; write it as indented 'key: \"value\"' lines or remove it.")]
    problems = []
    typed = written.get("metadata") if isinstance(written.get("metadata"), dict) else {}
    for key, value in data.items():
        where = f"metadata.{key}"
        if not isinstance(key, str):
            problems.append(_error("metadata-key-not-string", where,
                                   f"Metadata key {key!r} is a {kind_of(key)}; metadata keys must be strings, "
                                   f"so quote it: \"{key}\": ..."))
        if not isinstance(value, str):
            if isinstance(value, (dict, list)):
                advice = "metadata values must be strings; flatten it into one string or remove it"
            else:
                advice = f"metadata values must be strings; {_quote_hint(str(key), value, typed.get(str(key)))}"
            problems.append(_error("metadata-value-not-string", where,
                                   f"Metadata value '{key}' is a {kind_of(value)}, but {advice}."))
    return problems


def _check_allowed_tools(frontmatter: dict) -> list[Problem]:
    if "allowed-tools" not in frontmatter or isinstance(frontmatter["allowed-tools"], str):
        return []
    value = frontmatter["allowed-tools"]
    example = " ".join(str(v) for v in value) if isinstance(value, list) else "Read Bash(git:*)"
    return [_error("allowed-tools-not-string", "allowed-tools",
                   f"Field 'allowed-tools' must be a space-separated string, but it is a {kind_of(value)}; "
                   f"write it as allowed-tools: {example}")]


# -- whole skills ---------------------------------------------------------------------------------------


def validate_path(path: Path) -> ValidationReport:
    """Strict validation of a skill folder (or its SKILL.md). Never raises for a bad skill."""
    given = Path(path)
    report = ValidationReport(given)
    try:
        exists = given.exists()
    except OSError as exc:
        report.problems.append(_error("path-unreadable", None,
                                      f"Cannot examine {given}: {exc.strerror or exc}; check permissions."))
        return report
    if not exists:
        report.problems.append(_error("path-missing", None, f"Path does not exist: {given}"))
        return report
    if not given.is_dir():  # a file, or a FIFO or device (whose SKILL.md parse_skill_md refuses unopened)
        if given.name.lower() != "skill.md":
            report.problems.append(_error(
                "not-a-directory", None,
                f"Not a directory: {given}; give a skill folder or its SKILL.md file."))
            return report
        folder, skill_md = given.parent, given
    else:
        folder = given
        try:
            skill_md = find_skill_md(folder)
        except SkillMdError as exc:
            report.problems.append(exc.problem)
            return report
        if skill_md is None:
            report.problems.append(_error(
                "skill-md-missing", None,
                f"Missing required file: SKILL.md in {folder}; create it with 'name' and 'description' "
                "frontmatter."))
            return report
    try:
        parsed = parse_skill_md(skill_md, lenient=False)
        report.problems.extend(parsed.problems)
        written = string_view(parsed) if _needs_strings(parsed.frontmatter) else None
        report.problems.extend(check_frontmatter(parsed.frontmatter, _folder_name(folder), written=written))
        report.problems.extend(_body_problems(parsed.path, parsed.body_offset, limit=None))
    except InvalidSkill as exc:
        report.problems.append(_as_problem(exc))
    return report


def load_meta(folder: Path, root: Path, *, skill_md: Path | None = None, scan_body: bool = True
              ) -> tuple[SkillMeta | None, list[Problem]]:
    """Lenient loading for discovery: (SkillMeta, its problems) or (None, the problems that made it skip).

    Reads the frontmatter and, with `scan_body`, a bounded part of the body (`LISTING_SCAN_CAP`) for
    advice such as "over 500 lines". Discovery passes `scan_body=False`, so listing reads only the
    frontmatter, and the SKILL.md it already found. Never raises for a bad skill.
    """
    if not (isinstance(folder, Path) and folder.is_absolute()):  # discovery's folders already are
        folder = Path(os.path.abspath(folder))
    try:
        if skill_md is None:
            skill_md = find_skill_md(folder)
        if skill_md is None:
            return None, [_error("skill-md-missing", None, f"Missing required file: SKILL.md in {folder}.")]
        parsed = parse_skill_md(skill_md, lenient=True)
        frontmatter = dict(parsed.frontmatter)
        strings = string_view(parsed) if not parsed.plain and _needs_strings(frontmatter) else None
        problems = list(parsed.problems)
        problems += check_frontmatter(parsed.frontmatter, folder.name, written=strings)

        description = _as_text(frontmatter.get("description"), strings, "description")
        if description is None or not description.strip():
            problems.append(_error(
                "skipped-no-description", "description",
                f"Skipped {skill_md}: it has no usable description, which agents need to choose the skill. "
                "Add 'description: <what it does and when to use it>'.",
            ))
            return None, problems
        name = _as_text(frontmatter.get("name"), strings, "name")
        if name is None or not name.strip():
            name = folder.name
            problems.append(Problem("name-from-folder", "name",
                                    f"Loaded under the folder name '{name}' because the frontmatter has no "
                                    "usable name.", "warning"))
        if isinstance(frontmatter.get("metadata"), dict) and not parsed.plain:  # plain: strings already
            frontmatter["metadata"] = _metadata_as_text(frontmatter["metadata"], strings)
        if scan_body:
            problems += _body_problems(parsed.path, parsed.body_offset, limit=LISTING_SCAN_CAP)
    except InvalidSkill as exc:
        return None, [_as_problem(exc)]
    meta = SkillMeta(
        name=name.strip(),
        description=description.strip(),
        path=folder,
        skill_md=skill_md,
        root=root if isinstance(root, Path) and root.is_absolute() else Path(os.path.abspath(root)),
        frontmatter=frontmatter,
        problems=problems,
    )
    return meta, problems


# -- helpers ------------------------------------------------------------------------------------------


def body_advice(skill_md: Path) -> list[Problem]:
    """Findings about a SKILL.md's body (over 500 lines, over about 5000 tokens, empty, not UTF-8), read now.

    What listing leaves out, for a skill card or an editor. Reads at most `LISTING_SCAN_CAP` body bytes;
    [] when the file cannot be read or has no frontmatter (listing or activation reports that).
    """
    try:
        offset = body_offset(Path(skill_md))
        return _body_problems(Path(skill_md), offset, limit=LISTING_SCAN_CAP)
    except (InvalidSkill, OSError):
        return []


def _body_problems(path: Path, offset: int, *, limit: int | None) -> list[Problem]:
    lines, body_bytes, _, bad = body_scan(path, offset, limit)
    problems = []
    if bad is not None:
        problems.append(_error("body-not-utf8", None,
                               f"The body of SKILL.md is not valid UTF-8 ({bad}); save the file as UTF-8."))
    if lines > MAX_LINES:
        problems.append(Problem("body-too-long", None,
                                f"SKILL.md has {lines} lines; keep it under {MAX_LINES} and move detailed "
                                "material into files under references/.", "warning"))
    tokens = body_bytes // BYTES_PER_TOKEN
    if tokens > MAX_BODY_TOKENS:
        problems.append(Problem("body-too-large", None,
                                f"The body is {body_bytes} bytes (roughly {tokens} tokens); the specification "
                                f"recommends under {MAX_BODY_TOKENS} tokens. Move detail into references/.",
                                "warning"))
    if body_bytes <= 4096 and _blank_body(path, offset):
        problems.append(Problem("body-empty", None,
                                "SKILL.md has no instructions after the frontmatter; add the Markdown body "
                                "an agent reads when it activates the skill.", "warning"))
    return problems


def _blank_body(path: Path, offset: int) -> bool:
    try:
        with path.open("rb") as f:
            f.seek(offset)
            return not f.read(4096).strip()
    except OSError:
        return False


def _needs_strings(frontmatter: dict) -> bool:
    meta = frontmatter.get("metadata")
    values = [*meta.values(), *meta.keys()] if isinstance(meta, dict) else []
    values += [frontmatter.get(key) for key in ("name", "description", "compatibility")]
    return any(v is not None and not isinstance(v, str) and _is_scalar(v) for v in values)


def _as_text(value, strings: dict | None, key: str) -> str | None:
    if isinstance(value, str):
        return value
    if not _is_scalar(value) or value is None:
        return None
    written = (strings or {}).get(key)
    return written if isinstance(written, str) else _scalar_text(value)


def _metadata_as_text(metadata: dict, strings: dict | None) -> dict:
    written = (strings or {}).get("metadata")
    if isinstance(written, dict):  # keys and values exactly as typed (`on: yes` stays "on": "yes")
        return written
    out = {}
    for key, value in metadata.items():
        if _is_scalar(value) and not isinstance(value, str):
            value = _scalar_text(value)
        out[key if isinstance(key, str) else _scalar_text(key)] = value
    return out


def _is_scalar(value) -> bool:
    return value is None or isinstance(value, (str, int, float, bool, date))


def _scalar_text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, date):
        return value.isoformat()
    return str(value)


def _quote_hint(key: str, value, as_written=None) -> str:
    if isinstance(value, (dict, list)):
        return "write it as a single string"
    text = as_written if isinstance(as_written, str) else _scalar_text(value)
    return f'quote it: {key}: "{text}"'


def _folder_name(folder: Path) -> str:
    return Path(os.path.abspath(folder)).name


def _as_problem(exc: InvalidSkill) -> Problem:
    problem = getattr(exc, "problem", None)
    return problem if isinstance(problem, Problem) else _error("invalid-skill", None, str(exc))


def _error(code: str, field_name: str | None, message: str) -> Problem:
    return Problem(code, field_name, message, "error")


def suggest_name(name: str) -> str:
    """A valid name close to `name`: ASCII lowercase, anything but a-z/0-9 as one '-', no edge hyphens,
    at most MAX_NAME_LENGTH ('Hello_World' -> 'hello-world'). 'my-skill' when nothing is left."""
    lowered = _ascii_lower(name)
    out = re.sub(r"-+", "-", "".join(c if c in _NAME_CHARS else "-" for c in lowered)).strip("-")
    return out[:MAX_NAME_LENGTH].rstrip("-") or "my-skill"


def _ascii_lower(text: str) -> str:
    return "".join(c.lower() if "A" <= c <= "Z" else c for c in text)


def _unique(chars) -> list[str]:
    return list(dict.fromkeys(chars))


def _show(chars: list[str]) -> str:
    return ", ".join(repr(c) for c in chars[:8]) + (", ..." if len(chars) > 8 else "")
