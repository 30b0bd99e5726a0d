"""The one lock every `ast.parse` in the process takes: CPython 3.11's parser is not thread-safe under load,
and the requirement scan, the interpreter check and the Python guard all parse scripts, from many runs at
once. It lives here, below all three, so none borrows it from another."""

from __future__ import annotations

import threading

PARSE_LOCK = threading.Lock()
