"""Rich display: the right mimetypes, content rendered by kind, and untrusted skill text escaped."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from ipyskills.core.model import Problem, SkillMeta
from ipyskills.core.prompt import SkillContent, SkillResource
from ipyskills.notebook import display
from ipyskills.sandbox.result import Artifact, ExecuteResult, Finding

from .conftest import tiny_png

ATTACKS = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    '"><svg onload=alert(1)>',
    "[click](javascript:alert(1))",
]


class _Elements(HTMLParser):
    def __init__(self):
        super().__init__()
        self.elements: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, {k: v or "" for k, v in attrs}))


def assert_inert(html: str) -> None:
    """Parsed as a browser would: no script/svg/iframe element, no on* handler, no javascript: URL."""
    parser = _Elements()
    parser.feed(html)
    for tag, attrs in parser.elements:
        assert tag not in ("script", "svg", "iframe", "object", "embed"), tag
        assert not [a for a in attrs if a.startswith("on")], (tag, attrs)
        for name in ("href", "src"):
            assert not re.sub(r"\s", "", attrs.get(name, "")).lower().startswith(("javascript:", "data:text")), attrs


ALL_ATTACKS = " ".join(ATTACKS)


def meta(name="evil", description=ALL_ATTACKS, problems=(), frontmatter=None):
    return SkillMeta(name=name, description=description, path=Path("/s") / name, skill_md=Path("/s") / name / "SKILL.md",
                     root=Path("/s"), frontmatter=frontmatter or {"name": name, ATTACKS[1]: ATTACKS[0]},
                     problems=list(problems))


def test_skill_meta_bundle_is_escaped():
    m = meta(problems=[Problem("x", ATTACKS[0], ATTACKS[1], "error")])
    bundle = display.bundle_for(m)
    assert set(bundle) == {"text/plain", "text/html"}
    assert_inert(bundle["text/html"])
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in bundle["text/html"]
    assert ATTACKS[0] in bundle["text/plain"]  # plain text is not HTML; shown as written


def test_skill_content_body_is_rendered_safely():
    body = "# Title\n\n" + "\n\n".join(ATTACKS) + "\n\n<div onclick='x'>block html</div>\n\n```python\nx = 1\n```\n"
    content = SkillContent(ATTACKS[0], body, Path("/s/evil"), ["references/" + ATTACKS[1], "scripts/run.py"])
    bundle = display.content_bundle(content, meta())
    html = bundle["text/html"]
    assert_inert(html)
    assert "<h1>Title</h1>" in html
    assert "<details><summary>agent text" in html
    assert bundle["text/plain"] == str(content)
    assert "text/markdown" not in bundle  # never hand untrusted Markdown to the frontend's renderer


@pytest.mark.parametrize("path, text, expect", [
    ("references/guide.md", "# Guide\n\n*em*\n" + ATTACKS[0], ["<h1>Guide</h1>", "<em>em</em>"]),
    ("scripts/run.py", "def f():\n    return '<script>'\n", ["<span", "&lt;script&gt;"]),
    ("assets/data.json", '{"a": [1, 2], "k": "<script>"}', ['"a"', "&lt;script&gt;"]),
    ("assets/table.csv", "h1,h2\n<script>x</script>,2\n", ["<th>h1</th>", "<td>&lt;script&gt;x&lt;/script&gt;</td>"]),
    ("assets/table.tsv", "h1\th2\n1\t2\n", ["<th>h2</th>", "<td>2</td>"]),
    ("notes.txt", "plain <b>text</b>", ["<pre>plain &lt;b&gt;text&lt;/b&gt;</pre>"]),
])
def test_resources_render_by_kind(path, text, expect):
    res = SkillResource("evil", path, text)
    bundle = display.bundle_for(res)
    assert bundle["text/plain"] == str(res)
    for fragment in expect:
        assert fragment in bundle["text/html"], fragment
    assert_inert(bundle["text/html"])


def test_svg_resource_is_shown_as_an_image_only():
    svg = '<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"><script>alert(2)</script></svg>'
    html = display.bundle_for(SkillResource("s", "logo.svg", svg))["text/html"]
    assert 'src="data:image/svg+xml;base64,' in html
    assert_inert(html.split("<details>")[0])
    assert_inert(html)


def test_image_resource_bundle():
    image = display.ImageResource("s", "logo.png", tiny_png(), "image/png")
    bundle = image.mimebundle()
    assert bundle["image/png"] and 'src="data:image/png;base64,' in bundle["text/html"]
    assert "image/png image" in bundle["text/plain"]


def run_result(**changes):
    base = {"exit_code": 0, "stdout": "out <script>alert(1)</script>", "stderr": "warn <img src=x onerror=y>",
                "duration_ms": 412.0, "backend": "local", "isolation": "uid 65534, no network", "skill": "evil",
                "script": "scripts/run.py", "args": ["--n", ATTACKS[0]]}
    base.update(changes)
    return ExecuteResult(**base)


def test_run_result_bundle():
    result = run_result(
        artifacts=[Artifact("plot.png", 70, tiny_png()), Artifact("t.csv", 8, b"a,b\n1,2\n"),
                   Artifact("x.bin", 2, b"\x00\x01"), Artifact("big.parquet", 10**9, None),
                   Artifact('"><img src=x onerror=alert(1)>.svg', 10, b"<svg onload=alert(1)></svg>")],
        findings=[Finding("network", "warn", 3, "uses <b>urllib</b>", "scripts/run.py")],
        notice="backend auto: Docker not used (engine not running); ran on the local backend instead")
    bundle = display.bundle_for(result)
    html, text = bundle["text/html"], bundle["text/plain"]
    assert_inert(html)
    assert "backend=local" in text and "exit=0" in text and "412 ms" in text and "uid 65534" in text
    assert "Docker not used" in text and "Docker not used" in html
    assert 'src="data:image/png;base64,' in html
    assert "<td>1</td><td>2</td>" in html
    assert "x.bin" in html and "not returned" in html
    assert "uses &lt;b&gt;urllib&lt;/b&gt;" in html
    assert "--- stdout" in text and "--- stderr" in text


@pytest.mark.parametrize("changes, words", [
    ({"exit_code": None, "timed_out": True}, ["TIMED OUT"]),
    ({"exit_code": 137, "oom_killed": True}, ["OUT OF MEMORY"]),
    ({"stdout_truncated": True}, ["output truncated"]),
])
def test_run_status_line_flags(changes, words):
    text = display.bundle_for(run_result(**changes))["text/plain"]
    for word in words:
        assert word in text


def test_table_is_paginated_for_thousands_of_skills():
    skills = [meta(name=f"skill-{i:04d}", description=f"number {i}", frontmatter={"name": "x"})
              for i in range(3000)]
    table = display.SkillTable(skills, limit=50)
    html = table.mimebundle()["text/html"]
    assert html.count("<tr>") == 51  # header + 50 rows
    assert "showing 1–50 of 3000" in html and "--filter" in html
    assert len(html) < 60_000
    page = table.page(3)
    assert page.mimebundle()["text/plain"].splitlines()[1].split()[1] == "skill-0100"
    narrowed = table.filter("number 299")
    assert len(narrowed) == 11 and "showing" not in narrowed.mimebundle()["text/plain"]
    assert len(table) == 3000 and table[0].name == "skill-0000"


def test_empty_catalog_says_what_to_do():
    text = display.SkillTable([]).mimebundle()["text/plain"]
    assert "%skills add" in text and "%%skill" in text


def test_rich_wrapper_renders_without_the_extension():
    from IPython.core.formatters import DisplayFormatter

    result = run_result()
    data, _ = DisplayFormatter().format(display.Rich(result))
    assert "text/html" in data and "backend=local" in data["text/plain"]
    assert DisplayFormatter().format(result)[0].keys() == {"text/plain"}  # core stays IPython-free


def test_extension_formatters_come_and_go(ip):
    result = run_result()
    assert "text/html" in ip.display_formatter.format(result)[0]
    assert "text/html" in ip.display_formatter.format(meta())[0]
    ip.run_line_magic("unload_ext", "ipyskills")
    assert "text/html" not in ip.display_formatter.format(result)[0]


def test_markdown_images_never_load_from_the_network():
    from ipyskills.notebook.primitives import markdown_html

    html_ = markdown_html("See ![the chart](https://tracker.example/pixel.png) and ![local](assets/a.png).")
    parser = _Elements()
    parser.feed(html_)
    assert not [tag for tag, _ in parser.elements if tag == "img"]
    assert "the chart" in html_ and "https://tracker.example/pixel.png" in html_  # still shown, as text
