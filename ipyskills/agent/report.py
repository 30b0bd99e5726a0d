"""The run report: the text a model gets for one script run (`<script_result>` with its status, streams and
artifacts), framed so that nothing a script prints can forge or remove a tag.
"""

from __future__ import annotations

import json
from html import escape

from ..core.prompt import neutralise
from .schemas import DEFAULT_OUTPUT_CAP, cap_text

# ------------------------------------------------------------------------------------------ run reports


_LINE_BREAKS = str.maketrans({c: repr(c)[1:-1] for c in "\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"})


def one_line(text: str) -> str:
    """`text` with every character Python or a model may read as a line break escaped, so a value in
    the report's head can never start a line of its own (a forged `Status:` line)."""
    return text.translate(_LINE_BREAKS)


def run_report(result, cap: int = DEFAULT_OUTPUT_CAP) -> str:
    """The text a model gets for one `ExecuteResult`: a status, then stdout, stderr and artifacts.

    Every text that comes from the run (output, arguments, notices, findings, file names) is neutralised
    (`prompt.neutralise`), so the block and each section have exactly one opening and one closing tag.
    The head and the artifact listing are each capped to a quarter of `cap`; standard output and error
    share what is left, each keeping its start and end.
    """
    attrs = (f'skill="{escape(_short(result.skill, 200))}" script="{escape(_short(result.script, 300))}" '
             f'exit_code="{result.exit_code if result.exit_code is not None else "none"}"')
    opening = f"<script_result {attrs}>"
    head = [f"Status: {_status(result)}"]
    if result.args:
        head.append("Arguments: " + json.dumps(list(result.args), ensure_ascii=False))
    if getattr(result, "inputs", None):
        head.append("Inputs in the working folder: " + json.dumps(list(result.inputs), ensure_ascii=False))
    head.append(f"Backend: {one_line(result.backend or 'unknown')}"
                + (f" ({one_line(result.isolation)})" if result.isolation else ""))
    if result.notice:
        head.append(f"Notice: {one_line(result.notice)}")  # it quotes file names a skill chose
    for finding in result.findings:
        head.append(f"Guard warning: {one_line(str(finding))}")
    quarter = max(cap // 4, 200)
    head_text = cap_text(neutralise("\n".join(head)), quarter, result_cap=cap)
    tail = []
    notes = [neutralise(_short(n, 600)) for n in getattr(result, "artifact_notes", list)()]
    if result.artifacts or notes:
        listing = [f"  Note: {n}" for n in notes]  # first: a long file list gives way, the notes stay
        listing += [f'  <file size="{a.size}">{escape(_short(a.path, 300))}</file>' for a in result.artifacts]
        while listing and len("\n".join(listing)) > quarter:  # whole lines only: no tag is ever cut
            cut_mark = (f"  [ipyskills: {len(result.artifacts)} files listed in all; "
                        "the rest of this list was cut]")
            listing = listing[:len(listing) // 2] + [cut_mark]
            if len(listing) <= 2:
                break
        tail += ["<artifacts>", *listing, "</artifacts>"]
    tail.append("</script_result>")

    streams = [("stdout", neutralise(result.stdout or "")), ("stderr", neutralise(result.stderr or ""))]
    frame = len("\n".join([opening, head_text, *tail])) + sum(len(f"\n<{n}>\n\n</{n}>") for n, _ in streams)
    budget = max(cap - frame, 0)
    sizes = _share(budget, [len(text) for _, text in streams])
    body = []
    for (tag, text), size in zip(streams, sizes):
        if not text:
            body.append(f"<{tag}></{tag}>")
            continue
        text = cap_text(text, size, result_cap=cap)
        end = "" if text.endswith("\n") else "\n"
        body.append(f"<{tag}>\n{text}{end}</{tag}>")
    return "\n".join([opening, head_text, *body, *tail])


def _short(text: str, limit: int) -> str:
    text = str(text)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _share(budget: int, lengths: list[int]) -> list[int]:
    """Split `budget` between streams: equal shares, and what a short stream does not need goes to the other."""
    if sum(lengths) <= budget:
        return lengths
    shares = [0] * len(lengths)
    left, open_ = budget, sorted(range(len(lengths)), key=lambda i: lengths[i])
    while open_:
        each = left // len(open_)
        i = open_.pop(0)
        shares[i] = min(lengths[i], each)
        left -= shares[i]
    return shares


def _status(result) -> str:
    secs = f"{result.duration:.2f} s"
    if result.timed_out:
        return (f"TIMED OUT after {secs}; the script was stopped before it finished. Any output it produced "
                "is below. Try smaller input or fewer items, or tell the user it needs a longer timeout.")
    if result.oom_killed:
        return (f"OUT OF MEMORY after {secs}; the sandbox's memory limit stopped the script. Try smaller "
                "input, or tell the user it needs a higher memory limit.")
    if result.exit_code == 0:
        return f"completed, exit code 0, in {secs}"
    return (f"FAILED with exit code {result.exit_code} after {secs}; standard error below usually says why. "
            "Fix the arguments or input and try again, or tell the user.")


def _run_error_kind(result) -> str:
    if result.timed_out:
        return "timed_out"
    if result.oom_killed:
        return "out_of_memory"
    return "" if result.exit_code == 0 else "exit_code"
