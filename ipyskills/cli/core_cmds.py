"""`ipyskills list`, `ipyskills prompt`, `ipyskills load`: discovery and the agent's text, from the shell.

- list: one line a skill (name, status, shortened description) on stdout; skipped folders, shadowed names
  and root problems on stderr. `--json` prints a list of objects (name, description, path, status,
  warnings, problems, ...). Exit 0 even when some folders were skipped: they are reported, not fatal.
- prompt: the <available_skills> block. With no skills, stdout stays empty (so `$(ipyskills prompt)` adds
  nothing to a prompt), a one-line note goes to stderr, and the exit code is 0.
- load: exactly the text an agent receives for NAME or NAME/PATH, and nothing else on stdout. A refused
  locator exits 1 with a one-line reason on stderr and never prints the refused file.
"""

from __future__ import annotations

import json
import sys

from . import add_dir_option, add_json_option

DESCRIPTION_WIDTH = 72


def register(subparsers) -> None:
    p = subparsers.add_parser("list", help="list the skills found (lenient loading)",
                              description="List discovered skills, one a line; diagnostics go to stderr.")
    add_dir_option(p)
    add_json_option(p)
    p.set_defaults(func=cmd_list)

    p = subparsers.add_parser("prompt", help="print the <available_skills> block (level 1)",
                              description="Print the catalog an agent gets in its system prompt. "
                              "Prints nothing when there are no skills.")
    add_dir_option(p)
    p.add_argument("--instructions", choices=("file-read", "tool"),
                   help="put the client guide's behavioural instructions before the block")
    p.set_defaults(func=cmd_prompt)

    p = subparsers.add_parser("load", help="print exactly what an agent receives for NAME or NAME/PATH",
                              description="Print the <skill_content> text for NAME (level 2) or the "
                              "<skill_resource> text for NAME/PATH (level 3).")
    p.add_argument("locator", metavar="NAME[/PATH]")
    add_dir_option(p)
    p.add_argument("--read-cap", type=int, metavar="BYTES",
                   help="largest resource to read (default 65536, or IPYSKILLS_READ_CAP)")
    p.set_defaults(func=cmd_load)


def make_registry(args):
    """The registry for a command: `--dir` roots only, else the configured and default roots."""
    from ..core.registry import SkillRegistry

    return SkillRegistry(args.dirs) if args.dirs else SkillRegistry()


def _tolerant_streams() -> None:
    # A path or description the terminal cannot encode must not crash the command.
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")


def report_diagnostics(reg) -> None:
    """Skipped folders, shadowed names and root problems, one line each, on stderr."""
    for folder, problems in reg.skipped:
        reasons = "; ".join(p.message for p in problems if p.severity == "error") or \
            "; ".join(p.message for p in problems) or "not loaded"
        print(f"skipped: {folder}: {reasons}", file=sys.stderr)
    for winner, loser in reg.shadowed:
        print(f"shadowed: {loser.name!r} at {loser.path} is hidden by {winner.path} (earlier root wins)",
              file=sys.stderr)
    for problem in reg.diagnostics:
        print(f"note: {problem.message}", file=sys.stderr)


def shorten(text: str, width: int = DESCRIPTION_WIDTH) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1].rstrip() + "…"


def cmd_list(args) -> int:
    _tolerant_streams()
    reg = make_registry(args)
    skills = reg.list()
    if args.json:
        print(json.dumps([m.to_dict() for m in skills], indent=2, ensure_ascii=False))
    else:
        name_w = max((len(m.name) for m in skills), default=0)
        for m in skills:
            print(f"{m.name:<{name_w}}  {m.status:<8}  {shorten(m.description)}")
        if not skills:
            print("no skills found (searched: " + ", ".join(str(r) for r in reg.roots) + ")", file=sys.stderr)
    sys.stdout.flush()
    report_diagnostics(reg)
    return 0


def cmd_prompt(args) -> int:
    _tolerant_streams()
    reg = make_registry(args)
    text = reg.catalog(instructions=args.instructions)
    if text:
        print(text)
    else:
        print("ipyskills: no skills found, so there is no catalog to print", file=sys.stderr)
    return 0


def cmd_load(args) -> int:
    _tolerant_streams()
    reg = make_registry(args)
    text = str(reg.load(args.locator, read_cap=args.read_cap))  # a SkillError exits 1 via cli.main
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0
