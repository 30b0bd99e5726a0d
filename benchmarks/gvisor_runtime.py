"""runc next to gVisor (runsc), side by side in one process: the same scripts through `SkillRegistry.run`,
the runtimes alternating run by run so drift in the machine hits both alike.

Five workloads, each timed as `reg.run` returns (the call a notebook cell or an agent makes):

- warm trivial: `print('ok')` with the warm pool on, in the steady state (before each timed run the
  benchmark waits, untimed, until the pool is full again and earlier removals are done);
- warm trivial, no pre-start: the same with the warm containers' pre-started interpreter turned off
  (`containers.PRESTART`), so the script's interpreter starts after the job arrives;
- fresh trivial: the same with the pool off, a new container per run;
- import-heavy: `import pandas, numpy, matplotlib.pyplot` with the warm pool on;
- file-heavy: write 200 files of 64 KiB in the workspace, read them back and return one as an artifact,
  warm pool on.

Goal (from the issue): the warm trivial run under gVisor within 2x of runc.

    .venv/bin/python benchmarks/gvisor_runtime.py [--runs 15] [--json]

Needs a running Docker engine, the sandbox image and gVisor registered (`sudo ipyskills sandbox gvisor`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from ipyskills import SkillRegistry
from ipyskills.sandbox.docker import containers
from ipyskills.sandbox.docker import pool as pool_mod
from ipyskills.sandbox.docker.backend import flush_removals
from ipyskills.settings import Settings

GOAL_WARM = 2.0  # runsc warm median / runc warm median
BLOCK = 5  # runs of one runtime in a row (the warm pool is re-made when the runtime changes)
WORKLOADS = {  # name: (script, source, warm pool on, pre-started interpreter)
    "warm trivial": ("trivial.py", "print('ok')\n", True, True),
    "warm, no pre-start": ("trivial.py", "print('ok')\n", True, False),
    "fresh trivial": ("trivial.py", "print('ok')\n", False, True),
    "import-heavy": ("imports.py", "import pandas, numpy, matplotlib.pyplot\nprint('ok')\n", True, True),
    "file-heavy": ("files.py", """\
import os
block = os.urandom(64 * 1024)
for i in range(200):
    with open(f"f{i:03}.bin", "wb") as fh:
        fh.write(block)
total = sum(len(open(f"f{i:03}.bin", "rb").read()) for i in range(200))
import shutil; shutil.copy("f000.bin", os.path.join(os.environ["IPYSKILLS_OUTPUT"], "one.bin"))
print(total)
""", True, True),
}


def make_skill(root: Path) -> Path:
    skill = root / "bench-runtime"
    (skill / "scripts").mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: bench-runtime\ndescription: Benchmark scripts.\n---\n# Bench\n")
    for script, source, _warm, _prestart in WORKLOADS.values():
        (skill / "scripts" / script).write_text(source)
    os.chmod(root, 0o755)
    for path in [skill, *skill.rglob("*")]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    return skill


def registry(skill: Path, runtime: str, pooled: bool) -> SkillRegistry:
    return SkillRegistry([str(skill.parent)], settings=Settings(
        default_roots=False, bundled_skills=False, backend="docker", runtime=runtime, guard=False,
        pool_size=2 if pooled else 0, memory="512m"))


def wait_settled() -> None:
    """Untimed: earlier removals done and every warm pool full, so no run pays for another's clean-up."""
    flush_removals(timeout=60)
    deadline = time.monotonic() + 60
    while any(len(pool.idle_ids()) < pool.size for pool in pool_mod.pools()):
        if time.monotonic() > deadline:
            raise SystemExit(f"a warm pool did not refill in 60 s: {[p.status() for p in pool_mod.pools()]}")
        time.sleep(0.01)


def measure(runs: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="ipyskills-bench-runtime-") as tmp:
        skill = make_skill(Path(tmp))
        regs = {(rt, pooled): registry(skill, rt, pooled) for rt in ("runc", "runsc") for pooled in (True, False)}
        times: dict[str, dict[str, list[float]]] = {name: {"runc": [], "runsc": []} for name in WORKLOADS}
        for name, (script, _source, pooled, prestart) in WORKLOADS.items():
            if containers.PRESTART != prestart:
                containers.PRESTART = prestart
                pool_mod.drain_all()  # the warm containers made the other way go
            done = 0
            while done < runs:
                block = min(BLOCK, runs - done)
                for rt in ("runc", "runsc"):
                    reg = regs[(rt, pooled)]
                    # untimed: the process keeps one warm pool per image, re-made when the runtime changes
                    reg.run("bench-runtime", f"scripts/{script}")
                    for _ in range(block):
                        wait_settled()
                        began = time.perf_counter()
                        result = reg.run("bench-runtime", f"scripts/{script}")
                        elapsed = (time.perf_counter() - began) * 1000
                        if result.exit_code != 0:
                            raise SystemExit(f"{name} under {rt} failed: {result.stderr[-400:]}")
                        if pooled and "warm pool" not in result.isolation:
                            raise SystemExit(f"{name} under {rt} did not get a warm container")
                        times[name][rt].append(elapsed)
                done += block
        pool_mod.drain_all()
        flush_removals(timeout=60)
    out = {}
    for name, by in times.items():
        runc, runsc = statistics.median(by["runc"]), statistics.median(by["runsc"])
        out[name] = {"runc_ms": round(runc, 1), "runsc_ms": round(runsc, 1), "ratio": round(runsc / runc, 2),
                     "runs": len(by["runc"])}
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    figures = measure(args.runs)
    load = os.getloadavg()[0]
    if args.json:
        print(json.dumps({"figures": figures, "load": load}, indent=2))
    else:
        print(f"{'workload':20} {'runc ms':>9} {'runsc ms':>9} {'ratio':>6}   (median of {args.runs} each, "
              f"alternating; load average {load:.1f})")
        for name, f in figures.items():
            print(f"{name:20} {f['runc_ms']:9.1f} {f['runsc_ms']:9.1f} {f['ratio']:6.2f}")
        warm = figures["warm trivial"]["ratio"]
        print(f"goal: warm trivial runsc/runc <= {GOAL_WARM:g}: {'met' if warm <= GOAL_WARM else 'NOT met'} "
              f"({warm:.2f})")
    return 0 if figures["warm trivial"]["ratio"] <= GOAL_WARM else 1


if __name__ == "__main__":
    sys.exit(main())
