"""Per-run latency of `reg.run(...)` next to a bare `docker run --rm` with the same image and hardening.

Three ways of running the same trivial Python script (`print('ok')`) are measured alternately in one
process, so drift in the machine hits them alike:

- `docker run --rm` through the docker CLI, with the sandbox's flags (user, caps, read-only root, tmpfs,
  no network, memory, pids, CPU, no log driver, skill mounted read-only);
- `SkillRegistry.run` with the warm pool off (`pool_size=0`): a fresh container per run;
- `SkillRegistry.run` with the warm pool on (`pool_size=2`), in the steady state where runs are spaced so
  the background refill keeps up: before each timed pooled run the benchmark waits (untimed) until the
  pool is full again.

`reg.run` is the call a notebook cell or an agent loop makes (registry lookup, guard, backend choice, run);
it returns once the result is known, while the used container is removed in the background. Before every
timed run the benchmark waits (untimed) for earlier removals to finish, so no way pays for another's
clean-up. Then a burst of back-to-back pooled runs (no spacing) shows what happens when runs come faster
than the refill: the pool empties and runs fall back to fresh containers, never waiting for one.

Goals (from the issue): pooled median <= 0.35 x the bare CLI median; no-pool median <= 1.10 x it.

    .venv/bin/python benchmarks/run_latency.py [--runs 20] [--burst 10] [--json]

Needs a running Docker engine and the sandbox image (`ipyskills sandbox build`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ipyskills import SkillRegistry
from ipyskills.sandbox.docker import pool as pool_mod
from ipyskills.sandbox.docker.backend import DockerBackend, flush_removals
from ipyskills.sandbox.policy import Limits
from ipyskills.settings import Settings

SCRIPT = "print('ok')\n"
POOL_SIZE = 2
GOAL_POOLED = 0.35  # pooled median / CLI median
GOAL_NO_POOL = 1.10  # no-pool median / CLI median
CLI = "docker run --rm (CLI)"
NO_POOL = "reg.run, pool_size=0"
POOLED = "reg.run, warm pool (spaced)"
BURST = "reg.run, warm pool (back-to-back)"


def bare_cli_argv(image: str, skill: Path, limits: Limits) -> list[str]:
    mib = limits.memory // 1024**2
    return ["docker", "run", "--rm", "--user", "1000:1000", "--cap-drop", "ALL",
            "--security-opt", "no-new-privileges:true", "--read-only",
            "--tmpfs", f"/tmp:rw,noexec,nosuid,nodev,size={limits.tmp_size}",
            "--tmpfs", "/output:rw,noexec,nosuid,nodev,size=64m,uid=1000,gid=1000,mode=0700",
            "--network", "none", "--memory", f"{mib}m", "--memory-swap", f"{mib}m",
            "--pids-limit", str(limits.pids), "--cpus", f"{limits.cpus:g}", "--ipc", "private",
            "--log-driver", "none", "-v", f"{skill}:/skill:ro", "-w", "/skill",
            "-e", "HOME=/tmp", "-e", "IPYSKILLS_OUTPUT=/output", image, "python3", "scripts/x.py"]


def summarize(samples: list[float]) -> dict:
    return {"median_ms": round(statistics.median(samples), 1), "min_ms": round(min(samples), 1),
            "max_ms": round(max(samples), 1), "runs": len(samples)}


def make_skill(base: Path) -> Path:
    os.chmod(base, 0o755)
    skill = base / "bench"
    (skill / "scripts").mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: bench\ndescription: Latency benchmark skill.\n---\nBody.\n")
    (skill / "scripts" / "x.py").write_text(SCRIPT)
    for path in (skill, skill / "scripts"):
        os.chmod(path, 0o755)
    return skill


def wait_until_full(pool, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while len(pool.idle_ids()) < pool.size:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the warm pool did not refill in {timeout:.0f} s: {pool.status()}")
        time.sleep(0.01)


def timed(fn) -> tuple[float, object]:
    started = time.perf_counter()
    out = fn()
    return (time.perf_counter() - started) * 1000, out


def measure(runs: int = 20, burst: int = 10) -> dict:
    """Run the benchmark; returns {way: summary} plus the ratios and verdicts under "goals"."""
    DockerBackend().ensure_ready()
    base_settings = Settings.from_env().with_overrides(backend="docker", default_roots=False,
                                                       bundled_skills=False)
    with tempfile.TemporaryDirectory(prefix="ipyskills-bench-") as tmp:
        skill = make_skill(Path(tmp))
        plain = SkillRegistry([str(skill)], settings=base_settings.with_overrides(pool_size=0))
        pooled = SkillRegistry([str(skill)], settings=base_settings.with_overrides(pool_size=POOL_SIZE))
        cli = bare_cli_argv(base_settings.image, skill, Limits.from_settings(base_settings))

        def check(result) -> None:
            assert result.exit_code == 0 and result.stdout.strip() == "ok", (result.stdout, result.stderr)

        for _ in range(2):  # warm-up: page cache, image layers, the registry's discovery, the pool
            subprocess.run(cli, capture_output=True, check=True)
            check(plain.run("bench", "scripts/x.py"))
            check(pooled.run("bench", "scripts/x.py"))
        [pool] = [p for p in pool_mod.pools() if p.image == base_settings.image]
        samples: dict[str, list[float]] = {CLI: [], NO_POOL: [], POOLED: [], BURST: []}
        served_warm = 0
        try:
            for _ in range(runs):
                flush_removals()
                ms, out = timed(lambda: subprocess.run(cli, capture_output=True, check=True).stdout)
                assert out.strip() == b"ok", out
                samples[CLI].append(ms)
                flush_removals()
                ms, result = timed(lambda: plain.run("bench", "scripts/x.py"))
                check(result)
                samples[NO_POOL].append(ms)
                flush_removals()
                wait_until_full(pool)
                ms, result = timed(lambda: pooled.run("bench", "scripts/x.py"))
                check(result)
                assert result.isolation.startswith("docker (warm pool)"), result.isolation
                samples[POOLED].append(ms)
            flush_removals()
            wait_until_full(pool)
            for _ in range(burst):
                ms, result = timed(lambda: pooled.run("bench", "scripts/x.py"))
                check(result)
                served_warm += result.isolation.startswith("docker (warm pool)")
                samples[BURST].append(ms)
        finally:
            pool_mod.drain_all()
            flush_removals()
    report = {name: summarize(values) for name, values in samples.items() if values}
    base = report[CLI]["median_ms"]
    for entry in report.values():
        entry["ratio_to_cli"] = round(entry["median_ms"] / base, 2)
    if BURST in report:
        report[BURST]["served_warm"] = served_warm
    report["goals"] = {
        "pooled": {"ratio": report[POOLED]["ratio_to_cli"], "goal": GOAL_POOLED,
                   "verdict": "PASS" if report[POOLED]["ratio_to_cli"] <= GOAL_POOLED else "MISS"},
        "no_pool": {"ratio": report[NO_POOL]["ratio_to_cli"], "goal": GOAL_NO_POOL,
                    "verdict": "PASS" if report[NO_POOL]["ratio_to_cli"] <= GOAL_NO_POOL else "MISS"},
    }
    return report


def print_report(report: dict, runs: int) -> None:
    print(f"{'way':36} {'median':>8} {'min':>8} {'max':>8} {'vs CLI':>7}   (ms; {runs} runs each, alternating)")
    for name, e in report.items():
        if name == "goals":
            continue
        extra = f"   {e['served_warm']} of {e['runs']} served warm" if "served_warm" in e else ""
        print(f"{name:36} {e['median_ms']:8.1f} {e['min_ms']:8.1f} {e['max_ms']:8.1f} {e['ratio_to_cli']:7.2f}{extra}")
    goals = report["goals"]
    print(f"goal: warm pool <= {goals['pooled']['goal']:.2f} x CLI: {goals['pooled']['ratio']:.2f} "
          f"{goals['pooled']['verdict']}")
    print(f"goal: pool_size=0 <= {goals['no_pool']['goal']:.2f} x CLI: {goals['no_pool']['ratio']:.2f} "
          f"{goals['no_pool']['verdict']}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="timed runs of each way (default 20)")
    parser.add_argument("--burst", type=int, default=10, help="back-to-back pooled runs (default 10)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args()
    report = measure(args.runs, args.burst)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_report(report, args.runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
