"""`ipyskills mcp` over stdio with the SDK's own ClientSession: tools, text, errors and the Skills extension.

Every tool result is compared with what `registry.dispatch` returns for the same call: the same bytes (a
run report up to its durations), and `isError` where dispatch sets `is_error`."""

from __future__ import annotations

import base64
import hashlib

import anyio
import pytest

from .conftest import cold_env, direct_dispatch, raw_request, stdio_session, text_of, timeless

EXTENSION = "io.modelcontextprotocol/skills"


def run(coro_fn, *args):
    return anyio.run(coro_fn, *args)


def test_tools_are_the_agent_tools_exactly(skills_root, inputs_dir):
    from ipyskills import SkillRegistry

    async def main():
        async with stdio_session("--dir", str(skills_root), "--disable", "secret-ops",
                                 "--inputs", str(inputs_dir)) as session:
            return (await session.list_tools()).tools

    tools = run(main)
    expected = SkillRegistry([skills_root]).for_agent(disabled=["secret-ops"], inputs_dir=inputs_dir) \
        .tool_schemas("anthropic")
    assert [t.name for t in tools] == ["read_skill", "execute_skill_script"]
    for tool, spec in zip(tools, expected):
        assert (tool.name, tool.description, tool.input_schema) == \
            (spec["name"], spec["description"], spec["input_schema"])
    assert tools[0].input_schema["properties"]["skill_name"]["enum"] == ["data-tool", "pdf-processing"]
    assert "inputs" in tools[1].input_schema["properties"]  # only because --inputs names a folder


def test_allow_list_hides_skills_from_tools_resources_and_listing(skills_root):
    async def main():
        async with stdio_session("--dir", str(skills_root), "--allow", "pdf-processing") as session:
            tools = (await session.list_tools()).tools
            resources = (await session.list_resources()).resources
            listing = await raw_request(session, "skills/list", {})
            hidden = await session.call_tool("read_skill", {"skill_name": "secret-ops"})
            return tools, resources, listing, hidden

    tools, resources, listing, hidden = run(main)
    assert tools[0].input_schema["properties"]["skill_name"]["enum"] == ["pdf-processing"]
    assert {str(r.uri) for r in resources} == {"skill://pdf-processing/SKILL.md",
                                               "skill://pdf-processing/references/forms.md"}
    assert [s["frontmatter"]["name"] for s in listing["skills"]] == ["pdf-processing"]
    assert hidden.is_error and "TOP-SECRET" not in text_of(hidden)
    assert text_of(hidden) == direct_dispatch([skills_root], "read_skill", {"skill_name": "secret-ops"},
                                              allow=["pdf-processing"])["text"]


READS = [
    {"skill_name": "data-tool"},
    {"skill_name": "data-tool", "file_path": "references/guide.md"},
    {"skill_name": "pdf-processing/references/forms.md"},
    {"skill_name": "no-such-skill"},  # a bad skill name
    {"skill_name": "data-tool", "file_path": "../secret-ops/references/secret.md"},  # a path escape
    {"skill_name": "data-tool", "file_path": "../../secret.txt"},
    {"skill_name": "data-tool", "file_path": "assets/logo.png"},  # binary: refused in agent text
    {"skill_name": 42},  # a wrong type
]


def test_read_skill_text_is_byte_for_byte_dispatch(skills_root):
    async def main():
        async with stdio_session("--dir", str(skills_root)) as session:
            out = [await session.call_tool("read_skill", args) for args in READS]
            out.append(await session.call_tool("no_such_tool", {}))
            return out

    results = run(main)
    for args, result in zip(READS + [None], results):
        expected = (direct_dispatch([skills_root], "read_skill", args) if args is not None
                    else direct_dispatch([skills_root], "no_such_tool", {}))
        assert text_of(result) == expected["text"], args
        assert result.is_error == expected["is_error"], args
    assert results[0].content[0].text.startswith('<skill_content name="data-tool">')
    assert "Use --to csv" in text_of(results[1])
    for refused in results[3:]:
        assert refused.is_error and text_of(refused).startswith("Error:")
    assert "TOP-SECRET" not in "".join(text_of(r) for r in results)


def test_resources_and_skills_extension_with_digests(skills_root):
    async def main():
        async with stdio_session("--dir", str(skills_root), modern=True) as session:
            caps = session.server_capabilities
            resources = (await session.list_resources()).resources
            listing = await raw_request(session, "skills/list", {})
            got = await raw_request(session, "skills/get", {"uri": "skill://data-tool/SKILL.md"})
            reads = {}
            for entry in got["skill"]["resources"]:
                reads[entry["uri"]] = (await session.read_resource(entry["uri"])).contents[0]
            errors = []
            for call in (raw_request(session, "skills/get", {"uri": "skill://nope/SKILL.md"}),
                         raw_request(session, "skills/get", {"uri": "skill://secret-ops/references/secret.md"}),
                         session.read_resource("skill://data-tool/../secret-ops/references/secret.md"),
                         session.read_resource("skill://data-tool/%2e%2e/%2e%2e/secret.txt"),
                         session.read_resource("skill://data-tool/no/such/file.md")):
                try:
                    await call
                    errors.append(None)
                except Exception as exc:  # noqa: BLE001 - the SDK's MCPError
                    errors.append(exc)
            return caps, resources, listing, got, reads, errors

    caps, resources, listing, got, reads, errors = run(main)
    assert caps.extensions == {EXTENSION: {}}
    assert caps.resources is not None  # the SEP: the extension needs the resources capability
    uris = {str(r.uri) for r in resources}
    assert "skill://data-tool/SKILL.md" in uris and "skill://data-tool/scripts/echo.py" in uris
    skill_md = next(r for r in resources if str(r.uri) == "skill://data-tool/SKILL.md")
    assert skill_md.mime_type == "text/markdown" and skill_md.name == "data-tool"
    assert listing["resultType"] == "complete" and "ttlMs" in listing and "cacheScope" in listing
    names = [s["frontmatter"]["name"] for s in listing["skills"]]
    assert names == ["data-tool", "pdf-processing", "secret-ops"]
    entry = got["skill"]
    assert entry == next(s for s in listing["skills"] if s["uri"] == "skill://data-tool/SKILL.md")
    assert entry["frontmatter"] == {"name": "data-tool", "description": entry["frontmatter"]["description"],
                                    "license": "Apache-2.0", "metadata": {"author": "tests"}}
    on_disk = sorted(str(p.relative_to(skills_root / "data-tool")) for p in (skills_root / "data-tool").rglob("*")
                     if p.is_file())
    assert sorted(e["uri"].removeprefix("skill://data-tool/") for e in entry["resources"]) == on_disk
    for item in entry["resources"]:  # every digest and size is that of the file's bytes, and of what is read
        raw = (skills_root / "data-tool" / item["uri"].removeprefix("skill://data-tool/")).read_bytes()
        assert item["digest"] == "sha256:" + hashlib.sha256(raw).hexdigest() and item["size"] == len(raw)
        content = reads[item["uri"]]
        served = content.text.encode() if hasattr(content, "text") and content.text is not None \
            else base64.b64decode(content.blob)
        assert served == raw, item["uri"]
    assert hasattr(reads["skill://data-tool/assets/logo.png"], "blob")
    assert all(e is not None and getattr(e, "code", None) == -32602 for e in errors), errors
    assert not any("TOP-SECRET" in str(e) or "HOST-SECRET" in str(e) for e in errors)


def test_legacy_handshake_sees_the_extension_declared(skills_root):
    async def main():
        async with stdio_session("--dir", str(skills_root)) as session:
            return session.server_capabilities, session.instructions

    caps, instructions = run(main)
    assert EXTENSION in (caps.experimental or {})
    assert "data-tool" in instructions and "read_skill" in instructions


@pytest.mark.docker
def test_scripts_run_in_docker_with_dispatch_text(skills_root, docker):
    calls = [
        {"skill_name": "data-tool", "script_path": "scripts/echo.py", "args": ["--to", "csv"], "input": '{"a": 1}'},
        {"skill_name": "data-tool", "script_path": "scripts/fail.py"},
        {"skill_name": "data-tool", "script_path": "scripts/flood.py"},  # huge output: capped the same way
        {"skill_name": "data-tool", "script_path": "scripts/danger.py"},  # blocked by the guard
        {"skill_name": "data-tool", "script_path": "../secret-ops/scripts/x.py"},  # a path escape
        {"skill_name": "data-tool", "script_path": "scripts/missing.py"},
        {"skill_name": "data-tool", "script_path": "scripts/echo.py", "inputs": ["sales.csv"]},  # no --inputs
    ]

    async def main():
        async with stdio_session("--dir", str(skills_root), "--backend", "docker", "--timeout", "20",
                                 env=cold_env()) as session:
            return [await session.call_tool("execute_skill_script", c) for c in calls]

    results = run(main)
    for call, result in zip(calls, results):
        expected = direct_dispatch([skills_root], "execute_skill_script", call, env=cold_env(), backend="docker",
                                   timeout=20)
        assert timeless(text_of(result)) == timeless(expected["text"]), call
        assert result.is_error == expected["is_error"], call
    echo, fail, flood, danger = (text_of(r) for r in results[:4])
    assert 'exit_code="0"' in echo and "Backend: docker" in echo and "stdin: {\"a\": 1}" in echo
    assert results[1].is_error and 'exit_code="3"' in fail
    assert len(flood) <= 30000 and "characters cut here" in flood and "END-OF-OUTPUT" in flood
    assert results[3].is_error and "static safety guard blocked it" in danger
    for refused in results[4:]:
        assert refused.is_error and text_of(refused).startswith("Error:")


@pytest.mark.docker
def test_a_timeout_is_a_tool_result_and_the_server_goes_on(skills_root, docker):
    call = {"skill_name": "data-tool", "script_path": "scripts/slow.py"}

    async def main():
        async with stdio_session("--dir", str(skills_root), "--backend", "docker", "--timeout", "2",
                                 env=cold_env()) as session:
            slow = await session.call_tool("execute_skill_script", call)
            after = await session.call_tool("read_skill", {"skill_name": "pdf-processing"})
            return slow, after

    slow, after = run(main)
    expected = direct_dispatch([skills_root], "execute_skill_script", call, env=cold_env(), backend="docker",
                               timeout=2)
    assert timeless(text_of(slow)) == timeless(expected["text"])
    assert slow.is_error and "SLOW-STARTED" in text_of(slow) and "SLOW-DONE" not in text_of(slow)
    assert "timed out" in text_of(slow).lower()
    assert not after.is_error and text_of(after).startswith('<skill_content name="pdf-processing">')


@pytest.mark.docker
def test_artifacts_come_back_embedded(skills_root, docker):
    async def main():
        async with stdio_session("--dir", str(skills_root), "--backend", "docker") as session:
            small = await session.call_tool("execute_skill_script", {"skill_name": "data-tool",
                                                                     "script_path": "scripts/artifact.py"})
            big = await session.call_tool("execute_skill_script", {"skill_name": "data-tool",
                                                                   "script_path": "scripts/big_artifacts.py"})
            return small, big

    result, big = run(main)
    assert "result.csv" in text_of(result) and not result.is_error
    embedded = [c for c in result.content if c.type == "resource"]
    assert len(embedded) == 1
    assert str(embedded[0].resource.uri).endswith("/result.csv")
    assert embedded[0].resource.text == "a,b\n1,2\n"
    # Capped: a file over 1 MiB is listed in the text (as dispatch lists it) but not embedded; it is named.
    assert not big.is_error and "huge.bin" in text_of(big)
    kinds = {str(c.resource.uri).rsplit("/", 1)[1]: c.resource for c in big.content if c.type == "resource"}
    assert set(kinds) == {"small%20report.md", "chart.png"}
    assert kinds["small%20report.md"].text == "# Small\n"
    assert base64.b64decode(kinds["chart.png"].blob)[:4] == b"\x89PNG"
    assert big.content[-1].type == "text" and "not embedded here" in big.content[-1].text
    assert "huge.bin" in big.content[-1].text


def test_no_docker_engine_is_the_agent_tools_error(skills_root, tmp_path):
    from .conftest import server_env

    env = server_env(DOCKER_HOST=f"unix://{tmp_path}/no-engine.sock")
    call = {"skill_name": "data-tool", "script_path": "scripts/echo.py"}

    async def main():
        async with stdio_session("--dir", str(skills_root), "--backend", "docker", env=env) as session:
            first = await session.call_tool("execute_skill_script", call)
            still = await session.call_tool("read_skill", {"skill_name": "data-tool"})
            return first, still

    result, still = run(main)
    expected = direct_dispatch([skills_root], "execute_skill_script", call, env=env, backend="docker")
    assert result.is_error and expected["is_error"]
    assert text_of(result) == expected["text"]
    assert text_of(result).startswith("Error:") and "was not run" in text_of(result)
    assert not still.is_error  # the server did not crash


@pytest.mark.docker
def test_inputs_only_from_the_operator_folder(skills_root, inputs_dir, docker):
    calls = [
        {"skill_name": "data-tool", "script_path": "scripts/read_input.py", "args": ["sales.csv"],
         "inputs": ["sales.csv"]},
        {"skill_name": "data-tool", "script_path": "scripts/read_input.py", "args": ["secret.txt"],
         "inputs": ["../secret.txt"]},
        {"skill_name": "data-tool", "script_path": "scripts/read_input.py", "args": ["escape.txt"],
         "inputs": ["escape.txt"]},
        {"skill_name": "data-tool", "script_path": "scripts/read_input.py", "args": ["x"],
         "inputs": [str(skills_root.parent / "secret.txt")]},
    ]

    async def main():
        async with stdio_session("--dir", str(skills_root), "--inputs", str(inputs_dir), "--backend", "docker",
                                 "--timeout", "20", env=cold_env()) as session:
            return [await session.call_tool("execute_skill_script", c) for c in calls]

    results = run(main)
    for call, result in zip(calls, results):
        expected = direct_dispatch([skills_root], "execute_skill_script", call, env=cold_env(),
                                   inputs_dir=str(inputs_dir), backend="docker", timeout=20)
        assert timeless(text_of(result)) == timeless(expected["text"]), call
    assert not results[0].is_error and "north,10" in text_of(results[0])
    for refused in results[1:]:
        assert refused.is_error and text_of(refused).startswith("Error: inputs:")
        assert "HOST-SECRET" not in text_of(refused)


@pytest.mark.docker
def test_concurrent_calls_run_side_by_side(skills_root, docker):
    import time

    async def main():
        async with stdio_session("--dir", str(skills_root), "--backend", "docker", "--timeout", "30") as session:
            await session.call_tool("execute_skill_script", {"skill_name": "data-tool",  # warm up
                                                             "script_path": "scripts/echo.py"})
            results = {}

            async def one(i):
                results[i] = await session.call_tool("execute_skill_script", {
                    "skill_name": "data-tool", "script_path": "scripts/sleep.py", "args": ["3", f"call-{i}"]})

            start = time.monotonic()
            async with anyio.create_task_group() as tg:
                for i in range(3):
                    tg.start_soon(one, i)
            return results, time.monotonic() - start

    results, elapsed = run(main)
    for i in range(3):
        assert not results[i].is_error and f"woke ['call-{i}']" in text_of(results[i])
    assert elapsed < 7.5, f"three 3 s runs took {elapsed:.1f} s: they did not overlap"


def test_a_skill_that_cannot_be_read_does_not_hide_the_others(skills_root, tmp_path):
    from ipyskills import SkillRegistry
    from ipyskills.agent.mcp.skills_ext import SkillFiles

    reg = SkillRegistry([skills_root])
    files = SkillFiles(reg.for_agent())
    reg.list()
    # After discovery, pdf-processing's SKILL.md becomes a link leading out of its folder: refused to read.
    skill_md = skills_root / "pdf-processing" / "SKILL.md"
    outside = tmp_path / "elsewhere.md"
    outside.write_text(skill_md.read_text())
    skill_md.unlink()
    skill_md.symlink_to(outside)
    listing = files.list_entries(None)
    resources = {r["uri"] for r in files.resource_list()}
    names = [s["frontmatter"]["name"] for s in listing["skills"]]
    assert names == ["data-tool", "pdf-processing", "secret-ops"]
    pdf = next(s for s in listing["skills"] if s["frontmatter"]["name"] == "pdf-processing")
    assert pdf["resources"] == "dynamic"  # no complete, verifiable list: the SEP's answer
    assert "skill://data-tool/SKILL.md" in resources and "skill://secret-ops/SKILL.md" in resources
