"""The prompt-lab magics' work: `%%skill_agent`, `%skills eval`, `%skills budget`.

`magics.py` declares the magics and their options; this module finds the client, calls the core
(`agent.loop.run_agent`, `agent.prompt_lab`) and renders, live where it takes time.
"""

from __future__ import annotations

import json
import sys
import time

from IPython.core.error import UsageError

from ..errors import SkillError

# Parameters of run_agent / eval_trigger that the magics fill in themselves: not request options.
_SET_BY_THE_MAGIC = {"model": "--model", "client": "--client", "max_turns": "--max-turns", "runs": "--runs",
                     "parallel": "--parallel", "descriptions": "--description / --descriptions",
                     "queries": "--queries", "style": "", "skills": "", "prompt": "", "name": "",
                     "on_event": "", "progress": "", "inputs_dir": "IPySkills.agent_inputs"}


def _names(value: str | None) -> list[str]:
    return [n.strip() for n in (value or "").split(",") if n.strip()]


def request_options(magics, given: list[str] | None) -> dict:
    """`IPySkills.agent_options`, then each `--option K=V` of the line over it. V is read as JSON when it
    is JSON (0, 0.2, true, null, ["x"], {...}), else taken as text (tool_choice=auto)."""
    options = dict(magics.agent_options)
    for item in given or ():
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise UsageError(f"--option needs KEY=VALUE, like --option temperature=0; got {item!r}")
        try:
            options[key] = json.loads(raw)
        except ValueError:
            options[key] = raw
    for key in options:
        if key in _SET_BY_THE_MAGIC:
            flag = _SET_BY_THE_MAGIC[key]
            raise UsageError(f"{key!r} is not a request option here: the magic sets it"
                             + (f" (use {flag})" if flag else ""))
    return options


def resolve_client(magics, var: str | None, *, required: bool = True):
    """The chat client: the user variable `var`, else the one named by `%config IPySkills.agent_client`."""
    name = var or magics.agent_client
    if not name:
        if not required:
            return None, ""
        raise UsageError("no chat client: pass --client VAR (a variable holding an OpenAI or Anthropic client, "
                         "e.g. client = OpenAI()) or set one for the session with "
                         "%config IPySkills.agent_client = 'client'")
    ns = magics.shell.user_ns
    if name not in ns:
        raise UsageError(f"no variable named {name!r} in the notebook; create the client first, e.g. "
                         f"{name} = OpenAI() or {name} = anthropic.Anthropic()")
    return ns[name], name


def resolve_model(magics, model: str | None) -> str:
    model = model or magics.agent_model
    if not model:
        raise UsageError("no model: pass --model NAME or set %config IPySkills.agent_model = 'NAME'")
    return model


def _display(obj):
    from IPython.display import display

    return display(obj, display_id=True)


def skill_agent(magics, args, cell: str):
    """Run the tool loop for the cell's message and show the transcript live; returns the Transcript."""
    from ..agent.loop import run_agent
    from .lab_display import TranscriptView

    if not cell.strip():
        raise UsageError("%%skill_agent: the cell is the user's message; write it below the magic line")
    if args.var is not None and not args.var.isidentifier():
        raise UsageError(f"-o needs a Python variable name, got {args.var!r}")
    if args.max_turns < 1:
        raise UsageError("--max-turns must be at least 1")
    if args.allow is not None and not _names(args.allow):
        raise UsageError("--allow needs skill names separated by commas, like --allow a,b")
    client, _ = resolve_client(magics, args.client)
    model = resolve_model(magics, args.model)
    options = request_options(magics, args.option)
    view = magics.agent_view(allow=args.allow, conversation=True)
    handle = None
    shown = {"view": None}

    def on_event(kind, transcript):
        nonlocal handle
        if shown["view"] is None:
            shown["view"] = TranscriptView(transcript, cell.strip())
            handle = _display(shown["view"])
        elif handle is not None:
            handle.update(shown["view"])

    from ..agent.loop import AgentInterrupted
    from ..sandbox.interrupts import shield_repeated_interrupts

    # Only the first Ctrl-C counts until the loop has stopped (a second one would cut short the removal
    # of a sandbox that a tool call was running).
    with shield_repeated_interrupts():
        try:
            transcript = magics._call(run_agent, client, view, cell.strip(), model=model,
                                      max_turns=args.max_turns, on_event=on_event, **options)
        except AgentInterrupted as stop:  # one line under the transcript so far, as %%skill_run does
            if args.var:
                magics.shell.user_ns[args.var] = stop.transcript
            print(stop.line() + (f"; the transcript so far is in {args.var}" if args.var else ""),
                  file=sys.stderr)
            return
        except SkillError as exc:  # a MagicError: one line under the transcript so far
            partial = getattr(getattr(exc, "original", exc), "transcript", None)
            if args.var and partial is not None:
                magics.shell.user_ns[args.var] = partial
            raise
    if args.var:
        magics.shell.user_ns[args.var] = transcript


def skills_eval(magics, args):
    """`%skills eval NAME --queries VAR ...`: the trigger eval with live progress; returns the report view."""
    from ..agent.prompt_lab.trigger_eval import DEFAULT_RUNS, eval_trigger
    from .lab_display import EvalProgress, TriggerReportView

    if not args.queries:
        raise UsageError("%skills eval needs --queries VAR (a list of (text, should_trigger) pairs, a "
                         "DataFrame) or --queries PATH.csv")
    ns = magics.shell.user_ns
    queries = ns.get(args.queries, args.queries)
    if isinstance(queries, str) and queries == args.queries and not queries.endswith((".csv", ".json")):
        raise UsageError(f"--queries {args.queries!r}: no such variable, and not a .csv or .json path")
    descriptions = list(args.description or [])
    if args.descriptions:
        if args.descriptions not in ns:
            raise UsageError(f"--descriptions {args.descriptions!r}: no such variable (a list of strings)")
        extra = ns[args.descriptions]
        descriptions += [extra] if isinstance(extra, str) else list(extra)
    client, _ = resolve_client(magics, args.client)
    model = resolve_model(magics, args.model)
    runs = args.runs if args.runs is not None else DEFAULT_RUNS
    parallel = args.parallel if args.parallel is not None else magics.eval_parallel
    options = request_options(magics, args.option)
    view = magics.agent_view()
    progress = EvalProgress(args.target)
    shown = {"handle": None, "at": 0.0}

    def on_progress(done, total, outcome):  # shown from the first call: the eval has checked its input
        progress.update(done, total, outcome)
        now = time.monotonic()
        if shown["handle"] is None:
            shown["handle"] = _display(progress)
        elif now - shown["at"] >= 0.2 or done == total:  # redraw at most five times a second
            shown["handle"].update(progress)
        else:
            return
        shown["at"] = now

    report = magics._call(eval_trigger, view, args.target, queries, client=client, model=model, runs=runs,
                          descriptions=descriptions, parallel=parallel, progress=on_progress, **options)
    progress.finished = report.headline()
    if shown["handle"] is not None:
        shown["handle"].update(progress)
    if args.var:
        ns[args.var] = report
    return TriggerReportView(report)


def skills_budget(magics, args):
    """`%skills budget [NAME]`: the level costs; the provider's counter when the session's client has one."""
    from ..agent.prompt_lab.budget import skill_budget
    from .lab_display import BudgetView

    client, _ = resolve_client(magics, args.client, required=False)
    model = args.model or magics.agent_model or None
    report = magics._call(skill_budget, magics.registry, args.target, client=client, model=model)
    if args.var:
        magics.shell.user_ns[args.var] = report
    return BudgetView(report)
