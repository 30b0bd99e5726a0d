"""Trigger eval: does a skill's description make the model load the skill when it should, and only then?

Each query goes to the model as the first user message, with the system prompt (instructions plus the
full catalog) and the tools of the agent view, exactly as `run_agent`'s first turn sends them. Nothing is
dispatched: the eval reads the tool calls the model asks for. A query *triggers* the skill when the model
calls `read_skill` for it (its instructions or any file in it). Each query runs `runs` times, because
models are not deterministic; the trigger rate is the share of runs that triggered.

Description variants are tried without touching SKILL.md: the catalog is rendered with the variant in
place of the skill's description, the rest unchanged.

Precision, recall and accuracy count runs (each run is one prediction): a run of a should-trigger query
that triggers is a true positive, and so on. A query *passes* when most of its runs went the right way.
"""

from __future__ import annotations

import csv
import json
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from pathlib import Path

from ...errors import ConfigError, SkillError
from ..loop import ClientError, call_target, detect_style, model_reply, request_options
from ..tools import READ_SKILL, AgentView

DEFAULT_RUNS = 3
DEFAULT_MAX_TOKENS = 1024  # the eval reads the first reply's tool calls; a long answer is wasted time
DEFAULT_PARALLEL = 4
MAX_PARALLEL = 32
CURRENT = "current"  # the label of the description in SKILL.md

_TRUE = {"1", "true", "yes", "y", "t", "on"}
_FALSE = {"0", "false", "no", "n", "f", "off", ""}


@dataclass
class RunOutcome:
    """One query sent once under one description."""

    variant: int
    query: int
    run: int
    triggered: bool = False
    calls: list[str] = field(default_factory=list)  # e.g. ["read_skill(data-processor)"]
    input_tokens: int | None = None
    output_tokens: int | None = None
    seconds: float = 0.0
    error: str = ""
    empty: bool = False  # the reply had no text and no tool call


@dataclass
class QueryResult:
    text: str
    should_trigger: bool
    runs: int = 0  # runs that got an answer
    triggered: int = 0
    errors: int = 0
    input_tokens: int | None = None  # None: the API reported no usage
    output_tokens: int | None = None
    other_skills: dict = field(default_factory=dict)  # other skill -> runs that loaded it instead

    @property
    def rate(self) -> float | None:
        return self.triggered / self.runs if self.runs else None

    @property
    def passed(self) -> bool | None:
        if not self.runs:
            return None
        return (self.rate > 0.5) if self.should_trigger else (self.rate < 0.5)


@dataclass
class VariantResult:
    label: str
    description: str
    queries: list[QueryResult]
    first_error: str = ""  # the message of the first run that failed under this description

    def _counts(self) -> tuple[int, int, int, int]:
        tp = sum(q.triggered for q in self.queries if q.should_trigger)
        fn = sum(q.runs - q.triggered for q in self.queries if q.should_trigger)
        fp = sum(q.triggered for q in self.queries if not q.should_trigger)
        tn = sum(q.runs - q.triggered for q in self.queries if not q.should_trigger)
        return tp, fp, fn, tn

    @property
    def runs(self) -> int:
        return sum(q.runs for q in self.queries)

    @property
    def errors(self) -> int:
        return sum(q.errors for q in self.queries)

    @property
    def precision(self) -> float | None:
        tp, fp, _, _ = self._counts()
        return tp / (tp + fp) if tp + fp else None

    @property
    def recall(self) -> float | None:
        tp, _, fn, _ = self._counts()
        return tp / (tp + fn) if tp + fn else None

    @property
    def accuracy(self) -> float | None:
        tp, _, _, tn = self._counts()
        return (tp + tn) / self.runs if self.runs else None

    @property
    def passed(self) -> int:
        return sum(1 for q in self.queries if q.passed)

    @property
    def input_tokens(self) -> int | None:
        return _sum(q.input_tokens for q in self.queries)

    @property
    def output_tokens(self) -> int | None:
        return _sum(q.output_tokens for q in self.queries)

    def summary(self) -> dict:
        return {"variant": self.label, "accuracy": self.accuracy, "precision": self.precision,
                "recall": self.recall, "queries_passed": self.passed, "queries": len(self.queries),
                "runs": self.runs, "errors": self.errors, "input_tokens": self.input_tokens,
                "output_tokens": self.output_tokens, "description": self.description}


@dataclass
class TriggerReport:
    """The eval's result: one `VariantResult` per description, best first (see `ranked`)."""

    skill: str
    model: str
    runs: int
    variants: list[VariantResult]
    outcomes: list[RunOutcome] = field(default_factory=list)
    planned: int = 0  # runs the eval set out to make
    interrupted: bool = False  # stopped by Ctrl-C (or a fatal client error); the figures cover what finished
    error: str = ""  # the client error that stopped it, if any
    seconds: float = 0.0
    options: dict = field(default_factory=dict)  # the request options every call carried (max_tokens, ...)

    @property
    def done(self) -> int:
        return len(self.outcomes)

    @property
    def failed(self) -> int:
        """Runs that got no answer (a client error each: see each variant's `first_error`)."""
        return sum(1 for o in self.outcomes if o.error)

    @property
    def answered(self) -> int:
        return self.done - self.failed

    @property
    def with_tool_calls(self) -> int:
        """Runs in which the model called any tool (for any skill)."""
        return sum(1 for o in self.outcomes if o.calls and not o.error)

    @property
    def empty_replies(self) -> int:
        return sum(1 for o in self.outcomes if o.empty and not o.error)

    @property
    def warnings(self) -> list[str]:
        """What makes the figures suspect: no tool call at all, empty replies."""
        out = []
        if self.answered and not self.with_tool_calls:
            choice = self.options.get("tool_choice")
            hint = ("try tool_choice=auto" if choice != "auto" else
                    "tool_choice was auto; tool_choice=required (or a tool's name) checks the plumbing")
            out.append(f"the model never called a tool in {self.answered} answered run(s): does the server "
                       f"pass tools? {hint}")
        if self.empty_replies:
            out.append(f"{self.empty_replies} of {self.answered} answered run(s) were empty replies (no text, "
                       "no tool call)")
        return out

    def ranked(self) -> list[VariantResult]:
        """Variants best first: accuracy, then recall, then precision, then fewer tokens."""
        def key(v):
            return (-(v.accuracy or 0.0), -(v.recall or 0.0), -(v.precision or 0.0), v.input_tokens or 0)
        return sorted(self.variants, key=key)

    @property
    def best(self) -> VariantResult:
        return self.ranked()[0]

    def table(self) -> list[dict]:
        """One row per variant, best first (a DataFrame: `pandas.DataFrame(report.table())`)."""
        return [v.summary() for v in self.ranked()]

    def query_table(self) -> list[dict]:
        """One row per query, with its trigger rate under each variant (in ranked order)."""
        ranked = self.ranked()
        rows = []
        for i, q in enumerate(ranked[0].queries if ranked else []):
            row = {"query": q.text, "should_trigger": q.should_trigger}
            for v in ranked:
                row[v.label] = v.queries[i].rate
            rows.append(row)
        return rows

    def to_dataframe(self):
        """The per-variant table as a pandas DataFrame (pandas must be installed)."""
        import pandas

        return pandas.DataFrame(self.table())

    def headline(self) -> str:
        """'trigger eval of 'x' with m: 8/8 runs, 2 failed, 5 with a tool call, in 3.1 s'."""
        parts = [f"{self.done}/{self.planned} runs"]
        if self.failed:
            parts.append(f"{self.failed} failed")
        if self.answered:
            parts.append(f"{self.with_tool_calls} with a tool call")
        head = f"trigger eval of {self.skill} with {self.model}: {', '.join(parts)}, in {self.seconds:.1f} s"
        if self.interrupted:
            head += " (interrupted; figures cover the finished runs)"
        return head

    def sent(self) -> str:
        """The request options, as `max_tokens=1024, tool_choice=auto`."""
        return ", ".join(f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in self.options.items())

    def error_lines(self) -> list[str]:
        """One line per variant with failed runs: how many, and the first message (not cut)."""
        return [f"{v.label}: {v.errors} of {v.errors + v.runs} run(s) failed; first: {v.first_error}"
                for v in self.ranked() if v.errors]

    def __str__(self) -> str:
        lines = [self.headline()]
        if self.options:
            lines.append(f"request options: {self.sent()}")
        if self.error:
            lines.append(f"stopped by: {self.error}")
        lines += [f"errors: {line}" for line in self.error_lines()]
        lines += [f"warning: {line}" for line in self.warnings]
        lines.append(f"{'variant':<12} {'accuracy':>8} {'precision':>9} {'recall':>6} {'passed':>7} "
                     f"{'tokens in/out':>15} {'errors':>6}")
        for v in self.ranked():
            lines.append(f"{v.label:<12} {pct(v.accuracy):>8} {pct(v.precision):>9} {pct(v.recall):>6} "
                         f"{v.passed:>3}/{len(v.queries):<3} {_tokens(v.input_tokens):>8}/"
                         f"{_tokens(v.output_tokens):<6} {v.errors:>6}")
        for v in self.ranked():
            lines.append(f"\n{v.label}: {v.description}")
            for q in v.queries:
                mark = {True: "ok  ", False: "FAIL", None: "----"}[q.passed]
                want = "should" if q.should_trigger else "should not"
                lines.append(f"  {mark} {pct(q.rate):>5} ({q.triggered}/{q.runs}) {want:<10} {q.text}")
        return "\n".join(lines)


def _sum(values) -> int | None:
    values = [v for v in values if v is not None]
    return sum(values) if values else None


def _tokens(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


# ---------------------------------------------------------------------------------------------- inputs


def normalize_queries(queries) -> list[tuple[str, bool]]:
    """(text, should_trigger) pairs from pairs, dicts, a DataFrame, or a .csv / .json file path.

    Dicts and tables use the columns `query` (or `text`) and `should_trigger` (or `trigger`, `expected`).
    """
    if isinstance(queries, (str, Path)):
        queries = _read_file(Path(queries).expanduser())
    elif hasattr(queries, "to_dict") and hasattr(queries, "columns"):  # a pandas DataFrame
        queries = queries.to_dict("records")
    try:
        items = list(queries)
    except TypeError:
        raise ConfigError(f"queries must be a list of (text, should_trigger) pairs, a DataFrame or a CSV "
                          f"path; got {type(queries).__name__}") from None
    out = []
    for i, item in enumerate(items):
        if isinstance(item, dict):
            text = next((item[k] for k in ("query", "text", "prompt") if k in item), None)
            flag = next((item[k] for k in ("should_trigger", "trigger", "expected") if k in item), None)
        elif isinstance(item, (list, tuple)) and len(item) == 2:
            text, flag = item
        else:
            raise ConfigError(f"query {i + 1} must be a (text, should_trigger) pair or a dict with 'query' and "
                              f"'should_trigger'; got {item!r:.80}")
        if not isinstance(text, str) or not text.strip():
            raise ConfigError(f"query {i + 1} has no text")
        out.append((text, _flag(flag, i)))
    if not out:
        raise ConfigError("no queries given: pass a list of (text, should_trigger) pairs")
    return out


def _flag(value, i: int) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    try:  # numpy booleans and the like
        import numbers

        if isinstance(value, numbers.Number) or type(value).__name__ == "bool_":
            return bool(value)
    except (TypeError, ValueError):
        pass
    raise ConfigError(f"query {i + 1}: should_trigger must be true or false, got {value!r}")


def _read_file(path: Path) -> list:
    if not path.is_file():
        raise ConfigError(f"no queries file at {path}")
    text = path.read_text(encoding="utf-8")
    if path.suffix.lower() == ".json":
        try:
            return json.loads(text)
        except ValueError as exc:
            raise ConfigError(f"{path} is not valid JSON: {exc}") from None
    rows = list(csv.DictReader(text.splitlines()))
    if rows and not ({"query", "text", "prompt"} & set(rows[0])):
        raise ConfigError(f"{path}: the CSV needs a header with 'query' and 'should_trigger' columns")
    return rows


# ------------------------------------------------------------------------------------------------- eval


def triggered_by(calls, name: str) -> bool:
    """True when one of the (id, tool, arguments) calls is a read_skill of `name` or of a file in it."""
    return any(tool == READ_SKILL and call_target(tool, args)[0] == name for _, tool, args in calls)


def eval_trigger(skills, name: str, queries, *, client, model: str, runs: int = DEFAULT_RUNS,
                 descriptions: list[str] | None = None, parallel: int = DEFAULT_PARALLEL,
                 style: str | None = None, system: str = "", max_tokens: int = DEFAULT_MAX_TOKENS,
                 tool_choice=None, progress: Callable[[int, int, RunOutcome | None], None] | None = None,
                 **create_options) -> TriggerReport:
    """Run the trigger eval of skill `name` and return a `TriggerReport`.

    `skills`: a `SkillRegistry` (all its skills) or an `AgentView` (its filter: what the agent sees).
    `queries`: (text, should_trigger) pairs, dicts, a DataFrame or a CSV/JSON path. `descriptions`: extra
    description variants, each run against the same queries next to the one in SKILL.md (labelled
    "current"). `parallel`: model calls in flight at once. `progress(done, total, outcome)` is called in
    the caller's thread after each run. Request options as for `run_agent` (`max_tokens`, 1024 here, is
    always sent; `tool_choice` "auto" for OpenAI-style clients; `create_options` such as temperature go
    as they are); a bad one is a ConfigError before anything is sent. Ctrl-C stops the eval and returns
    what finished (`interrupted`); an error that retrying cannot fix (bad key, unknown model) stops it
    too, with `error` set; any other failure of a run (a server error, a streamed reply, an unreadable
    response) counts for that run, with the first message kept per variant (`first_error`).
    """
    if not isinstance(runs, int) or isinstance(runs, bool) or runs < 1:
        raise ConfigError(f"runs must be a whole number of at least 1, got {runs!r}")
    if not isinstance(parallel, int) or isinstance(parallel, bool) or not 1 <= parallel <= MAX_PARALLEL:
        raise ConfigError(f"parallel must be a whole number from 1 to {MAX_PARALLEL}, got {parallel!r}")
    if not model:
        raise ConfigError("model is required: the model name to send to the client, e.g. model='gpt-4o-mini'")
    view = skills if isinstance(skills, AgentView) else AgentView(skills)
    metas = view.skills()
    target = next((m for m in metas if m.name == name), None)
    if target is None:
        try:
            canonical = view.registry.get(name).name
        except SkillError:
            canonical = None
        target = next((m for m in metas if m.name == canonical), None)
        if target is None:
            why = "is hidden from the agent (allow-list or disabled)" if canonical else "does not exist"
            raise ConfigError(f"skill {name!r} {why}, so the model could never pick it; visible skills: "
                              f"{', '.join(m.name for m in metas) or 'none'}")
    name = target.name
    pairs = normalize_queries(queries)
    texts = [target.description]
    for text in descriptions or ():
        if not isinstance(text, str) or not text.strip():
            raise ConfigError("each description variant must be non-empty text")
        if text not in texts:
            texts.append(text)
    style = style or detect_style(client)
    tools = view.tool_schemas(style)
    options = dict(create_options, max_tokens=max_tokens, tool_choice=tool_choice)
    sent = request_options(style, tools, **options)  # a bad option fails before any request

    from ..system_prompt import system_prompt_for

    prompts = []
    for text in texts:
        shown = [replace(m, description=text) if m.name == name else m for m in metas]
        prompts.append("\n\n".join(p for p in (system, system_prompt_for(shown, "xml")) if p))
    variants = [VariantResult(CURRENT if i == 0 else f"variant {i}", text,
                              [QueryResult(q, flag) for q, flag in pairs]) for i, text in enumerate(texts)]
    jobs = [(v, q, r) for r in range(runs) for q in range(len(pairs)) for v in range(len(texts))]
    report = TriggerReport(name, model, runs, variants, planned=len(jobs), options=sent)
    stop = threading.Event()

    def one(v: int, q: int, r: int) -> RunOutcome:
        outcome = RunOutcome(v, q, r)
        if stop.is_set():
            outcome.error = "skipped"
            return outcome
        try:
            reply = model_reply(client, [{"role": "user", "content": pairs[q][0]}], model=model, style=style,
                                system=prompts[v], tools=tools, **options)
        except ClientError as exc:
            outcome.error = str(exc)
            if exc.kind in ClientError.FATAL:
                stop.set()
                raise
            return outcome
        except SkillError as exc:  # an unreadable response: this run failed, the others go on
            outcome.error = str(exc)
            return outcome
        outcome.triggered = triggered_by(reply.calls, name)
        outcome.empty = not reply.calls and not reply.text.strip()
        outcome.calls = [f"{tool}({call_target(tool, args)[0]})" for _, tool, args in reply.calls]
        outcome.input_tokens, outcome.output_tokens = reply.usage.input_tokens, reply.usage.output_tokens
        outcome.seconds = reply.seconds
        return outcome

    started = time.perf_counter()
    pool = ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="ipyskills-eval")
    pending = set()
    try:
        pending = {pool.submit(one, *job) for job in jobs}
        if progress:
            progress(0, len(jobs), None)
        while pending:
            finished, pending = wait(pending, timeout=0.25, return_when=FIRST_COMPLETED)
            for future in finished:
                try:
                    outcome = future.result()
                except ClientError as exc:
                    if not report.error:
                        report.error = str(exc)
                    report.interrupted = True
                    continue
                if outcome.error == "skipped":
                    continue
                _record(report, outcome, pairs, name)
                if progress:
                    progress(report.done, len(jobs), outcome)
    except KeyboardInterrupt:
        report.interrupted = True
        stop.set()
    finally:
        stop.set()
        for future in pending:
            future.cancel()
        pool.shutdown(wait=not report.interrupted, cancel_futures=True)
        report.seconds = time.perf_counter() - started
    return report


def _record(report: TriggerReport, outcome: RunOutcome, pairs, name: str) -> None:
    report.outcomes.append(outcome)
    result = report.variants[outcome.variant].queries[outcome.query]
    if outcome.error:
        result.errors += 1
        variant = report.variants[outcome.variant]
        variant.first_error = variant.first_error or outcome.error
        return
    result.runs += 1
    result.triggered += outcome.triggered
    if outcome.input_tokens is not None:
        result.input_tokens = (result.input_tokens or 0) + outcome.input_tokens
    if outcome.output_tokens is not None:
        result.output_tokens = (result.output_tokens or 0) + outcome.output_tokens
    for call in outcome.calls:
        skill = call[call.index("(") + 1:-1]
        if call.startswith(READ_SKILL) and skill and skill != name:
            result.other_skills[skill] = result.other_skills.get(skill, 0) + 1

