"""Removing our containers on every path: the removal queue (a finished run's container goes in a background
thread), the healer (retries removals that failed and creates whose reply was lost, once the engine answers),
the sweep at exit and on SIGTERM/SIGHUP, and `ipyskills sandbox cleanup` for strays of dead processes.

Every container we create carries LABEL and its owner's pid and host, so it can always be found again.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import queue
import socket
import threading
import time

from ..owners import pid_alive
from . import client as docker_client

LABEL = "ipyskills.sandbox"
LABEL_PID = "ipyskills.pid"
LABEL_HOST = "ipyskills.host"
LABEL_POOL = "ipyskills.pool"  # "1" on containers started ahead of time by the warm pool
LABEL_CREATE = "ipyskills.create"  # a token per create call, to find a container whose create reply was lost
REMOVING_WAIT = 5.0  # seconds to wait for a container the engine is already removing to be gone

_live: dict[str, object] = {}  # container id -> client, for the atexit sweep
_live_lock = threading.Lock()
_creating: set[str] = set()  # create tokens of calls in progress (their containers are not strays yet)
_lost: dict[str, object] = {}  # create token -> client, for creates that failed after maybe creating one
_unremoved: dict[str, object] = {}  # container id -> client, for removals that failed (retried by the healer)
_engines: dict[str, object] = {}  # endpoint -> this process's shared client of that engine (swept at exit)


def engine_started(client) -> None:
    """The first time this process runs something on an engine: remember it for the sweep at exit, and
    remove (in the background) containers whose owner process is gone."""
    _engines.setdefault(_endpoint_of(client), client)
    threading.Thread(target=_cleanup_quietly, args=(client,), name="ipyskills-startup-cleanup",
                     daemon=True).start()


def _cleanup_quietly(client) -> None:
    with contextlib.suppress(Exception):  # best effort; `ipyskills sandbox cleanup` says what went wrong
        cleanup(client)


def _endpoint_of(client) -> str:
    # The engine as named by DOCKER_HOST: docker-py's base_url is "http+docker://localhost" for every unix
    # socket, which would make two local engines (a private one, the shared one) one.
    return docker_client.engine_name(client)


def _remove(client, container_id: str) -> bool:
    """Force-remove a container; never raises. False when it could not be removed now: it stays
    registered, and the healer thread retries in the background once the engine answers. True when it is
    gone, or the engine is already removing it (the healer then checks that it went)."""
    import docker.errors

    if docker_client.out_of_time():  # the caller's deadline has passed: the healer tries it instead
        return _removal_failed(client, container_id)
    try:
        client.api.remove_container(container_id, force=True, v=True)
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError as exc:
        if "already in progress" not in str(exc):
            return _removal_failed(client, container_id)
        # The engine is removing it already (AutoRemove, or its own clean-up after a restart): wait a
        # moment until it is gone. An engine's removal can fail and leave the container "Dead", so one
        # not seen gone stays on the list, and the healer removes it.
        try:
            client.api.wait(container_id, timeout=REMOVING_WAIT, condition="removed")
        except docker.errors.NotFound:
            pass
        except Exception:  # noqa: BLE001 - still there, or the engine stopped answering
            _removal_failed(client, container_id)
            return True
    except Exception:  # noqa: BLE001 - engine gone, connection lost, urllib3 trouble: retried later
        return _removal_failed(client, container_id)
    _forget(container_id)
    return True


def _forget(container_id: str) -> None:
    """The container is gone: nothing needs to remove it any more."""
    with _live_lock:
        _live.pop(container_id, None)
        _unremoved.pop(container_id, None)


def _removal_failed(client, container_id: str) -> bool:
    with _live_lock:
        _live.setdefault(container_id, client)
        _unremoved[container_id] = client
    _heal_later(client)
    return False


# -- self-healing: removals that failed, creates whose reply was lost, strays of this process ---------
HEAL_FIRST_DELAY = 0.5  # seconds before the first retry; doubles up to HEAL_MAX_DELAY
HEAL_MAX_DELAY = 5.0
_healer: threading.Thread | None = None
_heal_clients: dict[str, object] = {}  # endpoint -> a client of that engine
_heal_wake = threading.Event()


def _heal_later(client) -> None:
    """Start (or wake) the background healer: once the engine answers again it retries failed removals,
    removes containers of lost creates, and sweeps this process's untracked containers."""
    global _healer
    with _remover_lock:
        _heal_clients[_endpoint_of(client)] = client
        if os.getpid() == _main_pid and (_healer is None or not _healer.is_alive()):
            _healer = threading.Thread(target=_heal_loop, name="ipyskills-container-healer", daemon=True)
            _healer.start()
    _heal_wake.set()


def _heal_loop() -> None:
    delay = HEAL_FIRST_DELAY
    while True:
        _heal_wake.wait(delay)
        _heal_wake.clear()
        with _remover_lock:
            clients = list(_heal_clients.values())
        healed = all(heal(client) for client in clients)
        with _live_lock:
            pending = bool(_unremoved or _lost)
        if healed and not pending:
            with _remover_lock:
                if not _heal_wake.is_set():
                    global _healer
                    _healer = None
                    _heal_clients.clear()
                    return
            continue
        delay = HEAL_FIRST_DELAY if healed else min(HEAL_MAX_DELAY, delay * 2)


def heal(client, everything: bool = False) -> bool:
    """One healing pass on one engine: retry failed removals, remove containers of lost creates and
    containers labelled with this process's pid that nothing tracks (with `everything`, all of this
    process's containers). Returns False when the engine does not answer."""
    endpoint = _endpoint_of(client)
    try:
        client.api.ping()
        ours = client.api.containers(all=True, filters={"label": [f"{LABEL}=1", f"{LABEL_PID}={os.getpid()}"]})
    except Exception:  # noqa: BLE001 - still down; try again later
        return False
    with _live_lock:
        retry = [cid for cid, c in _unremoved.items() if _endpoint_of(c) == endpoint]
        tracked, creating = set(_live), set(_creating)
        lost = {t for t, c in _lost.items() if _endpoint_of(c) == endpoint}
    results = [_remove(client, cid) for cid in retry]  # every one tried, not only up to the first failure
    ok = all(results)
    for container in ours:
        cid, labels = container.get("Id", ""), container.get("Labels") or {}
        token = labels.get(LABEL_CREATE)
        if everything or token in lost or (cid not in tracked and token not in creating):
            ok = _remove(client, cid) and ok
    if ok:
        with _live_lock:
            for token in lost:
                _lost.pop(token, None)
    return ok


_removals: queue.Queue = queue.Queue()
_remover: threading.Thread | None = None
_remover_lock = threading.Lock()


def remove_later(client, container_id: str, settle: float = 0.0) -> None:
    """Remove a finished run's container in a background thread (it stays in the atexit sweep's list
    until it is gone). `settle`: first wait up to that long for it to go by itself (AutoRemove after the
    launcher exits), for gVisor, where a forced removal racing the sandbox's own exit stalled 30-60 s
    (measured after runs that forked: 1 in 4 under load; waiting first, it went in 0.1-0.2 s, 8 of 8)."""
    global _remover
    with _live_lock:
        if container_id not in _live:
            return  # already removed (e.g. right away at a timeout) or known gone
    with _remover_lock:
        if _remover is None or not _remover.is_alive():
            _remover = threading.Thread(target=_remove_queued, name="ipyskills-container-remover", daemon=True)
            _remover.start()
    _removals.put((client, container_id, settle))


def _remove_queued() -> None:
    while True:
        client, container_id, settle = _removals.get()
        try:
            if settle and _went_by_itself(client, container_id, settle):
                _forget(container_id)
                continue
            _remove(client, container_id)  # engine errors leave it to the atexit sweep and `sandbox cleanup`
        finally:
            _removals.task_done()


def _went_by_itself(client, container_id: str, wait: float) -> bool:
    import docker.errors

    try:
        client.api.wait(container_id, timeout=wait, condition="removed")
        return True
    except docker.errors.NotFound:
        return True
    except Exception:  # noqa: BLE001 - still there after `wait`, or the engine did not answer: force it
        return False


def flush_removals(timeout: float = 30.0) -> bool:
    """Wait until every queued removal has been tried; False if that took longer than `timeout`."""
    deadline = time.monotonic() + timeout
    while _removals.unfinished_tasks:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


_main_pid = os.getpid()  # a forked child owns none of these containers


def end_all(timeout: float = 10.0) -> None:
    """Remove every container this process made: queued removals, in-flight and pooled ones, and any
    other container labelled with this pid (lost creates). At exit, and on SIGTERM/SIGHUP."""
    if os.getpid() != _main_pid:
        return
    with docker_client.calls_end_by(time.monotonic() + timeout):  # a stuck engine must not hold the exit
        _end_all(timeout)


def _end_all(timeout: float) -> None:
    flush_removals(timeout=timeout)
    with _live_lock:
        pending = list(_live.items())
        endpoints = {_endpoint_of(c): c for c in [*_live.values(), *_lost.values(), *_unremoved.values()]}
    endpoints.update(_engines)
    for container_id, client in pending:
        _remove(client, container_id)
    for client in endpoints.values():
        heal(client, everything=True)


@atexit.register
def _remove_live_containers() -> None:
    # The process is on its way out, often because of a Ctrl-C: one more Ctrl-C (an impatient user
    # pressing it again) must neither cut this bounded clean-up short nor print a traceback.
    if threading.current_thread() is threading.main_thread():
        import signal

        with contextlib.suppress(ValueError, OSError):
            signal.signal(signal.SIGINT, signal.SIG_IGN)
    end_all()


def labelled_containers(client, all_owners: bool = False) -> list:
    """Our containers that no live process on this machine owns (or all of them with all_owners)."""
    containers = client.containers.list(all=True, filters={"label": f"{LABEL}=1"}, ignore_removed=True)
    if all_owners:
        return containers
    host = socket.gethostname()
    return [c for c in containers if not _owner_alive(c.labels, host)]


def _owner_alive(labels: dict, host: str) -> bool:
    if labels.get(LABEL_HOST) != host:
        return True  # another machine's process cannot be checked from here; only --all removes it
    try:
        pid = int(labels.get(LABEL_PID, ""))
    except ValueError:
        return False
    return pid == os.getpid() or pid_alive(pid)


def cleanup(client=None, all_owners: bool = False) -> list[str]:
    """Remove stray sandbox containers; returns their short ids."""
    client = client or docker_client.connect()
    try:
        strays = labelled_containers(client, all_owners)
    except docker_client.engine_errors() as exc:
        raise docker_client.unreachable(docker_client.engine_name(client), exc) from None
    removed = []
    for container in strays:
        _remove(client, container.id)
        removed.append(container.short_id)
    return removed
