"""The `ipyskills` command. Exit codes: 0 success, 1 a reported failure, 2 a usage error.

Each group of subcommands lives in its own module with a `register(subparsers)` function; a subcommand
sets `func(args) -> int` as its parser default.
"""

from __future__ import annotations

import argparse
import sys

from ..errors import SkillError

COMMAND_MODULES = ("validate_cmd", "core_cmds", "run_cmd", "deps_cmd", "guard_cmd", "sandbox_cmds", "mcp_cmd")


def build_parser() -> argparse.ArgumentParser:
    import importlib

    parser = argparse.ArgumentParser(
        prog="ipyskills",
        description="Agent Skills: discover, validate, read and run skills in a sandbox.",
    )
    from .. import __version__

    parser.add_argument("--version", action="version", version=f"ipyskills {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(f"{__name__}.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)  # argparse exits 2 on usage errors
    try:
        return int(args.func(args) or 0)
    except SkillError as exc:
        print(f"ipyskills: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("ipyskills: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `ipyskills list | head`
        return 0


def add_dir_option(parser: argparse.ArgumentParser) -> None:
    """`--dir D` (repeatable): use these roots instead of the configured ones."""
    parser.add_argument(
        "--dir", dest="dirs", action="append", metavar="D",
        help="a skill root or a single skill folder (repeatable); replaces the configured roots",
    )


def add_json_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")


if __name__ == "__main__":  # python -m ipyskills.cli
    sys.exit(main())
