"""Sends waiting for an offset to be acknowledged (replicated or durable): one heap, one sweeper.

Owns: :class:`AckWaiters`, the futures of sends waiting until a threshold (the offset every
required replica acknowledged, or the flushed offset) reaches their record's end offset;
:class:`AckWaitersByCount` for waits keyed by the number of replicas needed; and
:func:`nth_highest`. Must not: know how the threshold is computed (the classic and AutoSwitch
HA masters and the commit log's group commit do, once per ack or flush). Plays the part of
upstream's ``GroupTransferService`` / ``GroupCommitService`` request lists; instead of
re-checking every waiter, a new threshold resolves only the waiters at or below it (a heap
ordered by offset), and one periodic timer expires the late ones instead of a timer per send.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable, Iterable

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
        return await self.future(offset, timeout_s)

    def future(self, offset: int, timeout_s: float) -> asyncio.Future[bool]:
        """:meth:`wait` as a future to await (no coroutine frame: the SYNC_FLUSH path makes one
        per message)."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[bool] = loop.create_future()
        heapq.heappush(self._heap, (offset, next(self._seq), loop.time() + timeout_s, fut))
        if self._sweeper is None:
            period = timeout_s / SWEEP_FRACTION
            self._sweeper = loop.call_later(period, self._expire, period)
        return fut

    def release(self, threshold: int) -> None:
        """Resolve every waiter whose offset is at or below ``threshold``."""
        heap = self._heap
        while heap and heap[0][0] <= threshold:
            fut = heapq.heappop(heap)[3]
            if not fut.done():
                fut.set_result(True)

    def fail_all(self) -> None:
        """Answer every pending wait False now, as its deadline would (the master steps down:
        no ack it gets from now on can count)."""
        for fut in self._take_all():
            if not fut.done():
                fut.set_result(False)

    def cancel_all(self) -> None:
        """Cancel every pending wait (the master stops)."""
        for fut in self._take_all():
            fut.cancel()

    def _take_all(self) -> list[asyncio.Future[bool]]:
        """Every pending future, removed, and the sweeper stopped."""
        heap, self._heap = self._heap, []
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        return [entry[3] for entry in heap]

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


def nth_highest(values: Iterable[int], n: int) -> int:
    """The ``n``-th highest of ``values`` (``n >= 1``); -1 when there are fewer than ``n``: the
    offset ``n`` replicas all hold, given each one's acknowledged offset."""
    ordered = sorted(values, reverse=True)
    return ordered[n - 1] if len(ordered) >= n else -1


class AckWaitersByCount:
    """:class:`AckWaiters` per number of replicas a send needs (``inSyncReplicas`` values)."""

    def __init__(self) -> None:
        self._by_needed: dict[int, AckWaiters] = {}

    def __bool__(self) -> bool:
        return any(self._by_needed.values())

    async def wait(self, needed: int, offset: int, timeout_s: float) -> bool:
        """Wait until :meth:`release` passes ``offset`` for ``needed``; False after the timeout."""
        waiters = self._by_needed.get(needed)
        if waiters is None:
            waiters = self._by_needed[needed] = AckWaiters()
        return await waiters.wait(offset, timeout_s)

    def release(self, threshold: Callable[[int], int]) -> None:
        """Resolve, for every ``needed`` with waiters, those at or below ``threshold(needed)``."""
        for needed, waiters in self._by_needed.items():
            if waiters:
                waiters.release(threshold(needed))

    def fail_all(self) -> None:
        """:meth:`AckWaiters.fail_all` for every ``needed``."""
        for waiters in self._by_needed.values():
            waiters.fail_all()

    def cancel_all(self) -> None:
        """Cancel every pending wait (the master stops)."""
        for waiters in self._by_needed.values():
            waiters.cancel_all()
