"""ACK_MESSAGE (200051), BATCH_ACK_MESSAGE (200151) and CHANGE_MESSAGE_INVISIBLETIME (200053).

Owns: the checks of proxy.md section 3.3 (unknown topic TOPIC_NOT_EXIST, bad queue
MESSAGE_ILLEGAL, offset outside the queue NO_MESSAGE), writing ``ack``/``bAck`` messages into the
handle's revive queue for normal pops (answered only once they are in the CommitLog), and for
orderly pops (revive queue 999) committing through
:class:`~rocketpy.broker.order_info.ConsumerOrderInfoManager`. A change of invisible time writes
a one-message checkpoint with the new times, then acks the old handle. Mirrors
``broker/processor/AckMessageProcessor`` and ``ChangeInvisibleTimeProcessor`` (5.3.x).
Must not: revive anything (``pop_revive.py`` does).

Difference, on purpose: an ack whose revive message cannot be stored answers SYSTEM_ERROR
(upstream logs it and answers SUCCESS), so every ack answered SUCCESS is in the CommitLog.
CHANGE_MESSAGE_INVISIBLETIME refuses ``offset == maxOffset`` (proxy.md section 3.3's [min, max)).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

import structlog

from rocketpy.broker.order_info import ConsumerOrderInfoManager
from rocketpy.broker.processors.pop import PopMessageProcessor, RevivePut
from rocketpy.broker.runtime import BrokerRuntime
from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.common.errors import CodecError, RemoteError
from rocketpy.common.message.const import MessageConst
from rocketpy.remoting.protocol import pop as codec
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.protocol.headers.base import from_ext, to_ext
from rocketpy.remoting.protocol.headers.pop import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
)
from rocketpy.remoting.transport.dispatch import NowaitProcessor, Processor, RequestContext
from rocketpy.store.commit_log.put_types import MessageToStore, PutResult

log = structlog.get_logger(__name__)

#: Wakes parked pops of a queue whose orderly batch was acked: (topic, group, queue id).
NotifyQueue = Callable[[str, str, int], None]
#: Puts a revive message when the store can append at once; None (nothing written) otherwise.
RevivePutNowait = Callable[[MessageToStore], PutResult | None]


class AckMessageProcessor:
    """Acks and invisible-time changes."""

    def __init__(
        self,
        rt: BrokerRuntime,
        *,
        revive_topic: str,
        put_revive: RevivePut,
        pop: PopMessageProcessor,
        order_info: ConsumerOrderInfoManager,
        notify_queue: NotifyQueue,
        put_revive_nowait: RevivePutNowait | None = None,
    ) -> None:
        """Args: ``rt`` shared state; ``revive_topic``/``put_revive`` where acks go; ``pop``
        builds checkpoints; ``order_info`` orderly state; ``notify_queue`` wakes parked pops;
        ``put_revive_nowait`` lets an ACK_MESSAGE be answered without a task."""
        self._rt = rt
        self._revive_topic = revive_topic
        self._put_revive = put_revive
        self._put_revive_nowait = put_revive_nowait
        self._pop = pop
        self._order = order_info
        self._notify_queue = notify_queue

    def handlers(self) -> Mapping[int, Processor]:
        """Request code -> processor."""
        return {
            RequestCode.ACK_MESSAGE: self.ack_message,
            RequestCode.BATCH_ACK_MESSAGE: self.batch_ack_message,
            RequestCode.CHANGE_MESSAGE_INVISIBLETIME: self.change_invisible_time,
        }

    def nowait_handlers(self) -> Mapping[int, NowaitProcessor]:
        """The codes also served synchronously (the connection calls them without a task)."""
        return {RequestCode.ACK_MESSAGE: self.ack_message_nowait}

    def _check(self, topic: str, queue_id: int, offset: int, *, upper_open: bool) -> None:
        rt = self._rt
        topic_config = rt.topics.select(topic)
        if topic_config is None:
            log.error("topic not exist, apply first", topic=topic)
            raise RemoteError(
                ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!"
            )
        if not 0 <= queue_id < topic_config.read_queue_nums:
            raise RemoteError(
                ResponseCode.MESSAGE_ILLEGAL,
                f"queueId[{queue_id}] is illegal, topic:[{topic}] "
                f"topicConfig.readQueueNums:[{topic_config.read_queue_nums}]",
            )
        low = rt.store.min_offset_in_queue(topic, queue_id)
        high = rt.store.max_offset_in_queue(topic, queue_id)
        if offset < low or offset > high or (upper_open and offset == high):
            raise RemoteError(
                ResponseCode.NO_MESSAGE,
                f"offset is illegal, key:{topic}@{queue_id}, commit:{offset}, store:{low},{high}",
            )

    @staticmethod
    def _extra(text: str) -> codec.ExtraInfo:
        try:
            return codec.decode_extra_info(text)
        except CodecError as e:
            raise RemoteError(ResponseCode.MESSAGE_ILLEGAL, f"extraInfo is illegal: {e}") from e

    # -- ACK_MESSAGE -----------------------------------------------------------------------

    async def ack_message(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand | None:
        """``AckMessageProcessor.processRequest`` for one handle."""
        result = self.ack_message_nowait(ctx, request)
        if result is None or isinstance(result, RemotingCommand):
            return result
        return await result

    def ack_message_nowait(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand | Awaitable[RemotingCommand]:
        """:meth:`ack_message` answered at once when the ``ack`` message can be appended
        without waiting (no task per ack), else the awaitable that finishes it."""
        h = from_ext(AckMessageRequestHeader, request.ext_fields)
        self._check(h.topic, h.queue_id, h.offset, upper_open=False)
        extra = self._extra(h.extra_info)
        if extra.revive_qid == codec.POP_ORDER_REVIVE_QUEUE:
            self._ack_order(h.consumer_group, h.topic, h.queue_id, h.offset, extra)
            return request.make_response(ResponseCode.SUCCESS)
        ack = codec.AckMsg(
            ack_offset=h.offset,
            start_offset=extra.ck_queue_offset,
            consumer_group=h.consumer_group,
            topic=h.topic,
            queue_id=h.queue_id,
            pop_time=extra.pop_time,
            broker_name=extra.broker_name,
        )
        msg = self._ack_to_store(ack, extra.revive_qid, codec.ACK_TAG)
        put = None if self._put_revive_nowait is None else self._put_revive_nowait(msg)
        if put is None:
            return self._finish_ack(request, ack, msg)
        self._check_put(put, ack)
        return request.make_response(ResponseCode.SUCCESS)

    async def _finish_ack(
        self, request: RemotingCommand, ack: codec.AckMsg, msg: MessageToStore
    ) -> RemotingCommand:
        self._check_put(await self._put_revive(msg), ack)
        return request.make_response(ResponseCode.SUCCESS)

    async def batch_ack_message(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand | None:
        """``BatchAckMessageRequestBody``: one ``bAck`` per entry (orderly ones commit). As
        upstream, no acks is NO_MESSAGE, and an entry of an unknown queue or offsets outside
        the queue are skipped."""
        try:
            broker_name, acks = codec.decode_batch_ack_body(request.body or b"{}")
        except CodecError as e:
            raise RemoteError(ResponseCode.MESSAGE_ILLEGAL, f"batch ack body: {e}") from e
        if not acks:
            return request.make_response(ResponseCode.NO_MESSAGE)
        store = self._rt.store
        for entry in acks:
            topic = (
                codec.pop_retry_topic(
                    entry.topic, entry.consumer_group, v2=self._rt.config.enable_retry_topic_v2
                )
                if entry.retry == codec.RETRY_TOPIC
                else entry.topic
            )
            if self._rt.topics.select(topic) is None:
                log.error("Illegal topic or queue found when batch ack", topic=topic)
                continue
            low = store.min_offset_in_queue(topic, entry.queue_id)
            high = store.max_offset_in_queue(topic, entry.queue_id)
            offsets = [o for o in entry.offsets if low <= o <= high]
            if entry.revive_queue_id == codec.POP_ORDER_REVIVE_QUEUE:
                extra = codec.ExtraInfo(
                    ck_queue_offset=entry.start_offset, pop_time=entry.pop_time,
                    invisible_time=entry.invisible_time, revive_qid=entry.revive_queue_id,
                    topic_type=codec.topic_type(topic), broker_name=broker_name or "",
                    queue_id=entry.queue_id, queue_offset=entry.start_offset,
                )  # fmt: skip
                for offset in offsets:
                    self._ack_order(entry.consumer_group, topic, entry.queue_id, offset, extra)
                continue
            if not offsets:
                continue
            ack = codec.BatchAckMsg(
                ack_offset=-1,
                start_offset=entry.start_offset,
                consumer_group=entry.consumer_group,
                topic=topic,
                queue_id=entry.queue_id,
                pop_time=entry.pop_time,
                broker_name=broker_name,
                ack_offset_list=offsets,
            )
            await self._append_ack(ack, entry.revive_queue_id, codec.BATCH_ACK_TAG)
        return request.make_response(ResponseCode.SUCCESS)

    async def _append_ack(self, ack: codec.AckMsg, revive_qid: int, tag: str) -> None:
        msg = self._ack_to_store(ack, revive_qid, tag)
        self._check_put(await self._put_revive(msg), ack)

    def _ack_to_store(self, ack: codec.AckMsg, revive_qid: int, tag: str) -> MessageToStore:
        rt = self._rt
        if not 0 <= revive_qid < rt.config.revive_queue_num:
            raise RemoteError(ResponseCode.MESSAGE_ILLEGAL, f"reviveQid[{revive_qid}] is illegal")
        return MessageToStore.with_properties(
            topic=self._revive_topic,
            queue_id=revive_qid,
            body=ack.encode(),
            # upstream sets genAckUniqueId last for a bAck too (ackOffset -1, suffix "ack")
            properties={MessageConst.TAGS: tag, MessageConst.UNIQ_KEY: ack.unique_id()},
            born_timestamp=rt.clock.wall_ms(),
            born_host=rt.store_host,
        )

    @staticmethod
    def _check_put(put: PutResult, ack: codec.AckMsg) -> None:
        if not put.stored:
            log.error("put ack msg error", status=put.status.value, topic=ack.topic)
            raise RemoteError(ResponseCode.SYSTEM_ERROR, f"put ack msg error: {put.status.value}")

    def _ack_order(
        self, group: str, topic: str, queue_id: int, offset: int, extra: codec.ExtraInfo
    ) -> None:
        """Orderly ack: commit up to the first un-acked offset of the batch."""
        rt = self._rt
        if offset < rt.offsets.query_offset(group, topic, queue_id):
            return
        next_offset = self._order.commit_and_next(topic, group, queue_id, offset, extra.pop_time)
        if next_offset == -1:
            raise RemoteError(
                ResponseCode.MESSAGE_ILLEGAL,
                f"offset is illegal, key:{topic}@{group}@{queue_id}, commit:{offset}",
            )
        if next_offset > -1:
            if not rt.offsets.has_offset_reset(topic, group, queue_id):
                rt.offsets.commit_offset("pop-ack", group, topic, queue_id, next_offset)
            if not self._order.check_block(
                None, topic, group, queue_id, extra.invisible_time, rt.clock.wall_ms()
            ):
                self._notify_queue(topic, group, queue_id)

    # -- CHANGE_MESSAGE_INVISIBLETIME ------------------------------------------------------

    async def change_invisible_time(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand | None:
        """``ChangeInvisibleTimeProcessor.processRequest``."""
        h = from_ext(ChangeInvisibleTimeRequestHeader, request.ext_fields)
        self._check(h.topic, h.queue_id, h.offset, upper_open=True)
        extra = self._extra(h.extra_info)
        rt = self._rt
        now = rt.clock.wall_ms()
        if extra.revive_qid == codec.POP_ORDER_REVIVE_QUEUE:
            if h.offset >= rt.offsets.query_offset(h.consumer_group, h.topic, h.queue_id):
                self._order.update_next_visible_time(
                    h.topic, h.consumer_group, h.queue_id, h.offset, extra.pop_time,
                    now + h.invisible_time,
                )  # fmt: skip
            # upstream answers the batch's pop time and the invisible time measured from it
            header = ChangeInvisibleTimeResponseHeader(
                pop_time=extra.pop_time, invisible_time=now + h.invisible_time - extra.pop_time,
                revive_qid=extra.revive_qid,
            )  # fmt: skip
            return request.make_response(ResponseCode.SUCCESS, None, ext_fields=to_ext(header))
        ck = codec.PopCheckPoint(
            start_offset=h.offset,
            pop_time=now,
            invisible_time=h.invisible_time,
            num=1,
            queue_id=h.queue_id,
            topic=h.topic,
            cid=h.consumer_group,
            queue_offset_diff=[0],
            broker_name=extra.broker_name,
        )
        if not 0 <= extra.revive_qid < rt.config.revive_queue_num:
            raise RemoteError(
                ResponseCode.MESSAGE_ILLEGAL, f"reviveQid[{extra.revive_qid}] is illegal"
            )
        put = await self._put_revive(self._pop.checkpoint_message(ck, extra.revive_qid))
        if not put.stored:
            raise RemoteError(ResponseCode.SYSTEM_ERROR, f"append checkpoint: {put.status.value}")
        old = codec.AckMsg(
            ack_offset=h.offset,
            start_offset=extra.ck_queue_offset,
            consumer_group=h.consumer_group,
            topic=h.topic,
            queue_id=h.queue_id,
            pop_time=extra.pop_time,
            broker_name=extra.broker_name,
        )
        await self._append_ack(old, extra.revive_qid, codec.ACK_TAG)
        header = ChangeInvisibleTimeResponseHeader(
            pop_time=now, invisible_time=h.invisible_time, revive_qid=extra.revive_qid
        )
        return request.make_response(ResponseCode.SUCCESS, None, ext_fields=to_ext(header))
