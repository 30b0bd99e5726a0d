"""The prompt lab in a real JupyterLab and a real browser: `%%skill_agent` renders the transcript (user message,
each tool call with its arguments and returned text, the skill activated, the answer; hostile model text shown
as text, never run) and `%skills eval` renders one row per description variant, best first, with a bar.

No model and no network: the clients are the deterministic stand-ins from `ipyskills.agent.loop`. Screenshots
go to artifacts/ (prompt-lab-transcript.png, prompt-lab-eval.png); the README shows copies of them from
docs/images/ (copy them again when the rendering changes)."""

from __future__ import annotations

import re

import pytest

from .conftest import ARTIFACTS, notebook_json
from .test_browser import RUN_ALL, WAIT_MS

pytestmark = pytest.mark.browser

HOSTILE = "<img src=x onerror=alert(1)>"
HOSTILE_FINAL = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'

SETUP = '''\
%load_ext ipyskills
from ipyskills.agent.loop import MatchingClient, ScriptedClient

class Chatty(ScriptedClient):
    """The scripted stand-in, plus model text next to its tool calls and usage figures. NOT a model."""
    texts = ["I'll load the data-processor skill first. ''' + HOSTILE + '''", "Now I run its analysis script."]

    def _openai(self, step, n):
        response = super()._openai(step, n)
        if n <= len(self.texts):
            response["choices"][0]["message"]["content"] = self.texts[n - 1]
        response["usage"] = {"prompt_tokens": 1200 + 300 * n, "completion_tokens": 40 + n,
                             "total_tokens": 1240 + 301 * n}
        return response

scripted = Chatty([
    [("read_skill", {"skill_name": "data-processor"})],
    [("execute_skill_script", {"skill_name": "data-processor", "script_path": "scripts/analyze.py",
                               "input": '{"items": [12, 15, 9, 22, 17]}'})],
    "The mean is 15.0 ms and the median 15.0 ms (9 to 22 ms). ''' + HOSTILE_FINAL.replace('"', '\\"') + '''",
])'''

AGENT = """\
%%skill_agent --client scripted --model scripted-stand-in -o conversation
What are the mean and median of these response times in ms: 12, 15, 9, 22, 17?"""

EVAL = '''\
stand_in = MatchingClient()
queries = [
    ("Give me a TL;DR of these meeting notes", True),
    ("Condense this report into five key points", True),
    ("Write an executive summary of the attached article", True),
    ("Summarise this long email thread", True),
    ("Convert this JSON to a CSV table", False),
    ("What is the capital of France?", False),
    ("Extract all dates and prices from this document", False),
]
%skills eval summary-generator --queries queries --client stand_in --model matching-stand-in --runs 2 \\
    --description "Summaries." \\
    --description "Summarise, condense or shorten any text: a TL;DR, key points, an executive summary of an article, report, email thread or meeting notes."'''


def _percent(text: str) -> float:
    match = re.search(r"(\d+)%", text)
    assert match, text
    return float(match.group(1))


def test_prompt_lab_transcript_and_eval_in_jupyterlab(lab, page):
    from playwright.sync_api import expect

    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    (lab.root / "lab.ipynb").write_text(notebook_json([SETUP, AGENT, EVAL]))
    try:
        page.goto(lab.url("lab/tree/lab.ipynb"), wait_until="domcontentloaded", timeout=WAIT_MS)
        page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell.currentWidget "
                               "&& window.jupyterapp.shell.currentWidget.sessionContext", timeout=WAIT_MS)
        page.evaluate(RUN_ALL)
        cells = page.locator(".jp-Notebook .jp-Cell")
        expect(cells).to_have_count(3, timeout=WAIT_MS)

        # ---- the transcript
        transcript = cells.nth(1).locator(".jp-OutputArea-output .ipyskills").last
        final = transcript.locator(".card:not([data-turn])", has_text="final answer")
        expect(final).to_be_visible(timeout=WAIT_MS)
        assert cells.nth(1).locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']"
                                    ).count() == 0, cells.nth(1).inner_text()
        header = transcript.locator(".card").first
        expect(header).to_contain_text("scripted-stand-in (openai) · 3 turn(s) · 2 tool call(s)")
        expect(header).to_contain_text("skills activated: data-processor (level 3)")
        user = transcript.locator(".card", has_text="user").first
        expect(user).to_contain_text("What are the mean and median of these response times in ms: 12, 15, 9, "
                                     "22, 17?")
        turns = transcript.locator(".card[data-turn]")
        expect(turns).to_have_count(3)
        expect(turns.nth(0)).to_contain_text("turn 1 · 1,500 in / 41 out")
        # Each tool call with its arguments; its returned text one click away.
        read = turns.nth(0).locator("details").first
        expect(read.locator("summary")).to_contain_text('read_skill {"skill_name": "data-processor"} ok · level 2')
        read.locator("summary").click()
        expect(read.locator("pre")).to_contain_text('<skill_content name="data-processor">')
        run = turns.nth(1).locator("details").first
        expect(run.locator("summary")).to_contain_text(
            'execute_skill_script {"skill_name": "data-processor", "script_path": "scripts/analyze.py", '
            '"input": "{\\"items\\": [12, 15, 9, 22, 17]}"} ok · level 3')
        run.locator("summary").click()
        expect(run.locator("pre")).to_contain_text("Status: completed, exit code 0")
        expect(run.locator("pre")).to_contain_text('"mean": 15.0')
        expect(final).to_contain_text("The mean is 15.0 ms and the median 15.0 ms (9 to 22 ms).")
        expect(turns.nth(2)).to_contain_text("turn 3 · 2,100 in / 43 out")
        expect(turns.nth(2)).to_contain_text("the final answer, below")  # said once, not twice
        expect(turns.nth(2).locator("pre")).to_have_count(0)

        # Hostile model text is shown as text: no element made from it, no handler run, no dialog.
        expect(turns.nth(0).locator("pre").first).to_have_text(
            f"I'll load the data-processor skill first. {HOSTILE}")
        expect(final.locator("pre")).to_contain_text(HOSTILE_FINAL)
        assert transcript.locator("img, script").count() == 0
        page.wait_for_timeout(500)  # an onerror handler would have fired by now
        assert page.evaluate("() => window.__pwned === undefined")
        assert dialogs == []

        # It fits the output area, and the read_skill text (long) scrolls inside its box.
        area = cells.nth(1).locator(".jp-OutputArea-output").last.bounding_box()
        for box in (transcript.bounding_box(), run.bounding_box()):
            assert box["x"] + box["width"] <= area["x"] + area["width"] + 1, (box, area)
        read.locator("summary").click()  # collapse the long skill text again for the picture
        transcript.scroll_into_view_if_needed()
        transcript.screenshot(path=str(ARTIFACTS / "prompt-lab-transcript.png"))

        # ---- the trigger eval: one row per variant (the current description and two more), best first
        report = cells.nth(2).locator(".jp-OutputArea-output .ipyskills", has=page.locator("table")).last
        expect(report).to_contain_text("trigger eval of summary-generator with matching-stand-in", timeout=WAIT_MS)
        expect(report).to_contain_text("42/42 runs (2 per query)")
        summary = report.locator("table").first
        headers = summary.locator("thead th").all_inner_texts()
        assert headers[:2] == ["variant", "accuracy"], headers
        # Left-aligned as the page's own CSS says (JupyterLab right-aligns table cells by default).
        assert summary.locator("th").first.evaluate("e => getComputedStyle(e).textAlign") == "left"
        rows = summary.locator("tbody tr")
        expect(rows).to_have_count(3)
        labels = [rows.nth(i).locator("td").first.inner_text().replace(" ★", "").strip() for i in range(3)]
        assert sorted(labels) == ["current", "variant 1", "variant 2"], labels
        accuracies = [_percent(rows.nth(i).locator("td").nth(1).inner_text()) for i in range(3)]
        assert accuracies == sorted(accuracies, reverse=True), (labels, accuracies)
        assert labels[0] == "variant 2" and accuracies[0] == 100.0, (labels, accuracies)
        expect(rows.first.locator("td").first).to_contain_text("★")
        for i in range(3):  # each row has its bar, as wide as its accuracy, with the percentage beside it
            svg = rows.nth(i).locator("td").nth(1).locator("svg")
            assert svg.bounding_box()["width"] == pytest.approx(float(svg.get_attribute("width")), abs=1)
            assert _percent(svg.locator("text").text_content()) == accuracies[i]
            bar = svg.locator("rect")
            expect(bar).to_have_count(2)
            full, filled = (float(bar.nth(k).get_attribute("width")) for k in (0, 1))
            assert filled == pytest.approx(full * accuracies[i] / 100, abs=1), (i, full, filled)
        expect(rows.nth(2).locator("td").last).to_contain_text("Summaries.")
        per_query = report.locator("details table")
        expect(per_query.locator("tbody tr")).to_have_count(7)
        area = cells.nth(2).locator(".jp-OutputArea-output").last.bounding_box()
        box = summary.bounding_box()
        assert box["x"] + box["width"] <= area["x"] + area["width"] + 1, (box, area)
        report.scroll_into_view_if_needed()
        report.screenshot(path=str(ARTIFACTS / "prompt-lab-eval.png"))
    except Exception:
        page.screenshot(path=str(ARTIFACTS / "browser-prompt-lab-failure.png"))
        print("JupyterLab log (tail):\n" + lab.log())
        raise
