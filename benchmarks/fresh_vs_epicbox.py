"""A fresh container per run (the warm pool off) next to epicbox's, side by side in one process, alternating
run by run so drift in the machine hits both alike. Same image, same script (`print('ok')`), same limits
(256 MiB without swap, 128 pids, network off, uid 1000). epicbox keeps its default writable root: its
files are copied into the container (put_archive), which a read-only root refuses unless a Docker volume
is made for them, a cost of its own; ours keeps the read-only root.

- epicbox: `epicbox.run(...)`: it creates the container, copies the script in (put_archive), attaches,
  starts, reads to the end, inspects and removes it; the call returns once it is removed.
- ipyskills: `SkillRegistry.run` with `pool_size=0`, every hardening flag on (no capabilities,
  no-new-privileges, our seccomp profile, tmpfs mounts, the launcher's report and output files). Timed
  twice: as `reg.run` returns (the result is known; the container is removed in the background), and until
  the container is removed too (the same end epicbox waits for). Before each timed run both wait, untimed,
  for earlier removals.

Goal (from the issue): the pool-off run at or below epicbox's median.

    .venv/bin/pip install epicbox        # not a dependency of ipyskills: only this benchmark uses it
    .venv/bin/python benchmarks/fresh_vs_epicbox.py [--runs 30] [--json]

Needs a running Docker engine and the sandbox image (`ipyskills sandbox build`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from ipyskills import SkillRegistry
from ipyskills.sandbox.docker.backend import DockerBackend, flush_removals
from ipyskills.settings import Settings

SCRIPT = "print('ok')\n"
EPICBOX = "epicbox.run"
RETURNED = "reg.run, pool off (returns)"
REMOVED = "reg.run, pool off (container removed)"


def make_skill(root: Path) -> Path:
    skill = root / "bench-fresh"
    (skill / "scripts").mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: bench-fresh\ndescription: Benchmark script.\n---\n# Bench\n")
    (skill / "scripts" / "ok.py").write_text(SCRIPT)
    os.chmod(root, 0o755)
    for path in [skill, *skill.rglob("*")]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    return skill


def _urllib3_v2_shim() -> None:
    """epicbox 1.1.0 (its latest on PyPI) passes urllib3 1.x's `method_whitelist`, which urllib3 2 renamed
    `allowed_methods`; the same retry policy under the new name, so it runs against today's requests."""
    import inspect

    from epicbox import utils
    from urllib3.util.retry import Retry

    if "method_whitelist" in inspect.signature(Retry.__init__).parameters:
        return

    class CompatRetry(Retry):
        def __init__(self, *args, method_whitelist=None, **kwargs):
            if method_whitelist is not None:
                kwargs.setdefault("allowed_methods", method_whitelist)
            super().__init__(*args, **kwargs)

    utils.Retry = CompatRetry


def measure(runs: int) -> dict:
    try:
        import epicbox
    except ImportError:
        raise SystemExit("epicbox is not installed: .venv/bin/pip install epicbox") from None
    _urllib3_v2_shim()
    logging.getLogger("epicbox").setLevel(logging.WARNING)
    with contextlib.suppress(Exception):  # epicbox logs every step through structlog
        import structlog

        structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    image = DockerBackend().image
    epicbox.configure(profiles=[epicbox.Profile("python", image, user="1000:1000", read_only=False,
                                                network_disabled=True)])
    limits = {"cputime": 10, "realtime": 30, "memory": 256, "processes": 128}
    files = [{"name": "ok.py", "content": SCRIPT.encode()}]
    times: dict[str, list[float]] = {EPICBOX: [], RETURNED: [], REMOVED: []}
    with tempfile.TemporaryDirectory(prefix="ipyskills-bench-fresh-") as tmp:
        skill = make_skill(Path(tmp))
        reg = SkillRegistry([str(skill.parent)], settings=Settings(
            default_roots=False, bundled_skills=False, backend="docker", guard=False, pool_size=0))
        for _ in range(2):  # untimed: both paths warmed up (imports, engine caches)
            epicbox.run("python", "python3 ok.py", files=files, limits=limits)
            reg.run("bench-fresh", "scripts/ok.py")
            flush_removals(timeout=60)
        for i in range(runs):
            for way in ((EPICBOX, RETURNED) if i % 2 == 0 else (RETURNED, EPICBOX)):
                flush_removals(timeout=60)
                began = time.perf_counter()
                if way == EPICBOX:
                    result = epicbox.run("python", "python3 ok.py", files=files, limits=limits)
                    if result["exit_code"] != 0 or result["stdout"] != b"ok\n":
                        raise SystemExit(f"epicbox run failed: {result}")
                    times[EPICBOX].append((time.perf_counter() - began) * 1000)
                else:
                    result = reg.run("bench-fresh", "scripts/ok.py")
                    times[RETURNED].append((time.perf_counter() - began) * 1000)
                    if result.exit_code != 0 or result.stdout != "ok\n" or "warm pool" in result.isolation:
                        raise SystemExit(f"ipyskills run failed: {result.stderr[-400:]}")
                    if not flush_removals(timeout=60):
                        raise SystemExit("the used container was not removed within 60 s")
                    times[REMOVED].append((time.perf_counter() - began) * 1000)
    base = statistics.median(times[EPICBOX])
    return {name: {"median_ms": round(statistics.median(t), 1), "p90_ms": round(sorted(t)[int(len(t) * 0.9) - 1], 1),
                   "ratio": round(statistics.median(t) / base, 2), "runs": len(t)} for name, t in times.items()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    figures = measure(args.runs)
    load = os.getloadavg()[0]
    if args.json:
        print(json.dumps({"figures": figures, "load": load}, indent=2))
    else:
        print(f"{'way':40} {'median ms':>10} {'p90 ms':>8} {'x epicbox':>10}   ({args.runs} runs each, "
              f"alternating; load average {load:.1f})")
        for name, f in figures.items():
            print(f"{name:40} {f['median_ms']:10.1f} {f['p90_ms']:8.1f} {f['ratio']:10.2f}")
        ratio = figures[RETURNED]["ratio"]
        print(f"goal: pool-off run at or below epicbox: {'met' if ratio <= 1.0 else 'NOT met'} ({ratio:.2f})")
    return 0 if figures[RETURNED]["ratio"] <= 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
