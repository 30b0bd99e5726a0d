"""`%skills deps NAME [--install]`: a skill's requirements as a table, and the live progress of provisioning."""

from __future__ import annotations

from ..core.requirements_report import install_summary, requirements_text
from .display import Displayed
from .primitives import esc, wrap

PROGRESS_LINES = 8  # the newest stage lines shown while dependencies are being installed


class RequirementsView(Displayed):
    """SkillRequirements (`.requirements`) and, after --install, what was provisioned (`.installed`)."""

    def __init__(self, requirements, mode: str, installed=None, install_asked: bool = False):
        self.requirements, self.mode = requirements, mode
        self.installed, self.install_asked = installed, install_asked

    def text(self) -> str:
        text = requirements_text(self.requirements, self.mode)
        return text + ("\n" + install_summary(self.installed) if self.install_asked else "")

    def mimebundle(self) -> dict:
        reqs = self.requirements
        rows = []
        for group, items in (("install", reqs.python), ("in the image", reqs.provided)):
            for req in items:
                chosen = group == "install" and (self.mode == "auto" or req.declared) and self.mode != "off"
                state = "install" if chosen else ("in the image" if group != "install" else f"not with {self.mode}")
                rows.append(f"<tr><td><code>{esc(req.spec)}</code></td><td>{esc(req.source)}</td>"
                            f"<td><code>{esc(req.file)}:{req.line}</code></td><td>{esc(req.detail)}</td>"
                            f"<td>{esc(state)}</td></tr>")
        table = ("<table><thead><tr><th>distribution</th><th>source</th><th>where</th><th>why</th>"
                 f"<th>status</th></tr></thead><tbody>{''.join(rows)}</tbody></table>" if rows
                 else "<p>No Python requirements found.</p>")
        extra = []
        if reqs.skipped:
            items = "".join(f"<li><code>{esc(t)}</code> ({esc(f)}:{n}): {esc(why)}</li>"
                            for t, f, n, why in reqs.skipped)
            extra.append(f"<details><summary>skipped ({len(reqs.skipped)})</summary><ul>{items}</ul></details>")
        if reqs.programs:
            calls = ", ".join(f"<code>{esc(p.program)}</code> ({esc(p.file)}:{p.line}"
                              f"{esc(', via ' + p.via) if p.via else ''})" for p in reqs.programs)
            extra.append(f"<p>programs: {calls}</p>")
        if reqs.profile:
            extra.append(f"<p>image profile: <b>{esc(reqs.profile)}</b> (build it with <code>ipyskills sandbox "
                         f"build --profile {esc(reqs.profile)} --offline</code>)</p>")
        if self.install_asked:
            extra.append(f"<p>{esc(install_summary(self.installed))}</p>")
        head = f"<h4>{esc(reqs.skill)}: requirements (deps={esc(self.mode)})</h4>"
        return {"text/plain": self.text(), "text/html": wrap(head + table + "".join(extra))}


class ProgressLog:
    """A display that shows the newest stage lines of slow preparation work, updated in place."""

    def __init__(self):
        self.lines: list[str] = []
        self.handle = None

    def __call__(self, line: str) -> None:
        from IPython.display import display

        self.lines.append(line)
        shown = self.lines[-PROGRESS_LINES:]
        bundle = {"text/plain": "\n".join(shown),
                  "text/html": wrap("<pre>" + esc("\n".join(shown)) + "</pre>")}
        if self.handle is None:
            self.handle = display(bundle, raw=True, display_id=True)
        else:
            self.handle.update(bundle, raw=True)
