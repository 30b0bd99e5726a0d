"""What MCP adds to a tool call: the same trivial calls through `ipyskills mcp` over stdio (the SDK's own
ClientSession spawning the server) and through a direct `dispatch` in this process, alternating call by
call in one run so the machine's drift hits both alike.

Calls: `execute_skill_script` of a script printing one line (Docker backend, warm pool as normal: the
server process and this process each have their own), and `read_skill` (no sandbox: the protocol's own
cost). Each call's text is checked (the run's exit code 0, the skill's text) on both sides.

    .venv/bin/python benchmarks/mcp_overhead.py [--runs 30] [--backend docker|local] [--json]

Prints the median and p90 of each side and the median difference; not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


def make_skill(base: Path) -> Path:
    skill = base / "bench"
    (skill / "scripts").mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: bench\ndescription: MCP overhead benchmark skill. Use to "
                                    "measure.\n---\n# Bench\n\nRun scripts/x.py.\n")
    (skill / "scripts" / "x.py").write_text("print('ok')\n")
    return base


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


async def measure(root: Path, runs: int, backend: str) -> dict:
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    from ipyskills import SkillRegistry

    env = {k: v for k, v in os.environ.items() if not k.startswith("IPYSKILLS_")}
    env.update(PYTHONPATH=str(REPO), IPYSKILLS_DEFAULT_ROOTS="0", IPYSKILLS_BUNDLED_SKILLS="0")
    os.environ.update(IPYSKILLS_DEFAULT_ROOTS="0", IPYSKILLS_BUNDLED_SKILLS="0")
    view = SkillRegistry([root]).for_agent(track_activations=False, backend=backend, timeout=30)
    calls = {"execute_skill_script": {"skill_name": "bench", "script_path": "scripts/x.py"},
             "read_skill": {"skill_name": "bench"}}
    times = {tool: {"mcp": [], "dispatch": []} for tool in calls}
    params = StdioServerParameters(command=sys.executable, args=["-m", "ipyskills", "mcp", "--dir", str(root),
                                                                  "--backend", backend, "--timeout", "30"],
                                   env=env, cwd=str(REPO))

    def check(tool: str, text: str) -> None:
        ok = 'exit_code="0"' in text if tool == "execute_skill_script" else text.startswith("<skill_content")
        if not ok:
            raise SystemExit(f"{tool} failed: {text[:400]}")

    with open(os.devnull, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                for tool, arguments in calls.items():  # warm both sides up (pool, image, imports)
                    for _ in range(3):
                        await session.call_tool(tool, arguments)
                        await anyio.to_thread.run_sync(view.dispatch, tool, arguments)
                for _ in range(runs):
                    for tool, arguments in calls.items():
                        started = time.perf_counter()
                        result = await session.call_tool(tool, arguments)
                        times[tool]["mcp"].append((time.perf_counter() - started) * 1000)
                        check(tool, result.content[0].text)
                        started = time.perf_counter()
                        direct = await anyio.to_thread.run_sync(view.dispatch, tool, arguments)
                        times[tool]["dispatch"].append((time.perf_counter() - started) * 1000)
                        check(tool, direct.text)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--backend", choices=("docker", "local"), default="docker")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ipyskills-mcp-bench-") as tmp:
        times = anyio.run(measure, make_skill(Path(tmp)), args.runs, args.backend)
    report = {"runs": args.runs, "backend": args.backend, "machine": f"{os.cpu_count()} cores, "
              f"{platform.platform()}, Python {platform.python_version()}",
              "load_average": os.getloadavg()}
    for tool, sides in times.items():
        report[tool] = {side: {"median_ms": round(statistics.median(v), 1), "p90_ms": round(pct(v, 0.9), 1)}
                        for side, v in sides.items()}
        report[tool]["added_median_ms"] = round(statistics.median(
            [m - d for m, d in zip(sides["mcp"], sides["dispatch"])]), 1)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"{args.runs} calls each, alternating, backend {args.backend}; {report['machine']}; "
          f"load average {', '.join(f'{x:.1f}' for x in report['load_average'])}")
    for tool in times:
        r = report[tool]
        print(f"{tool:22} MCP stdio median {r['mcp']['median_ms']:7.1f} ms (p90 {r['mcp']['p90_ms']:.1f})   "
              f"dispatch median {r['dispatch']['median_ms']:7.1f} ms (p90 {r['dispatch']['p90_ms']:.1f})   "
              f"added by MCP (median of pairs) {r['added_median_ms']:+.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
