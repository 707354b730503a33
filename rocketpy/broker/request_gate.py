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

A fast-path request that finds no slot waits in the queue as a job, not as a task: once a slot
is free, one loop callback runs every job it can in order, as a pool thread takes task after
task. (A task per waiter moved four waiters per loop turn, one per slot; under a pipelining
producer the queue, once formed by a moment of four slow sends, never drained, and every later
send paid a task.)
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from contextvars import ContextVar
from typing import Any

from rocketpy.common.codes import ResponseCode
from rocketpy.common.errors import RemoteError
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.transport.dispatch import (
    AnswerFuture,
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


class _Job:
    """A fast-path request waiting for a slot: its run (which gives the slot back itself),
    the future its answer goes to, and when it began to wait."""

    __slots__ = ("future", "run", "started")

    def __init__(
        self, run: Callable[[], NowaitResult], future: AnswerFuture, started: float
    ) -> None:
        self.run = run
        self.future = future
        self.started = started


class RequestGate:
    """Admission control for one request family."""

    def __init__(
        self, name: str, *, max_concurrency: int, max_waiting: int, max_wait_ms: int | None = None
    ) -> None:
        """Args: ``name`` for remarks and logs; ``max_concurrency`` requests running at once;
        ``max_waiting`` requests allowed to queue; ``max_wait_ms`` longest wait in the queue
        (None: no limit)."""
        self.name = name
        # Invariant: _free > 0 only while _waiters is empty, or while a drain of the jobs at
        # its head is scheduled or running (release hands a slot to a waiting task at once).
        self._free = max_concurrency
        self._waiters: deque[asyncio.Future[None] | _Job] = deque()
        self._drain_scheduled = False
        self._draining = False
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
        if self._free > 0 and not self._waiters:
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
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.release()  # the slot was handed over as we were cancelled: pass it on
            elif fut in self._waiters:
                self._waiters.remove(fut)
            raise
        finally:
            self._waiting -= 1
            self._wait_started.remove(start)
        waited_ms = int((time.monotonic() - start) * 1000)
        if self._max_wait_ms is not None and waited_ms > self._max_wait_ms:
            self.release()
            raise self._too_long(waited_ms)

    def release(self) -> None:
        """Give the slot back (straight to the longest waiter, if any)."""
        self._free += 1
        self._hand_over()

    def queue(self, run: Callable[[], NowaitResult]) -> AnswerFuture:
        """Queue a fast-path request that found no slot: ``run`` (which takes over a slot
        and gives it back itself) runs once one is free, in order; its answer (or error)
        goes to the returned future.

        Raises:
            RemoteError: SYSTEM_BUSY when the wait queue is full.
        """
        if self._waiting >= self._max_waiting:
            raise RemoteError(ResponseCode.SYSTEM_BUSY, OVERLOAD_REMARK)
        future: AnswerFuture = asyncio.get_running_loop().create_future()
        started = time.monotonic()
        self._waiting += 1
        self._wait_started.append(started)
        self._waiters.append(_Job(run, future, started))
        self._hand_over()
        return future

    def _hand_over(self) -> None:
        """Free slots to the head of the queue: straight to a waiting task; to jobs through
        one drain callback (:meth:`_drain`)."""
        waiters = self._waiters
        while self._free > 0 and waiters:
            head = waiters[0]
            if isinstance(head, _Job):
                if not (self._draining or self._drain_scheduled):
                    self._drain_scheduled = True
                    asyncio.get_running_loop().call_soon(self._drain)
                return
            waiters.popleft()
            if not head.done():
                self._free -= 1
                head.set_result(None)

    def _drain(self) -> None:
        """Run the queued jobs in order while slots are free (a job answered at once gives
        its slot back before the next runs)."""
        self._drain_scheduled = False
        self._draining = True
        try:
            waiters = self._waiters
            while self._free > 0 and waiters:
                head = waiters[0]
                if not isinstance(head, _Job):
                    self._draining = False
                    self._hand_over()  # a waiting task: the slot goes to it
                    self._draining = True
                    continue
                waiters.popleft()
                self._waiting -= 1
                self._wait_started.remove(head.started)
                if head.future.done():
                    continue  # cancelled: the connection closed
                waited_ms = int((time.monotonic() - head.started) * 1000)
                if self._max_wait_ms is not None and waited_ms > self._max_wait_ms:
                    head.future.set_exception(self._too_long(waited_ms))
                    continue
                self._free -= 1
                try:
                    result = head.run()
                except Exception as e:  # noqa: BLE001 - answered as dispatch answers it
                    head.future.set_exception(e)
                    continue
                _settle_into(head.future, result)
        finally:
            self._draining = False

    def _too_long(self, waited_ms: int) -> RemoteError:
        return RemoteError(
            ResponseCode.SYSTEM_BUSY,
            "[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, period in "
            f"queue: {waited_ms}ms, size of queue: {self._waiting}",
        )


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


def gated_nowait(gate: RequestGate, nowait: NowaitProcessor) -> NowaitProcessor:
    """``nowait`` run at once while ``gate`` has a free slot (held until its awaitable, if it
    returns one, is done); otherwise queued (:meth:`RequestGate.queue`), answered through a
    future once it has run."""

    def admitted(ctx: RequestContext, request: RemotingCommand) -> NowaitResult:
        try:
            result = nowait(ctx, request)
        except BaseException:
            gate.release()
            raise
        if result is None or isinstance(result, RemotingCommand | bytes):
            gate.release()
            return result
        if isinstance(result, asyncio.Future):
            # Its work is done but for an acknowledgement (dispatch.py): the slot goes back
            # now, as release_slot_early gives it back before a wait for replicas.
            gate.release()
            return result
        return _release_after(gate, result)

    def run(ctx: RequestContext, request: RemotingCommand) -> NowaitResult:
        if gate.try_acquire():
            return admitted(ctx, request)
        return gate.queue(functools.partial(admitted, ctx, request))

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


def _settle_into(future: AnswerFuture, result: NowaitResult) -> None:
    """A queued job's result into the future its connection answers from."""
    if result is None or isinstance(result, RemotingCommand | bytes):
        future.set_result(result)
        return
    pending: asyncio.Future[Any] = (
        result if isinstance(result, asyncio.Future) else asyncio.ensure_future(result)
    )

    def copy(done: asyncio.Future[Any]) -> None:
        if future.done():
            return
        if done.cancelled():
            future.cancel()
        elif (error := done.exception()) is not None:
            future.set_exception(error)
        else:
            future.set_result(done.result())

    pending.add_done_callback(copy)


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
