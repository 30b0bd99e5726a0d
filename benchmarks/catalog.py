"""Catalog figures: cold and warm scans, skills-ref side by side, memory, and `%skills` / browser response.

Every figure comes from a fresh child process, so "cold" includes `import ipyskills` (the OS page cache is
warm: the tree was just built or read). The parent only starts children and collects the JSON they print.

    .venv/bin/python benchmarks/catalog.py ROOT [--runs 3]      # one tree, our side only
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
PYCACHE = HERE / ".data" / "pycache"  # .pyc for the children, as an installed package would have

# Listing + catalog with ipyskills, from the first import.
OURS = r"""
import json, sys, time
t0 = time.perf_counter()
import ipyskills
reg = ipyskills.SkillRegistry([sys.argv[1]])
text = reg.catalog()
cold = time.perf_counter() - t0
warm = []
for _ in range(9):
    t = time.perf_counter()
    reg.refresh()
    warm.append(time.perf_counter() - t)
warm.sort()
print(json.dumps({"skills": len(reg), "cold_s": cold, "warm_s": warm[4], "warm_min_s": warm[0],
                  "loads": reg._discovery.loads, "catalog_chars": len(text)}))
"""

# The same job with skills-ref: find the skill folders, read_properties() each, build the same block.
# (skills_ref.to_prompt would do this too, but it resolves and looks for each SKILL.md a second time.)
REFERENCE = r"""
import json, sys, time
t0 = time.perf_counter()
import html
from pathlib import Path
from skills_ref import find_skill_md, read_properties
root = Path(sys.argv[1])
lines = ["<available_skills>"]
count = 0
for folder in sorted(p for p in root.iterdir() if p.is_dir()):
    skill_md = find_skill_md(folder)
    if skill_md is None:
        continue
    props = read_properties(folder)
    lines += ["  <skill>", f"    <name>{html.escape(props.name)}</name>",
              f"    <description>{html.escape(props.description)}</description>",
              f"    <location>{html.escape(str(skill_md))}</location>", "  </skill>"]
    count += 1
lines.append("</available_skills>")
text = "\n".join(lines)
print(json.dumps({"skills": count, "cold_s": time.perf_counter() - t0, "catalog_chars": len(text)}))
"""

# Memory held by the metadata of every skill: Python heap (tracemalloc) or resident set growth (RSS).
MEMORY = r"""
import gc, json, os, sys, tempfile, tracemalloc
import ipyskills
import ipyskills.core.validate  # the loader's imports (YAML) are not metadata
from ipyskills.core.registry import SkillRegistry

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

mode = sys.argv[2]
with tempfile.TemporaryDirectory() as empty:
    SkillRegistry([empty]).list()
gc.collect()
if mode == "tracemalloc":
    tracemalloc.start()
else:
    before = rss()
reg = SkillRegistry([sys.argv[1]])
n = len(reg.list())
gc.collect()
used = tracemalloc.get_traced_memory()[0] if mode == "tracemalloc" else rss() - before
print(json.dumps({"skills": n, "bytes": used}))
"""

# `%skills` and the browser through a real shell; widget messages are serialised as a frontend would get them.
NOTEBOOK = r"""
import json, sys, time
from IPython.core.interactiveshell import InteractiveShell
from traitlets.config import Config
from ipywidgets.widgets.tests.utils import DummyComm, setup_test_comm

sent = []
DummyComm.send = lambda self, data=None, buffers=None, **kw: sent.append(len(json.dumps(data, default=str)))
setup_test_comm()
config = Config()
config.HistoryManager.hist_file = ":memory:"
config.IPySkills.skill_dirs = [sys.argv[1]]
config.IPySkills.default_roots = False
config.IPySkills.bundled_skills = False
ip = InteractiveShell.instance(config=config)
ip.run_line_magic("load_ext", "ipyskills")

def timed(fn):
    t = time.perf_counter()
    out = fn()
    return out, (time.perf_counter() - t) * 1000

def skills(line):
    table = ip.run_line_magic("skills", line)
    return ip.display_formatter.format(table)[0]

first, first_ms = timed(lambda: skills(""))
again, again_ms = timed(lambda: skills(""))
_, filter_ms = timed(lambda: skills("--filter summary-generator-01"))
table = ip.run_line_magic("skills", "")
_, page_ms = timed(lambda: ip.display_formatter.format(table.page(len(table) // table.limit))[0])
browser, open_ms = timed(lambda: ip.run_line_magic("skills", "browse"))
keys = []
for text in ("c", "ci", "cit", "citation-", "citation-generator-0", "citation-generator-00420", ""):
    sent.clear()
    _, ms = timed(lambda: setattr(browser.filter, "value", text))
    keys.append({"text": text, "ms": ms, "bytes_sent": sum(sent), "listed": len(browser.skills.options)})
print(json.dumps({
    "skills": len(ip.run_line_magic("skills", "")), "first_skills_ms": first_ms, "skills_ms": again_ms,
    "filter_ms": filter_ms, "page_ms": page_ms, "html_chars": len(again["text/html"]),
    "browser_open_ms": open_ms, "keystrokes": keys,
}))
"""


def child_env() -> dict:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # let the warm-up write .pyc, as an install does
    env["PYTHONPYCACHEPREFIX"] = str(PYCACHE)
    env.pop("IPYSKILLS_SKILL_DIRS", None)
    return env


def run_child(python: str, code: str, *args: str, timeout: float = 900) -> dict:
    proc = subprocess.run([python, "-c", code, *args], capture_output=True, text=True, env=child_env(),
                          cwd=REPO, timeout=timeout, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"benchmark child failed ({python}): {proc.stderr.strip()[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def sample_ours(root: Path, python: str = sys.executable) -> dict:
    """One cold process: list + catalog, then nine warm re-scans (their median and best)."""
    return run_child(python, OURS, str(root))


def sample_reference(root: Path, python: str) -> dict:
    """One cold process doing the same with skills-ref (`python` has skills_ref installed)."""
    return run_child(python, REFERENCE, str(root), timeout=3600)


def summarize(samples: list[dict]) -> dict:
    out = {"skills": samples[0]["skills"], "runs": len(samples),
           "cold_s": statistics.median(s["cold_s"] for s in samples)}
    if "warm_s" in samples[0]:
        out["warm_s"] = statistics.median(s["warm_s"] for s in samples)
        out["warm_min_s"] = min(s["warm_min_s"] for s in samples)
        out["warm_loads"] = max(s["loads"] - s["skills"] for s in samples)  # SKILL.md reads by re-scans
    return out


def memory(root: Path, python: str = sys.executable) -> dict:
    traced = run_child(python, MEMORY, str(root), "tracemalloc")
    resident = run_child(python, MEMORY, str(root), "rss")
    return {"skills": traced["skills"], "tracemalloc_bytes": traced["bytes"], "rss_bytes": resident["bytes"]}


def notebook(root: Path, python: str = sys.executable) -> dict:
    return run_child(python, NOTEBOOK, str(root))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    sample_ours(args.root)  # warm-up: .pyc
    catalog = summarize([sample_ours(args.root) for _ in range(args.runs)])
    print(json.dumps({"catalog": catalog, "memory": memory(args.root), "notebook": notebook(args.root)},
                     indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
