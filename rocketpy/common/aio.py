"""asyncio plumbing shared by every daemon: the service runner, periodic loops, contained tasks,
waits.

Owns: signal handling (SIGTERM/SIGINT set a shutdown event; a second signal forces exit), ordered
start/stop of services, and the helpers STYLE.md section 5 asks for. Mirrors the shape of uvicorn's
``Server.serve``/``shutdown``. Must not: create event loops (``cli/`` does, via :func:`run`).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol

import structlog

log = structlog.get_logger(__name__)


class Service(Protocol):
    """A long-lived component: ``start`` returns when ready, ``stop`` is idempotent and bounded."""

    async def start(self) -> None:
        """Bind, recover, start background tasks; return when ready to serve."""
        ...

    async def stop(self) -> None:
        """Stop everything started; safe to call twice or after a failed start."""
        ...


#: GIL switch interval of a daemon (CPython's default is 5 ms).
SWITCH_INTERVAL_S = 0.001


def tune_switch_interval() -> None:
    """Let executor threads (fdatasync, segment creation) get the GIL back within 1 ms.

    A blocking call on an executor releases the GIL and must take it back when it returns;
    while the event loop is busy that waits for the switch interval, once per call. With
    the default 5 ms a consume-queue segment created while producers kept the loop busy
    took 470 ms (a dozen syscalls), and the reput waited on it; with 1 ms, 8 ms.
    """
    sys.setswitchinterval(SWITCH_INTERVAL_S)


#: Generation-0 threshold of a serving broker (CPython's default is 700).
GC_GEN0_THRESHOLD = 10_000


def tune_gc() -> None:
    """Once a daemon is up: move everything made so far (modules, configs, tables) out of the
    collector's sight, and collect the youngest generation every 10,000 net allocations, not
    700.

    The cyclic collector runs when allocations outnumber frees by the threshold. A send in
    flight holds ~35 tracked objects (futures, callbacks, closures, its record and result) until
    it is answered, so with 64 sends in flight a DLedger leader passed 700 every few dozen
    messages and each collection walked those ~1,000 live objects again; every tenth pass
    walked the older ones, and a full pass walked the whole ~59,000-object heap (~47 ms).
    Measured in ``make bench-dledger-mode`` (batch push on, ~50,000 messages): the leader spent
    0.67 s collecting (1,071 young, 97 middle and 9 full passes), ~12 % of its CPU; frozen and
    at 10,000, three young passes, 0.02 s. Followers hardly collect either way. Garbage cycles
    are still collected, only less often; frozen objects are never (they live as long as the
    process anyway).
    """
    gc.freeze()
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(GC_GEN0_THRESHOLD, gen1, gen2)


def run(main: Coroutine[Any, Any, int], *, use_uvloop: bool = True) -> int:
    """Run ``main`` on a fresh loop (uvloop when importable) and return its exit code."""
    tune_switch_interval()
    factory: Callable[[], asyncio.AbstractEventLoop] | None = None
    if use_uvloop and os.environ.get("ROCKETPY_NO_UVLOOP") != "1":
        try:
            import uvloop  # noqa: PLC0415 - optional accelerator, chosen at run time

            factory = uvloop.new_event_loop
        except ImportError:
            factory = None
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)


async def serve_until_signalled(
    services: list[Service],
    *,
    on_started: Callable[[], None],
    stop_timeout_s: float = 30.0,
    shutdown: asyncio.Event | None = None,
) -> int:
    """Start ``services`` in order, call ``on_started``, wait for a signal, stop them in reverse.

    Args:
        services: started first to last, stopped last to first.
        on_started: prints the boot line (with real bound addresses).
        stop_timeout_s: budget for each service's ``stop``.
        shutdown: an event to wait on instead of a fresh one (tests, embedded use).

    Returns:
        0 after a clean stop, 1 if a service failed to start or stop.
    """
    loop = asyncio.get_running_loop()
    stop_event = shutdown or asyncio.Event()
    signals_seen = 0

    def on_signal(signum: int) -> None:
        nonlocal signals_seen
        signals_seen += 1
        if signals_seen > 1:
            log.warning("second signal, forcing exit", signal=signum)
            os._exit(130)
        log.info("shutdown signal received", signal=signal.Signals(signum).name)
        stop_event.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal, sig)
    started: list[Service] = []
    code = 0
    try:
        for svc in services:
            await svc.start()
            started.append(svc)
        on_started()
        await stop_event.wait()
    except Exception as e:
        log.exception("start failed", cause=f"{type(e).__name__}: {e}")
        code = 1
    finally:
        for svc in reversed(started):
            try:
                async with asyncio.timeout(stop_timeout_s):
                    await svc.stop()
            except Exception:
                log.exception("stop failed", service=type(svc).__name__)
                code = 1
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
    return code


class TaskSet:
    """Owns per-connection and per-request tasks: keeps references, logs failures, cancels on
    close."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(
        self, coro: Coroutine[Any, Any, Any], *, name: str | None = None
    ) -> asyncio.Task[Any]:
        """Start ``coro`` as a contained task."""
        task = asyncio.get_running_loop().create_task(coro, name=name or self._name)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            log.error("task failed", task=task.get_name(), exc_info=exc)

    def __len__(self) -> int:
        return len(self._tasks)

    async def cancel_all(self, timeout_s: float = 5.0) -> None:
        """Cancel every task and wait (bounded) for them to finish."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout_s):
                    await asyncio.gather(*tasks, return_exceptions=True)


async def periodic(
    interval_s: float,
    fn: Callable[[], Awaitable[None]],
    *,
    stop: asyncio.Event,
    name: str,
    initial_delay_s: float | None = None,
) -> None:
    """Run ``fn`` every ``interval_s`` until ``stop`` is set; log and continue on expected
    failures."""
    delay = interval_s if initial_delay_s is None else initial_delay_s
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(delay):
                await stop.wait()
        if stop.is_set():
            return
        try:
            await fn()
        except (OSError, TimeoutError, ConnectionError) as e:
            log.warning("periodic task failed", task=name, error=repr(e))
        delay = interval_s


async def wait_until(
    predicate: Callable[[], bool], timeout_s: float, *, interval_s: float = 0.01
) -> None:
    """Poll ``predicate`` until true; raise ``TimeoutError`` after ``timeout_s``."""
    async with asyncio.timeout(timeout_s):
        while not predicate():  # noqa: ASYNC110 - predicates are plain state, no event to wait on
            await asyncio.sleep(interval_s)
