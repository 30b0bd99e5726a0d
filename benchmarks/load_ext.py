"""`%load_ext ipyskills` in fresh processes: the time from the magic to its return, IPython's own start excluded.

Two cases: with bytecode caches (what an installed package has; the first, warm-up run writes them) and
without any (a fresh checkout with PYTHONDONTWRITEBYTECODE, every module compiled from source).

    .venv/bin/python benchmarks/load_ext.py [--runs 7]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from catalog import REPO, child_env

CHILD = r"""
import json, sys, time
from IPython.core.interactiveshell import InteractiveShell
from traitlets.config import Config
config = Config()
config.HistoryManager.hist_file = ":memory:"
ip = InteractiveShell.instance(config=config)
before = set(sys.modules)
t = time.perf_counter()
ip.run_line_magic("load_ext", "ipyskills")
ms = (time.perf_counter() - t) * 1000
new = set(sys.modules) - before
print(json.dumps({"ms": ms, "modules": len(new), "yaml": any(m.split(".")[0] == "yaml" for m in new),
                  "discovered": "ipyskills.core.discover" in new}))
"""


def one_run(env: dict) -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, cwd=REPO,
                          timeout=300, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"load_ext child failed: {proc.stderr.strip()[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measure(runs: int = 7) -> dict:
    cached = child_env()
    one_run(cached)  # warm-up: writes the .pyc
    with_cache = [one_run(cached) for _ in range(runs)]
    with tempfile.TemporaryDirectory(prefix="ipyskills-nopyc-") as empty:
        # IPython's start is excluded from the figure, so compiling it too only costs wall time here.
        bare = dict(cached, PYTHONDONTWRITEBYTECODE="1", PYTHONPYCACHEPREFIX=os.path.join(empty, "none"))
        without = [one_run(bare) for _ in range(max(3, runs // 2))]
    return {
        "ms": statistics.median(r["ms"] for r in with_cache),
        "ms_max": max(r["ms"] for r in with_cache),
        "ms_no_pyc": statistics.median(r["ms"] for r in without),
        "runs": runs,
        "modules_imported": with_cache[0]["modules"],
        "yaml_imported": with_cache[0]["yaml"],
        "discovery_ran": with_cache[0]["discovered"],
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args(argv)
    print(json.dumps(measure(args.runs), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
