"""Helpers shared by the test folders."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def make_skill(tmp_path):
    """`make_skill(folder, frontmatter_text, body)` writes tmp_path/folder/SKILL.md and returns the folder.

    `frontmatter_text` goes between the `---` lines as is; pass `raw=b"..."` to write exact bytes instead.
    """

    def make(folder: str, frontmatter_text: str = "", body: str = "# Skill\n\nDo the thing.\n", *,
             raw: bytes | None = None, filename: str = "SKILL.md") -> Path:
        path = tmp_path / folder
        path.mkdir(parents=True, exist_ok=True)
        data = raw if raw is not None else f"---\n{frontmatter_text}---\n{body}".encode()
        (path / filename).write_bytes(data)
        return path

    return make
