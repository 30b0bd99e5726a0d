"""The magics' argument parsing: IPython's magic_arguments parsers run on a line with its `# comment` removed,
`-h` shown as help instead of an error, a close-match hint for a mistyped option, and the checks that an
option is given only to the subcommands that take it."""

from __future__ import annotations

import argparse
import difflib
import shlex

from IPython.core import magic_arguments as ma
from IPython.core.error import UsageError

from ..agent.schemas import FORMATS as TOOL_FORMATS
from ..agent.system_prompt import PROMPT_FORMATS

HELP_WORDS = ("-h", "--help")


class HelpShown(Exception):
    """Raised by `parse` after printing a magic's help; the magic returns nothing."""


def parse(magic, line: str) -> argparse.Namespace:
    """POSIX-style splitting (quotes group words, as in a shell), then the magic's argparse parser.
    `-h`/`--help` among the magic's own options prints its help (raising HelpShown); after the words that
    go to a script (%%skill_run's ARGS) they are the script's. A mistyped option gets a "did you mean"."""
    try:
        argv = shlex.split(strip_comment(line))
    except ValueError as exc:
        raise UsageError(f"{exc} in {line!r}; close the quote or escape it") from None
    parser = magic.parser
    if any(word in HELP_WORDS for word in _own_words(parser, argv)):
        print(parser.format_help())
        raise HelpShown
    try:
        return parser.parse_args(argv)
    except UsageError as exc:
        raise UsageError(str(exc) + _option_hint(parser, str(exc))) from None


def strip_comment(line: str) -> str:
    """`line` without a trailing `# comment`, as a shell reads it: a `#` starting a word, outside quotes
    (so `%skills add ./x   # why` works as written in the README; `"#tag"` and `a#b` stay words)."""
    quote, escaped, word_start = None, False, True  # word_start: the last character ended a word
    for i, ch in enumerate(line):
        if escaped:
            escaped, word_start = False, False
        elif ch == "\\" and quote != "'":
            escaped = True
        elif quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote, word_start = ch, False
        elif ch == "#" and word_start:
            return line[:i]
        else:
            word_start = ch.isspace()
    return line


def _own_words(parser, argv: list[str]) -> list[str]:
    """The words that are the magic's own: all of them, or for a magic whose last positional takes the
    rest of the line (a script's ARGS), those before its fixed positionals end."""
    rest = [a for a in parser._actions if a.nargs == argparse.REMAINDER]
    if not rest:
        return argv
    fixed = len([a for a in parser._actions if not a.option_strings and a.nargs != argparse.REMAINDER])
    takes_value = {o for a in parser._actions if a.option_strings and a.nargs != 0 for o in a.option_strings}
    own, positionals, skip = [], 0, False
    for word in argv:
        if skip:
            skip = False
            continue
        if word.startswith("-") and positionals == 0:
            own.append(word)
            skip = word in takes_value
            continue
        positionals += 1
        if positionals >= fixed:
            break
    return own


def _option_hint(parser, message: str) -> str:
    """'; did you mean --filter?' for an unrecognized option close to a real one."""
    if "unrecognized arguments" not in message:
        return ""
    options = [o for a in parser._actions for o in a.option_strings]
    hints = []
    for word in message.split("unrecognized arguments:", 1)[1].split():
        close = difflib.get_close_matches(word.split("=", 1)[0], options, n=1, cutoff=0.6)
        if close:
            hints.append(f"{close[0]} (for {word})")
    return f"; did you mean {', '.join(hints)}?" if hints else ""


class _optional_rest(ma.argument):
    """A REMAINDER positional that may be empty: argparse counts it as required, so a missing
    SCRIPT would read "required: SCRIPT, ARGS" although ARGS may be left out."""

    def add_to_parser(self, parser, group):
        action = (group or parser).add_argument(*self.args, **self.kwds)
        action.required = False


def _names(value: str | None) -> list[str]:
    """"a, b,c" -> ["a", "b", "c"]."""
    return [n.strip() for n in (value or "").split(",") if n.strip()]


_AGENT_OPTIONS = {"--format": ("prompt", "tools"), "--allow": ("prompt", "tools", "agent"),
                  "--disable": ("agent",), "--enable": ("agent",), "--reset": ("agent",)}


_LAB_OPTIONS = {"--queries": ("eval",), "--client": ("eval", "budget"), "--model": ("eval", "budget"),
                "--runs": ("eval",), "--description": ("eval",), "--descriptions": ("eval",),
                "--parallel": ("eval",), "--option": ("eval",), "-o": ("eval", "budget")}


def _check_lab_options(command: str, args) -> None:
    """Usage errors for prompt-lab options given to another command, or with bad values."""
    given = {"--queries": args.queries, "--client": args.client, "--model": args.model, "--runs": args.runs,
             "--description": args.description, "--descriptions": args.descriptions,
             "--parallel": args.parallel, "--option": args.option, "-o": args.var}
    for option, value in given.items():
        if value is not None and command not in _LAB_OPTIONS[option]:
            takers = " or ".join(f"%skills {c}" for c in _LAB_OPTIONS[option])
            raise UsageError(f"{option} applies to {takers}, not to %skills {command}")
    if args.runs is not None and args.runs < 1:
        raise UsageError("--runs must be at least 1")
    if args.parallel is not None and not 1 <= args.parallel <= 32:
        raise UsageError("--parallel must be from 1 to 32")
    if args.var is not None and not args.var.isidentifier():
        raise UsageError(f"-o needs a Python variable name, got {args.var!r}")


def _check_agent_options(command: str, args) -> None:
    """Usage errors for agent options given to a command that does not take them, or with bad values."""
    given = {"--format": args.format, "--allow": args.allow, "--disable": args.disable,
             "--enable": args.enable, "--reset": args.reset or None}
    for option, value in given.items():
        if value is not None and command not in _AGENT_OPTIONS[option]:
            takers = " or ".join(f"%skills {c}" for c in _AGENT_OPTIONS[option])
            raise UsageError(f"{option} applies to {takers}, not to %skills {command}")
    formats = {"prompt": PROMPT_FORMATS, "tools": TOOL_FORMATS}.get(command)
    if args.format is not None and args.format not in formats:
        raise UsageError(f"%skills {command} --format must be {' or '.join(formats)}, got {args.format!r}")
    if command == "prompt" and args.allow is not None and args.format is None:
        raise UsageError("%skills prompt --allow needs --format xml or markdown: bare %skills prompt is the "
                         "catalog of every skill, the agent's filtered system prompt is %skills prompt --format")
    for option in ("--allow", "--disable", "--enable"):
        value = given[option]
        if value is not None and not _names(value):
            raise UsageError(f"{option} needs skill names separated by commas, like {option} a,b")


