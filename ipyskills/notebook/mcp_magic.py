"""`%skills mcp [start|stop]`: hand the notebook's skills to an MCP client.

- `%skills mcp`: the exact client configuration for this kernel's roots and agent filter: the
  `mcpServers` JSON (Claude Desktop and Claude Code read this shape) and the `claude mcp add` command line
  for a stdio server the client starts itself, plus, while one runs, the same for the kernel's HTTP server.
- `%skills mcp start`: a Streamable HTTP server on 127.0.0.1 (any free port, or $IPYSKILLS_MCP_PORT)
  behind a fresh bearer token, in a background thread, bound to this kernel's registry and agent filter:
  a skill authored or added in the notebook is served at once. `%skills mcp stop` ends it.

The token is shown in the output (and so saved with the notebook); a new start gives a new one.
"""

from __future__ import annotations

import os

ACTIONS = ("config", "start", "stop")
PORT_ENV = "IPYSKILLS_MCP_PORT"

_running = None  # the one HTTPServer of this kernel


class MCPSetup:
    """What `%skills mcp` shows: client configurations, as text (and the same text as HTML)."""

    def __init__(self, sections: list[tuple[str, str]], status: str):
        self.sections = sections
        self.status = status

    def __repr__(self) -> str:
        parts = [self.status]
        for title, body in self.sections:
            parts += ["", title, body]
        return "\n".join(parts)

    def _repr_pretty_(self, p, cycle):
        p.text(repr(self))

    def _repr_html_(self) -> str:
        from html import escape

        out = [f"<p>{escape(self.status)}</p>"]
        for title, body in self.sections:
            out.append(f"<p><b>{escape(title)}</b></p><pre>{escape(body)}</pre>")
        return "".join(out)


def _filter(magics) -> dict:
    view = magics.agent_view()
    return {"allow": None if view.allow is None else sorted(view.allow),
            "disabled": sorted(magics._known(magics.agent_disabled)),
            "enabled": sorted(magics._known(magics.agent_enabled)),
            "inputs_dir": magics.agent_inputs or None}


def setup(magics) -> MCPSetup:
    from ..agent.mcp import config

    view_filter = _filter(magics)
    roots = [str(r) for r in magics.registry.roots if os.path.isdir(r)]
    args = config.stdio_args(roots, allow=view_filter["allow"], disabled=view_filter["disabled"],
                             inputs_dir=view_filter["inputs_dir"])
    sections = [("stdio: the client starts the server (mcpServers JSON)", config.dumps(config.stdio_config(args))),
                ("stdio: command line (Claude Code)", config.stdio_command_line(args))]
    if _running is not None and _running.running:
        status = f"HTTP server running at {_running.url} (this kernel's registry; %skills mcp stop ends it)"
        sections += [("HTTP: this kernel's server (mcpServers JSON)",
                      config.dumps(config.http_config(_running.url, _running.token))),
                     ("HTTP: command line (Claude Code)", config.http_command_line(_running.url, _running.token))]
    else:
        status = "No HTTP server running (%skills mcp start serves this kernel's registry on 127.0.0.1)"
    if view_filter["enabled"]:
        sections.append(("note", "skills enabled with %skills agent --enable are served by the kernel's HTTP "
                                 "server only; a stdio server follows their SKILL.md"))
    return MCPSetup(sections, status)


def start(magics) -> MCPSetup:
    global _running
    from ..agent.mcp.http import HTTPServer
    from ..agent.mcp.server import build_server

    if _running is not None and _running.running:
        return setup(magics)
    view_filter = _filter(magics)
    options = {"inputs_dir": view_filter["inputs_dir"]} if view_filter["inputs_dir"] else {}
    server = build_server(magics.registry, view_filter["allow"], view_filter["disabled"],
                          enabled=view_filter["enabled"], **options)
    port = int(os.environ.get(PORT_ENV) or 0)
    _running = HTTPServer(server, port=port).start()
    return setup(magics)


def stop(magics) -> MCPSetup:
    global _running
    if _running is not None:
        _running.stop()
        _running = None
    return setup(magics)


def skills_mcp(magics, args):
    """The body of `%skills mcp [start|stop]`."""
    from IPython.core.error import UsageError

    action = args.target or "config"
    if action not in ACTIONS:
        raise UsageError(f"%skills mcp takes start or stop (or nothing, for the client configuration), "
                         f"got {action!r}")
    return magics._call({"config": setup, "start": start, "stop": stop}[action], magics)
