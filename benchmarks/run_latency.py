"""Per-run latency of the Docker backend next to a bare `docker run --rm` with the same hardening.

Runs the same trivial script N times each way, alternating (so drift in the machine hits both alike), and
prints the median, min and max per way and the ratio to the bare CLI. Both ways of getting the skill into
the container are measured: a read-only bind mount and a copy sent through the launcher.

    .venv/bin/python benchmarks/run_latency.py [--runs 20] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ipyskills.sandbox.docker_backend import DockerBackend
from ipyskills.sandbox.policy import Limits
from ipyskills.sandbox.runner import RunRequest

SCRIPT = "print('ok')\n"


def bare_cli_argv(image: str, skill: Path, limits: Limits) -> list[str]:
    mib = limits.memory // 1024**2
    return ["docker", "run", "--rm", "--user", "1000:1000", "--cap-drop", "ALL",
            "--security-opt", "no-new-privileges:true", "--read-only",
            "--tmpfs", f"/tmp:rw,noexec,nosuid,nodev,size={limits.tmp_size}",
            "--tmpfs", "/output:rw,noexec,nosuid,nodev,size=64m,uid=1000,gid=1000,mode=0700",
            "--network", "none", "--memory", f"{mib}m", "--memory-swap", f"{mib}m",
            "--pids-limit", str(limits.pids), "--cpus", f"{limits.cpus:g}", "--ipc", "private",
            "--log-driver", "none", "-v", f"{skill}:/skill:ro", "-w", "/skill",
            "-e", "HOME=/tmp", "-e", "IPYSKILLS_OUTPUT=/output", image, "python3", "x.py"]


def summarize(samples: list[float]) -> dict:
    return {"median_ms": round(statistics.median(samples), 1), "min_ms": round(min(samples), 1),
            "max_ms": round(max(samples), 1), "runs": len(samples)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    backend = DockerBackend()
    backend.ensure_ready()
    mount = DockerBackend(client=backend.client(), skill_transfer="mount")
    copy = DockerBackend(client=backend.client(), skill_transfer="copy")
    limits = Limits()
    with tempfile.TemporaryDirectory(prefix="ipyskills-bench-") as tmp:
        skill = Path(tmp) / "bench"
        skill.mkdir()
        Path(tmp).chmod(0o755)
        skill.chmod(0o755)
        (skill / "SKILL.md").write_text("---\nname: bench\ndescription: latency benchmark\n---\n")
        (skill / "x.py").write_text(SCRIPT)
        request = RunRequest("bench", skill, "x.py", limits=limits)
        cli = bare_cli_argv(backend.image, skill, limits)
        ways = {
            "docker run --rm (CLI)": lambda: subprocess.run(cli, capture_output=True, check=True).stdout,
            "DockerBackend, skill mounted": lambda: mount.run(request).stdout.encode(),
            "DockerBackend, skill copied": lambda: copy.run(request).stdout.encode(),
        }
        for run in ways.values():  # warm-up: page cache, image layers
            assert run().strip() == b"ok"
        samples: dict[str, list[float]] = {name: [] for name in ways}
        for _ in range(args.runs):
            for name, run in ways.items():
                started = time.perf_counter()
                out = run()
                samples[name].append((time.perf_counter() - started) * 1000)
                assert out.strip() == b"ok", (name, out)
    report = {name: summarize(values) for name, values in samples.items()}
    base = report["docker run --rm (CLI)"]["median_ms"]
    for entry in report.values():
        entry["ratio_to_cli"] = round(entry["median_ms"] / base, 2)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"{'way':32} {'median':>8} {'min':>8} {'max':>8} {'vs CLI':>7}   ({args.runs} runs each, alternating)")
        for name, e in report.items():
            print(f"{name:32} {e['median_ms']:8.1f} {e['min_ms']:8.1f} {e['max_ms']:8.1f} {e['ratio_to_cli']:7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
