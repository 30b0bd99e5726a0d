"""Client configuration for `ipyskills mcp`: the `mcpServers` JSON of Claude Desktop and Claude Code (and
the many clients that copied its shape), and the equivalent command lines."""

from __future__ import annotations

import json
import shlex
import sys

SERVER_KEY = "ipyskills"


def stdio_args(roots, *, allow=None, disabled=(), inputs_dir=None, backend=None, timeout=None, memory=None,
               runtime=None, deps=None) -> list[str]:
    """`ipyskills mcp` arguments reproducing a registry's roots, an agent view and run options."""
    args = ["mcp"]
    for root in roots:
        args += ["--dir", str(root)]
    if allow is not None:
        args += ["--allow", ",".join(sorted(allow))]
    if disabled:
        args += ["--disable", ",".join(sorted(disabled))]
    if inputs_dir is not None:
        args += ["--inputs", str(inputs_dir)]
    if backend:
        args += ["--backend", backend]
    if timeout is not None:
        args += ["--timeout", f"{timeout:g}"]
    for flag, value in (("--memory", memory), ("--runtime", runtime), ("--deps", deps)):
        if value:
            args += [flag, value]
    return args


def stdio_config(args: list[str], *, python: str | None = None) -> dict:
    """{"mcpServers": {...}} spawning `python -m ipyskills <args>`."""
    return {"mcpServers": {SERVER_KEY: {"command": python or sys.executable, "args": ["-m", "ipyskills", *args]}}}


def http_config(url: str, token: str) -> dict:
    return {"mcpServers": {SERVER_KEY: {"type": "http", "url": url,
                                        "headers": {"Authorization": f"Bearer {token}"}}}}


def stdio_command_line(args: list[str], *, python: str | None = None) -> str:
    command = [python or sys.executable, "-m", "ipyskills", *args]
    return f"claude mcp add {SERVER_KEY} -- " + shlex.join(command)


def http_command_line(url: str, token: str) -> str:
    return shlex.join(["claude", "mcp", "add", "--transport", "http", SERVER_KEY, url,
                       "--header", f"Authorization: Bearer {token}"])


def dumps(config: dict) -> str:
    return json.dumps(config, indent=2)
