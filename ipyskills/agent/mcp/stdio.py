"""The stdio transport, and what happens when the client goes away.

When the client closes the pipe (it quit, or was killed) the serve loop ends; calls still running are
abandoned by their tasks, so the runs themselves are ended here: in-flight sandbox runs (containers,
local process groups) and the warm pool are removed, then the process exits at once instead of waiting for
the abandoned worker threads to reach their runs' deadlines.
"""

from __future__ import annotations

import logging
import os
import sys

log = logging.getLogger(__name__)


def install_cleanup_on_signals() -> None:
    """SIGTERM/SIGHUP end this process's runs first, as for every other ipyskills process. Called from the
    main thread: runs are started from worker threads here, where the sandbox cannot install it itself."""
    from ...sandbox.signals import install  # internal, imported here only

    install()


def serve_stdio(server) -> None:
    import anyio
    from mcp.server.stdio import stdio_server

    install_cleanup_on_signals()

    async def main():
        try:
            async with stdio_server() as (read_stream, write_stream):
                await server.run(read_stream, write_stream, server.create_initialization_options())
        except Exception as exc:  # noqa: BLE001 - the pipe broke: the client is gone, which ends the session
            log.info("ipyskills mcp: the client went away (%s)", type(exc).__name__)
        finally:
            # Here, not after anyio.run: leaving the event loop waits for the abandoned worker threads.
            if server.ipyskills.in_flight:
                end_runs_and_exit()

    try:
        anyio.run(main)
    except KeyboardInterrupt:
        pass
    if server.ipyskills.in_flight:
        end_runs_and_exit()


def end_runs_and_exit(code: int = 0) -> None:
    """Remove this process's sandbox runs and warm pool, then exit without joining worker threads."""
    # Internal, imported here only: the sandbox's own "end every run of this process" (SIGTERM uses it).
    from ...sandbox.signals import end_runs

    try:
        end_runs()
    finally:
        sys.stderr.flush()
        os._exit(code)
