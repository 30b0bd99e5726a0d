"""A real MCP session with `ipyskills mcp`, printed as a transcript (the one in the README).

The SDK's own ClientSession spawns `python -m ipyskills mcp --dir ./skills --backend docker` over stdio and
makes five requests; each is printed as `-> method params` and its answer as `<- ...` (long lists are
shortened with "..."; tool results are printed in full, exactly as the client receives them).

    .venv/bin/python scripts/mcp_transcript.py [SKILLS_DIR]
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import anyio

REPO = Path(__file__).resolve().parents[1]


async def transcript(skills: str) -> list[str]:
    import mcp_types as types
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client
    from pydantic import TypeAdapter

    class Custom(types.Request):
        method: str
        params: dict

    env = {k: v for k, v in os.environ.items() if not k.startswith("IPYSKILLS_")}
    env.update(IPYSKILLS_DEFAULT_ROOTS="0", IPYSKILLS_BUNDLED_SKILLS="0", IPYSKILLS_POOL_SIZE="0",
               PYTHONPATH=str(REPO) + os.pathsep + env.get("PYTHONPATH", ""))
    params = StdioServerParameters(command=sys.executable, env=env,
                                   args=["-m", "ipyskills", "mcp", "--dir", skills, "--backend", "docker"])
    out = []
    with open(os.devnull, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                init = await session.initialize()
                out.append("-> initialize")
                out.append(f"<- server {init.server_info.name} {init.server_info.version}, protocol "
                           f"{init.protocol_version}, capabilities: "
                           + ", ".join(k for k, v in init.capabilities.model_dump(exclude_none=True).items()
                                       if k != "experimental")
                           + "; experimental: " + ", ".join(sorted(init.capabilities.experimental or {})))
                tools = (await session.list_tools()).tools
                out.append("-> tools/list")
                out.append("<- " + ", ".join(t.name for t in tools) + "; skill_name is one of "
                           + ", ".join(tools[0].input_schema["properties"]["skill_name"]["enum"]))
                listing = await session.send_request(Custom(method="skills/list", params={}), TypeAdapter(dict))
                out.append("-> skills/list {}")
                out.append("<- " + ", ".join(f"{s['uri']} ({len(s['resources'])} file{'s' if len(s['resources']) != 1 else ''})"
                                             for s in listing["skills"]))
                got = await session.send_request(
                    Custom(method="skills/get", params={"uri": "skill://data-processor/SKILL.md"}),
                    TypeAdapter(dict))
                out.append('-> skills/get {"uri": "skill://data-processor/SKILL.md"}')
                entry = got["skill"]
                shown = {"uri": entry["uri"], "frontmatter": {"name": entry["frontmatter"]["name"],
                                                              "license": entry["frontmatter"]["license"],
                                                              "metadata": entry["frontmatter"]["metadata"]},
                         "resources": entry["resources"][:2]}
                out.append("<- " + json.dumps(shown, indent=2).replace('}\n  ]', '},\n    ...\n  ]')
                           .replace('"metadata": {', '"...": "...",\n    "metadata": {'))
                call = {"skill_name": "data-processor", "script_path": "scripts/analyze.py",
                        "input": '{"items": [12, 15, 9, 22, 17]}'}
                result = await session.call_tool("execute_skill_script", call)
                out.append("-> tools/call execute_skill_script " + json.dumps(call))
                out.append(f"<- isError={str(result.is_error).lower()}, text:")
                out.append(result.content[0].text)
    return out


def main() -> int:
    skills = sys.argv[1] if len(sys.argv) > 1 else str(REPO / "skills")
    print("\n".join(anyio.run(transcript, skills)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
