"""What dependency provisioning costs: the first run of a PDF-type skill, and every run after it.

Figures, all in one process on one engine:

- **first provisioning, cold**: a PDF-type skill (requirements.txt: reportlab, pymupdf, pdf2image) whose
  dependency image does not exist, with an empty wheel cache (a fresh `UV_CACHE_DIR`): resolve, download,
  unpack, build the derived image, then run. Repeated `--cold-runs` times, each from nothing.
- **first provisioning, warm cache**: the same after its image was removed, with the wheels cached.
- **per-run latency, side by side**: runs of the provisioned skill alternate with runs of a skill with no
  dependencies, both running the same trivial script (so package import time is not counted), `--runs`
  of each, warm pool on (as in a notebook: each image has its own pool) and off. The goal is an added
  median under 10 ms.
- **image sizes**: the sandbox image, the office profile image when present, and the derived image.

    .venv/bin/python benchmarks/provision.py [--runs 20] [--cold-runs 2] [--json out.json]

Needs a running Docker engine, the sandbox image, and access to PyPI (the cold figure downloads wheels).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from ipyskills import SkillRegistry
from ipyskills.sandbox.docker import pool as pool_mod
from ipyskills.sandbox.docker.backend import flush_removals, shared_client
from ipyskills.sandbox.docker.image import PROFILES
from ipyskills.sandbox.provision import docker_image
from ipyskills.settings import DEFAULT_IMAGE, Settings

PDF_REQUIREMENTS = "reportlab>=4\npymupdf\npdf2image\n"
SCRIPT = "print('ok')\n"
GOAL_ADDED_MS = 10.0
SKILL_MD = "---\nname: {name}\ndescription: Benchmark skill {name}.\n---\nBody.\n"


def make_skill(base: Path, name: str, files: dict[str, str]) -> Path:
    folder = base / name
    (folder / "scripts").mkdir(parents=True)
    (folder / "SKILL.md").write_text(SKILL_MD.format(name=name))
    for rel, text in files.items():
        (folder / rel).write_text(text)
    return folder


def forget(client, marker: str) -> None:
    """Remove the dependency images that installed `marker`, so the next run must build again."""
    flush_removals()  # the last run's container still holds its image until its removal is done
    docker_image._hits.clear()
    for image in client.images.list(name=docker_image.REPOSITORY):
        if marker in (image.labels or {}).get(docker_image.LABEL_INSTALLED, ""):
            for tag in image.tags:
                client.images.remove(tag)


def first_run(reg: SkillRegistry, name: str) -> float:
    t0 = time.perf_counter()
    result = reg.run(name, "scripts/x.py", backend="docker")
    elapsed = time.perf_counter() - t0
    if result.exit_code != 0 or "installed" not in result.notice:
        raise SystemExit(f"provisioning run failed: {result.stderr or result.notice}")
    return elapsed


def latency(reg: SkillRegistry, names: list[str], runs: int, pooled: bool) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {n: [] for n in names}
    for name in names:  # warm-up: provisioned already; this fills each pool
        reg.run(name, "scripts/x.py", backend="docker")
    for _ in range(runs):
        for name in names:
            flush_removals()
            if pooled:
                for pool in list(pool_mod._pools.values()):
                    pool.warm(wait=30)  # untimed: the steady state, where refills keep up
            t0 = time.perf_counter()
            result = reg.run(name, "scripts/x.py", backend="docker")
            times[name].append((time.perf_counter() - t0) * 1000)
            assert result.exit_code == 0, result.stderr
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--cold-runs", type=int, default=2)
    parser.add_argument("--json", metavar="OUT")
    args = parser.parse_args()

    client = shared_client()
    work = Path(tempfile.mkdtemp(prefix="ipyskills-bench-"))
    figures: dict = {}
    try:
        # The same trivial script in both skills: what is compared is the cost of running in a provisioned
        # image (finding it, its own warm pool), not the time the packages take to import.
        pdf = make_skill(work, "pdf-bench", {"requirements.txt": PDF_REQUIREMENTS, "scripts/x.py": SCRIPT})
        plain = make_skill(work, "plain-bench", {"scripts/x.py": SCRIPT})
        settings = Settings(default_roots=False, bundled_skills=False, pool_size=0)

        cold = []
        for _ in range(args.cold_runs):
            forget(client, "reportlab")
            cache = tempfile.mkdtemp(prefix="ipyskills-uv-cold-")
            os.environ["UV_CACHE_DIR"] = cache
            try:
                cold.append(first_run(SkillRegistry([str(work)], settings=settings), "pdf-bench"))
            finally:
                shutil.rmtree(cache, ignore_errors=True)
                os.environ.pop("UV_CACHE_DIR")
        forget(client, "reportlab")
        warm = first_run(SkillRegistry([str(work)], settings=settings), "pdf-bench")  # user's cache, now warm
        warm_again = []
        for _ in range(args.cold_runs):
            forget(client, "reportlab")
            warm_again.append(first_run(SkillRegistry([str(work)], settings=settings), "pdf-bench"))
        figures["first_provisioning_cold_s"] = [round(t, 1) for t in cold]
        figures["first_provisioning_warm_cache_s"] = [round(t, 1) for t in [*warm_again]]
        del warm

        for label, size in (("pool_off", 0), ("pool_on", 2)):
            reg = SkillRegistry([str(work)], settings=settings.with_overrides(pool_size=size))
            times = latency(reg, ["pdf-bench", "plain-bench"], args.runs, pooled=size > 0)
            med = {n: statistics.median(t) for n, t in times.items()}
            figures[f"latency_{label}"] = {
                "provisioned_median_ms": round(med["pdf-bench"], 1),
                "no_deps_median_ms": round(med["plain-bench"], 1),
                "added_ms": round(med["pdf-bench"] - med["plain-bench"], 1),
            }
            pool_mod.drain_all()

        sizes = {}
        for image in {DEFAULT_IMAGE, *PROFILES.values()}:
            try:
                sizes[image] = round(client.images.get(image).attrs["Size"] / 1e6)
            except Exception:  # noqa: BLE001 - an absent profile image is simply not reported
                continue
        for image in client.images.list(name=docker_image.REPOSITORY):
            if "reportlab" in (image.labels or {}).get(docker_image.LABEL_INSTALLED, ""):
                base = client.images.get(image.labels[docker_image.LABEL_BASE])
                sizes["derived (pdf-bench)"] = round(image.attrs["Size"] / 1e6)
                sizes["derived layer only"] = round((image.attrs["Size"] - base.attrs["Size"]) / 1e6)
        figures["image_sizes_mb"] = sizes
    finally:
        shutil.rmtree(work, ignore_errors=True)

    for key, value in figures.items():
        print(f"{key}: {value}")
    for label in ("pool_off", "pool_on"):
        added = figures[f"latency_{label}"]["added_ms"]
        print(f"goal added median < {GOAL_ADDED_MS} ms ({label}): {'met' if added < GOAL_ADDED_MS else 'MISSED'}")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
