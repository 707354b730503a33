"""Per-family request admission: bounded concurrency, bounded waiting, SYSTEM_BUSY beyond.

Owns: :class:`RequestGate` and :func:`gated`, which wraps a processor. Replaces upstream's
per-family thread pools and their queues (``sendMessageThreadPoolNums`` /
``sendThreadPoolQueueCapacity`` ...): at most ``max_concurrency`` requests of a family run at
once, at most ``max_waiting`` wait for a slot, and a request that waited longer than
``max_wait_ms`` is refused (``BrokerFastFailure``). Refusals are answered with SYSTEM_BUSY and
upstream's remarks, never buffered without bound (STYLE.md section 5, backpressure).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from contextvars import ContextVar

from rocketpy.common.codes import ResponseCode
from rocketpy.common.errors import RemoteError
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.transport.dispatch import Processor, RequestContext

OVERLOAD_REMARK = "[OVERLOAD]system busy, start flow control for a while"

#: Gives back the slot the running request holds (None outside a gated request, or once given).
_held_slot: ContextVar[Callable[[], None] | None] = ContextVar("request_gate_slot", default=None)


def release_slot_early() -> None:
    """Give back the current request's slot before a wait that needs no worker.

    Upstream's send thread returns as soon as the append is done and the SYNC_MASTER reply is
    written when the replication future completes (``asyncPutMessage`` + ``handleHA``), so the
    thread pool bounds appends, not replication waits. The request task calls this before
    waiting for slave acks; the in-flight cap per connection still bounds the waiters.
    """
    release = _held_slot.get()
    if release is not None:
        _held_slot.set(None)
        release()


class RequestGate:
    """Admission control for one request family."""

    def __init__(
        self, name: str, *, max_concurrency: int, max_waiting: int, max_wait_ms: int | None = None
    ) -> None:
        """Args: ``name`` for remarks and logs; ``max_concurrency`` requests running at once;
        ``max_waiting`` requests allowed to queue; ``max_wait_ms`` longest wait in the queue
        (None: no limit)."""
        self.name = name
        self._sem = asyncio.Semaphore(max_concurrency)
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

    async def acquire(self) -> None:
        """Take a slot.

        Raises:
            RemoteError: SYSTEM_BUSY when the wait queue is full or the wait was too long.
        """
        if not self._sem.locked():
            await self._sem.acquire()
            return
        if self._waiting >= self._max_waiting:
            raise RemoteError(ResponseCode.SYSTEM_BUSY, OVERLOAD_REMARK)
        self._waiting += 1
        start = time.monotonic()
        self._wait_started.append(start)
        try:
            await self._sem.acquire()
        finally:
            self._waiting -= 1
            self._wait_started.remove(start)
        waited_ms = int((time.monotonic() - start) * 1000)
        if self._max_wait_ms is not None and waited_ms > self._max_wait_ms:
            self._sem.release()
            raise RemoteError(
                ResponseCode.SYSTEM_BUSY,
                "[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, period in "
                f"queue: {waited_ms}ms, size of queue: {self._waiting}",
            )

    def release(self) -> None:
        """Give the slot back."""
        self._sem.release()


def gated(gate: RequestGate, processor: Processor) -> Processor:
    """``processor`` admitted through ``gate``."""

    async def run(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        await gate.acquire()
        held = True

        def release_once() -> None:
            nonlocal held
            if held:
                held = False
                gate.release()

        token = _held_slot.set(release_once)
        try:
            return await processor(ctx, request)
        finally:
            _held_slot.reset(token)
            release_once()

    return run
