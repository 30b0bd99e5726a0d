"""Rich views for the prompt lab: a conversation transcript, a trigger-eval report, a budget table.

They only render agent-layer objects (`agent.loop.Transcript`, `agent.prompt_lab.trigger_eval.TriggerReport`,
`agent.prompt_lab.budget.BudgetReport`). Model text and tool results are untrusted: every piece is escaped and
shown in <pre>, never as Markdown or HTML.
"""

from __future__ import annotations

from ..agent.loop import EMPTY_REPLY
from .display import Displayed
from .primitives import details, esc, pre, shorten, wrap

_OK, _BAD, _MUTED = "#1a7f37", "#cf222e", "#6e7781"
# JupyterLab right-aligns table cells (`:not(.jp-RenderedMarkdown).jp-RenderedHTMLCommon td`) and shrinks SVGs
# to their cell (`max-width: 100%`), which cut the percentage off the bars; these rules are more specific.
_LAB_CSS = ("<style>.ipyskills .lab table td,.ipyskills .lab table th{text-align:left}"
            ".ipyskills .lab table .nowrap{white-space:nowrap}.ipyskills .lab svg{max-width:none}"
            ".ipyskills .lab table .desc{min-width:16em;max-width:40em}</style>")


def _lab_wrap(inner: str) -> str:
    return wrap(f'{_LAB_CSS}<div class="lab">{inner}</div>')


def _is_answer(transcript, step) -> bool:
    """The last turn said the final answer: it is shown once, in its own card, not twice."""
    return (bool(transcript.final) and not step.tool_calls and step is transcript.steps[-1]
            and step.text.strip() == transcript.final.strip())


def _args_text(arguments) -> str:
    from ..agent.loop import _compact  # the transcript shows arguments exactly as the loop records them

    return _compact(arguments)


def _secs(value: float) -> str:
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


class TranscriptView(Displayed):
    """A `Transcript` as it happens: system prompt (collapsed), each model turn with its usage and time,
    every tool call with its arguments and the exact text returned, the skills activated, the answer."""

    def __init__(self, transcript, prompt: str = ""):
        self.transcript = transcript
        self.prompt = prompt

    def header(self) -> str:
        t = self.transcript
        state = "running…" if t.running else (f"stopped: {t.stop_reason}" if t.stop_reason else "")
        return (f"{t.model} ({t.style}) · {t.turns} turn(s) · {len(t.tool_calls)} tool call(s) · "
                f"{t.usage}" + "".join(f" · {part}" for part in (_secs(t.seconds) if not t.running else "", state)
                                   if part))

    def activated(self) -> str:
        acts = self.transcript.activated
        return ", ".join(f"{name} (level {level})" for name, level in acts) or "none"

    def text(self) -> str:
        t = self.transcript
        lines = [self.header(), f"skills activated: {self.activated()}"]
        for step in t.steps:
            lines.append(f"-- turn {step.turn}: {step.usage}, {_secs(step.seconds)}, finish: "
                         f"{step.finish_reason or '?'}")
            if step.text and not _is_answer(t, step):
                lines.append(f"   model: {step.text}")
            elif not step.text.strip() and not step.tool_calls and not (t.empty_reply and step is t.steps[-1]):
                lines.append(f"   model: {EMPTY_REPLY}")
            for call in step.tool_calls:
                flag = f" [error: {call.result.error}]" if call.result.is_error else ""
                lines.append(f"   {call.name}({_args_text(call.arguments)}){flag} · {_secs(call.seconds)}")
                lines += ["     | " + line for line in call.result.text.splitlines()[:12]]
                more = len(call.result.text.splitlines()) - 12
                if more > 0:
                    lines.append(f"     | … {more} more line(s) (full text in .tool_calls[i].result.text)")
        if t.final:
            lines.append(f"final answer: {t.final}")
        elif t.empty_reply:
            lines.append(f"final answer: {EMPTY_REPLY}")
        lines += [f"warning: {w}" for w in t.warnings]
        if t.error:
            lines.append(f"error: {t.error}")
        return "\n".join(lines)

    def mimebundle(self) -> dict:
        t = self.transcript
        parts = [(f'<div class="card"><b>{esc(self.header())}</b><br>'
                 f'skills activated: {esc(self.activated())}</div>'),
                 details(f"system prompt ({len(t.system):,} characters)", pre(t.system))]
        if self.prompt:
            parts.append(f'<div class="card"><b>user</b><pre>{esc(self.prompt)}</pre></div>')
        for step in t.steps:
            head = (f"turn {step.turn} · {esc(str(step.usage))} · {esc(_secs(step.seconds))} · finish: "
                    f"{esc(step.finish_reason or '?')}")
            body = f"<pre>{esc(step.text)}</pre>" if step.text else ""
            if not step.text.strip() and not step.tool_calls:
                body = f'<div style="color:{_BAD}">{esc(EMPTY_REPLY)}</div>'
            elif _is_answer(t, step):
                body = '<div class="muted">the final answer, below</div>'
            for call in step.tool_calls:
                colour = _BAD if call.result.is_error else _OK
                verdict = f"error ({call.result.error})" if call.result.is_error else "ok"
                level = f" · level {call.level}" if call.level else ""
                summary = (f'<b>{esc(call.name)}</b> <code>{esc(shorten(_args_text(call.arguments), 200))}</code>'
                           f' <span style="color:{colour}">{esc(verdict)}</span>{esc(level)} · '
                           f'{esc(_secs(call.seconds))} · {len(call.result.text):,} characters returned')
                body += f"<details><summary>{summary}</summary>{pre(call.result.text)}</details>"
            parts.append(f'<div class="card" data-turn="{step.turn}"><b>{head}</b>{body}</div>')
        if t.running:
            parts.append(f'<div class="muted">waiting for turn {len(t.steps) + 1}…</div>')
        if t.final:
            parts.append(f'<div class="card"><b>final answer</b><pre>{esc(t.final)}</pre></div>')
        for warning in t.warnings:
            parts.append(f'<div class="card" style="color:{_BAD}"><b>warning</b>: {esc(warning)}</div>')
        if t.error:
            parts.append(f'<div class="card" style="color:{_BAD}"><b>error</b>: {esc(t.error)}</div>')
        return {"text/plain": self.text(), "text/html": _lab_wrap("".join(parts))}

    def __str__(self) -> str:
        return self.text()


def _bar(value: float | None, colour: str = "#0969da", width: int = 120) -> str:
    """A small inline SVG bar for a share in [0, 1]."""
    if value is None:
        return '<span class="muted">-</span>'
    w = max(0, min(width, round(value * width)))
    return (f'<svg width="{width + 44}" height="12" role="img" aria-label="{value:.0%}">'
            f'<rect width="{width}" height="12" fill="#eaeef2"/><rect width="{w}" height="12" fill="{colour}"/>'
            f'<text x="{width + 4}" y="10" font-size="10">{value:.0%}</text></svg>')


def _pct(value) -> str:
    return "-" if value is None else f"{value:.0%}"


def _tok(value) -> str:
    return "-" if value is None else f"{value:,}"


class TriggerReportView(Displayed):
    """A `TriggerReport`: variants side by side (best first) with bars, then each query's trigger rate."""

    def __init__(self, report):
        self.report = report

    def mimebundle(self) -> dict:
        r = self.report
        ranked = r.ranked()
        failed = f' · <span style="color:{_BAD}">{r.failed} failed</span>' if r.failed else ""
        calls = f" · {r.with_tool_calls} with a tool call" if r.answered else ""
        head = (f"trigger eval of <b>{esc(r.skill)}</b> with {esc(r.model)} · {r.done}/{r.planned} runs "
                f"({r.runs} per query){failed}{calls} · {esc(_secs(r.seconds))}")
        if r.interrupted:
            head += f' · <span style="color:{_BAD}">interrupted: figures cover the finished runs</span>'
        if r.options:
            head += f'<br><span class="muted">request options: {esc(r.sent())}</span>'
        if r.error:
            head += f'<br><span style="color:{_BAD}">stopped by: {esc(r.error)}</span>'
        for line in r.error_lines():
            head += f'<br><span style="color:{_BAD}">errors: {esc(line)}</span>'
        for line in r.warnings:
            head += f'<br><span style="color:{_BAD}">warning: {esc(line)}</span>'
        rows = "".join(
            f"<tr><td class=\"nowrap\"><b>{esc(v.label)}</b>{' ★' if i == 0 and len(ranked) > 1 else ''}</td>"
            f"<td class=\"nowrap\">{_bar(v.accuracy)}</td><td>{_pct(v.precision)}</td><td>{_pct(v.recall)}</td>"
            f"<td>{v.passed}/{len(v.queries)}</td><td>{_tok(v.input_tokens)} / {_tok(v.output_tokens)}</td>"
            f"<td>{v.errors}</td><td class=\"desc\">{esc(shorten(v.description, 160))}</td></tr>"
            for i, v in enumerate(ranked))
        summary = ("<table><thead><tr><th>variant</th><th>accuracy</th><th>precision</th><th>recall</th>"
                   "<th>queries passed</th><th>tokens in / out</th><th>errors</th><th>description</th></tr>"
                   f"</thead><tbody>{rows}</tbody></table>")
        qhead = "".join(f"<th>{esc(v.label)}</th>" for v in ranked)
        qrows = ""
        for i, q in enumerate(ranked[0].queries if ranked else []):
            cells = ""
            for v in ranked:
                res = v.queries[i]
                colour = _MUTED if res.passed is None else (_OK if res.passed else _BAD)
                others = (f' <span class="muted">(loaded {esc(", ".join(res.other_skills))})</span>'
                          if res.other_skills else "")
                cells += (f'<td style="color:{colour}"><span class="nowrap">{_bar(res.rate, colour, 60)} '
                          f"{res.triggered}/{res.runs}</span>{others}</td>")
            want = "yes" if q.should_trigger else "no"
            qrows += f"<tr><td>{esc(shorten(q.text, 120))}</td><td>{want}</td>{cells}</tr>"
        queries = (f"<table><thead><tr><th>query</th><th>should trigger</th>{qhead}</tr></thead>"
                   f"<tbody>{qrows}</tbody></table>")
        return {"text/plain": str(r),
                "text/html": _lab_wrap(f'<div class="card">{head}</div>{summary}'
                                       f'{details("per query: trigger rate over the runs", queries, open_=True)}')}

    def __str__(self) -> str:
        return str(self.report)


class BudgetView(Displayed):
    """A `BudgetReport` as a table, over-guidance figures in red."""

    def __init__(self, report):
        self.report = report

    def mimebundle(self) -> dict:
        from ..agent.prompt_lab.budget import INSTRUCTION_TOKENS, METADATA_TOKENS

        r = self.report
        rows = ""
        for s in r.skills:
            l1 = _OK if s.level1_tokens <= METADATA_TOKENS * 1.5 else _BAD
            l2 = _OK if s.level2_tokens < INSTRUCTION_TOKENS else _BAD
            files = "<br>".join(
                f"{esc(f.path)} · {f.bytes:,} bytes · " + (f"{f.tokens:,} tokens" if f.tokens is not None
                                                             else "binary") for f in s.files) or "-"
            rows += (f"<tr><td><b>{esc(s.name)}</b></td><td>{s.level1_chars:,}</td>"
                     f'<td style="color:{l1}">{s.level1_tokens:,}</td><td>{s.level2_chars:,}</td>'
                     f'<td style="color:{l2}">{s.level2_tokens:,}</td><td>{files}</td>'
                     f"<td>{esc('; '.join(s.warnings + ([s.error] if s.error else [])))}</td></tr>")
        html = (f'<div class="card">tokens: {esc(r.method)}<br>guidance (Agent Skills specification): '
                f"level 1 about {METADATA_TOKENS} tokens, level 2 under {INSTRUCTION_TOKENS:,} tokens · "
                f"catalog total {r.level1_total:,} tokens in every conversation</div>"
                "<table><thead><tr><th>skill</th><th>L1 chars</th><th>L1 tokens</th><th>L2 chars</th>"
                "<th>L2 tokens</th><th>largest level-3 files</th><th>notes</th></tr></thead>"
                f"<tbody>{rows}</tbody></table>")
        return {"text/plain": str(r), "text/html": _lab_wrap(html)}

    def __str__(self) -> str:
        return str(self.report)


class EvalProgress(Displayed):
    """A one-line progress display for a running eval."""

    def __init__(self, skill: str, total: int = 0):
        self.skill, self.total, self.done, self.triggered, self.errors = skill, total, 0, 0, 0
        self.finished = ""

    def update(self, done: int, total: int, outcome) -> None:
        self.done, self.total = done, total
        if outcome is not None:
            self.triggered += bool(outcome.triggered)
            self.errors += bool(outcome.error)

    def line(self) -> str:
        if self.finished:
            return self.finished
        return (f"eval of {self.skill}: {self.done}/{self.total} runs done, {self.triggered} triggered, "
                f"{self.errors} error(s) · Ctrl-C (interrupt the kernel) stops and keeps what finished")

    def mimebundle(self) -> dict:
        share = self.done / self.total if self.total else 0.0
        return {"text/plain": self.line(),
                "text/html": _lab_wrap(f'<div class="muted">{_bar(share) if not self.finished else ""} '
                                  f"{esc(self.line())}</div>")}
