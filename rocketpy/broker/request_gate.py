"""Per-family request admission: bounded concurrency, bounded waiting, SYSTEM_BUSY beyond.

Owns: :class:`RequestGate`, :func:`gated`, which wraps a processor, :func:`gated_nowait`,
which wraps a synchronous fast path (a request answered without awaiting never waits for a slot
while one is free, and needs no task), and :func:`gated_run`, which wraps a run processor (the
run holds one slot while it answers at once). Replaces upstream's
per-family thread pools and their queues (``sendMessageThreadPoolNums`` /
``sendThreadPoolQueueCapacity`` ...): at most ``max_concurrency`` requests of a family run at
once, at most ``max_waiting`` wait for a slot, and a request that waited longer than
``max_wait_ms`` is refused (``BrokerFastFailure``). Refusals are answered with SYSTEM_BUSY and
upstream's remarks, never buffered without bound (STYLE.md section 5, backpressure).

A freed slot wakes every waiting request, not one: they take free slots in order when they run
(most give theirs back before the next runs: a send's append is synchronous), and one that
finds none waits again at the head. Handing the slot to one waiter reserved it until that
waiter's task ran a loop turn later, so a queue, once formed by four sends holding the four
send slots for a moment, moved four requests per turn and never drained under a pipelining
producer: every later send queued behind it and paid a task.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from contextvars import ContextVar

from rocketpy.common.codes import ResponseCode
from rocketpy.common.errors import RemoteError
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.transport.dispatch import (
    Deferred,
    NowaitProcessor,
    NowaitResult,
    Processor,
    RequestContext,
    RunProcessor,
)

OVERLOAD_REMARK = "[OVERLOAD]system busy, start flow control for a while"

#: Gives back the slot the running request holds (None outside a gated request, or once given).
_held_slot: ContextVar[Callable[[], None] | None] = ContextVar("request_gate_slot", default=None)


def release_slot_early() -> None:
    """Give back the current request's slot before a wait that needs no worker.

    Upstream's send thread returns as soon as the append is done and the reply is written when
    the flush and replication futures complete (``asyncPutMessage``, ``handleDiskFlush``,
    ``handleHA``), so the thread pool bounds appends, not disk or replication waits. The
    request calls this once its record is written, before waiting for a SYNC_FLUSH fdatasync
    or slave acks; the in-flight cap per connection still bounds the waiters.
    """
    release = _held_slot.get()
    if release is not None:
        _held_slot.set(None)
        release()


def _release_once(gate: RequestGate) -> Callable[[], None]:
    held = True

    def release() -> None:
        nonlocal held
        if held:
            held = False
            gate.release()

    return release


class RequestGate:
    """Admission control for one request family."""

    def __init__(
        self, name: str, *, max_concurrency: int, max_waiting: int, max_wait_ms: int | None = None
    ) -> None:
        """Args: ``name`` for remarks and logs; ``max_concurrency`` requests running at once;
        ``max_waiting`` requests allowed to queue; ``max_wait_ms`` longest wait in the queue
        (None: no limit)."""
        self.name = name
        self._free = max_concurrency
        self._waiters: deque[asyncio.Future[None]] = deque()
        #: Waiters woken by a release whose tasks have not run yet: nobody jumps them.
        self._woken = 0
        #: Where the next woken waiter that finds no slot goes back in (behind the ones of
        #: the same wake that went back before it).
        self._requeue_at = 0
        self._max_waiting = max_waiting
        self._max_wait_ms = max_wait_ms
        self._waiting = 0
        self._wait_started: list[float] = []

    @property
    def waiting(self) -> int:
        """Requests waiting for a slot."""
        return self._waiting

    @property
    def max_waiting(self) -> int:
        """The wait-queue capacity."""
        return self._max_waiting

    def head_wait_ms(self) -> int:
        """How long the oldest waiting request has waited (``...QueueHeadWaitTimeMills``)."""
        if not self._wait_started:
            return 0
        return int((time.monotonic() - min(self._wait_started)) * 1000)

    def try_acquire(self) -> bool:
        """Take a slot if one is free and nobody waits (no await); False otherwise."""
        if self._free > 0 and not self._waiters and not self._woken:
            self._free -= 1
            return True
        return False

    async def acquire(self) -> None:
        """Take a slot.

        Raises:
            RemoteError: SYSTEM_BUSY when the wait queue is full or the wait was too long.
        """
        if self.try_acquire():
            return
        if self._waiting >= self._max_waiting:
            raise RemoteError(ResponseCode.SYSTEM_BUSY, OVERLOAD_REMARK)
        self._waiting += 1
        start = time.monotonic()
        self._wait_started.append(start)
        loop = asyncio.get_running_loop()
        try:
            fut: asyncio.Future[None] = loop.create_future()
            self._waiters.append(fut)
            while True:
                try:
                    await fut
                except asyncio.CancelledError:
                    if fut in self._waiters:
                        self._waiters.remove(fut)
                    elif fut.done() and not fut.cancelled():
                        self._woken -= 1  # woken, then cancelled before it ran
                    raise
                self._woken -= 1
                if self._free > 0:
                    self._free -= 1
                    break
                # Another woken waiter (or a fast path) took the slot: wait again, in order.
                fut = loop.create_future()
                self._waiters.insert(min(self._requeue_at, len(self._waiters)), fut)
                self._requeue_at += 1
        finally:
            self._waiting -= 1
            self._wait_started.remove(start)
        waited_ms = int((time.monotonic() - start) * 1000)
        if self._max_wait_ms is not None and waited_ms > self._max_wait_ms:
            self.release()
            raise RemoteError(
                ResponseCode.SYSTEM_BUSY,
                "[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, period in "
                f"queue: {waited_ms}ms, size of queue: {self._waiting}",
            )

    def release(self) -> None:
        """Give the slot back and wake every waiting request (see the module docstring)."""
        self._free += 1
        waiters = self._waiters
        if not waiters:
            return
        self._waiters = deque()
        self._requeue_at = 0
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)
                self._woken += 1


def gated(gate: RequestGate, processor: Processor) -> Processor:
    """``processor`` admitted through ``gate``."""

    async def run(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        await gate.acquire()
        release = _release_once(gate)
        token = _held_slot.set(release)
        try:
            return await processor(ctx, request)
        finally:
            _held_slot.reset(token)
            release()

    return run


def gated_nowait(
    gate: RequestGate, nowait: NowaitProcessor, processor: Processor
) -> NowaitProcessor:
    """``nowait`` run at once while ``gate`` has a free slot (held until its awaitable, if it
    returns one, is done); otherwise ``processor`` queued through ``gate`` as :func:`gated`."""
    queued = gated(gate, processor)

    def run(ctx: RequestContext, request: RemotingCommand) -> NowaitResult:
        if not gate.try_acquire():
            return queued(ctx, request)
        try:
            result = nowait(ctx, request)
        except BaseException:
            gate.release()
            raise
        if result is None or isinstance(result, RemotingCommand | bytes):
            gate.release()
            return result
        if isinstance(result, Deferred):
            # Its work is done but for an acknowledgement (dispatch.py): the slot goes back
            # now, as release_slot_early gives it back before a wait for replicas.
            gate.release()
            return result
        return _release_after(gate, result)

    return run


def gated_run(gate: RequestGate, run: RunProcessor) -> RunProcessor:
    """``run`` holding one slot of ``gate`` while it answers; with no slot free it answers
    nothing (each request then goes through the code's :func:`gated_nowait` form). A run
    answers only what it can at once, so the slot is back before it returns."""

    def run_gated(
        ctx: RequestContext, requests: Sequence[RemotingCommand], out: list[NowaitResult]
    ) -> None:
        if not gate.try_acquire():
            return
        try:
            run(ctx, requests, out)
        finally:
            gate.release()

    return run_gated


async def _release_after(
    gate: RequestGate, pending: Awaitable[RemotingCommand | None]
) -> RemotingCommand | None:
    """Await the rest of a fast-path request holding its slot (given back early by
    :func:`release_slot_early` when it waits for slaves)."""
    release = _release_once(gate)
    token = _held_slot.set(release)
    try:
        return await pending
    finally:
        _held_slot.reset(token)
        release()
