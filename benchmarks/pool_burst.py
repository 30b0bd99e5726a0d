"""How the warm pool keeps up with the way agents call tools: sequential back-to-back runs, bursts of N
parallel calls after a pause, and sustained throughput with N threads, each side by side with
`pool_size=0` (a fresh container per run) in the same process.

Every run is `SkillRegistry.run` of a script that echoes a unique token from stdin (each result is
checked: a wrong output fails the benchmark). Modes alternate so drift on the machine hits both alike.

- sequential: `--seq` runs one after another, no pause (median and p90 latency, runs/s, warm hits);
- bursts: for N in 1, 2, 4, 8: one unmeasured burst of N (the pool learns the burst size), then `--repeat`
  measured bursts, each after a `--pause` (seconds; earlier removals finished first): N threads released
  together by a barrier; median call latency, the burst's wall time (slowest call), warm hits;
- sustained: N = 1, 4, 16 threads running back-to-back for `--seconds`; runs/s, median latency, hits.

    .venv/bin/python benchmarks/pool_burst.py [--only sequential,bursts,sustained] [--json]

Needs a running Docker engine and the sandbox image (`ipyskills sandbox build`).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import fields
from pathlib import Path

from ipyskills import SkillRegistry
from ipyskills.sandbox.docker import pool as pool_mod
from ipyskills.sandbox.docker.backend import flush_removals
from ipyskills.settings import Settings

SCRIPT = "import sys\nprint(sys.stdin.read())\n"
BURSTS = (1, 2, 4, 8)
THREADS = (1, 4, 16)


def make_skill(base: Path) -> Path:
    os.chmod(base, 0o755)
    skill = base / "burst"
    (skill / "scripts").mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: burst\ndescription: Pool burst benchmark skill.\n---\nBody.\n")
    (skill / "scripts" / "echo.py").write_text(SCRIPT)
    for path in (skill, skill / "scripts"):
        os.chmod(path, 0o755)
    return skill


def one_run(reg) -> tuple[float, bool]:
    token = secrets.token_hex(12)
    start = time.perf_counter()
    result = reg.run("burst", "scripts/echo.py", stdin=token)
    ms = (time.perf_counter() - start) * 1000
    if result.exit_code != 0 or result.stdout.strip() != token:
        raise RuntimeError(f"wrong result: exit {result.exit_code}, stdout {result.stdout[:100]!r}")
    return ms, result.isolation.startswith("docker (warm pool)")


def settle(pause: float) -> None:
    flush_removals(timeout=60)
    time.sleep(pause)


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)


def sequential(regs: dict, count: int, pause: float) -> dict:
    out = {}
    for name, reg in regs.items():
        settle(pause)
        start = time.perf_counter()
        samples = [one_run(reg) for _ in range(count)]
        elapsed = time.perf_counter() - start
        ms = [s[0] for s in samples]
        out[name] = {"median_ms": round(statistics.median(ms), 1), "p90_ms": pct(ms, 0.9),
                     "runs_per_s": round(count / elapsed, 2), "warm_hits": sum(s[1] for s in samples),
                     "runs": count}
    return out


def burst_once(reg, n: int) -> list[tuple[float, bool]]:
    barrier = threading.Barrier(n)
    results: list = [None] * n

    def call(i):
        barrier.wait()
        results[i] = one_run(reg)

    threads = [threading.Thread(target=call, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def bursts(regs: dict, repeat: int, pause: float) -> dict:
    out: dict = {}
    for n in BURSTS:
        row = {}
        for name, reg in regs.items():
            settle(pause)
            burst_once(reg, n)  # unmeasured: the pool learns the burst size
            calls, walls, hits = [], [], 0
            for _ in range(repeat):
                settle(pause)
                samples = burst_once(reg, n)
                calls += [s[0] for s in samples]
                walls.append(max(s[0] for s in samples))
                hits += sum(s[1] for s in samples)
            row[name] = {"median_ms": round(statistics.median(calls), 1), "burst_ms": round(statistics.median(walls), 1),
                         "warm_hits": hits, "calls": n * repeat}
        out[str(n)] = row
    return out


def sustained(regs: dict, seconds: float, pause: float) -> dict:
    out: dict = {}
    for n in THREADS:
        row = {}
        for name, reg in regs.items():
            settle(pause)
            stop = time.perf_counter() + seconds
            samples: list = []
            lock = threading.Lock()

            def worker(reg=reg, stop=stop, samples=samples, lock=lock):
                while time.perf_counter() < stop:
                    sample = one_run(reg)
                    with lock:
                        samples.append(sample)

            start = time.perf_counter()
            threads = [threading.Thread(target=worker) for _ in range(n)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            elapsed = time.perf_counter() - start
            ms = [s[0] for s in samples]
            row[name] = {"runs_per_s": round(len(samples) / elapsed, 2), "median_ms": round(statistics.median(ms), 1),
                         "warm_hits": sum(s[1] for s in samples), "runs": len(samples)}
        out[str(n)] = row
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="sequential,bursts,sustained")
    parser.add_argument("--seq", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--pause", type=float, default=4.0)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--pool-size", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    parts = set(args.only.split(","))
    base = Settings.from_env().with_overrides(backend="docker", default_roots=False, bundled_skills=False)
    pooled_settings = {"pool_size": args.pool_size}
    if "pool_max" in {f.name for f in fields(Settings)}:
        pooled_settings["pool_max"] = 8
    report: dict = {"cpus": os.cpu_count(), "python": sys.version.split()[0]}
    with tempfile.TemporaryDirectory() as tmp:
        skill = make_skill(Path(tmp))
        regs = {"pool_size=0": SkillRegistry([str(skill)], settings=base.with_overrides(pool_size=0)),
                "warm pool": SkillRegistry([str(skill)], settings=base.with_overrides(**pooled_settings))}
        try:
            for reg in regs.values():
                for _ in range(2):
                    one_run(reg)  # warm-up: page cache, discovery, the pool
            if "sequential" in parts:
                report["sequential"] = sequential(regs, args.seq, args.pause)
            if "bursts" in parts:
                report["bursts"] = bursts(regs, args.repeat, args.pause)
            if "sustained" in parts:
                report["sustained"] = sustained(regs, args.seconds, args.pause)
        finally:
            pool_mod.drain_all()
            flush_removals(timeout=60)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    if "sequential" in report:
        print("sequential back-to-back:")
        for name, r in report["sequential"].items():
            print(f"  {name:12} median {r['median_ms']:7.1f} ms  p90 {r['p90_ms']:7.1f} ms  {r['runs_per_s']:5.2f} runs/s  "
                  f"warm {r['warm_hits']}/{r['runs']}")
    if "bursts" in report:
        print("bursts after a pause (N parallel calls):")
        for n, row in report["bursts"].items():
            for name, r in row.items():
                print(f"  N={n:>2} {name:12} median {r['median_ms']:7.1f} ms  burst {r['burst_ms']:7.1f} ms  "
                      f"warm {r['warm_hits']}/{r['calls']}")
    if "sustained" in report:
        print("sustained (N threads back-to-back):")
        for n, row in report["sustained"].items():
            for name, r in row.items():
                print(f"  N={n:>2} {name:12} {r['runs_per_s']:5.2f} runs/s  median {r['median_ms']:7.1f} ms  "
                      f"warm {r['warm_hits']}/{r['runs']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
