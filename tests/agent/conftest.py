"""Real skill folders in tmp_path and a registry over them, for the agent-tool tests."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from ipyskills.core.registry import SkillRegistry
from ipyskills.settings import Settings

ECHO = """\
import sys
print("args:", sys.argv[1:])
print("stdin:", sys.stdin.read())
"""
FAIL = """\
import sys
print("about to fail")
sys.stderr.write("bad input: expected JSON\\n")
sys.exit(3)
"""
FLOOD = """\
import sys
sys.stdout.write("START-OF-OUTPUT\\n" + "x" * 100000 + "\\nEND-OF-OUTPUT\\n")
"""
SLOW = """\
import time
print("SLOW-STARTED", flush=True)
time.sleep(30)
print("SLOW-DONE")
"""
# Blocked by the guard (evaluates caller input) yet harmless if it ever ran: without an argument it
# evaluates a constant.
DANGER = """\
import sys
code = sys.argv[1] if len(sys.argv) > 1 else "1 + 1"
print(eval(code))
"""
ARTIFACT = """\
import os, pathlib
out = pathlib.Path(os.environ["IPYSKILLS_OUTPUT"])
(out / "result.csv").write_text("a,b\\n1,2\\n")
print("wrote result.csv")
"""


def write_skill(root: Path, name: str, description: str, body: str = "", files: dict | None = None,
                frontmatter: str = "") -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    head = f"---\nname: {name}\ndescription: {description}\n{frontmatter}---\n"
    (folder / "SKILL.md").write_text(head + textwrap.dedent(body))
    for rel, content in (files or {}).items():
        target = folder / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content)
    return folder


@pytest.fixture
def skills_root(tmp_path: Path) -> Path:
    root = tmp_path / "skills"
    write_skill(root, "data-tool", "Transform and analyse small data sets. Use for JSON or CSV data.",
                "# Data tool\n\nRun scripts/echo.py with the data on stdin.\n", {
                    "references/guide.md": "# Guide\n\nUse --to csv for CSV output.\n",
                    "scripts/echo.py": ECHO,
                    "scripts/fail.py": FAIL,
                    "scripts/flood.py": FLOOD,
                    "scripts/slow.py": SLOW,
                    "scripts/danger.py": DANGER,
                    "scripts/artifact.py": ARTIFACT,
                    "assets/logo.png": b"\x89PNG\r\n\x1a\n" + bytes(64),
                    "notes/latin1.txt": "caf\xe9".encode("latin-1"),
                })
    write_skill(root, "pdf-processing", "Extract text and tables from PDF files. Use when handling PDFs.",
                "# PDF processing\n\nSee references/forms.md.\n", {"references/forms.md": "# Forms\n"})
    write_skill(root, "secret-ops", "Internal operations runbook.",
                "# Secret ops\n\nTOP-SECRET-BODY\n", {
                    "references/secret.md": "TOP-SECRET-RESOURCE\n",
                    "scripts/echo.py": ECHO,
                })
    write_skill(root, "quiet", "Only for people, not for the model.", "# Quiet\n",
                frontmatter="disable-model-invocation: true\n")
    return root


@pytest.fixture
def new_skill():
    """`new_skill(root, name, description, body, files)` writes one more real skill folder."""
    return write_skill


@pytest.fixture
def settings() -> Settings:
    return Settings(default_roots=False, bundled_skills=False, backend="local", timeout=20.0)


@pytest.fixture
def reg(skills_root: Path, settings: Settings) -> SkillRegistry:
    return SkillRegistry([skills_root], settings=settings)


@pytest.fixture
def empty_reg(tmp_path: Path, settings: Settings) -> SkillRegistry:
    (tmp_path / "nothing").mkdir()
    return SkillRegistry([tmp_path / "nothing"], settings=settings)
