"""Real work in a real JupyterLab and a real browser, on the Docker backend: a notebook-side file goes into a
run (`--input`), the file the script makes is saved (`--save`), linked in the result and opens from it, output
shows in the cell while the script still runs, and the toolbar's stop button interrupts a run: the output so
far stays with one line, no traceback, no container left, and the kernel answers the next cell.

Screenshots of each state go to artifacts/flow-*.png."""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

from .conftest import ARTIFACTS, notebook_json
from .test_browser import WAIT_MS

pytestmark = [pytest.mark.browser, pytest.mark.docker]

SKILL_MD = """---
name: flow
description: Summarises a CSV of cities and counts slowly. Use to try files in and out and live output.
---
Run `scripts/summarize.py FILE` or `scripts/ticks.py N GAP`.
"""
SUMMARIZE = """import csv, sys
rows = list(csv.DictReader(open(sys.argv[1], newline="")))
total = sum(int(r["population"]) for r in rows)
with open("summary.csv", "w", newline="") as fh:  # the working directory is the run's workspace
    out = csv.writer(fh)
    out.writerow(["city", "population", "share"])
    for r in sorted(rows, key=lambda r: -int(r["population"])):
        out.writerow([r["city"], r["population"], f"{int(r['population']) / total:.1%}"])
print(f"read {len(rows)} rows from {sys.argv[1]}; wrote summary.csv")
"""
TICKS = """import sys, time
for i in range(int(sys.argv[1])):
    print(f"tick {i}", flush=True)
    time.sleep(float(sys.argv[2]))
print("done")
"""
DATA = "city,population\nOslo,709000\nBergen,291000\nTrondheim,212000\nStavanger,146000\n"

CELLS = [
    # 0: no warm pool, so any container of this kernel after a run is one that was left behind
    "%load_ext ipyskills\n%config IPySkills.pool_size = 0\nimport os\nprint('kernel pid', os.getpid())",
    "%skill_run --input cities.csv --save results -o summary flow scripts/summarize.py cities.csv",  # 1
    "%skill_run flow scripts/ticks.py 8 0.5",  # 2: about 4 s, output from the first half second on
    "%skill_run --timeout 120 -o partial flow scripts/ticks.py 1000 0.1",  # 3: interrupted
    "print('alive', 6 * 7, partial.interrupted, partial.stdout.splitlines()[:2])",  # 4
]

RUN_CELL = """async (index) => {
    const app = window.jupyterapp;
    const panel = app.shell.currentWidget;
    const timeout = new Promise((_, reject) => setTimeout(() => reject(new Error('kernel not ready in 60 s')), 60000));
    await Promise.race([panel.sessionContext.ready, timeout]);
    panel.content.activeCellIndex = index;
    app.commands.execute('notebook:run-cell');  // not awaited: the page waits below are bounded
}"""


def _containers_of(pid: int) -> list[str]:
    """Containers the kernel with this pid made (other test runs share the engine)."""
    out = subprocess.run(["docker", "ps", "-aq", "--filter", "label=ipyskills.sandbox=1",
                          "--filter", f"label=ipyskills.pid={pid}"], check=False, capture_output=True, text=True,
                         timeout=30)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def _docker_ready():
    from ipyskills.sandbox.docker.backend import DockerBackend

    ready, reason = DockerBackend().readiness()
    if not ready:
        if os.environ.get("IPYSKILLS_REQUIRE_DOCKER") == "1":
            pytest.fail(f"Docker is required here but not ready: {reason}")
        pytest.skip(f"Docker not ready: {reason}")


def test_files_in_and_out_live_output_and_interrupt(lab, page):
    from playwright.sync_api import expect

    _docker_ready()
    skill = lab.root / "skills" / "flow"
    (skill / "scripts").mkdir(parents=True)
    (skill / "SKILL.md").write_text(SKILL_MD)
    (skill / "scripts" / "summarize.py").write_text(SUMMARIZE)
    (skill / "scripts" / "ticks.py").write_text(TICKS)
    (lab.root / "cities.csv").write_text(DATA)
    (lab.root / "flow.ipynb").write_text(notebook_json(CELLS))
    pid = None
    try:
        page.goto(lab.url("lab/tree/flow.ipynb"), wait_until="domcontentloaded", timeout=WAIT_MS)
        page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell.currentWidget "
                               "&& window.jupyterapp.shell.currentWidget.sessionContext", timeout=WAIT_MS)
        cells = page.locator(".jp-Notebook .jp-Cell")
        expect(cells).to_have_count(len(CELLS), timeout=WAIT_MS)

        def run(index: int) -> None:
            page.evaluate(RUN_CELL, index)

        def running(index: int) -> bool:
            return cells.nth(index).locator(".jp-InputPrompt").inner_text().strip() == "[*]:"

        def shot(name: str, target=None) -> None:
            (target or page).screenshot(path=str(ARTIFACTS / f"flow-{name}.png"))

        run(0)
        expect(cells.nth(0).locator(".jp-OutputArea-output")).to_contain_text("kernel pid", timeout=WAIT_MS)
        pid = int(cells.nth(0).locator(".jp-OutputArea-output").inner_text().split()[-1])

        # ---- files in and out: cities.csv staged, summary.csv made in the workspace, saved, shown, linked
        run(1)
        result = cells.nth(1).locator(".jp-OutputArea-output .ipyskills").last
        expect(result).to_contain_text("exit=0", timeout=WAIT_MS)
        expect(result).to_contain_text("inputs in the workspace: cities.csv")
        expect(result).to_contain_text("read 4 rows from cities.csv; wrote summary.csv")
        table = result.locator("table").first
        expect(table.locator("tbody tr")).to_have_count(4)
        expect(table.locator("tbody tr").first).to_contain_text("Oslo")
        # Left-aligned, as the output's own CSS says (JupyterLab right-aligns and centres tables by default).
        for cell_ in (table.locator("th").first, table.locator("td").first):
            assert cell_.evaluate("e => getComputedStyle(e).textAlign") == "left"
        box, area = table.bounding_box(), result.bounding_box()
        assert box["x"] - area["x"] < 40, (box, area)  # not centred in the output area
        saved = lab.root / "results" / "summary.csv"
        assert saved.read_text().splitlines()[:2] == ["city,population,share", "Oslo,709000,52.2%"]
        link = result.locator("a", has_text="results/summary.csv")
        expect(link).to_be_visible()
        result.scroll_into_view_if_needed()
        shot("1-input-and-saved")

        # The link opens the saved file in JupyterLab (not a 404 page), and the file browser lists it.
        link.click()
        tab = page.locator(".lm-TabBar-tab", has_text="summary.csv")
        expect(tab).to_be_visible(timeout=WAIT_MS)
        expect(page.locator(".jp-CSVViewer:visible")).to_be_visible(timeout=WAIT_MS)  # a grid drawn on a canvas
        page.evaluate("() => window.jupyterapp.commands.execute('filebrowser:go-to-path', {path: '/results'})")
        listing = page.locator(".jp-DirListing-item", has_text="summary.csv")
        expect(listing).to_be_visible(timeout=WAIT_MS)
        shot("2-saved-file-opened")
        page.locator(".lm-TabBar-tab", has_text="flow.ipynb").click()  # back to the notebook
        page.evaluate("() => window.jupyterapp.commands.execute('filebrowser:go-to-path', {path: '/'})")

        # ---- live output: lines show in the cell while the run goes on
        started = time.monotonic()
        run(2)
        out2 = cells.nth(2).locator(".jp-OutputArea")
        expect(out2).to_contain_text("tick 2", timeout=WAIT_MS)
        seen_live = time.monotonic()
        assert running(2), "the output should show before the run ends"
        expect(out2).to_contain_text("running")  # the live display's header: 'flow/scripts/ticks.py · running 1.5 s'
        assert "done" not in out2.inner_text()
        out2.scroll_into_view_if_needed()
        shot("3-live-output")
        expect(out2.locator(".ipyskills", has_text="exit=0")).to_be_visible(timeout=WAIT_MS)
        finished = time.monotonic()
        assert finished - seen_live > 1.0, (started, seen_live, finished)
        text = out2.inner_text()
        assert text.count("tick 7") == 1 and "running" not in text, text  # the live display gave way to the result
        assert not running(2)

        # ---- interrupt with the toolbar's stop button: the output so far, one line, nothing left running
        run(3)
        out3 = cells.nth(3).locator(".jp-OutputArea")
        # 40 lines are more than the live box's 32em holds, so the check below can see where it scrolled.
        expect(out3).to_contain_text("tick 40", timeout=WAIT_MS)
        assert running(3) and len(_containers_of(pid)) == 1
        out3.scroll_into_view_if_needed()
        shot("4-before-interrupt")
        page.locator(".jp-NotebookPanel-toolbar [data-command='notebook:interrupt-kernel']").click()
        expect(out3).to_contain_text("interrupted after", timeout=30_000)
        expect(out3).to_contain_text("sandbox removed")
        text = out3.inner_text()
        assert "tick 0" in text and "tick 40" in text and "done" not in text, text
        # Longer than its box, which shows the end (the newest lines), not the start.
        box = out3.locator(".live")
        fits = box.evaluate("b => [b.scrollHeight > b.clientHeight + 10, b.firstElementChild.getBoundingClientRect()"
                            ".bottom - b.getBoundingClientRect().bottom]")
        assert fits[0] and abs(fits[1]) < 2, fits
        assert "Traceback" not in text and "KeyboardInterrupt" not in text, text
        expect(cells.nth(3).locator(".jp-InputPrompt")).not_to_have_text("[*]:", timeout=10_000)
        assert _containers_of(pid) == [], "the interrupted run's container is still there"
        out3.scroll_into_view_if_needed()
        shot("5-interrupted")

        # ---- the kernel is alive and holds the partial result
        run(4)
        out4 = cells.nth(4).locator(".jp-OutputArea-output")
        expect(out4).to_contain_text("alive 42 True ['tick 0', 'tick 1']", timeout=WAIT_MS)
        kernels = lab.api("GET", "api/kernels")
        assert len(kernels) == 1 and kernels[0]["execution_state"] in ("idle", "busy"), json.dumps(kernels)
        out4.scroll_into_view_if_needed()
        shot("6-kernel-alive")
    except Exception:
        page.screenshot(path=str(ARTIFACTS / "flow-failure.png"))
        print("JupyterLab log (tail):\n" + lab.log())
        raise
    finally:
        if pid is not None:  # nothing left behind, whatever happened above
            leftovers = _containers_of(pid)
            if leftovers:
                subprocess.run(["docker", "rm", "-f", *leftovers], check=False, capture_output=True, timeout=60)
