"""The notebook's HTML primitives: escaping, the wrapper and its CSS, status badges, collapsible sections,
and rendering of Markdown (mistune, raw HTML escaped, harmful link schemes removed), code, CSV, JSON,
images (as data: URLs only) and file trees. Everything that reaches HTML is escaped here.
"""

from __future__ import annotations

import base64
import csv
import html
import io
import json
from pathlib import PurePosixPath

CSV_ROWS = 50  # rows of a CSV resource or artifact shown as a table
INLINE_IMAGE_CAP = 5 * 1024 * 1024  # bytes of one image embedded in HTML

_STATUS_MARK = {"valid": "✓", "warnings": "!", "invalid": "✗"}
_STATUS_COLOUR = {"valid": "#1a7f37", "warnings": "#9a6700", "invalid": "#cf222e"}
_IMAGE_MIMES = {"image/png", "image/jpeg", "image/gif", "image/svg+xml", "image/webp"}
_CSS = (
    "<style>.ipyskills{font-family:var(--jp-ui-font-family,sans-serif);font-size:13px;line-height:1.45}"
    ".ipyskills table{border-collapse:collapse;margin:4px 0}"
    # The class twice: JupyterLab right-aligns cells with `:not(.jp-RenderedMarkdown).jp-RenderedHTMLCommon td`
    # (two classes), so one class would lose and tables would come out right-aligned.
    ".ipyskills.ipyskills th,.ipyskills.ipyskills td{border:1px solid #d0d7de;padding:2px 8px;text-align:left;"
    "vertical-align:top}"
    ".ipyskills pre{background:rgba(127,127,127,.08);padding:6px;overflow:auto;max-height:32em;margin:4px 0}"
    ".ipyskills .card{border:1px solid #d0d7de;border-radius:6px;padding:6px 10px;margin-bottom:6px}"
    ".ipyskills .muted{color:#6e7781}.ipyskills summary{cursor:pointer}"
    ".ipyskills.ipyskills a,.ipyskills.ipyskills a code{color:var(--jp-content-link-color,#0969da);"
    "text-decoration:underline}"
    ".ipyskills .md{border-left:3px solid #d0d7de;padding-left:10px}</style>"
)


# --------------------------------------------------------------------------- small HTML helpers


def esc(value) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def wrap(inner: str) -> str:
    return f'{_CSS}<div class="ipyskills">{inner}</div>'


def status_mark(status: str) -> str:
    return _STATUS_MARK.get(status, "?")


def badge(status: str) -> str:
    colour = _STATUS_COLOUR.get(status, "#6e7781")
    return (f'<span style="color:{colour};font-weight:600" title="{esc(status)}">'
            f"{_STATUS_MARK.get(status, '?')} {esc(status)}</span>")


def details(summary: str, inner_html: str, open_: bool = False) -> str:
    return f"<details{' open' if open_ else ''}><summary>{esc(summary)}</summary>{inner_html}</details>"


# Characters of one text rendered as HTML; a longer text shows its start and end (browsers and Markdown
# rendering slow down badly on megabytes). The plain-text form and the objects keep everything.
DISPLAY_TEXT_CAP = 200_000
DISPLAY_CUT_MARK = "\n[ipyskills: {cut:,} characters not shown here; the full text is in the result object]\n"


def display_cut(text: str, cap: int = DISPLAY_TEXT_CAP) -> str:
    if len(text) <= cap:
        return text
    head = cap * 2 // 3
    tail = cap - head
    return text[:head] + DISPLAY_CUT_MARK.format(cut=len(text) - cap) + text[len(text) - tail:]


def pre(text: str) -> str:
    return f"<pre>{esc(display_cut(text))}</pre>"


def markdown_html(text: str) -> str:
    """Markdown rendered to HTML with raw HTML escaped, javascript:/data:/file: links removed, and image
    references shown as text (a remote image would tell its server that this notebook opened the skill)."""
    import mistune

    class Renderer(mistune.HTMLRenderer):
        def image(self, text: str, url: str, title=None) -> str:
            return f'<span class="muted">[image: {esc(text)} ({esc(url)})]</span>'

    render = mistune.create_markdown(renderer=Renderer(escape=True), plugins=["table", "strikethrough"])
    return f'<div class="md">{render(display_cut(text))}</div>'


def highlight_html(text: str, filename: str) -> str:
    """Code highlighted by pygments (which escapes it), inline styles so no stylesheet is needed."""
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import TextLexer, get_lexer_for_filename
    from pygments.util import ClassNotFound

    text = display_cut(text)
    try:
        lexer = get_lexer_for_filename(filename, text)
    except ClassNotFound:
        lexer = TextLexer()
    return highlight(text, lexer, HtmlFormatter(noclasses=True, nobackground=True))


def csv_html(text: str, filename: str = "", max_rows: int = CSV_ROWS) -> str:
    delimiter = "\t" if filename.lower().endswith(".tsv") else ","
    rows = []
    reader = csv.reader(io.StringIO(text), delimiter=delimiter)
    try:
        for row in reader:
            rows.append(row)
            if len(rows) > max_rows:
                break
    except csv.Error:
        return pre(text)
    if not rows:
        return '<p class="muted">(empty)</p>'
    head, body = rows[0], rows[1 : max_rows + 1]
    out = ["<table><thead><tr>", *(f"<th>{esc(c)}</th>" for c in head), "</tr></thead><tbody>"]
    for row in body:
        out.append("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>")
    out.append("</tbody></table>")
    if len(rows) > max_rows:
        out.append(f'<p class="muted">first {max_rows} rows shown</p>')
    return "".join(out)


def json_html(text: str) -> str:
    try:
        pretty = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        return pre(text)
    return highlight_html(pretty, "x.json")


def image_html(data: bytes, mime: str, alt: str = "") -> str:
    if mime not in _IMAGE_MIMES:
        return f'<p class="muted">{esc(alt)} ({esc(mime)}, {len(data)} bytes)</p>'
    if len(data) > INLINE_IMAGE_CAP:
        return f'<p class="muted">{esc(alt)}: image too large to show inline ({len(data)} bytes)</p>'
    encoded = base64.b64encode(data).decode("ascii")
    return f'<img src="data:{mime};base64,{encoded}" alt="{esc(alt)}" style="max-width:100%">'


def file_html(text: str, filename: str) -> str:
    """A text file shown the way its kind reads best."""
    suffix = PurePosixPath(filename).suffix.lower()
    if suffix in (".md", ".markdown"):
        return markdown_html(text)
    if suffix == ".json":
        return json_html(text)
    if suffix in (".csv", ".tsv"):
        return csv_html(text, filename)
    if suffix in ("", ".txt", ".text", ".log"):
        return pre(text)
    return highlight_html(text, filename)


def problems_html(problems) -> str:
    if not problems:
        return ""
    rows = "".join(
        f"<tr><td>{badge('invalid' if p.severity == 'error' else 'warnings')}</td><td><code>{esc(p.code)}</code></td>"
        f"<td>{esc(p.field or '')}</td><td>{esc(p.message)}</td></tr>"
        for p in problems
    )
    return f"<table><thead><tr><th>severity</th><th>code</th><th>field</th><th>message</th></tr></thead>{rows}</table>"


def problems_text(problems, indent: str = "  ") -> list[str]:
    return [f"{indent}{p.severity}: {p.message}" + (f" [{p.code}]" if p.code else "") for p in problems]


def frontmatter_html(frontmatter: dict) -> str:
    if not frontmatter:
        return ""
    rows = []
    for key, value in frontmatter.items():
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
        rows.append(f"<tr><th>{esc(key)}</th><td>{esc(shown)}</td></tr>")
    return "<table>" + "".join(rows) + "</table>"


def tree_text(paths, truncated: bool = False) -> list[str]:
    """Sorted relative paths as an indented tree, folders first shown once."""
    lines, seen = [], set()
    for path in sorted(paths):
        parts = PurePosixPath(path).parts
        for depth in range(len(parts) - 1):
            folder = parts[: depth + 1]
            if folder not in seen:
                seen.add(folder)
                lines.append("  " * depth + parts[depth] + "/")
        lines.append("  " * (len(parts) - 1) + parts[-1])
    if truncated:
        lines.append("… (list truncated)")
    return lines


def shorten(text: str, width: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"
