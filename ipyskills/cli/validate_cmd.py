"""`ipyskills validate PATH...`: strict specification checks with skills-ref-style output.

Text output: `Valid skill: PATH` on stdout for a valid skill; `Validation failed for PATH:` and one
`  - message` line per error on stderr for an invalid one. Warnings follow as `  ! message` lines on the
same stream. `--json` prints one list of reports on stdout instead. Exit 1 when any path is invalid.
"""

from __future__ import annotations

import json
import sys

from . import add_json_option


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "validate",
        help="check skills against the Agent Skills specification",
        description="Check skill folders (or their SKILL.md files) against the Agent Skills specification. "
        "Exit 1 when any of them is invalid.",
    )
    parser.add_argument("paths", nargs="+", metavar="PATH", help="a skill folder or its SKILL.md file")
    add_json_option(parser)
    parser.set_defaults(func=run)


def run(args) -> int:
    from ..core.validate import validate_path  # lazy: keeps `ipyskills --help` free of YAML

    for stream in (sys.stdout, sys.stderr):  # odd paths or a non-UTF-8 terminal must not crash the report
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    reports = [validate_path(path) for path in args.paths]
    if args.json:
        print(json.dumps([r.to_dict() for r in reports], indent=2, ensure_ascii=False))
    else:
        for report in reports:
            _print_text(report)
    return 0 if all(r.valid for r in reports) else 1


def _print_text(report) -> None:
    if report.valid:
        stream = sys.stdout
        print(f"Valid skill: {report.path}", file=stream)
    else:
        stream = sys.stderr
        print(f"Validation failed for {report.path}:", file=stream)
        for problem in report.errors:
            print(f"  - {problem.message}", file=stream)
    for problem in report.warnings:
        print(f"  ! {problem.message}", file=stream)
    stream.flush()
