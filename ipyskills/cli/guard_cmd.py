"""`ipyskills guard FILE...`: the static script checks that run before every script, on demand.

Text output: one finding a line on stdout, `path:line: [severity] rule: message` (line 0 means the file
as a whole), then a one-line summary on stderr. `--json` prints `[{"path", "blocked", "findings"}]`.
A folder stands for the scripts inside it. Exit 1 when any file is blocked or cannot be found, else 0.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from . import add_json_option

LANGUAGE_CHOICES = ("python", "shell", "javascript", "other")


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "guard",
        help="static checks a script gets before it runs",
        description="Check scripts for destructive or escape attempts (block) and network or subprocess "
        "use (warn), the same checks that run before every sandboxed run. Exit 1 when any file is blocked.",
    )
    parser.add_argument("paths", nargs="+", metavar="FILE", help="a script, or a folder of scripts")
    parser.add_argument("--language", choices=LANGUAGE_CHOICES,
                        help="check as this language instead of guessing from the extension or shebang")
    add_json_option(parser)
    parser.set_defaults(func=run)


def run(args) -> int:
    from ..sandbox.guard import check_file, script_files

    for stream in (sys.stdout, sys.stderr):  # odd file names must not crash the report
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")

    entries: list[dict] = []  # one per file: the report dict, plus "error" when it could not be checked
    for given in args.paths:
        path = Path(given)
        if os.path.isdir(path):  # os.path: False for any OSError (a name too long)
            scripts = script_files(path)
            if not scripts:
                entries.append(_missing(given, "folder holds no scripts (.py, .sh, .js, ... or a shebang)"))
            entries.extend(check_file(p, str(p), args.language).to_dict() for p in scripts)
        elif os.path.isfile(path):
            entries.append(check_file(path, given, args.language).to_dict())
        elif os.path.exists(path):  # a fifo, socket or device: never opened, since reading could block
            entries.append(_missing(given, "not a regular file (a fifo, socket or device); not checked"))
        else:
            entries.append(_missing(given, "no such file"))

    if args.json:
        print(json.dumps(entries, indent=2, ensure_ascii=False))
    else:
        _print_text(entries)
    failed = any(e["blocked"] or "error" in e for e in entries)
    return 1 if failed else 0


def _missing(path: str, reason: str) -> dict:
    return {"path": path, "blocked": False, "findings": [], "error": reason}


def _print_text(entries: list[dict]) -> None:
    for entry in entries:
        if "error" in entry:
            print(f"ipyskills guard: {entry['path']}: {entry['error']}", file=sys.stderr)
        for f in entry["findings"]:
            print(f"{f['path']}:{f['line']}: [{f['severity']}] {f['rule']}: {f['message']}")
    checked = [e for e in entries if "error" not in e]
    blocked = sum(e["blocked"] for e in checked)
    warned = sum(1 for e in checked if not e["blocked"] and e["findings"])
    errors = len(entries) - len(checked)
    summary = f"checked {len(checked)} file(s): {blocked} blocked, {warned} with warnings only"
    if errors:
        summary += f", {errors} could not be checked"
    sys.stdout.flush()
    print(summary, file=sys.stderr)
