"""`ipyskills run NAME SCRIPT [ARGS...]`: run a skill's script in the sandbox from the shell.

ipyskills' own options go before SCRIPT; everything after SCRIPT is handed to the script untouched, even
words that start with '-' (a leading `--` after SCRIPT is dropped, so `run s x.py -- --help` works too).
Standard input is passed through when it is not a terminal (`--no-stdin` to skip reading it).

The script runs in a writable workspace (its working directory); `--input PATH` (repeatable) copies a host
file or folder into it first, and `--save DIR` writes the files the script made (in the workspace or in
$IPYSKILLS_OUTPUT) to DIR, never over an existing file (a clash takes a free name and says so).

The script's stdout and stderr are written through as they arrive (within the output cap); with `--json`
nothing is streamed and the whole result is printed at the end. Ctrl-C stops the run, removes the sandbox,
says "interrupted after N s; sandbox removed" and exits 130. The exit code is the script's, except:
124 when it ran out of time (as timeout(1) does), 137 when it was killed for using too much memory
(128 + SIGKILL, as a shell reports it), 128+N when a signal N ended it. `--json` prints
ExecuteResult.to_dict() instead and exits the same way. Backend notices, guard warnings and the
timeout/OOM reason go to stderr, prefixed `ipyskills:`.
"""

from __future__ import annotations

import argparse
import json
import sys

from ..errors import RunInterrupted
from . import add_dir_option, add_json_option
from .deps_cmd import add_allow_sdist_option, apply_allow_sdist

EXIT_TIMEOUT = 124
EXIT_OOM = 137
EXIT_INTERRUPTED = 130


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "run", help="run a skill's script in the sandbox",
        description="Run SCRIPT (a path inside skill NAME) with ARGS. Options for ipyskills go before "
        "SCRIPT; everything after SCRIPT goes to the script. Exit code: the script's; 124 on timeout, "
        "137 when killed for memory.",
    )
    p.add_argument("name", metavar="NAME", help="the skill")
    p.add_argument("script", metavar="SCRIPT", help="path inside the skill, e.g. scripts/analyze.py")
    p.add_argument("script_args", nargs=argparse.REMAINDER, metavar="ARGS", help="passed to the script")
    add_dir_option(p)
    p.add_argument("--backend", choices=("docker", "local", "auto"), help="where to run (default: auto)")
    p.add_argument("--runtime", choices=("runc", "runsc", "auto"),
                   help="the Docker runtime: runc, runsc (gVisor's user-space kernel) or auto (gVisor when the "
                   "engine offers it); default: the runtime setting (IPYSKILLS_RUNTIME), runc")
    p.add_argument("--timeout", type=float, metavar="S", help="seconds before the run is killed")
    p.add_argument("--memory", metavar="M", help="memory limit, e.g. 256m or 1g")
    p.add_argument("--network", action="store_true", default=None, help="allow network access")
    p.add_argument("--no-guard", dest="guard", action="store_false", default=None,
                   help="skip the static script check (the sandbox still applies)")
    p.add_argument("--no-stdin", action="store_true", help="do not read standard input")
    p.add_argument("--input", dest="inputs", action="append", metavar="PATH",
                   help="copy this file or folder into the run's workspace (its working directory) first; "
                   "repeatable")
    p.add_argument("--save", metavar="DIR",
                   help="write the files the script made to DIR (never over an existing file)")
    p.add_argument("--deps", choices=("auto", "declared", "off"),
                   help="install the skill's Python requirements before the run: auto (every requirement "
                   "found, the default), declared (ignore inferred imports) or off")
    add_allow_sdist_option(p)
    add_json_option(p)
    p.set_defaults(func=cmd_run)


def exit_code_for(result) -> int:
    if result.timed_out:
        return EXIT_TIMEOUT
    if result.oom_killed:
        return EXIT_OOM
    if result.exit_code is None:
        return 1
    if result.exit_code < 0:  # killed by signal N (subprocess reports -N)
        return 128 + (-result.exit_code)
    return result.exit_code


def read_stdin(skip: bool, cap: int | None = None) -> bytes:
    """The CLI's stdin; with `cap`, at most cap + 1 bytes are read (the run then refuses it past the cap)."""
    if skip or sys.stdin is None:
        return b""
    try:
        if sys.stdin.isatty():
            return b""
        return sys.stdin.buffer.read() if cap is None else sys.stdin.buffer.read(cap + 1)
    except (OSError, ValueError):  # closed or detached stdin
        return b""


def cmd_run(args) -> int:
    from .core_cmds import make_registry

    script_args = list(args.script_args)
    if script_args[:1] == ["--"]:
        script_args = script_args[1:]
    reg = make_registry(args)
    apply_allow_sdist(reg, args)
    reg.settings = reg.settings.with_overrides(pool_size=0)  # one run, then exit: a warm pool only costs
    live = None if args.json else _live
    from ..sandbox.interrupts import shield_repeated_interrupts

    # Ctrl-C pressed again while the first one's clean-up runs must not cut the sandbox removal short.
    with shield_repeated_interrupts():
        try:
            result = reg.run(
                args.name, args.script, args=script_args,
                stdin=read_stdin(args.no_stdin, reg.settings.stdin_cap),
                backend=args.backend, timeout=args.timeout, memory=args.memory, network=args.network,
                guard=args.guard, deps=args.deps, progress=_progress, inputs=args.inputs, save_to=args.save,
                on_output=live, runtime=args.runtime,
            )
        except RunInterrupted as stop:
            if args.json:
                print(json.dumps(stop.result.to_dict(), indent=2, ensure_ascii=False))
            print(f"ipyskills: {stop.line()}", file=sys.stderr)
            return EXIT_INTERRUPTED
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, ensure_ascii=False))
    for line in _notes(result):
        print(f"ipyskills: {line}", file=sys.stderr)
    return exit_code_for(result)


def _live(stream: str, text: str) -> None:
    """Write the script's output through as it arrives."""
    _write(sys.stdout if stream == "stdout" else sys.stderr, text)


def _progress(line: str) -> None:
    print(f"ipyskills: {line}", file=sys.stderr, flush=True)


def _write(stream, text: str) -> None:
    if not text:
        return
    buffer = getattr(stream, "buffer", None)
    stream.flush()
    if buffer is not None:  # exact bytes, whatever the terminal encoding
        buffer.write(text.encode("utf-8", "surrogateescape"))
        buffer.flush()
    else:
        stream.write(text)
        stream.flush()


def _notes(result) -> list[str]:
    notes = []
    if result.notice:
        notes.append(result.notice)
    notes += [str(f) for f in result.findings]
    notes += result.artifact_notes()
    for artifact, path in result.saved:
        notes.append(f"saved {artifact} -> {path}")
    if result.timed_out:
        notes.append(f"timed out after {result.duration:.1f} s; the run was killed (exit {EXIT_TIMEOUT})")
    elif result.oom_killed:
        notes.append(f"killed for exceeding the memory limit (exit {EXIT_OOM}); raise it with --memory")
    return notes
