"""The skill browser (`%skills browse`, `ipyskills.browse()`), built from core ipywidgets only (no JS build).

Layout: a filter box and one `Select` listing the skills with their status (one widget for the whole list;
at most `MAX_OPTIONS` entries, so 10,000 skills do not send 10,000 labels to the page on every keystroke:
the count says how many more match, and typing narrows them); tabs for the selected skill: rendered instructions with
frontmatter and validation, its files (choosing one shows it), a run panel, and the exact level-1/2/3 agent
text. All HTML comes from `display.py`, which escapes skill text.
"""

from __future__ import annotations

import shlex

import ipywidgets as w

from ..errors import SkillError
from . import display

TABS = ("Instructions", "Files", "Run", "Agent text")
MAX_OPTIONS = 1000  # entries in the list at once; the filter reaches the rest
LEVELS = ("1 catalog", "2 activation", "3 file")
PANE_HEIGHT = "36em"


class SkillBrowser(w.VBox):
    """Browse, read and run the skills of `registry`. `magics` (optional) supplies run defaults."""

    def __init__(self, registry, magics=None, rows: int = 14):
        self.registry = registry
        self.magics = magics
        self.max_rows = rows
        self._updating = False
        # width "auto" stretches to the cell; "100%" plus the widgets' margins overflows it by a few pixels.
        self.filter = w.Text(placeholder="filter by name, description, status or root", continuous_update=True,
                             layout=w.Layout(width="auto"))
        self.count = w.HTML()
        self.skills = w.Select(options=[], rows=rows, layout=w.Layout(width="auto"))
        # Long instructions and files scroll inside their tab instead of making the output pages tall.
        self.details = w.HTML(layout=w.Layout(max_height=PANE_HEIGHT, overflow="auto"))
        self.files = w.Select(options=[], rows=10, layout=w.Layout(width="35%"))
        self.file_view = w.HTML(layout=w.Layout(width="65%", max_height=PANE_HEIGHT, overflow="auto"))
        self.script = w.Dropdown(options=[], description="script")
        self.args = w.Text(description="args", placeholder="shell-style, e.g. --n 3 'two words'")
        self.stdin = w.Textarea(description="stdin", layout=w.Layout(width="100%", height="6em"))
        self.run_button = w.Button(description="Run", button_style="primary", icon="play")
        self.output = w.Output(layout=w.Layout(border="1px solid #d0d7de", min_height="2em"))
        self.level = w.ToggleButtons(options=LEVELS, value=LEVELS[1])
        self.agent_text = w.HTML(layout=w.Layout(max_height=PANE_HEIGHT, overflow="auto"))
        self.tabs = w.Tab(children=[
            self.details,
            w.HBox([self.files, self.file_view]),
            w.VBox([w.HBox([self.script, self.args]), self.stdin, self.run_button, self.output]),
            w.VBox([self.level, self.agent_text]),
        ])
        for i, title in enumerate(TABS):
            self.tabs.set_title(i, title)
        super().__init__([self.filter, self.count, self.skills, self.tabs])

        self.filter.observe(self._on_filter, names="value")
        self.skills.observe(self._on_skill, names="value")
        self.files.observe(self._on_file, names="value")
        self.level.observe(self._on_level, names="value")
        self.run_button.on_click(self._on_run)
        self.refresh()

    # ------------------------------------------------------------------ list and filter

    def refresh(self) -> None:
        """Re-read the registry's skill list (after adding or editing skills)."""
        self._all = self.registry.list()
        self.skills.rows = max(3, min(self.max_rows, len(self._all)))  # no tall empty list for a few skills
        self._show(self.filter.value)

    def _show(self, text: str) -> None:
        table = display.SkillTable(self._all)
        shown = table.filter(text).skills if text else table.skills
        previous = self.skills.value
        listed = shown[:MAX_OPTIONS]
        self._updating = True
        try:
            self.skills.options = [(f"{display.status_mark(m.status)} {m.name}", m.name) for m in listed]
            names = {m.name for m in listed}
            self.skills.value = previous if previous in names else (listed[0].name if listed else None)
        finally:
            self._updating = False
        count = f"{len(shown)} of {len(self._all)} skill(s)"
        if len(listed) < len(shown):
            count += f"; the first {len(listed)} are listed, type in the filter to narrow"
        self.count.value = f"<small>{display.esc(count)}</small>"
        self._select(self.skills.value)

    def _on_filter(self, change) -> None:
        self._show(change["new"])

    def _on_skill(self, change) -> None:
        if not self._updating:
            self._select(change["new"])

    # ------------------------------------------------------------------ the selected skill

    def _select(self, name: str | None) -> None:
        self.output.outputs = ()
        if name is None:
            self.details.value = "<i>no skill selected</i>"
            self.files.options, self.script.options = [], []
            self.file_view.value = self.agent_text.value = ""
            return
        try:
            meta = self.registry.get(name)
            content = self.registry.load(name)
        except SkillError as exc:
            self.details.value = display.wrap(f"<pre>{display.esc(exc)}</pre>")
            self.files.options, self.script.options = [], []
            return
        self._meta, self._content = meta, content
        self.details.value = display.wrap(display.meta_html(meta) + display.markdown_html(content.body))
        self.files.options = list(content.resources)
        scripts = [f for f in content.resources if f.startswith("scripts/")]
        self.script.options = scripts or list(content.resources)
        self.file_view.value = "<i>choose a file</i>" if content.resources else "<i>no bundled files</i>"
        self._on_level(None)

    def _on_file(self, change) -> None:
        path = change["new"]
        if not path:
            return
        self.file_view.value = self._file_html(path)
        if self.level.value == LEVELS[2]:
            self._on_level(None)

    def _file_html(self, path: str) -> str:
        locator = f"{self._meta.name}/{path}"
        try:
            data, mime = self.registry.read_bytes(locator)
            if mime.startswith("image/") and mime != "image/svg+xml":
                return display.wrap(display.image_html(data, mime, path))
            return display.resource_bundle(self.registry.load(locator))["text/html"]
        except SkillError as exc:
            return display.wrap(f"<pre>{display.esc(exc)}</pre>")

    def _on_level(self, change) -> None:
        if not hasattr(self, "_meta"):
            return
        level = self.level.value
        if level == LEVELS[0]:
            from ..core.prompt import catalog

            text = catalog([self._meta])
        elif level == LEVELS[1]:
            text = str(self._content)
        elif not self.files.value:
            text = "(choose a file in the Files tab)"
        else:
            try:
                text = str(self.registry.load(f"{self._meta.name}/{self.files.value}"))
            except SkillError as exc:
                text = f"(an agent would get this error: {exc})"
        self.agent_text.value = display.wrap(display.pre(text))

    # ------------------------------------------------------------------ running

    def _on_run(self, _button=None) -> None:
        self.output.outputs = ()
        if not self.skills.value or not self.script.value:
            self.output.append_stderr("choose a skill and a script first\n")
            return
        try:
            args = shlex.split(self.args.value)
        except ValueError as exc:
            self.output.append_stderr(f"args: {exc}; close the quote or escape it\n")
            return
        options = {}
        if self.magics is not None:
            options = {"backend": self.magics.sandbox_backend, "timeout": self.magics.timeout,
                       "memory": self.magics.memory, "network": self.magics.network, "guard": self.magics.guard}
        from ..errors import RunInterrupted
        from ..sandbox.interrupts import shield_repeated_interrupts

        self.run_button.disabled = True
        try:
            with shield_repeated_interrupts():  # as %%skill_run: only the first Ctrl-C counts
                result = self.registry.run(self.skills.value, self.script.value, args=args,
                                           stdin=self.stdin.value, **options)
        except SkillError as exc:
            self.output.append_stderr(f"{type(exc).__name__}: {exc}\n")
            return
        except RunInterrupted as stop:  # the output so far and one line, not a traceback in the log
            self.last_result = stop.result
            self.output.append_display_data(display.Rich(stop.result))
            self.output.append_stderr(stop.line() + "\n")
            return
        finally:
            self.run_button.disabled = False
        self.last_result = result
        self.output.append_display_data(display.Rich(result))

    # ------------------------------------------------------------------ static fallback

    def _repr_mimebundle_(self, **kwargs):
        data = super()._repr_mimebundle_(**kwargs) or {}
        if isinstance(data, tuple):
            data = data[0]
        # Static renderers (GitHub, nbviewer) show no live widget; they get the catalog table instead.
        data.setdefault("text/html", display.SkillTable(self._all).mimebundle()["text/html"])
        # A terminal shows text/plain: one line instead of the widget tree's repr.
        data["text/plain"] = f"SkillBrowser: {len(self._all)} skill(s); open it in Jupyter to use the widget"
        return data


def browse(registry=None) -> SkillBrowser:
    """The widget browser over `registry` (default: the process-wide `ipyskills.registry()`)."""
    if registry is None:
        from ..core.registry import shared_registry

        registry = shared_registry()
    return SkillBrowser(registry)
