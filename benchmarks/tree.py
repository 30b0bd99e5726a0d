"""Build a benchmark tree of N skill folders in one root, made from the bundled skills.

Each folder is a copy of one bundled skill under a new name (`data-processor-00042`): its SKILL.md is
rewritten so the name matches the folder, and its other files are hard-linked (cheap, same bytes). Trees are
kept under benchmarks/.data/ (git-ignored) and reused when a finished one of the same size is there.

    .venv/bin/python benchmarks/tree.py 10000        # prints the root
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE / ".data"
BUNDLED = HERE.parent / "skills"
_NAME_LINE = re.compile(rb"^name:.*$", re.MULTILINE)
_DONE = ".complete"  # written last, so a half-built tree (interrupted run) is rebuilt


def bundled_skills() -> list[Path]:
    found = sorted(p.parent for p in BUNDLED.glob("*/SKILL.md"))
    if not found:
        raise SystemExit(f"no bundled skills under {BUNDLED}; run from a checkout of the repository")
    return found


def build_tree(count: int, base: Path = DATA) -> Path:
    """The root of a tree of `count` skills (built once, then reused)."""
    root = base / f"skills-{count}"
    done = base / f"skills-{count}{_DONE}"  # beside the tree, so the root holds skill folders only
    if done.exists() and root.is_dir():
        return root
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    sources = bundled_skills()
    for i in range(count):
        source = sources[i % len(sources)]
        name = f"{source.name}-{i:05d}"
        _copy_skill(source, root / name, name)
    done.write_text(f"{count}\n")
    return root


def _copy_skill(source: Path, target: Path, name: str) -> None:
    for dirpath, dirnames, filenames in os.walk(source):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        rel = Path(dirpath).relative_to(source)
        (target / rel).mkdir(parents=True, exist_ok=True)
        for filename in filenames:
            src, dst = Path(dirpath) / filename, target / rel / filename
            if rel == Path(".") and filename == "SKILL.md":
                text = _NAME_LINE.sub(f"name: {name}".encode(), src.read_bytes(), count=1)
                dst.write_bytes(text)
            else:
                try:
                    os.link(src, dst)
                except OSError:  # another file system, or links not allowed
                    shutil.copyfile(src, dst)


if __name__ == "__main__":
    print(build_tree(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000))
