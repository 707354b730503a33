"""Queue allocation and per-queue consumption state of a push consumer.

Owns: :func:`allocate_averagely` (``AllocateMessageQueueAveragely``: contiguous blocks over the
sorted queues and sorted client ids, the first ``n mod m`` clients get one more) and
:class:`ProcessQueue` (``ProcessQueue``: the pulled-but-unconsumed messages of one queue by offset,
the offset to commit, the drop flag, flow-control and orderly lock state). Pure bookkeeping apart
from the asyncio events a pull loop waits on.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Sequence
from typing import Final

from rocketpy.client.message import MessageExt, MessageQueue

#: RebalanceImpl / ProcessQueue REBALANCE_LOCK_MAX_LIVE_TIME: a lock older than this is not
#: trusted for orderly consumption.
LOCK_MAX_LIVE_S: Final = 30.0


def allocate_averagely(
    mq_all: Sequence[MessageQueue], cid_all: Sequence[str], current_cid: str
) -> list[MessageQueue]:
    """``AllocateMessageQueueAveragely.allocate``; both lists must already be sorted. A client
    not in ``cid_all`` gets nothing."""
    if current_cid not in cid_all or not mq_all:
        return []
    index = cid_all.index(current_cid)
    n, m = len(mq_all), len(cid_all)
    mod = n % m
    if n <= m:
        average = 1
    elif mod > 0 and index < mod:
        average = n // m + 1
    else:
        average = n // m
    start = index * average if mod > 0 and index < mod else index * average + mod
    count = min(average, n - start)
    return [mq_all[(start + i) % n] for i in range(count)]


class ProcessQueue:
    """Messages of one assigned queue between pull and commit."""

    def __init__(self, mq: MessageQueue, next_offset: int, threshold: int) -> None:
        self.mq = mq
        #: offset of the next pull.
        self.next_offset = next_offset
        #: queue offset -> message, in offset order (pulls append increasing offsets).
        self._msgs: dict[int, MessageExt] = {}
        self._max_offset = -1
        self._threshold = threshold
        self.dropped = False
        self.task: asyncio.Task[None] | None = None
        self.space = asyncio.Event()
        self.space.set()
        self.has_msgs = asyncio.Event()
        # Orderly mode: broker lock state and local redelivery counts.
        self.locked = False
        self.last_lock_s = 0.0
        self.consume_lock = asyncio.Lock()
        self.reconsume: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self._msgs)

    def put(self, msgs: Iterable[MessageExt]) -> None:
        """Add freshly pulled messages."""
        for msg in msgs:
            self._msgs[msg.queue_offset] = msg
            self._max_offset = max(self._max_offset, msg.queue_offset)
        if self._msgs:
            self.has_msgs.set()
        if len(self._msgs) >= self._threshold:
            self.space.clear()

    def remove(self, msgs: Iterable[MessageExt]) -> int:
        """Drop consumed messages; return the offset that may be committed (the smallest still
        outstanding, else one past the largest pulled), or -1 when nothing was held."""
        if not self._msgs:
            return -1
        for msg in msgs:
            self._msgs.pop(msg.queue_offset, None)
            self.reconsume.pop(msg.queue_offset, None)
        if len(self._msgs) < self._threshold:
            self.space.set()
        if not self._msgs:
            self.has_msgs.clear()
            return self._max_offset + 1
        return min(self._msgs)

    def first(self, count: int) -> list[MessageExt]:
        """The ``count`` lowest-offset messages (orderly consumption)."""
        return [self._msgs[k] for k in sorted(self._msgs)[:count]]

    def lock_valid(self) -> bool:
        """Locked on the broker recently enough to consume in order."""
        return self.locked and time.monotonic() - self.last_lock_s < LOCK_MAX_LIVE_S
