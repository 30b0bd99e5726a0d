"""The agent's inputs folder: the one folder (chosen by the application, never the model) whose files a model
may name in `execute_skill_script`'s `inputs`, and the lexical checks every name gets before it is resolved.
"""

from __future__ import annotations

import os
import re
from pathlib import Path, PurePosixPath

from ..errors import ConfigError
from .report import _short

MAX_AGENT_INPUTS = 100  # names one execute_skill_script call may give in `inputs`


def _inputs_folder(value) -> Path | None:
    """The application's inputs folder, absolute; ConfigError when it is not an existing folder."""
    if value is None:
        return None
    if not isinstance(value, (str, os.PathLike)) or not os.fspath(value):
        raise ConfigError(f"inputs_dir must be a folder path, got {value!r}")
    folder = Path(os.path.expanduser(os.fspath(value))).absolute()
    if not folder.is_dir():
        raise ConfigError(f"inputs_dir {os.fspath(value)!r} is not an existing folder; create it, or give the "
                          "folder whose files the agent may pass to scripts")
    # Everything under it is the model's to read: the whole disk or a home directory is never that.
    if folder.resolve() in (Path(folder.anchor), Path.home().resolve()):
        raise ConfigError(f"inputs_dir {os.fspath(value)!r} would give the agent every file under "
                          f"{folder.resolve()}; make a folder holding only the files it may read")
    return folder


def _input_name_problem(raw: str) -> str:
    """Why `raw` is not a plain relative path inside a folder ("" when it is)."""
    if not raw.strip():
        return "it is empty"
    if "\0" in raw:
        return "it contains a NUL character"
    if "\\" in raw:
        return "it contains a backslash; separate folders with /"
    if raw.startswith("/") or re.match(r"^[A-Za-z]:", raw):
        return "it is an absolute path"
    if raw.startswith("~"):
        return "'~' is not expanded; paths are relative to the inputs folder"
    parts = PurePosixPath(raw).parts
    if ".." in parts:
        return "it contains '..'"
    if not [p for p in parts if p != "."]:
        return "it names the inputs folder itself"
    return ""


def _listing(root: Path, limit: int = 20) -> str:
    """'; it holds: a.csv, data/, ...' for an error message: what the model can ask for instead (links
    leading out are not offered)."""
    names = []
    try:
        with os.scandir(root) as entries:
            for entry in entries:
                real = Path(os.path.realpath(entry.path))
                if root in real.parents and (real.is_file() or real.is_dir()):
                    names.append(entry.name + ("/" if real.is_dir() else ""))
    except OSError:
        return ""
    names.sort()
    if not names:
        return "; it is empty"
    more = f", and {len(names) - limit} more" if len(names) > limit else ""
    return "; it holds: " + ", ".join(_short(n, 100) for n in names[:limit]) + more
