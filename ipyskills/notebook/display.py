"""Rich display for ipyskills objects: functions that build mimebundles, and small displayable wrappers.

Skill text is untrusted. Everything that reaches HTML is escaped (by primitives.py); Markdown is rendered by
mistune with raw HTML escaped and harmful link schemes removed. Untrusted Markdown is never emitted as
`text/markdown`, because JupyterLab renders trusted Markdown outputs without sanitizing them.
Images are shown through `<img src="data:...">` only (an SVG loaded that way cannot run scripts).

Every bundle has a `text/plain` entry that reads well in terminal IPython.
"""

from __future__ import annotations

import base64
import json
import shlex

from .primitives import (  # noqa: F401 (esc, wrap, markdown_html...: re-exported, the names this module always had)
    _IMAGE_MIMES,
    _STATUS_COLOUR,
    _STATUS_MARK,
    INLINE_IMAGE_CAP,
    badge,
    csv_html,
    details,
    display_cut,
    esc,
    file_html,
    frontmatter_html,
    highlight_html,
    image_html,
    json_html,
    markdown_html,
    pre,
    problems_html,
    problems_text,
    shorten,
    status_mark,
    tree_text,
    wrap,
)

TABLE_ROWS = 50  # catalog rows shown before "showing N of M"
NOTE_ROWS = 20  # shadowed or skipped skills listed under the table before "… and N more"
REPORT_ROWS = 50  # validation reports with problems shown in full by `%skills validate` (all skills)

# --------------------------------------------------------------------------- bundles for core objects


def card_problems(meta) -> list:
    """The skill's problems plus advice about its body, read now: listing reads only the frontmatter."""
    problems = list(meta.problems)
    skill_md = getattr(meta, "skill_md", None)
    if skill_md is not None:
        from ..core.validate import body_advice

        known = {p.code for p in problems}
        problems += [p for p in body_advice(skill_md) if p.code not in known]
    return problems


def _status(problems) -> str:
    if any(p.severity == "error" for p in problems):
        return "invalid"
    return "warnings" if problems else "valid"


def meta_html(meta, problems=None) -> str:
    """A skill's level-1 facts as HTML (unwrapped): card, problems (body advice included), frontmatter."""
    problems = card_problems(meta) if problems is None else problems
    card = (
        f'<div class="card"><b style="font-size:1.15em">{esc(meta.name)}</b> {badge(_status(problems))}'
        f"<div>{esc(meta.description)}</div>"
        f'<div class="muted"><code>{esc(meta.path)}</code> (root <code>{esc(meta.root)}</code>)</div></div>'
    )
    parts = [card]
    if problems:
        parts.append(details(f"{len(problems)} problem(s)", problems_html(problems), open_=True))
    if meta.frontmatter:
        parts.append(details("frontmatter", frontmatter_html(meta.frontmatter)))
    return "".join(parts)


def meta_bundle(meta) -> dict:
    """A skill's level-1 facts: card, frontmatter, problems."""
    problems = card_problems(meta)
    text = [f"{meta.name} [{_status(problems)}] {meta.description}", f"  {meta.path}", *problems_text(problems)]
    return {"text/plain": "\n".join(text), "text/html": wrap(meta_html(meta, problems))}


def content_bundle(content, meta=None) -> dict:
    """Level 2: the card, the body rendered, the resource tree; the exact agent text one click away."""
    agent_text = str(content)
    resources = list(getattr(content, "resources", []) or [])
    truncated = bool(getattr(content, "resources_truncated", False))
    parts = []
    if meta is not None:
        parts.append(meta_html(meta))
    else:
        parts.append(f'<div class="card"><b style="font-size:1.15em">{esc(content.name)}</b>'
                     f'<div class="muted"><code>{esc(getattr(content, "directory", ""))}</code></div></div>')
    parts.append(markdown_html(getattr(content, "shown_body", content.body)))  # what the agent text shows
    if resources or truncated:
        parts.append(details(f"files ({len(resources)}{'+' if truncated else ''})",
                             pre("\n".join(tree_text(resources, truncated)))))
    parts.append(details("agent text (level 2, exactly what the model receives)", pre(agent_text)))
    return {"text/plain": agent_text, "text/html": wrap("".join(parts))}


def resource_bundle(resource, data: bytes | None = None, mime: str | None = None) -> dict:
    """Level 3: the file rendered by kind (Markdown, code, JSON, CSV, image); agent text one click away."""
    path = str(resource.path)
    head = (f'<div class="card"><b>{esc(resource.skill)}</b> / <code>{esc(path)}</code></div>')
    if data is not None and mime in _IMAGE_MIMES:
        plain = f"{resource.skill}/{path}: {mime} image, {len(data)} bytes"
        return {"text/plain": plain, "text/html": wrap(head + image_html(data, mime, path))}
    agent_text = str(resource)
    if path.lower().endswith(".svg"):
        body = image_html(resource.text.encode("utf-8"), "image/svg+xml", path)
    else:
        body = file_html(resource.text, path)
    raw = details("agent text (level 3, exactly what the model receives)", pre(agent_text))
    return {"text/plain": agent_text, "text/html": wrap(head + body + raw)}


def report_parts(report) -> tuple[str, str]:
    """(plain text, unwrapped HTML) of a validation report: the verdict, then each problem."""
    problems = list(report.problems)
    errors = [p for p in problems if p.severity == "error"]
    status = "invalid" if errors else ("warnings" if problems else "valid")
    verdict = {"valid": "Valid skill", "warnings": "Valid skill, with warnings",
               "invalid": f"Invalid skill: {len(errors)} error(s)"}[status]
    colour = _STATUS_COLOUR.get(status, "#6e7781")
    mark = (f'<span style="color:{colour};font-weight:600" title="{esc(status)}">{_STATUS_MARK.get(status, "?")} '
            f"{esc(verdict)}</span>")  # the mark and the verdict once ("✓ Valid skill", not "✓ valid Valid skill")
    html_ = f'<div class="card">{mark} <code>{esc(report.path)}</code></div>'
    html_ += problems_html(problems)
    return "\n".join([f"{verdict}: {report.path}", *problems_text(problems)]), html_


def report_bundle(report) -> dict:
    text, html_ = report_parts(report)
    return {"text/plain": text, "text/html": wrap(html_)}


class Displayed:
    """Rich output from `mimebundle()`: the notebook shows its HTML, a terminal its text/plain."""

    __slots__ = ()

    def _repr_mimebundle_(self, include=None, exclude=None):
        return self.mimebundle()

    def _repr_pretty_(self, p, cycle):
        p.text(self.mimebundle()["text/plain"])


class ReportList(Displayed, list):
    """Validation reports for several skills (`%skills validate` with no target); a list of reports.

    Shows the problem reports in full (invalid first, at most REPORT_ROWS of them) and counts the valid
    ones, so validating thousands of skills stays a readable page.
    """

    @property
    def valid(self) -> bool:
        return all(getattr(r, "valid", False) for r in self)

    def mimebundle(self) -> dict:
        invalid = [r for r in self if not getattr(r, "valid", False)]
        advised = [r for r in self if getattr(r, "valid", False) and getattr(r, "problems", None)]
        clean = len(self) - len(invalid) - len(advised)
        lead = (f"{len(self)} skill(s) validated: {len(invalid)} invalid, {len(advised)} with warnings, "
                f"{clean} valid")
        shown = (invalid + advised)[:REPORT_ROWS]
        parts = [report_parts(r) for r in shown]
        text = [lead, *(t for t, _ in parts)]
        html_ = f"<p>{esc(lead)}</p>" + "".join(h for _, h in parts)
        hidden = len(invalid) + len(advised) - len(shown)
        if hidden:
            note = f"… and {hidden} more report(s) with problems; index this list to see them"
            text.append(note)
            html_ += f'<p class="muted">{esc(note)}</p>'
        return {"text/plain": "\n".join(text), "text/html": wrap(html_)}


def findings_html(findings) -> str:
    rows = "".join(
        f"<tr><td>{badge('invalid' if f.severity == 'block' else 'warnings')}</td><td><code>{esc(f.rule)}</code></td>"
        f"<td>{esc(f.path)}:{f.line}</td><td>{esc(f.message)}</td></tr>"
        for f in findings
    )
    return f"<table><thead><tr><th></th><th>rule</th><th>where</th><th>message</th></tr></thead>{rows}</table>"


def guard_bundle(report) -> dict:
    findings = list(report.findings)
    verdict = "blocked" if report.blocked else ("warnings" if findings else "no findings")
    text = [f"guard: {report.path}: {verdict}", *(f"  {f}" for f in findings)]
    html_ = f'<div class="card">guard <code>{esc(report.path)}</code>: <b>{esc(verdict)}</b></div>'
    if findings:
        html_ += findings_html(findings)
    return {"text/plain": "\n".join(text), "text/html": wrap(html_)}


def result_status(result) -> str:
    """One line: backend and isolation, exit code, duration, timed out / OOM / truncated."""
    line = result.status_line()
    return f"{line} · {result.isolation}" if getattr(result, "isolation", "") else line


# A run's stdout/stderr in the notebook: the HTML shows this many characters (start and end, marked), the
# plain-text form (stored next to the HTML in the .ipynb) far fewer; `result.stdout` keeps everything.
RUN_HTML_CAP = 50_000
RUN_PLAIN_CAP = 2_000
MARKDOWN_PREVIEW_CAP = 20_000


def run_text_cut(text: str, cap: int) -> str:
    if len(text) <= cap:
        return text
    head = cap * 2 // 3
    tail = cap - head
    return (text[:head] + f"\n[ipyskills: {len(text) - cap:,} characters not shown here; the full text is in "
            "the result object (.stdout / .stderr)]\n" + text[len(text) - tail:])


def saved_link(path: str) -> str:
    """A link JupyterLab opens in its own file browser (relative to the notebook's folder, which is the
    kernel's working directory); a file outside it is named, not linked."""
    import os

    try:
        rel = os.path.relpath(path)
    except ValueError:
        rel = None
    if rel is None or rel.startswith(".."):
        return f"<code>{esc(path)}</code>"
    from urllib.parse import quote

    return f'<a href="{esc(quote(rel.replace(os.sep, "/")))}" target="_blank"><code>{esc(rel)}</code></a>'


def artifact_html(artifact) -> str:
    name = esc(artifact.path)
    if artifact.data is None:
        return f"<li><code>{name}</code> ({artifact.size} bytes, over the return cap, not returned)</li>"
    mime = artifact.mime
    if artifact.path.lower().endswith((".md", ".markdown")):
        text = artifact.data.decode("utf-8", errors="replace")
        return (f"<li><code>{name}</code> ({artifact.size} bytes)"
                f"{details('preview', markdown_html(display_cut(text, MARKDOWN_PREVIEW_CAP)), open_=True)}</li>")
    if mime in _IMAGE_MIMES:
        return f"<li><code>{name}</code><br>{image_html(artifact.data, mime, artifact.path)}</li>"
    if mime in ("text/csv", "text/tab-separated-values"):
        text = artifact.data.decode("utf-8", errors="replace")
        return f"<li><code>{name}</code>{csv_html(text, artifact.path)}</li>"
    return f"<li><code>{name}</code> ({esc(mime)}, {artifact.size} bytes)</li>"


def result_bundle(result) -> dict:
    """A script run: status line, notice, stdout, stderr, guard findings, artifacts."""
    status = result_status(result)
    ok = result.ok
    colour = _STATUS_COLOUR["valid" if ok else "invalid"]
    title = f"{result.skill}/{result.script}" if result.skill else result.script
    # The outcome in bold, what isolated it below in plain grey: the long isolation line would drown it.
    isolation = getattr(result, "isolation", "")
    parts = [(f'<div class="card"><b>{esc(title)}</b> {esc(shlex.join(result.args))}'
             f'<div style="color:{colour};font-weight:600">{esc(result.status_line())}</div>'
             + (f'<div class="muted">{esc(isolation)}</div>' if isolation else ""))]
    text = [f"{title} {shlex.join(result.args)}".rstrip(), status]
    if result.notice:
        parts.append(f'<div style="color:{_STATUS_COLOUR["warnings"]}">{esc(result.notice)}</div>')
        text.append(f"notice: {result.notice}")
    parts.append("</div>")
    if result.findings:
        parts.append(details(f"guard findings ({len(result.findings)})", findings_html(result.findings), True))
        text += ["guard findings:", *(f"  {f}" for f in result.findings)]
    if getattr(result, "inputs", None):
        parts.append(f'<div class="muted">inputs in the workspace: {esc(", ".join(result.inputs))}</div>')
        text.append(f"inputs: {', '.join(result.inputs)}")
    if result.stdout:
        parts.append(details("stdout", f"<pre>{esc(run_text_cut(result.stdout, RUN_HTML_CAP))}</pre>", open_=True))
        text += ["--- stdout", run_text_cut(result.stdout, RUN_PLAIN_CAP).rstrip("\n")]
    if result.stderr:
        parts.append(details("stderr", f'<pre style="color:#cf222e">{esc(run_text_cut(result.stderr, RUN_HTML_CAP))}'
                             "</pre>", open_=True))
        text += ["--- stderr", run_text_cut(result.stderr, RUN_PLAIN_CAP).rstrip("\n")]
    if result.artifacts:
        items = "".join(artifact_html(a) for a in result.artifacts)
        parts.append(details(f"artifacts ({len(result.artifacts)})", f"<ul>{items}</ul>", open_=True))
        text += ["--- artifacts", *(f"  {a.path} ({a.mime}, {a.size} bytes)" for a in result.artifacts)]
    saved = getattr(result, "saved", None)
    if saved:
        items = "".join(f"<li><code>{esc(a)}</code> → {saved_link(p)}</li>" for a, p in saved)
        parts.append(details(f"saved ({len(saved)})", f"<ul>{items}</ul>", open_=True))
        text += ["--- saved", *(f"  {a} -> {p}" for a, p in saved)]
    for note in result.artifact_notes():
        parts.append(f'<div style="color:{_STATUS_COLOUR["warnings"]}">{esc(note)}</div>')
        text.append(note)
    return {"text/plain": "\n".join(text), "text/html": wrap("".join(parts))}


# --------------------------------------------------------------------------- dispatch

_BY_CLASS_NAME = {
    "SkillMeta": meta_bundle,
    "SkillContent": content_bundle,
    "SkillResource": resource_bundle,
    "ValidationReport": report_bundle,
    "GuardReport": guard_bundle,
    "ExecuteResult": result_bundle,
}


def bundle_for(obj) -> dict | None:
    """The mimebundle for any ipyskills object (None for anything else)."""
    if hasattr(obj, "mimebundle"):
        return obj.mimebundle()
    builder = _BY_CLASS_NAME.get(type(obj).__name__)
    return builder(obj) if builder else None


class Rich(Displayed):
    """Wraps a core object so it renders richly in any frontend, with or without `%load_ext ipyskills`.

    `display(Rich(result))`; the wrapped object stays available as `.value`.
    """

    def __init__(self, value, bundle: dict | None = None):
        self.value = value
        self._bundle = bundle

    def mimebundle(self) -> dict:
        if self._bundle is None:
            self._bundle = bundle_for(self.value) or {"text/plain": repr(self.value)}
        return self._bundle

    def __str__(self) -> str:
        return str(self.value)


# --------------------------------------------------------------------------- the catalog table


class SkillTable(Displayed):
    """The catalog as a table: name, description, source root, status.

    Shows the first `limit` rows (no 10,000-row HTML); `filter(text)` narrows it, `page(n)` moves on.
    Iterating gives the `SkillMeta` objects.
    """

    def __init__(self, skills, *, shadowed=(), skipped=(), limit: int = TABLE_ROWS, query: str = "",
                 offset: int = 0):
        self.skills = list(skills)
        self.shadowed = list(shadowed or [])
        self.skipped = list(skipped or [])
        self.limit = max(1, int(limit))
        self.query = query
        self.offset = max(0, int(offset))

    def filter(self, text: str) -> SkillTable:
        """Skills whose name, description, status or root contains `text` (case-insensitive)."""
        needle = text.lower()
        kept = [s for s in self.skills
                if needle in f"{s.name}\n{s.description}\n{s.status}\n{s.root}".lower()]
        return SkillTable(kept, shadowed=self.shadowed, skipped=self.skipped, limit=self.limit, query=text)

    def page(self, number: int) -> SkillTable:
        """Page `number` (from 1) of `limit` rows."""
        return SkillTable(self.skills, shadowed=self.shadowed, skipped=self.skipped, limit=self.limit,
                          query=self.query, offset=(max(1, number) - 1) * self.limit)

    def __len__(self) -> int:
        return len(self.skills)

    def __iter__(self):
        return iter(self.skills)

    def __getitem__(self, index):
        return self.skills[index]

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.skills]

    def _shown(self):
        return self.skills[self.offset : self.offset + self.limit]

    def _note(self) -> str:
        total, shown = len(self.skills), self._shown()
        if not shown and total:
            return f"no rows on this page ({total} skills in all)"
        if len(shown) == total:
            return ""
        last = self.offset + len(shown)
        return (f"showing {self.offset + 1}–{last} of {total}; narrow with %skills --filter TEXT "
                f"or table.filter('text'), move on with table.page(n)")

    def mimebundle(self) -> dict:
        shown = self._shown()
        lead = f"{len(self.skills)} skill(s)" + (f" matching {self.query!r}" if self.query else "")
        if not self.skills:
            hint = "no skill matches" if self.query else (
                "no skills found; add a folder with %skills add DIR or write one with %%skill NAME")
            return {"text/plain": f"{lead}: {hint}", "text/html": wrap(f"<p>{esc(lead)}: {esc(hint)}</p>")}
        width = min(32, max((len(s.name) for s in shown), default=0))  # a page past the end has no rows
        text = [lead]
        rows = []
        for s in shown:
            text.append(f"{_STATUS_MARK.get(s.status, '?')} {s.name:<{width}}  {s.status:<8}  "
                        f"{shorten(s.description, 64)}")
            rows.append(f"<tr><td><b>{esc(s.name)}</b></td><td>{esc(shorten(s.description, 300))}</td>"
                        f'<td><code title="{esc(s.path)}">{esc(s.root)}</code></td><td>{badge(s.status)}</td></tr>')
        html_ = (f"<p>{esc(lead)}</p><table><thead><tr><th>name</th><th>description</th><th>root</th>"
                 f"<th>status</th></tr></thead><tbody>{''.join(rows)}</tbody></table>")
        note = self._note()
        if note:
            text.append(note)
            html_ += f'<p class="muted">{esc(note)}</p>'
        for label, items in (("shadowed by an earlier root", self.shadowed), ("skipped", self.skipped)):
            if items:
                lines = [_note_line(i) for i in items[:NOTE_ROWS]]  # thousands of skipped folders stay one note
                if len(items) > NOTE_ROWS:
                    lines.append(f"… and {len(items) - NOTE_ROWS} more")
                text.append(f"{len(items)} {label}:")
                text += [f"  {line}" for line in lines]
                html_ += details(f"{len(items)} {label}", pre("\n".join(lines)))
        return {"text/plain": "\n".join(text), "text/html": wrap(html_)}


def _note_line(item) -> str:
    """One line for a shadowed (winner, loser) pair or a skipped (folder, problems) pair."""
    first, second = item
    if hasattr(second, "path"):  # (winner SkillMeta, loser SkillMeta)
        return f"{second.name}: {second.path} (the one used: {first.path})"
    return f"{first}: {'; '.join(str(p) for p in second) or 'not loaded'}"


class ImageResource(Displayed):
    """An image bundled with a skill, for display (agents never receive images as text)."""

    def __init__(self, skill: str, path: str, data: bytes, mime: str):
        self.skill, self.path, self.data, self.mime = skill, path, data, mime

    def mimebundle(self) -> dict:
        bundle = resource_bundle(self, data=self.data, mime=self.mime)
        if self.mime in ("image/png", "image/jpeg", "image/gif") and len(self.data) <= INLINE_IMAGE_CAP:
            bundle[self.mime] = base64.b64encode(self.data).decode("ascii")
        return bundle


class AgentText(str):
    """Exact agent text (a `str`), shown verbatim: `%skills prompt`, `%skill_load --raw`."""

    def _repr_pretty_(self, p, cycle):
        p.text(str(self))

    def _repr_mimebundle_(self, include=None, exclude=None):
        return {"text/plain": str(self)}


# --------------------------------------------------------------------------- agent prototyping


def _agent_scope(names, allow) -> str:
    """One line: which skills the agent sees, and whether an allow-list narrowed them."""
    seen = ", ".join(names) if names else "none"
    return f"{len(names)} skill(s) visible to the agent: {seen}" + (
        f" (allow-list: {', '.join(sorted(allow))})" if allow is not None else "")


class SystemPrompt(Displayed, AgentText):
    """The system-prompt section an agent gets (`%skills prompt --format`); `str()` is the exact text.

    `format` is "xml" or "markdown"; `names` the visible skills; `allow` the allow-list in force (None = all).
    """

    def __new__(cls, text: str, format: str, names=(), allow=None):
        self = super().__new__(cls, text)
        self.format, self.names, self.allow = format, list(names), allow
        return self

    def mimebundle(self) -> dict:
        scope = _agent_scope(self.names, self.allow)
        if not self:
            note = f"empty system prompt: {scope}, so the agent is told nothing about skills"
            return {"text/plain": note, "text/html": wrap(f'<p class="muted">{esc(note)}</p>')}
        head = f"system prompt ({self.format}, {len(self)} characters) · {scope}"
        return {"text/plain": str(self),
                "text/html": wrap(f'<div class="card">{esc(head)}</div>{pre(str(self))}')}


class ToolSchemas(Displayed, list):
    """Tool definitions (`%skills tools`): a list of dicts, ready to pass as `tools=` to a chat client.

    Shown as pretty JSON, one collapsible block a tool, with the whole list as raw JSON to copy.
    """

    def __init__(self, schemas, format: str, names=(), allow=None):
        super().__init__(schemas)
        self.format, self.names, self.allow = format, list(names), allow

    @property
    def json(self) -> str:
        """The list as indented JSON text."""
        return json.dumps(list(self), indent=2, ensure_ascii=False)

    @staticmethod
    def _summary(schema: dict) -> str:
        spec = schema.get("function", schema)  # openai nests the definition; anthropic does not
        return f"{spec.get('name', '?')}: {shorten(spec.get('description', ''), 100)}"

    def mimebundle(self) -> dict:
        scope = _agent_scope(self.names, self.allow)
        if not self:
            note = f"no tools: {scope}, so the agent gets no skill tools at all"
            return {"text/plain": f"[]  # {note}", "text/html": wrap(f'<p class="muted">{esc(note)}</p>')}
        head = f"{len(self)} tool(s) in {self.format} format · {scope}"
        blocks = "".join(
            details(self._summary(s), highlight_html(json.dumps(s, indent=2, ensure_ascii=False), "x.json"))
            for s in self)
        raw = details("raw JSON (the whole list, to copy into tools=...)", pre(self.json))
        return {"text/plain": self.json, "text/html": wrap(f'<div class="card">{esc(head)}</div>{blocks}{raw}')}


class ToolCallView(Displayed):
    """One replayed tool call (`%%skill_call`): the arguments as sent and the exact text the model gets.

    `result` is the core `ToolResult` (text, is_error, error kind); `str()` is its text, word for word.
    """

    def __init__(self, tool: str, arguments: str, result):
        self.tool, self.arguments, self.result = tool, arguments, result

    def status(self) -> str:
        r = self.result
        verdict = f"error ({r.error})" if r.is_error else "ok"
        return f"{r.tool} -> {verdict}, {len(r.text)} characters"

    def mimebundle(self) -> dict:
        r = self.result
        colour = _STATUS_COLOUR["invalid" if r.is_error else "valid"]
        args = " ".join(self.arguments.split()) or "(no arguments)"
        card = (f'<div class="card"><b>{esc(r.tool)}</b> <code>{esc(shorten(args, 300))}</code>'
                f'<div style="color:{colour};font-weight:600">{esc(self.status())}</div></div>')
        body = details("tool result (exactly what the model receives)", pre(r.text), open_=True)
        return {"text/plain": f"[{self.status()}]\n{r.text}", "text/html": wrap(card + body)}

    def __str__(self) -> str:
        return self.result.text


class AgentSettings(Displayed):
    """The notebook session's agent filter (`%skills agent`) and what it leaves visible.

    `view` is a new `AgentView` with the filter applied, for one conversation: pass it to `run_agent` so a
    loop in the notebook sees the same catalog, tools and dispatcher as `%skills tools`, `%skills prompt
    --format` and `%%skill_call` (run `%skills agent` again, or `view.reset()`, for a fresh conversation).
    `hidden` maps each hidden skill to the reason; `missing` lists filter names no skill answers to (a typo
    in ipython_config.py, or a skill since removed), which have no effect.
    """

    def __init__(self, view, allow, disabled, enabled, hidden: dict, missing=()):
        self.view = view
        self.allow = None if allow is None else list(allow)
        self.disabled, self.enabled = list(disabled), list(enabled)
        self.hidden = dict(hidden)
        self.missing = list(missing)

    @property
    def visible(self) -> list[str]:
        return self.view.names()

    def lines(self) -> list[str]:
        out = [f"allow-list: {', '.join(self.allow) if self.allow is not None else 'all skills'}",
               f"disabled:   {', '.join(self.disabled) or 'none'}",
               f"enabled:    {', '.join(self.enabled) or 'none'}",
               _agent_scope(self.visible, None)]
        if self.missing:
            out.append(f"no skill named (no effect): {', '.join(self.missing)}")
        if self.hidden:
            out.append(f"{len(self.hidden)} hidden:")
            out += [f"  {name}: {why}" for name, why in self.hidden.items()]
        return out

    def mimebundle(self) -> dict:
        lines = self.lines()
        rows = "".join(f"<tr><td><b>{esc(n)}</b></td><td>{esc(why)}</td></tr>" for n, why in self.hidden.items())
        hidden = (f"<table><thead><tr><th>hidden skill</th><th>why</th></tr></thead>{rows}</table>"
                  if rows else "")
        return {"text/plain": "\n".join(lines),
                "text/html": wrap(f'<div class="card">{"<br>".join(esc(x) for x in lines[:4 + bool(self.missing)])}</div>{hidden}')}
