"""What a run returns, and the capped buffers both backends collect output into."""

from __future__ import annotations

import mimetypes
from dataclasses import dataclass, field

TRUNCATION_MARK = "\n[ipyskills: output truncated, {dropped} more bytes not shown]\n"


class OutputBuffer:
    """Keeps the first `cap` bytes of a stream and counts the rest, so a flood costs no memory."""

    def __init__(self, cap: int, listener=None):
        self.cap = cap
        self._chunks: list[bytes] = []
        self.kept = 0
        self.total = 0
        # listener(bytes) gets each kept piece as it arrives; listener(None) once, when the cap is reached
        self.listener = listener

    def write(self, data: bytes) -> None:
        was_full = self.total > self.kept
        self.total += len(data)
        room = self.cap - self.kept
        piece = b""
        if room > 0:
            piece = data[:room]
            self._chunks.append(piece)
            self.kept += len(piece)
        if self.listener is not None:
            if piece:
                self.listener(piece)
            if not was_full and self.total > self.kept:
                self.listener(None)

    @property
    def truncated(self) -> bool:
        return self.total > self.kept

    def text(self) -> str:
        body = b"".join(self._chunks).decode("utf-8", errors="replace")
        if self.truncated:
            body += TRUNCATION_MARK.format(dropped=self.total - self.kept)
        return body


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def artifacts_note(omitted: dict, *, files_cap: int, bytes_cap: int) -> str:
    """One sentence per reason output files were left out, from a listing's `omitted` counts."""
    def count(key):
        value = omitted.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0

    parts = []
    if count("more_files"):
        n = count("more_files")
        parts.append(f"{n:,} more file{'s' if n != 1 else ''} ({_size(count('more_bytes'))}) not returned: "
                     f"file cap {files_cap}")
    if count("over_cap_files"):
        n = count("over_cap_files")
        parts.append(f"{n:,} file{'s' if n != 1 else ''} ({_size(count('over_cap_bytes'))}) listed but not "
                     f"returned: byte cap {_size(bytes_cap)}")
    if count("deep_folders"):
        n = count("deep_folders")
        parts.append(f"{n:,} folder{'s' if n != 1 else ''} deeper than {count('depth_cap') or '?'} levels not "
                     "looked into: depth cap")
    if omitted.get("walk_stopped") is True:
        parts.append(f"listing stopped after {count('walk_cap') or '?':,} entries: walk cap; more files may "
                     "exist")
    if count("unreadable"):
        n = count("unreadable")
        parts.append(f"{n:,} file{'s' if n != 1 else ''} or folder{'s' if n != 1 else ''} could not be read")
    if count("overflow_files"):
        n = count("overflow_files")
        parts.append(f"{n:,} file{'s' if n != 1 else ''} not returned: the report exceeded its size cap")
    return "; ".join(parts)


@dataclass(frozen=True)
class Finding:
    """One guard finding: which rule fired, how bad it is, and where."""

    rule: str
    severity: str  # "block" or "warn"
    line: int
    message: str
    path: str = ""

    def to_dict(self) -> dict:
        return {"rule": self.rule, "severity": self.severity, "line": self.line,
                "message": self.message, "path": self.path}

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.path else f"line {self.line}"
        return f"{where}: [{self.severity}] {self.rule}: {self.message}"


def printable_path(path: str) -> str:
    """A file name as text: bytes that are not UTF-8 (surrogate escapes from the OS) become U+FFFD, so
    the result can always be printed and serialised."""
    return path.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


@dataclass(frozen=True)
class Artifact:
    """A file the script wrote under $IPYSKILLS_OUTPUT. `data` is None when it was over the cap."""

    path: str  # relative to the output folder, '/'-separated
    size: int
    data: bytes | None

    @property
    def mime(self) -> str:
        return mimetypes.guess_type(self.path)[0] or "application/octet-stream"

    def to_dict(self) -> dict:
        return {"path": self.path, "size": self.size, "mime": self.mime, "returned": self.data is not None}

    def save(self, path, overwrite: bool = False):
        """Write the file to `path` (a folder: saved there under its own name and subfolders). Never
        overwrites an existing file unless `overwrite=True`: a FileExistsError-like SandboxError says so.
        Returns the Path written."""
        import os
        from pathlib import Path, PurePosixPath

        from ..errors import SandboxError
        from .inputs import safe_relative, write_confined

        if self.data is None:
            raise SandboxError(f"artifact {self.path!r} ({self.size:,} bytes) was over the return cap and did not "
                               "come back; raise artifact_cap or have the script write less")
        target = Path(os.fspath(path)).expanduser()
        if target.is_dir():
            folder, rel = target, safe_relative(self.path)
        else:
            folder, rel = target.parent, PurePosixPath(target.name)
        if not overwrite and os.path.lexists(Path(folder) / rel):
            raise SandboxError(f"{Path(folder) / rel} exists; pass overwrite=True to replace it, or another path")
        written, _renamed = write_confined(folder, rel, self.data, overwrite=overwrite)
        return written


@dataclass
class ExecuteResult:
    """The outcome of one script run, the same shape from every backend."""

    exit_code: int | None  # None when the process was killed before it exited (timeout)
    stdout: str
    stderr: str
    duration_ms: float
    timed_out: bool = False
    oom_killed: bool = False
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    backend: str = ""  # "docker" or "local"
    isolation: str = ""  # what was and was not enforced, in one line
    notice: str = ""  # e.g. why `auto` picked the local backend
    artifacts: list[Artifact] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    # Output files left out: `artifacts_truncated` is set and `artifacts_note` says how many and why
    # (file cap, byte cap, depth cap, ...); `artifacts_error` says why collecting them failed, if it did.
    # Neither changes exit_code, stdout or stderr.
    artifacts_truncated: bool = False
    artifacts_note: str = ""
    artifacts_error: str = ""
    skill: str = ""
    script: str = ""
    args: list[str] = field(default_factory=list)
    interrupted: bool = False  # Ctrl-C ended the run (RunInterrupted carries this result)
    inputs: list[str] = field(default_factory=list)  # names staged into the workspace
    saved: list[tuple[str, str]] = field(default_factory=list)  # (artifact path, host path) after save()
    save_note: str = ""  # what saving had to do differently (a clash renamed, an artifact not returned)

    @property
    def truncated(self) -> bool:
        return self.stdout_truncated or self.stderr_truncated

    @property
    def duration(self) -> float:
        """Seconds."""
        return self.duration_ms / 1000.0

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and not self.oom_killed

    def to_dict(self) -> dict:
        return {
            "skill": self.skill,
            "script": self.script,
            "args": list(self.args),
            "exit_code": self.exit_code,
            "stdout": self.stdout,
            "stderr": self.stderr,
            "duration_ms": round(self.duration_ms, 1),
            "timed_out": self.timed_out,
            "oom_killed": self.oom_killed,
            "truncated": self.truncated,
            "stdout_truncated": self.stdout_truncated,
            "stderr_truncated": self.stderr_truncated,
            "backend": self.backend,
            "isolation": self.isolation,
            "notice": self.notice,
            "artifacts": [a.to_dict() for a in self.artifacts],
            "artifacts_truncated": self.artifacts_truncated,
            "artifacts_note": self.artifacts_note,
            "artifacts_error": self.artifacts_error,
            "findings": [f.to_dict() for f in self.findings],
            "interrupted": self.interrupted,
            "inputs": list(self.inputs),
            "saved": [{"artifact": a, "path": p} for a, p in self.saved],
            "save_note": self.save_note,
        }

    def save(self, folder, overwrite: bool = False) -> list[tuple[str, str]]:
        """Write every returned artifact under `folder` (made if missing) at its own relative path, confined
        to it. An existing file is never replaced unless `overwrite=True`: the artifact takes a free name
        (`report (1).md`) and `save_note` says so. Returns and records (artifact path, host path) pairs."""
        from pathlib import Path

        from .inputs import safe_relative, write_confined

        notes, saved = [], []
        for artifact in self.artifacts:
            if artifact.data is None:
                notes.append(f"{artifact.path} not saved (over the return cap)")
                continue
            try:
                rel = safe_relative(artifact.path)
                written, renamed = write_confined(Path(folder), rel, artifact.data, overwrite=overwrite)
            except (OSError, ValueError) as exc:
                notes.append(f"{artifact.path} not saved ({exc})")
                continue
            except Exception as exc:  # noqa: BLE001 - SandboxError from confinement: said, not raised
                notes.append(f"{artifact.path} not saved: {exc}")
                continue
            if renamed:
                notes.append(f"{artifact.path} existed in {folder}; saved as {written.name}")
            saved.append((artifact.path, str(written)))
        self.saved = self.saved + saved
        self.save_note = "; ".join(n for n in (self.save_note, *notes) if n)
        return saved

    def status_line(self) -> str:
        parts = [f"backend={self.backend}"]
        if self.interrupted:
            parts.append("INTERRUPTED")
            parts.append("exit=130 (interrupted)")
        elif self.timed_out:
            parts.append("TIMED OUT")
            parts.append("exit=124 (timed out)")
        elif self.oom_killed:
            parts.append("OUT OF MEMORY")
            parts.append(f"exit={self.exit_code}")
        else:
            parts.append(f"exit={self.exit_code}")
        parts.append(f"{self.duration_ms:.0f} ms")
        if self.truncated:
            parts.append("output truncated")
        if self.artifacts_truncated or self.artifacts_error:
            parts.append("artifacts incomplete")
        return " · ".join(parts)

    def artifact_notes(self) -> list[str]:
        """What every rendering says about output files that did not come back (empty when all did)."""
        notes = []
        if self.artifacts_note:
            notes.append(f"artifacts: {self.artifacts_note}")
        if self.artifacts_error:
            notes.append(f"artifacts could not all be collected: {self.artifacts_error}")
        if self.save_note:
            notes.append(f"saving: {self.save_note}")
        return notes

    def __str__(self) -> str:
        return self.status_line()
