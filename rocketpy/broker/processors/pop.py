"""POP_MESSAGE (200050): pop messages that stay invisible until acked or revived.

Owns: the pop checks (broker/topic/queue/group permission, ``maxMsgNums`` <= 32, ``bornTime``),
the read order (``popFromRetryProbability`` percent of pops read the group's pop retry topic
first, then every read queue from a random start or the one queue asked for, then the retry topic
if still short), the try-lock per ``topic@group@queueId``, start offsets (committed offset, else
``initMode``), writing one checkpoint per popped queue into the revive topic before answering
(:class:`~rocketpy.broker.pop_revive.PopReviveService` re-puts what is not acked in time),
committing the pop offset at once, orderly pops through
:class:`~rocketpy.broker.order_info.ConsumerOrderInfoManager` (no checkpoint, a queue blocks
while a popped batch is invisible and un-acked), the response header (``startOffsetInfo``,
``msgOffsetInfo``, ``orderCountInfo``) and parking in
:class:`~rocketpy.broker.pop_long_polling.PopLongPollingService`; its checks, offsets and reads
are shared with ``pop_query.py`` (PEEK, NOTIFICATION, POLLING_INFO). Mirrors
``broker/processor/PopMessageProcessor`` (5.3.x, proxy.md section 3.1).

A message popped from the retry topic is answered, as upstream's default
``popResponseReturnActualRetryTopic=false`` does, re-encoded under the subscribed topic with its
ExtraInfo in the ``POP_CK`` property (whose topic type says it came from the retry topic);
``true`` answers the stored record as it is.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Final

import structlog

from rocketpy.broker.filter import build_subscription
from rocketpy.broker.order_info import ConsumerOrderInfoManager
from rocketpy.broker.pop_long_polling import PopLongPollingService, PopRequest
from rocketpy.broker.runtime import DEFAULT_PULL_MAX_BYTES, BrokerRuntime
from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.common.errors import CodecError, RemoteError
from rocketpy.common.message.const import MessageConst
from rocketpy.common.message.decoder import decode_record
from rocketpy.common.message.properties import encode_properties
from rocketpy.common.message.record import QUEUE_OFFSET_POS, encode_record
from rocketpy.remoting.protocol import pop as codec
from rocketpy.remoting.protocol.body.config_shapes import PERM_READ
from rocketpy.remoting.protocol.body.heartbeat import SubscriptionData
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.protocol.headers.base import from_ext, to_ext
from rocketpy.remoting.protocol.headers.pop import (
    PopMessageRequestHeader,
    PopMessageResponseHeader,
)
from rocketpy.remoting.transport.dispatch import Processor, RequestContext
from rocketpy.store.commit_log.put_types import MessageToStore, PutResult
from rocketpy.store.get_types import GetMessageStatus, GetResult

log = structlog.get_logger(__name__)

MAX_POP_NUMS: Final = 32
_TIMEOUT_TOO_MUCH_MS: Final = 500
_INIT_MODE_MIN: Final = 0
_INT64: Final = struct.Struct(">q")

#: Puts a message into the revive topic (a checkpoint or an ack) and returns the store's result.
RevivePut = Callable[[MessageToStore], Awaitable[PutResult]]


@dataclass(slots=True)
class _PopState:
    """What one pop collects across its queues."""

    records: list[bytes] = field(default_factory=list)
    rest: int = 0
    start_info: list[str] = field(default_factory=list)
    msg_info: list[str] = field(default_factory=list)
    order_info: list[str] = field(default_factory=list)


def record_queue_offset(record: bytes) -> int:
    """The QUEUEOFFSET field of a stored record (message-format.md section 1)."""
    return int(_INT64.unpack_from(record, QUEUE_OFFSET_POS)[0])


class PopMessageProcessor:
    """POP and its read-only siblings."""

    def __init__(
        self,
        rt: BrokerRuntime,
        *,
        revive_topic: str,
        put_revive: RevivePut,
        order_info: ConsumerOrderInfoManager,
    ) -> None:
        """Args: ``rt`` shared broker state; ``revive_topic`` where checkpoints go;
        ``put_revive`` writes one; ``order_info`` the orderly-pop state. Call :meth:`attach`
        before serving."""
        self._rt = rt
        self._revive_topic = revive_topic
        self._put_revive = put_revive
        self._order = order_info
        self._polling: PopLongPollingService | None = None
        #: NOTIFICATION's processor: a parked notification is re-run through it when woken.
        self.notification: Processor | None = None
        self._ck_counter = itertools.count()
        #: ``QueueLockManager``: ``topic@group@queueId`` keys a pop is reading right now.
        self._locked: set[str] = set()

    def attach(self, polling: PopLongPollingService) -> None:
        """Park empty pops in ``polling`` (which calls :meth:`wake_up`)."""
        self._polling = polling

    @property
    def polling(self) -> PopLongPollingService | None:
        """Where empty pops (and notifications) are parked."""
        return self._polling

    def handlers(self) -> Mapping[int, Processor]:
        """Request code -> processor."""
        return {RequestCode.POP_MESSAGE: self.pop_message}

    def retry_topic(self, topic: str, group: str) -> str:
        """The group's pop retry topic for ``topic``."""
        return codec.pop_retry_topic(topic, group, v2=self._rt.config.enable_retry_topic_v2)

    async def pop_message(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand | None:
        """An original POP: may be parked (returns None)."""
        return await self.process(ctx, request, allow_suspend=True)

    async def wake_up(self, ctx: RequestContext, request: RemotingCommand) -> None:
        """Re-run a parked request without suspension and write its response."""
        try:
            if request.code == RequestCode.NOTIFICATION and self.notification is not None:
                response = await self.notification(ctx, request)
            else:
                response = await self.process(ctx, request, allow_suspend=False)
        except (RemoteError, CodecError) as e:
            code = e.code if isinstance(e, RemoteError) else ResponseCode.SYSTEM_ERROR
            remark = e.remark if isinstance(e, RemoteError) else str(e)
            response = request.make_response(code, remark)
        if response is not None and not request.is_oneway:
            ctx.channel.send_response(response)

    # -- POP_MESSAGE -----------------------------------------------------------------------

    async def process(
        self, ctx: RequestContext, request: RemotingCommand, *, allow_suspend: bool
    ) -> RemotingCommand | None:
        """``processRequest``."""
        rt = self._rt
        ext = dict(request.ext_fields or {})
        if not ext.get("bornTime") or ext.get("bornTime") == "0":
            ext["bornTime"] = str(rt.clock.wall_ms())
            request.ext_fields = ext
        h = from_ext(PopMessageRequestHeader, ext)
        now = rt.clock.wall_ms()
        if now - h.born_time - h.poll_time > _TIMEOUT_TOO_MUCH_MS:
            return request.make_response(
                ResponseCode.POLLING_TIMEOUT,
                f"the broker[{rt.config.broker_ip1}] pop message is timeout too much",
            )
        read_queues = self.check_request(h)
        subscription = self._subscription(h.topic, h.exp, h.exp_type)
        order = bool(h.order)
        revive_qid = (
            codec.POP_ORDER_REVIVE_QUEUE
            if order
            else next(self._ck_counter) % rt.config.revive_queue_num
        )
        state = _PopState()
        retry = self.retry_topic(h.topic, h.consumer_group)
        need_retry = not order and rt.rng.randrange(100) < rt.config.pop_from_retry_probability
        if need_retry:
            await self._pop_topic(h, retry, None, revive_qid, now, state)
        if h.queue_id < 0:
            start = rt.rng.randrange(read_queues)
            for i in range(read_queues):
                qid = (start + i) % read_queues
                await self._pop_queue(h, h.topic, qid, subscription, revive_qid, now, state)
        else:
            await self._pop_queue(h, h.topic, h.queue_id, subscription, revive_qid, now, state)
        if not need_retry and not order and len(state.records) < h.max_msg_nums:
            await self._pop_topic(h, retry, None, revive_qid, now, state)
        return self._respond(ctx, request, h, subscription, state, revive_qid, now, allow_suspend)

    def _respond(  # noqa: PLR0917 - one pop's whole outcome
        self,
        ctx: RequestContext,
        request: RemotingCommand,
        h: PopMessageRequestHeader,
        subscription: SubscriptionData,
        state: _PopState,
        revive_qid: int,
        now: int,
        allow_suspend: bool,
    ) -> RemotingCommand | None:
        rt = self._rt
        if state.records:
            code = ResponseCode.SUCCESS
            body: bytes | None = b"".join(state.records)
            rt.stats.inc_get(h.consumer_group, h.topic, len(state.records))
            if state.rest > 0 and self._polling is not None:
                self._polling.notify_key(h.topic, h.consumer_group, h.queue_id)
        else:
            body = None
            parked = None
            if allow_suspend and h.poll_time > 0 and self._polling is not None:
                parked = self._polling.polling(
                    PopRequest(
                        ctx=ctx,
                        request=request,
                        topic=h.topic,
                        group=h.consumer_group,
                        queue_id=h.queue_id,
                        retry_topic=self.retry_topic(h.topic, h.consumer_group),
                        subscription=subscription,
                        deadline_ms=rt.clock.monotonic_ms() + h.poll_time,
                    )
                )
            if parked:
                return None
            code = ResponseCode.POLLING_FULL if parked is False else ResponseCode.POLLING_TIMEOUT
        header = PopMessageResponseHeader(
            pop_time=now,
            invisible_time=h.invisible_time,
            revive_qid=revive_qid,
            rest_num=state.rest,
            start_offset_info=";".join(state.start_info),
            msg_offset_info=";".join(state.msg_info),
            order_count_info=";".join(state.order_info) if h.order else None,
        )
        # upstream's remark is the get status: FOUND, or NO_MESSAGE_IN_QUEUE when nothing
        remark = (GetMessageStatus.FOUND if body else GetMessageStatus.NO_MESSAGE_IN_QUEUE).value
        response = request.make_response(code, remark, ext_fields=to_ext(header))
        response.body = body
        return response

    def check_request(self, h: PopMessageRequestHeader) -> int:
        """The refusals of proxy.md section 3.1; returns the topic's read queue count."""
        rt = self._rt
        if not rt.broker_readable:
            raise RemoteError(
                ResponseCode.NO_PERMISSION,
                f"the broker[{rt.config.broker_ip1}] pop message is forbidden",
            )
        if h.max_msg_nums > MAX_POP_NUMS:
            raise RemoteError(
                ResponseCode.INVALID_PARAMETER,
                f"the broker[{rt.config.broker_ip1}] pop message's num is greater than 32",
            )
        topic_config = rt.topics.select(h.topic)
        if topic_config is None:
            raise RemoteError(
                ResponseCode.TOPIC_NOT_EXIST, f"topic[{h.topic}] not exist, apply first please!"
            )
        if not topic_config.perm & PERM_READ:
            raise RemoteError(
                ResponseCode.NO_PERMISSION, f"the topic[{h.topic}] peeking message is forbidden"
            )
        if h.queue_id >= topic_config.read_queue_nums:  # upstream answers SYSTEM_ERROR
            raise RemoteError(
                ResponseCode.SYSTEM_ERROR,
                f"queueId[{h.queue_id}] is illegal, topic:[{h.topic}] "
                f"topicConfig.readQueueNums:[{topic_config.read_queue_nums}]",
            )
        rt.groups.find_consumable(h.consumer_group)
        return topic_config.read_queue_nums

    @staticmethod
    def _subscription(topic: str, exp: str | None, exp_type: str | None) -> SubscriptionData:
        try:
            return build_subscription(topic, exp, exp_type)
        except ValueError as e:
            raise RemoteError(
                ResponseCode.SUBSCRIPTION_PARSE_FAILED, "parse the consumer's subscription failed"
            ) from e

    async def _pop_topic(  # noqa: PLR0917
        self,
        h: PopMessageRequestHeader,
        topic: str,
        subscription: SubscriptionData | None,
        revive_qid: int,
        now: int,
        state: _PopState,
    ) -> None:
        """Every read queue of ``topic`` (the retry topic), if it exists."""
        topic_config = self._rt.topics.select(topic)
        if topic_config is None:
            return
        for qid in range(topic_config.read_queue_nums):
            await self._pop_queue(h, topic, qid, subscription, revive_qid, now, state)

    async def _pop_queue(  # noqa: PLR0917
        self,
        h: PopMessageRequestHeader,
        topic: str,
        queue_id: int,
        subscription: SubscriptionData | None,
        revive_qid: int,
        now: int,
        state: _PopState,
    ) -> None:
        """``popMsgFromQueue``."""
        want = h.max_msg_nums - len(state.records)
        lock_key = f"{topic}@{h.consumer_group}@{queue_id}"
        store = self._rt.store
        if want <= 0 or lock_key in self._locked:  # full, or another pop reads the queue
            state.rest += store.max_offset_in_queue(topic, queue_id) - self.pop_offset(
                h, topic, queue_id, commit_init=False
            )
            return
        self._locked.add(lock_key)
        try:
            offset = self.pop_offset(h, topic, queue_id, commit_init=True)
            if h.order and self._order.check_block(
                h.attempt_id, topic, h.consumer_group, queue_id, h.invisible_time, now
            ):
                state.rest += store.max_offset_in_queue(topic, queue_id) - offset
                return
            result = self.read(h.consumer_group, topic, queue_id, offset, want, subscription)
            if (
                result.status
                in (
                    GetMessageStatus.OFFSET_TOO_SMALL,
                    GetMessageStatus.OFFSET_OVERFLOW_BADLY,
                    GetMessageStatus.OFFSET_FOUND_NULL,
                )
                and result.next_begin_offset != offset
            ):
                log.warning(
                    "pop offset corrected", topic=topic, queue_id=queue_id,
                    old=offset, new=result.next_begin_offset,
                )  # fmt: skip
                offset = result.next_begin_offset
                self._commit(h, topic, queue_id, offset)
                result = self.read(h.consumer_group, topic, queue_id, offset, want, subscription)
            await self._take(h, topic, queue_id, offset, result, revive_qid, now, state)
        finally:
            self._locked.discard(lock_key)

    def read(  # noqa: PLR0917
        self,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        want: int,
        subscription: SubscriptionData | None,
    ) -> GetResult:
        return self._rt.store.get_message(
            group,
            topic,
            queue_id,
            offset,
            max_msg_nums=want,
            max_total_bytes=DEFAULT_PULL_MAX_BYTES,
            tags_codes=None
            if subscription is None or subscription.matches_all
            else set(subscription.code_set),
        )

    async def _take(  # noqa: PLR0917
        self,
        h: PopMessageRequestHeader,
        topic: str,
        queue_id: int,
        offset: int,
        result: GetResult,
        revive_qid: int,
        now: int,
        state: _PopState,
    ) -> None:
        """Record what was read: a checkpoint (or order info), the offset, the header infos."""
        next_offset = result.next_begin_offset
        offsets = [record_queue_offset(r) for r in result.records]
        if offsets and not h.order:
            ck = codec.PopCheckPoint(
                start_offset=offset,
                pop_time=now,
                invisible_time=h.invisible_time,
                num=len(offsets),
                queue_id=queue_id,
                topic=topic,
                cid=h.consumer_group,
                queue_offset_diff=[o - offset for o in offsets],
                broker_name=self._rt.config.broker_name,
            )
            put = await self._put_revive(self.checkpoint_message(ck, revive_qid))
            if not put.stored:
                log.error("pop: append checkpoint failed", topic=topic, status=put.status.value)
                return
        if h.order and offsets:  # orderly: committed by the acks, in order
            self._commit(h, topic, queue_id, offset)
            counts = self._order.update(
                h.attempt_id, topic, h.consumer_group, queue_id, now, h.invisible_time, offsets
            )
            for o, count in counts.items():
                codec.build_order_count_info(state.order_info, topic, queue_id, o, count)
            # the queue's least count, for clients that look it up by queue id (upstream)
            least = min(counts.values()) if len(counts) == len(offsets) else 0
            codec.build_queue_order_count_info(state.order_info, topic, queue_id, least)
        elif next_offset > offset:  # popped, or skipped by the filter
            self._commit(h, topic, queue_id, next_offset)
        state.rest += max(0, result.max_offset - next_offset)
        if not offsets:
            return
        records = result.records
        retry = codec.topic_type(topic) != codec.NORMAL_TOPIC
        if retry and not self._rt.config.pop_response_return_actual_retry_topic:
            records = [self._as_subscribed(h, r, offset, revive_qid, now) for r in records]
        state.records.extend(records)
        self._rt.metrics.record_get(
            h.consumer_group, topic, queue_id, len(records), sum(len(r) for r in records)
        )
        codec.build_start_offset_info(state.start_info, topic, queue_id, offset)
        codec.build_msg_offset_info(state.msg_info, topic, queue_id, offsets)

    def _as_subscribed(
        self, h: PopMessageRequestHeader, record: bytes, ck_offset: int, revive_qid: int, now: int
    ) -> bytes:
        """A retry-topic record under the subscribed topic, its handle in ``POP_CK``."""
        rec = decode_record(record, check_crc=False)
        extra = codec.ExtraInfo(
            ck_queue_offset=ck_offset,
            pop_time=now,
            invisible_time=h.invisible_time,
            revive_qid=revive_qid,
            topic_type=codec.topic_type(rec.topic),
            broker_name=self._rt.config.broker_name,
            queue_id=rec.queue_id,
            queue_offset=rec.queue_offset,
        )
        props = rec.property_map()
        props.setdefault(MessageConst.POP_CK, extra.encode())
        return encode_record(replace(rec, topic=h.topic, properties=encode_properties(props)))

    def checkpoint_message(self, ck: codec.PopCheckPoint, revive_qid: int) -> MessageToStore:
        """The ``ck`` message for the revive queue (``appendCheckPoint``)."""
        rt = self._rt
        return MessageToStore.with_properties(
            topic=self._revive_topic,
            queue_id=revive_qid,
            body=ck.encode(),
            properties={
                MessageConst.TAGS: codec.CK_TAG,
                MessageConst.UNIQ_KEY: ck.unique_id(),
            },
            born_timestamp=rt.clock.wall_ms(),
            born_host=rt.store_host,
        )

    def pop_offset(
        self, h: PopMessageRequestHeader, topic: str, queue_id: int, *, commit_init: bool
    ) -> int:
        """``getPopOffset``: the committed offset, else ``getInitOffset``: MIN the queue's min
        offset; MAX its last message (0 while offset 0 is still in memory with
        ``initPopOffsetByCheckMsgInMem``), committed at once."""
        rt = self._rt
        committed = rt.offsets.query_offset(h.consumer_group, topic, queue_id)
        if committed >= 0:
            return committed
        store = rt.store
        min_offset = store.min_offset_in_queue(topic, queue_id)
        if h.init_mode == _INIT_MODE_MIN:
            return min_offset
        if (
            rt.config.init_pop_offset_by_check_msg_in_mem
            and min_offset <= 0
            and store.check_in_mem_by_consume_offset(topic, queue_id, 0)
        ):
            offset = 0
        else:
            offset = max(0, store.max_offset_in_queue(topic, queue_id) - 1)
        if commit_init:
            self._commit(h, topic, queue_id, offset)
        return offset

    def _commit(self, h: PopMessageRequestHeader, topic: str, queue_id: int, offset: int) -> None:
        self._rt.offsets.commit_offset("pop", h.consumer_group, topic, queue_id, offset)
