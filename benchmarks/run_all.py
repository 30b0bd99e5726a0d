"""Every ipyskills performance figure in one run, each checked against its goal.

    .venv/bin/python benchmarks/run_all.py [--sizes 100,1000,10000] [--runs 3] [--no-ref] [--no-docker]
                                           [--json results.json]

Builds its own inputs (skill trees made from the bundled skills, under benchmarks/.data/, git-ignored),
installs skills-ref 0.1.1 from PyPI into benchmarks/.venv-ref on first use (never into the project's
environment), and runs every measurement in fresh child processes. Prints the catalog curve (cold and warm
at each size, skills-ref side by side), memory, `%skills` and browser response, `%load_ext` time, and the
sandbox's run latency from benchmarks/run_latency.py when Docker is there; then one line per goal,
"figure vs goal: PASS/MISS". Not part of the test suite; absolute times depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

import catalog
import load_ext
from tree import build_tree

HERE = Path(__file__).resolve().parent
REF_VENV = HERE / ".venv-ref"
REF_PACKAGE = "skills-ref==0.1.1"
MB = 1024 * 1024

# The goals (from the task that set them); each is printed with the figure measured.
GOAL_RATIO = 20.0  # cold list + catalog vs skills-ref read_properties, at the largest size
GOAL_WARM_MS = 100.0  # warm re-scan, nothing changed, at the largest size
GOAL_MEMORY_MB = 50.0  # metadata of the largest tree
GOAL_LOAD_EXT_MS = 150.0
GOAL_RESPONSE_MS = 100.0  # %skills after first use, a filter, a browser keystroke
GOAL_LINEAR = 1.5  # per-skill cold cost at the largest size vs the next size down


def machine() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    return {"platform": platform.platform(), "cpu": cpu, "cores": os.cpu_count(),
            "python": platform.python_version(), "load_average": _load()}


def _load() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def reference_python() -> str | None:
    """The skills-ref interpreter, installing it into benchmarks/.venv-ref on first use."""
    python = REF_VENV / "bin" / "python"
    if not python.exists():
        print(f"installing {REF_PACKAGE} into {REF_VENV} (once) ...", flush=True)
        made = subprocess.run([sys.executable, "-m", "venv", str(REF_VENV)], capture_output=True, text=True,
                              check=False)
        if made.returncode != 0:
            print(f"  could not create the venv: {made.stderr.strip()[-500:]}")
            return None
    check = subprocess.run([str(python), "-c", "import skills_ref; print(skills_ref.__version__)"],
                           capture_output=True, text=True, check=False)
    if check.returncode != 0:
        pip = subprocess.run([str(python), "-m", "pip", "install", "-q", REF_PACKAGE], capture_output=True,
                             text=True, check=False)
        if pip.returncode != 0:
            print(f"  pip install {REF_PACKAGE} failed: {pip.stderr.strip()[-500:]}")
            return None
        check = subprocess.run([str(python), "-c", "import skills_ref; print(skills_ref.__version__)"],
                               capture_output=True, text=True, check=False)
    if check.returncode != 0:
        print(f"  skills_ref does not import: {check.stderr.strip()[-500:]}")
        return None
    return str(python)


def docker_ready() -> tuple[bool, str]:
    if not (HERE / "run_latency.py").exists():
        return False, "benchmarks/run_latency.py is not there"
    if shutil.which("docker") is None:
        return False, "no docker command"
    info = subprocess.run(["docker", "info"], capture_output=True, text=True, timeout=60, check=False)
    if info.returncode != 0:
        return False, "the Docker engine does not answer (docker info failed)"
    return True, ""


def run_latency(runs: int) -> dict:
    proc = subprocess.run([sys.executable, str(HERE / "run_latency.py"), "--json", "--runs", str(runs)],
                          capture_output=True, text=True, timeout=1800, check=False, cwd=HERE.parent)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.strip()[-1500:] or proc.stdout.strip()[-1500:])
    text = proc.stdout
    return json.loads(text[text.index("{"):])


# ------------------------------------------------------------------------------------------------ printing

def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def marginal(smaller: dict, larger: dict) -> float:
    """µs per added skill between two sizes: the slope of the cold curve, fixed costs (imports) cancelled."""
    added = larger["size"] - smaller["size"]
    return (larger["ours"]["cold_s"] - smaller["ours"]["cold_s"]) / added * 1e6


def print_curve(rows: list[dict]) -> None:
    print(f"\n{'skills':>7} {'cold s':>8} {'µs/skill':>9} {'slope µs':>9} {'warm ms':>8} {'µs/skill':>9}"
          f" {'re-reads':>8} {'skills-ref s':>13} {'µs/skill':>9} {'ratio':>7}")
    for i, r in enumerate(rows):
        n, ours, ref = r["size"], r["ours"], r.get("reference")
        slope = f"{marginal(rows[i - 1], r):9.0f}" if i else f"{'-':>9}"
        ref_cols = (f"{ref['cold_s']:13.2f} {ref['cold_s'] / n * 1e6:9.0f} {ref['cold_s'] / ours['cold_s']:6.1f}×"
                    if ref else f"{'-':>13} {'-':>9} {'-':>7}")
        print(f"{n:>7} {ours['cold_s']:8.3f} {ours['cold_s'] / n * 1e6:9.0f} {slope} {ours['warm_s'] * 1000:8.1f}"
              f" {ours['warm_s'] / n * 1e6:9.2f} {ours['warm_loads']:>8} {ref_cols}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100,1000,10000", help="tree sizes, comma-separated")
    parser.add_argument("--runs", type=int, default=3, help="cold processes per size (median)")
    parser.add_argument("--ref-runs", type=int, default=None,
                        help="skills-ref processes per size (default: as --runs, one at 10,000 and above)")
    parser.add_argument("--no-ref", action="store_true", help="skip skills-ref")
    parser.add_argument("--no-docker", action="store_true", help="skip the run latency")
    parser.add_argument("--latency-runs", type=int, default=10)
    parser.add_argument("--json", type=Path, default=None, help="also write every figure to this file")
    args = parser.parse_args(argv)
    sizes = sorted(int(s) for s in args.sizes.split(","))
    results: dict = {"machine": machine(), "started": time.strftime("%Y-%m-%d %H:%M:%S")}
    m = results["machine"]
    print(f"machine: {m['cpu']}, {m['cores']} cores, {m['platform']}, Python {m['python']}, "
          f"load average {m['load_average']}")

    ref_python = None if args.no_ref else reference_python()
    trees = {n: build_tree(n) for n in sizes}
    print(f"trees: {', '.join(str(trees[n]) for n in sizes)}", flush=True)
    catalog.sample_ours(trees[sizes[0]])  # warm-ups: bytecode caches for both sides
    if ref_python:
        catalog.sample_reference(trees[sizes[0]], ref_python)

    rows = []
    for n in sizes:
        ref_runs = 0 if not ref_python else (args.ref_runs or (1 if n >= 10_000 else args.runs))
        ours_samples, ref_samples = [], []
        for i in range(max(args.runs, ref_runs)):  # alternate, so drift in the machine hits both alike
            if i < args.runs:
                ours_samples.append(catalog.sample_ours(trees[n]))
            if i < ref_runs:
                ref_samples.append(catalog.sample_reference(trees[n], ref_python))
        row = {"size": n, "ours": catalog.summarize(ours_samples)}
        if ref_samples:
            row["reference"] = catalog.summarize(ref_samples)
        rows.append(row)
        print(f"  {n} skills measured", flush=True)
    results["catalog"] = rows
    print_curve(rows)

    largest = trees[sizes[-1]]
    results["memory"] = mem = catalog.memory(largest)
    print(f"\nmemory, {mem['skills']} skills: {mem['tracemalloc_bytes'] / MB:.1f} MB Python heap (tracemalloc), "
          f"{mem['rss_bytes'] / MB:.1f} MB resident set growth")

    results["notebook"] = nb = catalog.notebook(largest)
    print(f"\n%skills with {nb['skills']} skills: first call (discovery included) {nb['first_skills_ms']:.0f} ms; "
          f"then {nb['skills_ms']:.1f} ms ({nb['html_chars']} characters of HTML); "
          f"--filter {nb['filter_ms']:.1f} ms; a later page {nb['page_ms']:.1f} ms")
    print(f"browser: opens in {nb['browser_open_ms']:.0f} ms; keystrokes in the filter box:")
    for k in nb["keystrokes"]:
        print(f"  {k['text']!r:28} {k['ms']:6.1f} ms  {k['listed']:5} listed  {k['bytes_sent']:7} bytes to the page")

    results["load_ext"] = le = load_ext.measure()
    print(f"\n%load_ext ipyskills: {le['ms']:.1f} ms median of {le['runs']} fresh processes (max {le['ms_max']:.1f}); "
          f"{le['ms_no_pyc']:.1f} ms with no bytecode cache; YAML imported: {le['yaml_imported']}, "
          f"discovery run: {le['discovery_ran']}")

    ready, why = (False, "--no-docker") if args.no_docker else docker_ready()
    if ready:
        try:
            results["run_latency"] = lat = run_latency(args.latency_runs)
            print(f"\nrun latency (benchmarks/run_latency.py, {args.latency_runs} runs each):")
            for name, e in lat.items():
                if isinstance(e, dict) and "median_ms" in e:
                    extra = f"  {e['ratio_to_cli']:.2f}× the bare CLI" if "ratio_to_cli" in e else ""
                    print(f"  {name:40} median {e['median_ms']:7.1f} ms  min {e['min_ms']:7.1f}  "
                          f"max {e['max_ms']:7.1f}{extra}")
        except (RuntimeError, subprocess.TimeoutExpired, ValueError) as exc:
            print(f"\nrun latency: not measured ({exc})")
    else:
        print(f"\nrun latency: not measured ({why})")

    # ------------------------------------------------------------------------------------------ goals
    top = rows[-1]
    goals = []
    if "reference" in top:
        ratio = top["reference"]["cold_s"] / top["ours"]["cold_s"]
        figure = (f"cold list + catalog, {top['size']} skills: {top['ours']['cold_s']:.2f} s vs skills-ref "
                  f"{top['reference']['cold_s']:.1f} s = {ratio:.1f}× faster")
        goals.append((figure, f"≥ {GOAL_RATIO:.0f}×", ratio >= GOAL_RATIO))
    else:
        goals.append(("cold list + catalog vs skills-ref: not measured", f"≥ {GOAL_RATIO:.0f}×", False))
    warm_ms = top["ours"]["warm_s"] * 1000
    figure = (f"warm re-scan, {top['size']} skills: {warm_ms:.1f} ms median (best {top['ours']['warm_min_s'] * 1000:.1f}),"
              f" {top['ours']['warm_loads']} SKILL.md re-read")
    goals.append((figure, f"< {GOAL_WARM_MS:.0f} ms, none re-read",
                  warm_ms < GOAL_WARM_MS and top["ours"]["warm_loads"] == 0))
    if len(rows) > 2:
        last, before = marginal(rows[-2], rows[-1]), marginal(rows[-3], rows[-2])
        figure = (f"linear: each skill from {rows[-2]['size']} to {top['size']} costs {last:.0f} µs, "
                  f"from {rows[-3]['size']} to {rows[-2]['size']} {before:.0f} µs")
        goals.append((figure, f"≤ {GOAL_LINEAR}× the earlier", last <= GOAL_LINEAR * before))
    worst_mem = max(mem["tracemalloc_bytes"], mem["rss_bytes"]) / MB
    figure = (f"metadata memory, {mem['skills']} skills: {mem['tracemalloc_bytes'] / MB:.1f} MB heap, "
              f"{mem['rss_bytes'] / MB:.1f} MB RSS")
    goals.append((figure, f"≤ {GOAL_MEMORY_MB:.0f} MB", worst_mem <= GOAL_MEMORY_MB))
    slowest_key = max(k["ms"] for k in nb["keystrokes"])
    responsive = max(nb["skills_ms"], nb["filter_ms"], nb["page_ms"], slowest_key)
    figure = (f"%skills / --filter / page / slowest browser keystroke at {nb['skills']} skills: "
              f"{nb['skills_ms']:.1f} / {nb['filter_ms']:.1f} / {nb['page_ms']:.1f} / {slowest_key:.1f} ms")
    goals.append((figure, f"each ≤ {GOAL_RESPONSE_MS:.0f} ms", responsive <= GOAL_RESPONSE_MS))
    goals.append((f"%load_ext ipyskills: {le['ms']:.1f} ms", f"≤ {GOAL_LOAD_EXT_MS:.0f} ms",
                  le["ms"] <= GOAL_LOAD_EXT_MS and not le["discovery_ran"]))
    results["goals"] = [{"figure": f, "goal": g, "pass": ok} for f, g, ok in goals]
    results["machine"]["load_average_end"] = _load()

    print("\ngoals:")
    for figure, goal, ok in goals:
        print(f"  {figure} vs goal {goal}: {verdict(ok)}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
        print(f"\nall figures written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
