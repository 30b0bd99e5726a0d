"""The widget browser in a real JupyterLab and a real browser: it renders, filters, shows a skill, shows the
agent text, and runs a script from the Run tab with the result appearing in the page."""

from __future__ import annotations

import pytest

from .conftest import ARTIFACTS, notebook_json

pytestmark = pytest.mark.browser

WAIT_MS = 60_000
RUN_ALL = """async () => {
    const app = window.jupyterapp;
    const panel = app.shell.currentWidget;
    const timeout = new Promise((_, reject) => setTimeout(() => reject(new Error('kernel not ready in 60 s')), 60000));
    await Promise.race([panel.sessionContext.ready, timeout]);
    app.commands.execute('notebook:run-all-cells');  // not awaited: the page waits below are bounded
    return panel.sessionContext.session.kernel.name;
}"""


def test_browse_select_and_run_in_jupyterlab(lab, page):
    from playwright.sync_api import expect

    (lab.root / "browse.ipynb").write_text(notebook_json(["%load_ext ipyskills", "%skills browse"]))
    try:
        page.goto(lab.url("lab/tree/browse.ipynb"), wait_until="domcontentloaded", timeout=WAIT_MS)
        page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell.currentWidget "
                               "&& window.jupyterapp.shell.currentWidget.sessionContext", timeout=WAIT_MS)
        page.evaluate(RUN_ALL)

        browser = page.locator(".jp-OutputArea-output .widget-vbox").first
        skills = browser.locator(".widget-select select").first
        expect(skills).to_be_visible(timeout=WAIT_MS)
        assert page.locator("text=Error displaying widget").count() == 0
        labels = skills.locator("option").all_inner_texts()  # ipywidgets shows spaces as no-break spaces
        assert any(label.replace("\xa0", " ").endswith(" data-processor") for label in labels), labels

        # It fits the output area (no overflow past the cell's right edge).
        area, box = page.locator(".jp-OutputArea-output").first.bounding_box(), skills.bounding_box()
        assert box["x"] + box["width"] <= area["x"] + area["width"], (box, area)

        # The filter narrows the list, and the count says so.
        count = browser.locator(".widget-html", has_text="skill(s)").first
        browser.locator(".widget-text input").first.fill("data-proc")
        expect(skills.locator("option")).to_have_count(1, timeout=10_000)
        expect(count).to_have_text(f"1 of {len(labels)} skill(s)")
        browser.locator(".widget-text input").first.fill("")
        expect(skills.locator("option")).to_have_count(len(labels), timeout=10_000)
        expect(count).to_have_text(f"{len(labels)} of {len(labels)} skill(s)")

        label = next(label for label in labels if label.replace("\xa0", " ").endswith(" data-processor"))
        skills.select_option(label=label)
        expect(browser.locator(".widget-tab")).to_contain_text("Data processor", timeout=10_000)
        page.screenshot(path=str(ARTIFACTS / "browser-skill.png"))

        # The agent text at level 2, exactly as an agent gets it.
        browser.get_by_role("tab", name="Agent text").click()
        expect(browser.locator(".widget-tab")).to_contain_text('<skill_content name="data-processor">')

        # Run a script from the Run tab; its result appears in the widget's output area.
        browser.get_by_role("tab", name="Run", exact=True).click()
        browser.locator(".widget-dropdown select").select_option(label="scripts/analyze.py")
        browser.locator(".widget-textarea textarea").fill('{"items": [1, 2, 3, 4, 5]}')
        browser.locator("button.widget-button", has_text="Run").click()
        output = browser.locator(".widget-output")
        expect(output).to_contain_text("exit=0", timeout=WAIT_MS)
        expect(output).to_contain_text('"sum": 15')
        expect(output).to_contain_text('"mean": 3.0')
        output.scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / "browser-run.png"))
        browser.screenshot(path=str(ARTIFACTS / "browser-widget.png"))
    except Exception:
        page.screenshot(path=str(ARTIFACTS / "browser-failure.png"))
        print("JupyterLab log (tail):\n" + lab.log())
        raise
