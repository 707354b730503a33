"""Sends waiting for replicas to acknowledge an offset: one heap, one sweeper timer.

Owns: :class:`AckWaiters`, the futures of sends waiting until a replication threshold (the
offset every required replica acknowledged) reaches their record's end offset. Must not: know
how the threshold is computed (the classic and AutoSwitch masters do, once per ack). Plays the
part of upstream's ``GroupTransferService`` request list; instead of re-checking every waiter
on every ack, an ack resolves only the waiters at or below the new threshold (a heap ordered
by offset), and one periodic timer expires the late ones (as the store's SYNC_FLUSH waiters do)
instead of a timer per send.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools

#: Deadlines are checked every this fraction of the timeout, so a wait ends between the
#: timeout and 1.125 times it (the commit log's SYNC_FLUSH waiters use the same period).
SWEEP_FRACTION = 8


class AckWaiters:
    """Futures resolved True once the threshold reaches their offset, False at their deadline."""

    def __init__(self) -> None:
        # (offset, sequence, deadline on the loop clock, future); the sequence keeps the
        # heap from ever comparing futures.
        self._heap: list[tuple[int, int, float, asyncio.Future[bool]]] = []
        self._seq = itertools.count()
        self._sweeper: asyncio.TimerHandle | None = None

    def __len__(self) -> int:
        return len(self._heap)

    async def wait(self, offset: int, timeout_s: float) -> bool:
        """Wait until :meth:`release` passes ``offset``; False after ``timeout_s``."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[bool] = loop.create_future()
        heapq.heappush(self._heap, (offset, next(self._seq), loop.time() + timeout_s, fut))
        if self._sweeper is None:
            period = timeout_s / SWEEP_FRACTION
            self._sweeper = loop.call_later(period, self._expire, period)
        return await fut

    def release(self, threshold: int) -> None:
        """Resolve every waiter whose offset is at or below ``threshold``."""
        heap = self._heap
        while heap and heap[0][0] <= threshold:
            fut = heapq.heappop(heap)[3]
            if not fut.done():
                fut.set_result(True)

    def cancel_all(self) -> None:
        """Cancel every pending wait (the master stops)."""
        heap, self._heap = self._heap, []
        for entry in heap:
            entry[3].cancel()
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None

    def _expire(self, period: float) -> None:
        """Answer waiters past their deadline with False; re-armed while any remain."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        still = []
        for entry in self._heap:
            fut = entry[3]
            if fut.done():
                continue  # its sender went away (cancelled)
            if entry[2] <= now:
                fut.set_result(False)
            else:
                still.append(entry)
        heapq.heapify(still)
        self._heap = still
        self._sweeper = loop.call_later(period, self._expire, period) if still else None
