"""`ipyskills mcp`: serve the skills to an MCP client (Claude Code or Desktop, an IDE agent, an SDK app).

Over stdio by default (the client spawns this command), or with `--http` over Streamable HTTP on
127.0.0.1 behind a bearer token (`--token`, or IPYSKILLS_MCP_TOKEN; generated and printed to stderr once
when neither is given). The tools are the agent tools exactly as `for_agent()` defines them, for the
skills `--dir`/`--allow`/`--disable` leave visible; `--inputs DIR` is the only folder whose files a model
may hand to a script. `--config` prints the client configuration for these options and exits.
"""

from __future__ import annotations

import os
import sys

from ..errors import ConfigError
from . import add_dir_option

TOKEN_ENV = "IPYSKILLS_MCP_TOKEN"


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "mcp", help="serve the skills to MCP clients (stdio, or --http on 127.0.0.1)",
        description="An MCP server: the agent tools read_skill and execute_skill_script, and the MCP Skills "
        "extension (skills/list, skills/get, skill:// resources with sha256 digests). stdio unless --http.")
    add_dir_option(p)
    p.add_argument("--allow", metavar="A,B", help="only these skills are served (comma-separated names)")
    p.add_argument("--disable", metavar="A,B", help="hide these skills (comma-separated names)")
    p.add_argument("--inputs", metavar="DIR",
                   help="a folder whose files the model may pass to scripts (execute_skill_script's inputs); "
                   "without it no host file can be passed")
    p.add_argument("--backend", choices=("docker", "local", "auto"), help="where scripts run (default: auto)")
    p.add_argument("--runtime", choices=("runc", "runsc", "auto"), help="the Docker runtime (default: runc)")
    p.add_argument("--timeout", type=float, metavar="S", help="seconds before a run is killed")
    p.add_argument("--memory", metavar="M", help="memory limit of a run, e.g. 256m or 1g")
    p.add_argument("--deps", choices=("auto", "declared", "off"), help="install skills' Python requirements")
    p.add_argument("--http", action="store_true", help="serve Streamable HTTP on 127.0.0.1 instead of stdio")
    p.add_argument("--port", type=int, default=8765, metavar="P", help="--http port (default 8765; 0: any free)")
    p.add_argument("--token", metavar="T", help=f"--http bearer token (default: ${TOKEN_ENV}, else generated)")
    p.add_argument("--config", action="store_true",
                   help="print the mcpServers JSON and a command line for a client, then exit")
    p.set_defaults(func=cmd_mcp)


def _names(value: str | None) -> list[str] | None:
    if value is None:
        return None
    names = [n.strip() for n in value.split(",") if n.strip()]
    if not names:
        raise ConfigError("--allow and --disable take skill names separated by commas, like a,b")
    return names


def view_options(args) -> dict:
    options = {"inputs_dir": args.inputs, "backend": args.backend, "timeout": args.timeout,
               "memory": args.memory, "deps": args.deps}
    return {k: v for k, v in options.items() if v is not None}


def cmd_mcp(args) -> int:
    from ..agent.mcp import config
    from .core_cmds import make_registry

    allow, disabled = _names(args.allow), _names(args.disable) or []
    if args.config:
        # Absolute, and the configured roots spelled out when no --dir is given: a client starts the
        # server from a working directory of its own.
        roots = ([os.path.abspath(d) for d in args.dirs] if args.dirs else
                 [str(r) for r in make_registry(args).roots if os.path.isdir(r)])
        cli = config.stdio_args(roots, allow=allow, disabled=disabled,
                                inputs_dir=os.path.abspath(args.inputs) if args.inputs else None,
                                backend=args.backend, timeout=args.timeout, memory=args.memory,
                                runtime=args.runtime, deps=args.deps)
        print(config.dumps(config.stdio_config(cli)))
        print(config.stdio_command_line(cli))
        return 0
    from ..agent.mcp.server import build_server

    reg = make_registry(args)
    if args.runtime:
        reg.settings = reg.settings.with_overrides(runtime=args.runtime)
    server = build_server(reg, allow, disabled, **view_options(args))
    if args.http:
        from ..agent.mcp.http import new_token, serve_http

        token = args.token or os.environ.get(TOKEN_ENV) or ""
        generated = not token
        token = token or new_token()

        def announce(url):  # once listening, so a port that cannot be had shows no token
            if generated:
                print(f"ipyskills: bearer token (shown once): {token}", file=sys.stderr)
            print(f"ipyskills: MCP server at {url}", file=sys.stderr, flush=True)

        serve_http(server, port=args.port, token=token, announce=announce)
        return 0
    from ..agent.mcp.stdio import serve_stdio

    serve_stdio(server)
    return 0
