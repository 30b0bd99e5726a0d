"""A real InteractiveShell with `%load_ext ipyskills`, in a scratch folder with its own skills."""

from __future__ import annotations

import base64
import os
import struct
import zlib
from pathlib import Path

import pytest

HELLO_MD = """---
name: hello
description: Greets people. Use when someone says hi.
license: Apache-2.0
metadata:
  author: tests
---
# Hello

Run `scripts/hi.py NAME` and pipe text in.
"""


def tiny_png() -> bytes:
    """A real 1x1 PNG."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    raw = zlib.compress(b"\x00\xff\x00\x00")
    ihdr = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", raw) + chunk(b"IEND", b"")


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """cwd = a scratch folder holding ./skills/hello and ./skills/bad-skill; HOME is empty; no IPYSKILLS_*."""
    for key in list(os.environ):
        if key.startswith("IPYSKILLS_"):
            monkeypatch.delenv(key)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tmp_path)
    hello = tmp_path / "skills" / "hello"
    write(hello / "SKILL.md", HELLO_MD)
    write(hello / "scripts" / "hi.py",
          "import sys\nprint('hi', sys.argv[1:], repr(sys.stdin.read()))\n")
    write(hello / "scripts" / "sleep.py", "import sys, time\ntime.sleep(float(sys.argv[1]))\n")
    write(hello / "scripts" / "fail.py", "import sys\nprint('bad input', file=sys.stderr)\nsys.exit(3)\n")
    write(hello / "scripts" / "plot.py",
          "import base64, os\nout = os.environ['IPYSKILLS_OUTPUT']\n"
          f"open(os.path.join(out, 'dot.png'), 'wb').write(base64.b64decode({base64.b64encode(tiny_png())!r}))\n"
          "open(os.path.join(out, 'table.csv'), 'w').write('a,b\\n1,2\\n')\n"
          "open(os.path.join(out, 'notes.bin'), 'wb').write(b'\\x00\\x01')\n")
    write(hello / "references" / "guide.md", "# Guide\n\nSome *advice*.\n")
    write(hello / "assets" / "data.csv", "city,pop\nOslo,700000\n")
    write(hello / "assets" / "data.json", '{"a": [1, 2], "b": {"c": true}}')
    write(hello / "assets" / "logo.png", tiny_png())
    write(tmp_path / "skills" / "bad-skill" / "SKILL.md",
          "---\nname: Bad_Skill\ndescription: Breaks the naming rules.\n---\nBody.\n")
    return tmp_path


@pytest.fixture
def ip(workdir):
    """InteractiveShell.instance() with the extension loaded; bundled skills off so the catalog is ours."""
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    from ipyskills.core import registry as core_registry

    core_registry._shared = None
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    config.IPySkills.bundled_skills = False
    shell = InteractiveShell.instance(config=config)
    shell.run_line_magic("load_ext", "ipyskills")
    yield shell
    if "ipyskills" in shell.extension_manager.loaded:
        shell.run_line_magic("unload_ext", "ipyskills")
    InteractiveShell.clear_instance()
    core_registry._shared = None


@pytest.fixture
def magics(ip):
    from ipyskills.notebook.extension import _loaded

    return _loaded[id(ip)]


@pytest.fixture
def cell(ip):
    """`cell(code)` runs `code` as a cell: (the ExecutionResult, what it printed, colours removed)."""
    from IPython.utils.capture import capture_output

    def run(code: str):
        with capture_output() as cap:
            result = ip.run_cell(code)
        return result, strip_ansi(cap.stdout + cap.stderr)

    return run


def strip_ansi(text: str) -> str:
    import re

    return re.sub(r"\x1b\[[0-9;]*m", "", text)
