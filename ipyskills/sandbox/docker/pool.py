"""A warm pool of sandbox containers: created and started ahead of time, each used for exactly one run.

Starting a container is most of a fresh run's cost (about 0.1-0.2 s of the engine's time). A pooled
container has already been created, attached to and started, with the launcher waiting for its job on
stdin and the script's Python interpreter already started (launcher.py `--prestart`, prestarted.py), so a
run only sends the job and reads the result. Nothing is ever reused: a container serves one
run and is then removed like any other, so no state can pass from one run to the next.

- One pool per engine and image, made for one set of container limits (memory, pids, CPUs, /tmp size,
  network, output folder size): a run with other limits gets a fresh container, as without a pool.
- A pooled container's mounts are fixed when it is created, so the skill is always copied in (through
  the launcher, from a tar cached per skill), never bind-mounted.
- The pool keeps `size` containers ready and grows to the recent burst size: the most runs that asked
  for a container within `BURST_WINDOW` seconds, up to `max_size` (the `pool_max` setting, at most
  `MAX_SIZE`). So a burst of N parallel tool calls after a pause finds N warm containers. Without demand
  for `SHRINK_AFTER` seconds the extra containers are removed and it is back to `size`.
- Refill threads (up to `PARALLEL_STARTS` at once) top the pool up after each take, so containers start
  in parallel and the caller never waits for one. They start lazily, on the first Docker run or on
  `warm()`, and back off when the engine refuses.
- A container idle for more than `max_idle` seconds, or whose launcher has died, is discarded, not used;
  the pool only refills while it is used, so an idle session ends up holding nothing. The launcher itself
  exits if no job came within `max_idle` plus a margin, so a pool whose process was killed stops too.
- Pooled containers carry the usual labels (owner pid and host), plus `ipyskills.pool=1`: they are in the
  backend's atexit sweep, `drain_all()` runs at exit, on `%unload_ext`, and `ipyskills sandbox cleanup`
  removes what a killed process left.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import select
import threading
import time
from collections import deque
from dataclasses import dataclass

from ...errors import ConfigError
from ..policy import Limits
from . import cleanup as docker_cleanup  # imported first, so its atexit sweep runs after drain_all (LIFO)
from . import client as docker_client
from .containers import create_container, output_size, start_attached
from .runtime import RUNC, Runtime

MAX_IDLE = 600.0  # seconds a started container may wait for its run
IDLE_EXIT_MARGIN = 60.0  # the launcher gives up this long after the pool would have discarded it
MAX_SIZE = 8  # the most containers a pool may hold (pool_max is capped here)
PARALLEL_STARTS = 4  # containers being created and started at once per pool
BURST_WINDOW = 2.0  # seconds: takes this close together count as one burst
SHRINK_AFTER = 60.0  # seconds without a burst before the pool shrinks back to `size`
FAILURES_BEFORE_PAUSE = 3
PAUSE_AFTER_FAILURES = 30.0  # seconds without refill attempts after repeated failures
START_TIMEOUT = 60.0  # seconds by which one container's create, attach and start must be done

_pools: dict[tuple[str, str], ContainerPool] = {}  # (engine endpoint, image) -> pool
_pools_lock = threading.Lock()


@dataclass(frozen=True)
class PoolKey:
    """What a container is made with and cannot change afterwards."""

    image: str
    memory: int
    pids: int
    cpus: float
    tmp_size: int
    network: bool
    output_size: int
    runtime: str  # the engine's runtime name: runc, or gVisor's

    @classmethod
    def of(cls, image: str, limits: Limits, runtime: Runtime = RUNC) -> PoolKey:
        return cls(image, limits.memory, limits.pids, float(limits.cpus), limits.tmp_size, limits.network,
                   output_size(limits), runtime.engine_name)


@dataclass
class WarmContainer:
    """A started container whose launcher waits for a job on the attached socket."""

    id: str
    sock: object
    ready_at: float  # time.monotonic() when it was started

    def alive(self) -> bool:
        """The launcher prints nothing before its job: anything readable (data or EOF) means it is gone."""
        raw = getattr(self.sock, "_sock", self.sock)
        try:
            if getattr(raw, "pending", lambda: 0)():
                return False
            return not select.select([raw], [], [], 0)[0]
        except (OSError, ValueError):
            return False


class ContainerPool:
    """Up to `size` started containers for runs on `image` with limits matching `limits`."""

    def __init__(self, client, image: str, limits: Limits, size: int, max_idle: float = MAX_IDLE,
                 max_size: int | None = None, runtime: Runtime = RUNC):
        self.client, self.image, self.limits, self.runtime = client, image, limits, runtime
        self.key = PoolKey.of(image, limits, runtime)
        self.size = _checked_size(size)
        self.max_size = max(self.size, _checked_size(MAX_SIZE if max_size is None else max_size))
        self.max_idle = max_idle
        self.taken = 0  # runs served from the pool
        self.missed = 0  # matching runs that found it empty
        self.discarded = 0  # containers dropped as dead or too old
        self.last_error = ""
        self._idle: deque[WarmContainer] = deque()
        self._creating = 0
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None  # the first refill thread (also expires and shrinks)
        self._threads: set[threading.Thread] = set()
        self._takes: deque[float] = deque(maxlen=MAX_SIZE)  # times of the latest takes (hits and misses)
        self._burst = 0  # the largest burst seen, until it is SHRINK_AFTER seconds old
        self._burst_at = 0.0
        self._stopped = False
        self._last_demand = time.monotonic()
        self._paused_until = 0.0
        self._pid = os.getpid()

    # -- used by the backend ---------------------------------------------------------------------------
    def serves(self, image: str, limits: Limits, runtime: Runtime = RUNC) -> bool:
        return self.size > 0 and PoolKey.of(image, limits, runtime) == self.key

    def take(self) -> WarmContainer | None:
        """A started container, now the caller's (to run once and remove), or None when none is ready."""
        if os.getpid() != self._pid:
            return None  # a forked child does not own its parent's containers
        with self._cond:
            now = self._last_demand = time.monotonic()
            self._note_take(now)
            while self._idle:
                warm = self._idle.popleft()
                if now - warm.ready_at <= self.max_idle and warm.alive():
                    self.taken += 1
                    self._spawn()  # start its successor now, in parallel with the run
                    return warm
                self._discard(warm)
            self.missed += 1
            self._spawn()  # start refilling now rather than after the run
            return None

    def _note_take(self, now: float) -> None:
        self._takes.append(now)
        burst = sum(1 for t in self._takes if now - t <= BURST_WINDOW)
        if burst >= self._burst or now - self._burst_at > SHRINK_AFTER:
            self._burst, self._burst_at = burst, now

    def target(self) -> int:
        """How many containers the pool wants ready now: `size`, or the recent burst size up to max_size."""
        if self.size == 0:
            return 0
        burst = self._burst if time.monotonic() - self._burst_at <= SHRINK_AFTER else 0
        return max(self.size, min(self.max_size, burst))

    def refill(self) -> None:
        """Top the pool up in the background (never waits)."""
        if os.getpid() != self._pid:
            return
        with self._cond:
            self._last_demand = time.monotonic()
            while len(self._idle) > self.target():
                self._discard(self._idle.pop())
            self._spawn()
            self._cond.notify_all()

    def _spawn(self) -> None:
        """Start refill threads for what is missing, up to PARALLEL_STARTS (called under the lock)."""
        if self._stopped or self.size == 0 or time.monotonic() < self._paused_until:
            return
        self._threads = {t for t in self._threads if t.is_alive()}
        if self._thread not in self._threads:
            self._thread = None
        missing = max(0, self.target() - len(self._idle) - self._creating)
        needed = min(PARALLEL_STARTS, max(1, self._creating + missing))  # busy threads + new starts
        while len(self._threads) < needed or self._thread is None:
            thread = threading.Thread(target=self._fill, name="ipyskills-pool-refill", daemon=True)
            if self._thread is None:
                self._thread = thread
            self._threads.add(thread)
            thread.start()

    # -- public ----------------------------------------------------------------------------------------
    def warm(self, wait: float = 0.0) -> int:
        """Start filling; with `wait`, block up to that many seconds until full. Returns the idle count."""
        self.refill()
        deadline = time.monotonic() + wait
        with self._cond:
            while len(self._idle) < self.size and not self._stopped:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or (self._thread is None and time.monotonic() < self._paused_until):
                    break
                self._cond.wait(remaining)
            return len(self._idle)

    def status(self) -> dict:
        with self._cond:
            return {"image": self.image, "size": self.size, "max_size": self.max_size, "target": self.target(),
                    "idle": len(self._idle), "starting": self._creating,
                    "taken": self.taken, "missed": self.missed, "discarded": self.discarded,
                    "last_error": self.last_error, "stopped": self._stopped}

    def idle_ids(self) -> list[str]:
        with self._cond:
            return [w.id for w in self._idle]

    def drain(self, wait: bool = True, timeout: float = 10.0) -> int:
        """Stop refilling and remove every idle container (with `wait`, before returning, and also wait
        for a container being started to be removed). Returns how many idle containers there were."""
        with self._cond:
            self._stopped = True
            idle, self._idle = list(self._idle), deque()
            threads = list(self._threads)
            self._cond.notify_all()
        if os.getpid() != self._pid:
            return 0
        for warm in idle:
            _close(warm)
            if wait:
                docker_cleanup._remove(self.client, warm.id)
            else:
                self._remove_later(warm.id)
        if wait:
            deadline = time.monotonic() + timeout
            for thread in threads:
                if thread is not threading.current_thread():
                    thread.join(max(0.0, deadline - time.monotonic()))
        return len(idle)

    # -- the refill thread -----------------------------------------------------------------------------
    def _wanted(self) -> bool:
        recently_used = time.monotonic() - self._last_demand < self.max_idle
        return recently_used and len(self._idle) + self._creating < self.target()

    def _expire(self) -> float | None:
        """Discard idle containers past max_idle, and those beyond the target once a burst is over;
        seconds until the next check is due (None: nothing idle)."""
        now = time.monotonic()
        while self._idle and (now - self._idle[0].ready_at > self.max_idle or not self._idle[0].alive()):
            self._discard(self._idle.popleft())
        while len(self._idle) > self.target():
            self._discard(self._idle.popleft())
        if not self._idle:
            return None
        due = self._idle[0].ready_at + self.max_idle - now
        if len(self._idle) > self.size:
            due = min(due, self._burst_at + SHRINK_AFTER - now + 0.1)
        return max(0.05, due)

    def _fill(self) -> None:
        failures = 0
        me = threading.current_thread()
        while True:
            with self._cond:
                while not self._stopped and not self._wanted():
                    if self._thread is not me:  # extra refill threads leave when there is nothing to start
                        self._threads.discard(me)
                        return
                    self._cond.wait(self._expire())
                    self._expire()
                if self._stopped:
                    self._threads.discard(me)
                    return
                self._creating += 1
            try:
                warm = self._start_one()
            except Exception as exc:  # noqa: BLE001 - a failed refill must never surface in a run
                failures += 1
                with self._cond:
                    self._creating -= 1
                    self.last_error = str(exc) or type(exc).__name__
                    if failures >= FAILURES_BEFORE_PAUSE or time.monotonic() < self._paused_until:
                        self._paused_until = max(self._paused_until, time.monotonic() + PAUSE_AFTER_FAILURES)
                        self._threads.discard(me)
                        if self._thread is me:
                            self._thread = None
                        self._cond.notify_all()
                        return
                    self._cond.wait(0.5 * 2**failures)
                continue
            failures = 0
            with self._cond:
                self._creating -= 1
                if warm is None or self._stopped:
                    if warm is not None:
                        self._discard(warm)
                    self._threads.discard(me)
                    return  # stopped while it was being made
                self._idle.append(warm)
                self._cond.notify_all()

    def _start_one(self) -> WarmContainer | None:
        # Bounded like a run's calls: a stuck engine must not hold a refill thread (and its slot) forever.
        with docker_client.calls_end_by(time.monotonic() + START_TIMEOUT):
            container_id = create_container(self.client, self.image, self.limits, pooled=True,
                                                           idle_exit=self.max_idle + IDLE_EXIT_MARGIN,
                                                           runtime=self.runtime)
            if self._stopped:
                docker_cleanup._remove(self.client, container_id)
                return None
            sock = start_attached(self.client, container_id)  # removes it if it cannot start
        return WarmContainer(container_id, sock, time.monotonic())

    def _discard(self, warm: WarmContainer) -> None:
        self.discarded += 1
        _close(warm)
        self._remove_later(warm.id)

    def _remove_later(self, container_id: str) -> None:
        docker_cleanup.remove_later(self.client, container_id)


def _close(warm: WarmContainer) -> None:
    with contextlib.suppress(OSError):
        warm.sock.close()


def _checked_size(size) -> int:
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise ConfigError(f"pool_size must be a whole number of at least 0 (0 turns the pool off), got {size!r}")
    return min(size, MAX_SIZE)


def pool_for(client, image: str, limits: Limits, size: int, max_size: int | None = None,
             runtime: Runtime = RUNC) -> ContainerPool:
    """The process's pool for this engine and image, made (or re-made, when the limits or the runtime
    changed) on demand. Nothing starts until the pool is warmed or refilled."""
    size = _checked_size(size)
    endpoint = docker_cleanup._endpoint_of(client)
    with _pools_lock:
        pool = _pools.get((endpoint, image))
        if pool is not None and (pool.key != PoolKey.of(image, limits, runtime) or pool._stopped):
            pool.drain(wait=False)  # made for other limits: its containers would never be used
            pool = None
        if pool is None:
            pool = _pools[(endpoint, image)] = ContainerPool(client, image, limits, size, max_size=max_size,
                                                             runtime=runtime)
        else:
            pool.size = size
            pool.max_size = max(size, _checked_size(MAX_SIZE if max_size is None else max_size))
    return pool


def pools() -> list[ContainerPool]:
    with _pools_lock:
        return list(_pools.values())


def drain_all(timeout: float = 10.0) -> int:
    """Remove every pooled container this process holds (at exit, on `%unload_ext`). Returns the count."""
    with _pools_lock:
        mine = list(_pools.values())
        _pools.clear()
    with docker_client.calls_end_by(time.monotonic() + timeout):  # a stuck engine must not hold the exit
        return sum(pool.drain(wait=True, timeout=timeout) for pool in mine)


atexit.register(drain_all)
