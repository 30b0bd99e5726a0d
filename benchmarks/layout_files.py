"""Which working-directory layout lets published scripts do file work? Runs the same file tasks (an input
staged into the workspace, an output named the way a user or an agent names it: a bare relative path)
with the working directory = the writable workspace (the default) and = the read-only skill (the old
layout), and counts the runs that exit 0 and produce their output.

    .venv/bin/python benchmarks/layout_files.py [/tmp/published] [--backend docker|local] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

# (collection/skill folder, script, args, inputs to stage, the artifact that must come back or None)
TASKS = [
    ("anthropics-skills/skills/pdf", "scripts/check_fillable_fields.py", ["/work/form.pdf"], ["form.pdf"], None),
    ("anthropics-skills/skills/pdf", "scripts/extract_form_field_info.py", ["/work/form.pdf", "fields.json"],
     ["form.pdf"], "fields.json"),
    ("anthropics-skills/skills/pdf", "scripts/extract_form_structure.py", ["/work/form.pdf", "structure.json"],
     ["form.pdf"], "structure.json"),
    ("anthropics-skills/skills/skill-creator", "scripts/quick_validate.py", ["/work/my-skill"], ["my-skill"], None),
    ("anthropics-skills/skills/skill-creator", "scripts/package_skill.py", ["/work/my-skill"], ["my-skill"],
     "my-skill.skill"),
    ("openai-skills/skills/.system/skill-creator", "scripts/quick_validate.py", ["/work/my-skill"], ["my-skill"],
     None),
    ("openai-skills/skills/.system/skill-creator", "scripts/package_skill.py", ["/work/my-skill"], ["my-skill"],
     "my-skill.skill"),
    ("openai-skills/skills/.system/skill-creator", "scripts/init_skill.py", ["new-skill", "--path", "."], [],
     "new-skill/SKILL.md"),
]


def tiny_pdf() -> bytes:
    """A one-page PDF with correct cross-reference offsets."""
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
               b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 200] >>"]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for n, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % n + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("published", nargs="?", type=Path, default=Path("/tmp/published"))
    parser.add_argument("--backend", default="docker", choices=("docker", "local"))
    parser.add_argument("--json", metavar="OUT")
    args = parser.parse_args(argv)

    from ipyskills import SkillRegistry
    from ipyskills.sandbox import runner
    from ipyskills.settings import Settings

    work = Path(tempfile.mkdtemp(prefix="layout-files-"))
    (work / "form.pdf").write_bytes(tiny_pdf())
    (work / "my-skill").mkdir()
    (work / "my-skill" / "SKILL.md").write_text("---\nname: my-skill\ndescription: A test skill. Use when testing "
                                                "the layout.\n---\n# My skill\n\nDo the thing.\n")
    rows = []
    for folder, script, task_args, inputs, expect in TASKS:
        skill = args.published / folder
        if not (skill / script).is_file():
            continue
        reg = SkillRegistry([skill], settings=Settings(default_roots=False, bundled_skills=False, pool_size=0,
                                                       timeout=60))
        name = reg.list()[0].name
        for workdir in ("workspace", "skill"):
            paths = [work / i for i in inputs]
            request = reg.run_request(name, script, args=task_args, inputs=paths)
            request.workdir = workdir
            try:
                result = runner.run(request, backend=args.backend, guard=False, settings=reg.settings)
                produced = {a.path for a in result.artifacts}
                ok = result.exit_code == 0 and (expect is None or expect in produced)
                detail = (result.stderr.strip().splitlines() or [""])[-1][:160]
                rows.append({"skill": folder, "script": script, "workdir": workdir, "ok": ok,
                             "exit": result.exit_code, "artifacts": sorted(produced), "detail": detail})
            except Exception as exc:  # noqa: BLE001 - every failure is a row
                rows.append({"skill": folder, "script": script, "workdir": workdir, "ok": False, "exit": None,
                             "artifacts": [], "detail": f"{type(exc).__name__}: {exc}"[:160]})
            r = rows[-1]
            print(f"{workdir:9} {'ok ' if r['ok'] else 'FAIL'} {folder}/{script}  {'' if r['ok'] else r['detail']}",
                  flush=True)
    for workdir in ("workspace", "skill"):
        mine = [r for r in rows if r["workdir"] == workdir]
        print(f"cwd={workdir}: {sum(r['ok'] for r in mine)} of {len(mine)} file tasks succeeded")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
