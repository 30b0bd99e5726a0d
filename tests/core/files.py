"""Writing test files in one call."""

from __future__ import annotations

from pathlib import Path


def write(path: Path, data: bytes | str = "x") -> Path:
    """Write `data` (text as UTF-8) to `path`, creating its folders."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        path.write_text(data, encoding="utf-8")
    else:
        path.write_bytes(data)
    return path
