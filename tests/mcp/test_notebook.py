"""`%skills mcp` in a real IPython kernel: the client configuration it shows starts a working server, and
`%skills mcp start` serves the kernel's own registry over HTTP, so a skill authored in the notebook with
%%skill is at once readable by an MCP client outside the kernel; `stop` ends it."""

from __future__ import annotations

import json
import os
import re
import time

import anyio
import pytest

from tests.notebook.test_nb_interrupts import _execute, _text

from .conftest import server_env, stdio_params, text_of
from .test_http import http_session, status_without


@pytest.fixture
def kernel(tmp_path, skills_root):
    from jupyter_client.manager import start_new_kernel

    env = server_env()
    env.update(HOME=str(tmp_path), IPYTHONDIR=str(tmp_path / "ipython"))
    km, kc = start_new_kernel(kernel_name="python3", cwd=str(tmp_path), env=env, startup_timeout=120)
    try:
        yield kc
    finally:
        try:
            _execute(kc, "%skills mcp stop", timeout=30)
        finally:
            kc.stop_channels()
            km.shutdown_kernel(now=True)


def run_cell(kc, code: str) -> str:
    text = _text(_execute(kc, code, timeout=120))
    assert "ERROR" not in text and "Traceback" not in text, text
    return text


def json_blocks(text: str) -> list[dict]:
    """The JSON objects in a %skills mcp output, in order."""
    found, decoder, i = [], json.JSONDecoder(), 0
    while (start := text.find('{\n  "mcpServers"', i)) != -1:
        value, end = decoder.raw_decode(text, start)
        found.append(value)
        i = end
    return found


@pytest.mark.slow
def test_skills_mcp_in_a_kernel(kernel, skills_root, tmp_path):
    run_cell(kernel, "%load_ext ipyskills")
    run_cell(kernel, f"%skills add {skills_root}")
    run_cell(kernel, "%skills agent --disable secret-ops")
    shown = run_cell(kernel, "%skills mcp")
    assert "No HTTP server running" in shown
    (stdio,) = json_blocks(shown)
    entry = stdio["mcpServers"]["ipyskills"]
    assert entry["args"][:3] == ["-m", "ipyskills", "mcp"]
    assert str(skills_root) in entry["args"] and ["--disable", "secret-ops"] == \
        entry["args"][entry["args"].index("--disable"):entry["args"].index("--disable") + 2]
    assert f"claude mcp add ipyskills -- {entry['command']} -m ipyskills mcp" in shown

    async def over_stdio():  # the configuration as shown, spawned by the SDK's client as Claude would
        from mcp.client.session import ClientSession
        from mcp.client.stdio import stdio_client

        params = stdio_params()
        params.command, params.args = entry["command"], entry["args"]
        with open(os.devnull, "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    return (await session.list_tools()).tools

    tools = anyio.run(over_stdio)
    assert tools[0].input_schema["properties"]["skill_name"]["enum"] == ["data-tool", "pdf-processing"]

    started = run_cell(kernel, "%skills mcp start")
    assert "HTTP server running at http://127.0.0.1:" in started
    _, http = json_blocks(started)
    server = http["mcpServers"]["ipyskills"]
    url, token = server["url"], server["headers"]["Authorization"].removeprefix("Bearer ")
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/mcp", url) and len(token) >= 32
    assert f"claude mcp add --transport http ipyskills {url} --header" in started
    assert status_without(url, {}) == 401

    async def names():
        async with http_session(url, token) as session:
            return (await session.list_tools()).tools[0].input_schema["properties"]["skill_name"]["enum"]

    assert anyio.run(names) == ["data-tool", "pdf-processing"]
    # Authored in the notebook, into the kernel's registry: live for the client at once.
    run_cell(kernel, "%config IPySkills.authoring_root = " + repr(str(skills_root)))
    saved = run_cell(kernel, "%%skill notebook-made\n---\nname: notebook-made\ndescription: Made in a "
                             "notebook cell. Use when testing live serving.\n---\n# Made here\n\nNOTEBOOK-BODY\n")
    assert "Valid skill" in saved, saved

    async def read_new():
        async with http_session(url, token) as session:
            return await session.call_tool("read_skill", {"skill_name": "notebook-made"})

    result = anyio.run(read_new)
    assert not result.is_error and "NOTEBOOK-BODY" in text_of(result)
    assert "running at " + url in run_cell(kernel, "%skills mcp")
    stopped = run_cell(kernel, "%skills mcp stop")
    assert "No HTTP server running" in stopped
    time.sleep(0.5)
    with pytest.raises(Exception):  # noqa: B017 - nothing listens any more
        status_without(url, {"Authorization": f"Bearer {token}"})
    bad = _text(_execute(kernel, "%skills mcp restart"))
    assert "takes start or stop" in bad
