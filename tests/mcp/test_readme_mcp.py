"""The README's MCP section, run: its mcpServers JSON is what `ipyskills mcp --config` prints and starts a
working server, and its transcript is what a real session gives today (durations aside)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import anyio
import pytest

from tests.notebook.test_readme import BLOCKS

from .conftest import REPO, server_env, stdio_params

README_PYTHON = "/home/me/project/.venv/bin/python"
README_SKILLS = "/home/me/project/skills"


def _block(lang: str, first: str):
    found = [b for b in BLOCKS if b.lang == lang and b.first == first]
    assert len(found) == 1, f"README has {len(found)} ```{lang} blocks starting {first!r}"
    return found[0].text


def test_the_config_json_is_what_the_command_prints_and_it_starts_a_server():
    shown = json.loads(_block("json", "{"))
    args = shown["mcpServers"]["ipyskills"]["args"][3:]  # after -m ipyskills mcp
    proc = subprocess.run([sys.executable, "-m", "ipyskills", "mcp", "--config", *args], cwd=str(REPO),
                          env=server_env(), capture_output=True, text=True, timeout=60, check=True)
    printed = json.loads(proc.stdout[:proc.stdout.rindex("}") + 1])
    printed["mcpServers"]["ipyskills"]["command"] = README_PYTHON
    assert printed == shown
    assert f"claude mcp add ipyskills -- {sys.executable} -m ipyskills mcp {' '.join(args)}" in proc.stdout
    # The entry as a client would use it, with this checkout's interpreter and skills.
    entry = shown["mcpServers"]["ipyskills"]
    real_args = [str(REPO / "skills") if a == README_SKILLS else a for a in entry["args"]]

    async def tools():
        from mcp.client.session import ClientSession
        from mcp.client.stdio import stdio_client

        params = stdio_params()
        params.args = real_args
        with open(os.devnull, "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    return (await session.list_tools()).tools

    listed = anyio.run(tools)
    assert [t.name for t in listed] == ["read_skill", "execute_skill_script"]
    assert "data-processor" in listed[0].input_schema["properties"]["skill_name"]["enum"]


def _comparable(text: str) -> str:
    return re.sub(r"\b(in|after) \d+(\.\d+)? s\b", r"\1 N s", text.strip())


@pytest.mark.docker
def test_the_transcript_is_a_real_session(docker):
    shown = _block("text", "-> initialize")
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "mcp_transcript.py"), str(REPO / "skills")],
                          cwd=str(REPO), env=server_env(), capture_output=True, text=True, timeout=180, check=False)
    assert proc.returncode == 0, proc.stderr
    assert _comparable(proc.stdout) == _comparable(shown)
