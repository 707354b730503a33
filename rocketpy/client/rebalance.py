"""Queue allocation and per-queue consumption state of a push consumer.

Owns: :func:`allocate_averagely` (``AllocateMessageQueueAveragely``: contiguous blocks over the
sorted queues and sorted client ids, the first ``n mod m`` clients get one more) and
:class:`ProcessQueue` (``ProcessQueue``: the pulled-but-unconsumed messages of one queue by offset,
the offset to commit, the drop flag, flow-control and orderly lock state). Pure bookkeeping apart
from the asyncio events a pull loop waits on.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import deque
from collections.abc import Iterable, Sequence
from typing import Final

from rocketpy.client.message import MessageExt, MessageQueue
from rocketpy.client.offset_store import OffsetCell

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
        #: the offsets put, ascending; consumed ones are popped lazily from the left, so its head
        #: is the smallest offset still held once ``_trim`` ran (amortised O(1) per message).
        self._order: deque[int] = deque()
        self._max_offset = -1
        self._threshold = threshold
        self.dropped = False
        #: this queue's entry in the offset store (set by the consumer when the queue is added).
        self.offset_cell = OffsetCell()
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
        """Add freshly pulled messages (offsets above every offset put before)."""
        held, order = self._msgs, self._order
        for msg in msgs:
            offset = msg.queue_offset
            if offset not in held:
                held[offset] = msg
                if offset > self._max_offset:
                    order.append(offset)
                    self._max_offset = offset
                else:  # not expected from a pull loop; keep the order deque sorted anyway
                    self._order = order = deque(sorted((*order, offset)))
        if held:
            self.has_msgs.set()
        if len(held) >= self._threshold:
            self.space.clear()

    def remove(self, msgs: Iterable[MessageExt]) -> int:
        """Drop consumed messages; return the offset that may be committed (the smallest still
        outstanding, else one past the largest pulled), or -1 when nothing was held."""
        held = self._msgs
        if not held:
            return -1
        reconsume = self.reconsume
        for msg in msgs:
            held.pop(msg.queue_offset, None)
            if reconsume:
                reconsume.pop(msg.queue_offset, None)
        if len(held) < self._threshold:
            self.space.set()
        if not held:
            self._order.clear()
            self.has_msgs.clear()
            return self._max_offset + 1
        order = self._order
        while order[0] not in held:
            order.popleft()
        return order[0]

    def first(self, count: int) -> list[MessageExt]:
        """The ``count`` lowest-offset messages (orderly consumption)."""
        held = self._msgs
        return [held[k] for k in itertools.islice((k for k in self._order if k in held), count)]

    def lock_valid(self) -> bool:
        """Locked on the broker recently enough to consume in order."""
        return self.locked and time.monotonic() - self.last_lock_s < LOCK_MAX_LIVE_S
