"""The plain-text report of a skill's requirements and of what provisioning did, shared by
`ipyskills deps` and `%skills deps`."""

from __future__ import annotations


def requirements_text(reqs, mode: str) -> str:
    """The text report shared by the CLI and the notebook's plain-text view."""
    lines = []
    chosen = [r for r in reqs.python if mode == "auto" or r.declared] if mode != "off" else []
    lines.append(f"{reqs.skill}: {len(chosen)} Python distribution(s) to install"
                 + (f", {len(reqs.provided)} already in the sandbox image" if reqs.provided else ""))
    width = max([len(r.spec) for r in [*reqs.python, *reqs.provided]] + [10])
    for req in reqs.python:
        mark = "" if req in chosen else "  (not installed: --deps " + mode + ")"
        lines.append(f"  {req.spec:<{width}}  {_origin(req)}{mark}")
    if reqs.provided:
        lines.append("already in the sandbox image:")
        lines += [f"  {r.spec:<{width}}  {_origin(r)}" for r in reqs.provided]
    if reqs.skipped:
        lines.append("skipped:")
        lines += [f"  {text}  ({file}:{line}: {why})" for text, file, line, why in reqs.skipped]
    if reqs.programs:
        calls = ", ".join(p.describe() for p in reqs.programs)
        lines.append(f"programs: {calls}")
    if reqs.profile:
        lines.append(f"image profile: {reqs.profile} (build it with: ipyskills sandbox build --profile "
                     f"{reqs.profile} --offline)")
    return "\n".join(lines)


def _origin(req) -> str:
    detail = f" ({req.detail})" if req.detail else ""
    return f"{req.file}:{req.line}{detail}"


def install_summary(done) -> str:
    if done is None:
        return "nothing to install"
    where = done.image or done.site or "the sandbox image as it is"
    if not done.installed:
        return f"nothing missing: {where}"
    state = f"installed in {done.seconds:.1f} s" if done.built else "already provisioned"
    return f"{state}: {', '.join(done.installed)} -> {where}"
