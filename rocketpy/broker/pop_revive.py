"""PopReviveService: re-puts popped messages that were not acked within their invisible time.

Owns: reading every revive queue of ``rmq_sys_REVIVE_LOG_<cluster>`` from its progress (consumer
offsets of ``CID_RMQ_SYS_REVIVE_GROUP``), matching ``ack``/``bAck`` messages to ``ck``
checkpoints by ``(topic, queueId, startOffset, popTime, group)``, and once a checkpoint's
``popTime + invisibleTime`` has passed, copying each un-acked message into the group's pop retry
topic ``%RETRY%<group>_<topic>`` (created on demand with 1 queue) with ``reconsumeTimes + 1``.
Runs on the master only. Mirrors ``broker/processor/PopReviveService`` (5.3.x, proxy.md section
3.4); the decision to send a message to ``%DLQ%<group>`` past ``maxReconsumeTimes`` is the
consumer's in 5.3 (the Java POP consumer's ``ConsumeMessagePopConcurrentlyService``, the proxy's
ReceiveMessage), so the revive never does it.

Differences, on purpose:
* Upstream 5.x has the timer deliver ``ck`` and ``ack`` messages at their due time
  (``TIMER_DELIVER_MS``). Here they are written straight into the revive queues at pop/ack time
  and this service keeps the due times itself, holding the checkpoints of a queue in memory
  until they are fully acked or revived -- what upstream did before the timer existed.
* Crash safety: after reviving a checkpoint the service writes a ``bAck`` for the offsets it
  re-put into the same revive queue, and the queue's progress never passes the oldest
  checkpoint still pending. A restart (even after SIGKILL) rescans from the persisted progress
  and rebuilds the same state from the CommitLog: nothing answered is lost, nothing acked or
  already revived is revived again (only a crash between a re-put and its ``bAck`` repeats that
  one checkpoint's re-puts).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Final

import structlog

from rocketpy.broker.processors.pop import record_queue_offset
from rocketpy.broker.runtime import BrokerRuntime
from rocketpy.broker.store_api import StoredMessage
from rocketpy.common.errors import CodecError
from rocketpy.common.message.const import MessageConst
from rocketpy.remoting.protocol import pop as codec
from rocketpy.remoting.protocol.body.config_shapes import PERM_READ, PERM_WRITE
from rocketpy.store.commit_log.put_types import MessageToStore, PutResult
from rocketpy.store.get_types import GetMessageStatus

log = structlog.get_logger(__name__)

FIRST_POP_TIME: Final = "1ST_POP_TIME"  # MessageConst.PROPERTY_FIRST_POP_TIME
ORIGIN_GROUP: Final = "ORIGIN_GROUP"  # MessageConst.PROPERTY_ORIGIN_GROUP
_BATCH: Final = 32
_SCAN_BYTES: Final = 4 * 1024 * 1024

Put = Callable[[MessageToStore], Awaitable[PutResult]]
CkKey = tuple[str, int, int, int, str]


def ck_key(topic: str, queue_id: int, start_offset: int, pop_time: int, group: str) -> CkKey:
    """How an ack finds its checkpoint."""
    return (topic, queue_id, start_offset, pop_time, group)


@dataclass(slots=True)
class _Pending:
    """A checkpoint read from the revive queue and not yet fully acked or revived."""

    ck: codec.PopCheckPoint
    revive_offset: int
    #: the offsets not acked yet, in checkpoint order (a dict as an ordered set): an ack costs
    #: one removal instead of a walk over the whole checkpoint
    left: dict[int, None] = field(init=False)

    def __post_init__(self) -> None:
        ck = self.ck
        self.left = dict.fromkeys(ck.offset_at(i) for i in range(ck.num) if not ck.bit_map >> i & 1)

    def ack(self, offsets: Iterable[int]) -> None:
        for offset in offsets:
            self.left.pop(offset, None)

    def unacked(self) -> list[int]:
        return list(self.left)


@dataclass(slots=True)
class _Queue:
    """One revive queue's scan position and pending checkpoints (in revive-offset order)."""

    scan_offset: int
    pending: dict[CkKey, _Pending] = field(default_factory=dict)


def revive_message(
    ck: codec.PopCheckPoint, msg: StoredMessage, store_host: tuple[str, int], *, v2: bool
) -> MessageToStore:
    """``reviveRetry``'s message: ``msg`` again, in the pop retry topic, one more reconsume."""
    retry = ck.topic.startswith(codec.RETRY_PREFIX)
    topic = ck.topic if retry else codec.pop_retry_topic(ck.topic, ck.cid, v2=v2)
    props = dict(msg.properties)
    if not retry:
        props[MessageConst.RETRY_TOPIC] = ck.topic
    if msg.reconsume_times == 0 or FIRST_POP_TIME not in props:
        props[FIRST_POP_TIME] = str(ck.pop_time)
    props[ORIGIN_GROUP] = ck.cid
    return MessageToStore.with_properties(
        topic=topic,
        queue_id=0,
        body=msg.body,
        flag=msg.flag,
        properties=props,
        sys_flag=msg.sys_flag,
        born_timestamp=msg.born_timestamp,
        born_host=store_host,
        reconsume_times=msg.reconsume_times + 1,
    )


class PopReviveService:
    """Matches acks to checkpoints and revives what timed out."""

    def __init__(
        self,
        rt: BrokerRuntime,
        *,
        revive_topic: str,
        put: Put,
        on_failure: Callable[[BaseException], None] | None = None,
    ) -> None:
        """Args: ``rt`` shared state (``reviveQueueNum``, ``reviveInterval``,
        ``reviveMaxSlow`` from ``rt.config``); ``revive_topic`` the cluster's revive topic;
        ``put`` stores a message (retry copies and ``bAck`` markers) and counts it;
        ``on_failure`` is told when the loop dies of a bug."""
        self._rt = rt
        self._topic = revive_topic
        self._put = put
        self._on_failure = on_failure
        self._queues: dict[int, _Queue] = {}
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def pending_count(self) -> int:
        """Checkpoints held in memory (tests, runtime info)."""
        return sum(len(q.pending) for q in self._queues.values())

    async def start(self) -> None:
        """Start the revive loop."""
        self._stop.clear()
        self._task = asyncio.get_running_loop().create_task(
            self._loop(), name=f"{self._rt.config.broker_name}/pop-revive"
        )
        self._task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            log.error("pop revive task failed", exc_info=exc)
            if self._on_failure is not None:
                self._on_failure(exc)

    async def stop(self) -> None:
        """Stop the loop. Idempotent."""
        self._stop.set()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _loop(self) -> None:
        while not self._stop.is_set():
            if self._rt.is_slave:
                self._queues.clear()  # a later term as master rescans from the progress
            else:
                try:
                    await self.revive_once()
                except (OSError, TimeoutError) as e:
                    log.warning("pop revive round failed", error=repr(e))
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._rt.config.revive_interval_ms / 1000):
                    await self._stop.wait()

    async def revive_once(self) -> None:
        """One round over every revive queue: read new ck/ack messages, revive what is due,
        commit the progress."""
        for qid in range(self._rt.config.revive_queue_num):
            queue = self._queues.get(qid)
            if queue is None:
                start = self._rt.offsets.query_offset(codec.REVIVE_GROUP, self._topic, qid)
                queue = self._queues[qid] = _Queue(scan_offset=max(0, start))
            self._scan(qid, queue)
            await self._revive(qid, queue)
            progress = min(
                (p.revive_offset for p in queue.pending.values()), default=queue.scan_offset
            )
            if progress != self._rt.offsets.query_offset(codec.REVIVE_GROUP, self._topic, qid):
                self._rt.offsets.commit_offset(
                    "revive", codec.REVIVE_GROUP, self._topic, qid, progress
                )

    def _scan(self, qid: int, queue: _Queue) -> None:
        store = self._rt.store
        while True:
            result = store.get_message(
                codec.REVIVE_GROUP, self._topic, qid, queue.scan_offset,
                max_msg_nums=_BATCH, max_total_bytes=_SCAN_BYTES, tags_codes=None,
            )  # fmt: skip
            if result.status in (
                GetMessageStatus.OFFSET_TOO_SMALL,
                GetMessageStatus.OFFSET_OVERFLOW_BADLY,
            ):
                log.warning(
                    "revive offset corrected", queue_id=qid, old=queue.scan_offset,
                    new=result.next_begin_offset,
                )  # fmt: skip
                queue.scan_offset = result.next_begin_offset
                continue
            for record in result.records:
                self._apply(queue, record)
            if result.status != GetMessageStatus.FOUND or not result.records:
                return
            queue.scan_offset = result.next_begin_offset

    def _apply(self, queue: _Queue, record: bytes) -> None:
        msg = self._rt.store.decode_message(record)
        tag = msg.properties.get(MessageConst.TAGS)
        try:
            if tag == codec.CK_TAG:
                ck = codec.decode_checkpoint(msg.body)
                key = ck_key(ck.topic, ck.queue_id, ck.start_offset, ck.pop_time, ck.cid)
                queue.pending.setdefault(key, _Pending(ck, record_queue_offset(record)))
            elif tag in (codec.ACK_TAG, codec.BATCH_ACK_TAG):
                ack = codec.decode_ack(msg.body)
                key = ck_key(ack.topic, ack.queue_id, ack.start_offset, ack.pop_time,
                             ack.consumer_group)  # fmt: skip
                pending = queue.pending.get(key)
                if pending is None:
                    return  # its checkpoint was revived or is older than the progress
                if isinstance(ack, codec.BatchAckMsg):
                    pending.ack(ack.ack_offset_list)
                else:
                    pending.ack((ack.ack_offset,))
                if not pending.left:
                    del queue.pending[key]
        except CodecError as e:
            log.warning("skip a bad revive message", tag=tag, error=str(e))

    async def _revive(self, qid: int, queue: _Queue) -> None:
        """Revive every due checkpoint, oldest first; stop at the first failed put (retried
        next round)."""
        now = self._rt.clock.wall_ms()
        due = sorted(
            (p for p in queue.pending.values() if p.ck.revive_time <= now),
            key=lambda p: p.revive_offset,
        )
        for pending in due:
            ck = pending.ck
            late_ms = now - ck.revive_time
            if late_ms > self._rt.config.revive_max_slow_s * 1000:
                log.warning("revive slow", queue_id=qid, late_ms=late_ms, topic=ck.topic)
            revived = pending.unacked()
            for offset in revived:
                if not await self._revive_one(ck, offset):
                    return
            marker = codec.BatchAckMsg(
                ack_offset=-1, start_offset=ck.start_offset, consumer_group=ck.cid,
                topic=ck.topic, queue_id=ck.queue_id, pop_time=ck.pop_time,
                broker_name=ck.broker_name, ack_offset_list=revived,
            )  # fmt: skip
            put = await self._put(self._marker_message(marker, qid))
            if not put.stored:
                log.error("revive: put bAck marker failed", status=put.status.value)
                return
            del queue.pending[ck_key(ck.topic, ck.queue_id, ck.start_offset, ck.pop_time, ck.cid)]

    async def _revive_one(self, ck: codec.PopCheckPoint, offset: int) -> bool:
        rt = self._rt
        result = rt.store.get_message(
            codec.REVIVE_GROUP, ck.topic, ck.queue_id, offset,
            max_msg_nums=1, max_total_bytes=_SCAN_BYTES, tags_codes=None,
        )  # fmt: skip
        if not result.records or record_queue_offset(result.records[0]) != offset:
            log.warning(
                "reviveQueueId, can not get biz msg, skip", topic=ck.topic,
                queue_id=ck.queue_id, offset=offset, status=result.status.value,
            )  # fmt: skip
            return True
        original = rt.store.decode_message(result.records[0])
        msg = revive_message(ck, original, rt.store_host, v2=rt.config.enable_retry_topic_v2)
        rt.topics.create_in_send_back(msg.topic, 1, PERM_READ | PERM_WRITE)
        put = await self._put(msg)
        if not put.stored:
            log.error("reviveQueueId, revive error", topic=msg.topic, status=put.status.value)
            return False
        return True

    def _marker_message(self, marker: codec.BatchAckMsg, qid: int) -> MessageToStore:
        rt = self._rt
        return MessageToStore.with_properties(
            topic=self._topic,
            queue_id=qid,
            body=marker.encode(),
            properties={
                MessageConst.TAGS: codec.BATCH_ACK_TAG,
                MessageConst.UNIQ_KEY: marker.unique_id(codec.BATCH_ACK_TAG),
            },
            born_timestamp=rt.clock.wall_ms(),
            born_host=rt.store_host,
        )
