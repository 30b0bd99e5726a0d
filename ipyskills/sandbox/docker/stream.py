"""Reading a run's attach stream: the script's stdout and stderr frames, capped as they arrive, and the
launcher's report (exit code, OOM kills, the output folder as a tar) found between two copies of the run's
secret marker, so nothing the script prints can forge it."""

from __future__ import annotations

import io
import json
import select
import ssl
import struct
import tarfile
import time

from ..policy import Limits
from ..result import Artifact, OutputBuffer, artifacts_note, printable_path


def _send(raw, payload) -> None:
    try:
        for part in payload:
            if len(part):
                raw.sendall(part)
    except OSError:
        pass  # the container ended before reading everything (e.g. the script exited early)


class _MarkerSplitter:
    """Passes one stream's bytes on to `out` until the marker, holding back only what could be its start."""

    def __init__(self, out: OutputBuffer, marker: bytes):
        self.out, self.marker = out, marker
        self._pending = b""

    def feed(self, data: bytes) -> bytes | None:
        """Write the part before the marker; once it is found, return what follows it (else None)."""
        data = self._pending + data
        at = data.find(self.marker)
        if at >= 0:
            self.out.write(data[:at])
            self._pending = b""
            return data[at + len(self.marker):]
        # Only an end that could be the marker's start is held back (usually nothing: the marker starts
        # with NULs), so output reaches live listeners line by line, not some 50 bytes late.
        keep = next((k for k in range(min(len(data), len(self.marker) - 1), 0, -1)
                     if data.endswith(self.marker[:k])), 0)
        self.out.write(data[:len(data) - keep])
        self._pending = data[len(data) - keep:]
        return None

    def flush(self) -> None:
        if self._pending:
            self.out.write(self._pending)
            self._pending = b""


class _StreamReader:
    """Demultiplexes Docker's attach stream into capped stdout/stderr, and splits off the report: the
    launcher ends stderr with the marker and sends marker, report, marker on stdout."""

    def __init__(self, stdout: OutputBuffer, stderr: OutputBuffer, marker: bytes, cap: int):
        self.marker, self.cap = marker, cap
        self._out = _MarkerSplitter(stdout, marker)
        self._err = _MarkerSplitter(stderr, marker)
        self.stderr_done = False
        self.trailer: bytearray | None = None
        self.trailer_done = False
        self.trailer_overflow = False
        self._tail = b""  # the last bytes of an overflowing trailer, where its end marker may start
        self.artifacts_note = ""  # set by artifacts(): what was left out and why

    @property
    def complete(self) -> bool:
        """Both streams have ended with the marker: everything the run printed and reported is here."""
        return self.stderr_done and self.trailer_done

    def pump(self, raw, deadline: float) -> bool:
        """Read until the report is complete or the stream closes (True), or the deadline passes (False)."""
        buf = bytearray()
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._flush()  # what the script printed before the timeout is kept
                return False
            pending = getattr(raw, "pending", lambda: 0)()  # TLS may hold decrypted bytes select cannot see
            ready = pending or select.select([raw], [], [], min(remaining, 1.0))[0]
            if not ready:
                continue
            try:
                chunk = raw.recv(1 << 18)
            except (TimeoutError, BlockingIOError, InterruptedError, ssl.SSLWantReadError):
                continue  # TLS: only part of a record has arrived yet
            except OSError:
                chunk = b""
            if not chunk:
                self._flush()
                return True
            buf += chunk
            offset = 0
            while len(buf) - offset >= 8:
                kind, size = buf[offset], struct.unpack(">I", buf[offset + 4:offset + 8])[0]
                if len(buf) - offset - 8 < size:
                    break
                self._frame(kind, bytes(buf[offset + 8:offset + 8 + size]))
                offset += 8 + size
            del buf[:offset]
            if self.complete:
                return True

    def _frame(self, kind: int, data: bytes) -> None:
        if kind == 2:
            if not self.stderr_done and self._err.feed(data) is not None:
                self.stderr_done = True  # anything after the marker is not the script's
            return
        if self.trailer_done:
            return
        if self.trailer is not None:
            self._trailer_add(data)
            return
        rest = self._out.feed(data)
        if rest is not None:
            self.trailer = bytearray()
            self._trailer_add(rest)

    def _trailer_add(self, data: bytes) -> None:
        window = self._tail + data
        at = window.find(self.marker)
        if at >= 0:
            self.trailer_done = True
            data = window[len(self._tail):at] if at >= len(self._tail) else b""
            if at < len(self._tail) and not self.trailer_overflow:  # it began in bytes kept: drop them
                del self.trailer[len(self.trailer) - (len(self._tail) - at):]
        else:
            self._tail = window[-(len(self.marker) - 1):]
        if self.trailer_overflow or len(self.trailer) + len(data) > self.cap:
            self.trailer_overflow = True
            return
        self.trailer += data

    def _flush(self) -> None:
        self._out.flush()
        if not self.stderr_done:
            self._err.flush()

    def summary(self) -> dict:
        if self.trailer is None:
            return {}
        line, _, _ = bytes(self.trailer).partition(b"\n")
        try:
            data = json.loads(line)
        except ValueError:
            return {}
        return data if isinstance(data, dict) else {}

    def artifacts(self, limits: Limits) -> list[Artifact]:
        summary = self.summary()
        listed = summary.get("files") or []
        omitted = summary.get("omitted") if isinstance(summary.get("omitted"), dict) else {}
        omitted = dict(omitted)
        if len(listed) > limits.artifact_files:
            omitted["more_files"] = omitted.get("more_files", 0) + len(listed) - limits.artifact_files
        if self.trailer_overflow:
            omitted["overflow_files"] = sum(1 for e in listed if isinstance(e, dict) and e.get("returned"))
        self.artifacts_note = artifacts_note(omitted, files_cap=limits.artifact_files,
                                             bytes_cap=limits.artifact_cap)
        if not listed:
            return []
        body = bytes(self.trailer).partition(b"\n")[2]
        contents: dict[str, bytes] = {}
        if not self.trailer_overflow:
            try:
                with tarfile.open(fileobj=io.BytesIO(body), mode="r:") as tar:
                    for member in tar:
                        if member.isfile():
                            contents[member.name] = tar.extractfile(member).read()
            except tarfile.TarError:
                contents = {}
        result, total = [], 0
        for entry in listed[:limits.artifact_files]:
            path, size = str(entry.get("path", "")), int(entry.get("size", 0))
            data = contents.get(path)
            if data is not None and total + len(data) <= limits.artifact_cap:
                total += len(data)
            else:
                data = None
            result.append(Artifact(path=printable_path(path), size=size, data=data))
        return result
