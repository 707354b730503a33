"""Concurrent consumption of pulled messages: listener calls on a fixed pool of worker tasks.

Owns: :class:`ConsumeStatus`, :class:`ConsumeOrderlyStatus`, the :data:`Listener` type,
:func:`restore_topic` (``resetRetryAndNamespace``) and :class:`ConsumeConcurrentlyService`
(``ConsumeMessageConcurrentlyService``: ``submitConsumeRequest``, ``ConsumeRequest.run``,
``processConsumeResult`` in CLUSTERING mode, ``submitConsumeRequestLater``).

Java runs each ``ConsumeRequest`` (at most ``consumeMessageBatchMaxSize`` messages) on a thread of
``consumeExecutor`` (``consumeThreadMax`` threads). Here ``concurrency`` long-lived worker tasks
take (process queue, batch) requests from one FIFO deque; a parked worker waits on a future. One
task per request (a task, a semaphore wait and three coroutines per message) cost more CPU than
decoding the message. Wake-ups are chained: :meth:`submit` wakes one idle worker, and a worker
that takes a request while more are queued wakes the next, unless one is already waking. A
listener that never suspends is thus served by one worker without waking the others for
nothing; listeners that suspend get up to ``concurrency`` calls in flight.
"""

from __future__ import annotations

import asyncio
import enum
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Final

import structlog

from rocketpy.client.message import MessageExt
from rocketpy.client.rebalance import ProcessQueue
from rocketpy.common.aio import TaskSet
from rocketpy.common.message.const import MessageConst

log = structlog.get_logger(__name__)

#: a worker yields to the event loop after this many listener calls in a row: a listener that
#: never suspends would otherwise keep the pull responses unread until the backlog is consumed.
YIELD_EVERY: Final = 64
#: ``submitConsumeRequestLater``: a batch the broker did not take back is retried after this.
CONSUME_LATER_S: Final = 5.0


class ConsumeStatus(enum.Enum):
    """``ConsumeConcurrentlyStatus``."""

    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


class ConsumeOrderlyStatus(enum.Enum):
    """``ConsumeOrderlyStatus`` (the deprecated COMMIT/ROLLBACK are not offered)."""

    SUCCESS = "SUCCESS"
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "SUSPEND_CURRENT_QUEUE_A_MOMENT"


Listener = Callable[[list[MessageExt]], Awaitable[ConsumeStatus | ConsumeOrderlyStatus]]
SendBack = Callable[[MessageExt], Awaitable[bool]]


def restore_topic(msg: MessageExt, retry_topic: str) -> MessageExt:
    """``resetRetryAndNamespace``: a message of the group's retry topic shows its original
    topic."""
    if msg.topic != retry_topic:
        return msg  # first: the properties of a pulled message are decoded only when read
    original = msg.properties.get(MessageConst.RETRY_TOPIC)
    return msg.replace(topic=original) if original else msg


class ConsumeConcurrentlyService:
    """Worker pool calling the listener for batches of pulled messages.

    Args:
        group: consumer group (for logs).
        retry_topic: ``%RETRY%group``: its messages are shown with their original topic.
        concurrency: worker tasks, i.e. listener calls in flight at most (``consumeThreadMax``).
        batch_max_size: messages per listener call (``consumeMessageBatchMaxSize``).
        send_back: CONSUMER_SEND_MSG_BACK of one message; False when the broker did not take it.
        stop_event: set when the consumer shuts down (ends the consume-later waits).
        consume_later_s: delay before a batch the broker did not take back is consumed again.
    """

    def __init__(
        self,
        *,
        group: str,
        retry_topic: str,
        concurrency: int,
        batch_max_size: int,
        send_back: SendBack,
        stop_event: asyncio.Event,
        consume_later_s: float = CONSUME_LATER_S,
    ) -> None:
        self._group = group
        self._retry_topic = retry_topic
        self._concurrency = max(1, concurrency)
        self._batch = max(1, batch_max_size)
        self._send_back = send_back
        self._stop = stop_event
        self._later_s = consume_later_s
        self._listener: Listener | None = None
        self._tasks = TaskSet(f"push-consumer/{group}/consume")
        #: FIFO of (queue, batch) requests; a request of a dropped queue is skipped.
        self._requests: deque[tuple[ProcessQueue, list[MessageExt]]] = deque()
        #: parked workers' futures, oldest first.
        self._idle: deque[asyncio.Future[None]] = deque()
        #: workers woken but not yet running (at most one: the chain rule).
        self._waking = 0
        #: requests being consumed (listener call, send-back, offset update).
        self._busy = 0

    @property
    def busy(self) -> int:
        """Requests being consumed right now."""
        return self._busy

    def start(self, listener: Listener) -> None:
        """Start the workers."""
        self._listener = listener
        for i in range(self._concurrency):
            self._tasks.spawn(self._worker(), name=f"consume-{i}")

    async def wait_idle(self, timeout_s: float) -> None:
        """Wait (bounded) until no request is being consumed."""
        deadline = time.monotonic() + timeout_s
        while self._busy and time.monotonic() < deadline:  # noqa: ASYNC110 - bounded drain
            await asyncio.sleep(0.01)

    async def cancel(self) -> None:
        """Cancel the workers and the consume-later waits."""
        await self._tasks.cancel_all()

    def submit(self, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        """``submitConsumeRequest``: queue ``msgs`` in listener-sized batches."""
        requests = self._requests
        size = self._batch
        if size == 1:
            requests.extend([(pq, [m]) for m in msgs])
        else:
            requests.extend((pq, msgs[i : i + size]) for i in range(0, len(msgs), size))
        if not self._waking:
            self._wake_one()

    def _wake_one(self) -> None:
        idle = self._idle
        while idle:
            waiter = idle.popleft()
            if not waiter.done():
                waiter.set_result(None)
                self._waking += 1
                return

    async def _park(self) -> None:
        waiter = asyncio.get_running_loop().create_future()
        self._idle.append(waiter)
        try:
            await waiter
        finally:
            if waiter.done() and not waiter.cancelled():
                self._waking -= 1

    async def _worker(self) -> None:
        """One ``consumeExecutor`` thread: run requests until cancelled (shutdown)."""
        assert self._listener is not None  # noqa: S101 - start() set it
        requests, listener, retry_topic = self._requests, self._listener, self._retry_topic
        streak = 0
        while True:
            if not requests:
                streak = 0
                await self._park()
                continue
            pq, msgs = requests.popleft()
            if requests and not self._waking:
                self._wake_one()
            if pq.dropped:
                continue
            self._busy += 1
            try:
                view = msgs
                if pq.mq.topic == retry_topic:
                    view = [restore_topic(m, retry_topic) for m in msgs]
                try:
                    status: ConsumeStatus | ConsumeOrderlyStatus | None = await listener(view)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    # The listener is user code: a failure means "consume later", as in Java.
                    log.exception("consumeMessage exception", group=self._group)
                    status = None
                if not pq.dropped:
                    if status is ConsumeStatus.CONSUME_SUCCESS:
                        offset = pq.remove(msgs)
                    else:
                        offset = await self._failed(pq, msgs)
                    cell = pq.offset_cell  # OffsetCell.advance, inlined: once per call
                    if offset > cell.value and not pq.dropped:
                        cell.value = offset
            finally:
                self._busy -= 1
            streak += 1
            if streak >= YIELD_EVERY:
                streak = 0
                await asyncio.sleep(0)

    async def _failed(self, pq: ProcessQueue, msgs: list[MessageExt]) -> int:
        """RECONSUME_LATER (or a listener error): send each message back for redelivery; those
        the broker did not take are consumed again here later. Returns what
        :meth:`ProcessQueue.remove` returns for the rest."""
        failed = [m for m in msgs if not await self._send_back(m)]
        if not failed:
            return pq.remove(msgs)
        self._tasks.spawn(self._later(pq, failed), name="consume-later")
        return pq.remove([m for m in msgs if m not in failed])

    async def _later(self, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        """``submitConsumeRequestLater``: the batch goes back to the workers."""
        try:
            async with asyncio.timeout(self._later_s):
                await self._stop.wait()
        except TimeoutError:
            pass
        if not pq.dropped and not self._stop.is_set():
            self._requests.append((pq, msgs))
            if not self._waking:
                self._wake_one()
