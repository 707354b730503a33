"""SimpleConsumer: POP consumption over remoting -- receive, ack, change invisible duration.

Owns: :class:`SimpleConsumer` (the shape of the 5.x ``SimpleConsumer``: ``receive(max_messages,
invisible_duration)``, ``ack``, ``change_invisible_duration``) over the broker's POP_MESSAGE,
ACK_MESSAGE and CHANGE_MESSAGE_INVISIBLETIME, and :class:`PopMessage` (a message with its
ExtraInfo receipt handle). Each ``receive`` pops broker-wide (queue id -1) on the next master of
the next subscribed topic, found through the route as the pull consumer does; the ExtraInfo of
each message is built from the response's ``startOffsetInfo``/``msgOffsetInfo`` as
``MQClientAPIImpl.processPopResponse`` does (a redelivery carries its own in ``POP_CK``), and an
orderly pop's ``reconsume_times`` comes from
``orderCountInfo``. A message redelivered more than ``max_reconsume_times`` times is not
returned: as the 5.x POP consumers do (the broker's revive never dead-letters), it is sent to
``%DLQ%<group>`` (CONSUMER_SEND_MSG_BACK, delay level -1) and acked; when that fails it is
returned like any other. Must not: ack on its own (beyond that) or retry a failed ack.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass
from typing import Final

import structlog

from rocketpy.client.instance import ClientInstance
from rocketpy.client.message import MessageExt, decode_message_exts
from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.common.errors import ClientError, RemoteError, RemotingError
from rocketpy.common.message.const import MessageConst
from rocketpy.remoting.protocol import pop as codec
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.protocol.headers.base import from_ext, to_ext
from rocketpy.remoting.protocol.headers.broker import ConsumerSendMsgBackRequestHeader
from rocketpy.remoting.protocol.headers.pop import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
)

log = structlog.get_logger(__name__)

INIT_MODE_MIN: Final = 0
INIT_MODE_MAX: Final = 1
_EMPTY_CODES: Final = frozenset(
    {ResponseCode.POLLING_FULL, ResponseCode.POLLING_TIMEOUT, ResponseCode.PULL_NOT_FOUND}
)


@dataclass(frozen=True, slots=True)
class PopMessage:
    """A popped message and its handle. ``message.topic`` is the subscribed topic (the broker
    re-encodes redeliveries from the pop retry topic, the handle's topic type says so; with
    ``popResponseReturnActualRetryTopic=true`` it is the retry topic); ``topic`` the topic the
    receive asked for."""

    message: MessageExt
    extra_info: codec.ExtraInfo
    topic: str
    broker_addr: str

    @property
    def receipt_handle(self) -> str:
        """The ExtraInfo text."""
        return self.extra_info.encode()

    def ack_topic(self, group: str) -> str:
        """The topic an ack or change names: the pop retry topic for a redelivery."""
        if self.message.topic.startswith(codec.RETRY_PREFIX):
            return self.message.topic
        return codec.real_topic(self.extra_info.topic_type, self.message.topic, group)


def pop_messages(
    response: RemotingCommand, *, topic: str, broker_name: str, broker_addr: str
) -> list[PopMessage]:
    """``processPopResponse``: the messages of a SUCCESS POP response with their handles."""
    addr = broker_addr
    h = from_ext(PopMessageResponseHeader, response.ext_fields)
    starts = codec.parse_start_offset_info(h.start_offset_info)
    offsets = codec.parse_msg_offset_info(h.msg_offset_info)
    counts = codec.parse_order_count_info(h.order_count_info)
    out: list[PopMessage] = []
    for msg in decode_message_exts(response.body or b"", broker_name):
        pop_ck = msg.properties.get(MessageConst.POP_CK)
        if pop_ck:  # a retry-topic message answered under the subscribed topic
            extra = codec.decode_extra_info(pop_ck)
            out.append(PopMessage(message=msg, extra_info=extra, topic=topic, broker_addr=addr))
            continue
        type_ = codec.topic_type(msg.topic)
        key = codec.info_key(type_, msg.queue_id)
        if msg.queue_offset not in offsets.get(key, ()):
            raise ClientError(f"pop response lacks the offset of {msg.topic}@{msg.queue_id}")
        count = counts.get(f"{key}@{msg.queue_offset}", counts.get(key))
        if count is not None:
            msg.reconsume_times = count
        extra = codec.ExtraInfo(
            ck_queue_offset=starts.get(key, msg.queue_offset),
            pop_time=h.pop_time,
            invisible_time=h.invisible_time,
            revive_qid=h.revive_qid,
            topic_type=type_,
            broker_name=broker_name,
            queue_id=msg.queue_id,
            queue_offset=msg.queue_offset,
        )
        msg.properties = {**msg.properties, MessageConst.POP_CK: extra.encode()}
        out.append(PopMessage(message=msg, extra_info=extra, topic=topic, broker_addr=addr))
    return out


class SimpleConsumer:
    """An asyncio POP consumer.

    Args:
        group: consumer group.
        namesrv_addr: ``host:port[;host:port...]``.
        subscription: topic -> tag expression (``*`` for all).
        await_duration_s: long-polling time of each receive.
        request_timeout_s: budget of every request beyond the long poll.
        order: pop orderly (``order=true``; queues block while a batch is un-acked).
        init_mode: where a group without an offset starts (:data:`INIT_MODE_MAX`, as the
            proxy does, or :data:`INIT_MODE_MIN`).
        max_reconsume_times: a message whose ``reconsume_times`` exceeds this goes to
            ``%DLQ%<group>`` instead of being returned (upstream's ``retryMaxTimes``, 16).
    """

    def __init__(
        self,
        group: str,
        namesrv_addr: str,
        subscription: dict[str, str],
        *,
        await_duration_s: float = 20.0,
        request_timeout_s: float = 3.0,
        order: bool = False,
        init_mode: int = INIT_MODE_MAX,
        max_reconsume_times: int = 16,
        instance_name: str | None = None,
    ) -> None:
        if not subscription:
            raise ClientError("a SimpleConsumer needs at least one subscribed topic")
        self.group = group
        self._subscription = dict(subscription)
        self._await_ms = int(await_duration_s * 1000)
        self._order = order
        self._init_mode = init_mode
        self.max_reconsume_times = max_reconsume_times
        self._client = ClientInstance(
            namesrv_addr,
            instance_name=instance_name,
            request_timeout_s=request_timeout_s,
            name="simple-consumer",
        )
        self._topics = itertools.cycle(sorted(self._subscription))
        self._broker_turn = itertools.count()
        self.attempt_id: str | None = None

    async def start(self) -> None:
        """Start the route refresh."""
        self._client.start()

    async def shutdown(self) -> None:
        """Close connections (idempotent)."""
        await self._client.close()

    async def _masters(self, topic: str) -> list[tuple[str, str]]:
        """(broker name, master address) of every broker with a readable queue of ``topic``."""
        names = sorted({q.broker_name for q in await self._client.routes.subscribe_queues(topic)})
        out = []
        for name in names:
            addr = self._client.routes.master_addr(name)
            if addr is not None:
                out.append((name, addr))
        if not out:
            raise ClientError(f"no master serves topic {topic}")
        return out

    async def receive(self, max_messages: int, invisible_duration_s: float) -> list[PopMessage]:
        """Pop up to ``max_messages`` (1-32) from the next broker, long polling up to the
        await duration. An empty list when nothing arrived in time.

        Raises:
            RemoteError: the broker refused the pop.
            ClientError: no route.
        """
        self._client.check_started()
        topic = next(self._topics)
        masters = await self._masters(topic)
        broker_name, addr = masters[next(self._broker_turn) % len(masters)]
        header = PopMessageRequestHeader(
            consumer_group=self.group,
            topic=topic,
            queue_id=-1,
            max_msg_nums=max_messages,
            invisible_time=int(invisible_duration_s * 1000),
            poll_time=self._await_ms,
            born_time=int(time.time() * 1000),
            init_mode=self._init_mode,
            exp_type="TAG",
            exp=self._subscription[topic],
            order=self._order,
            attempt_id=self.attempt_id,
        )
        request = RemotingCommand.request(RequestCode.POP_MESSAGE, to_ext(header))
        timeout_s = self._client.request_timeout_s + self._await_ms / 1000
        response = await self._client.remoting.invoke(addr, request, timeout_s)
        if response.code in _EMPTY_CODES:
            return []
        if response.code != ResponseCode.SUCCESS:
            raise RemoteError.for_code(response.code, response.remark or "")
        popped = pop_messages(response, topic=topic, broker_name=broker_name, broker_addr=addr)
        kept: list[PopMessage] = []
        for msg in popped:
            if msg.message.reconsume_times > self.max_reconsume_times and await self._to_dlq(msg):
                continue
            kept.append(msg)
        return kept

    async def _to_dlq(self, msg: PopMessage) -> bool:
        """Send ``msg`` to ``%DLQ%<group>`` and ack it; False (and logged) when either failed,
        so the caller still gets the message."""
        m = msg.message
        header = ConsumerSendMsgBackRequestHeader(
            offset=m.commit_log_offset,
            group=self.group,
            delay_level=-1,
            origin_msg_id=m.msg_id,
            origin_topic=m.properties.get(MessageConst.RETRY_TOPIC, m.topic),
            unit_mode=False,
            max_reconsume_times=self.max_reconsume_times,
            bname=msg.extra_info.broker_name,
        )
        try:
            await self._client.invoke_ok(
                msg.broker_addr, RequestCode.CONSUMER_SEND_MSG_BACK, to_ext(header)
            )
            await self.ack(msg)
        except (RemoteError, RemotingError, ClientError) as e:
            log.warning("pop message to DLQ failed", msg_id=m.msg_id, error=str(e))
            return False
        return True

    async def ack(self, msg: PopMessage) -> None:
        """ACK_MESSAGE for ``msg``'s handle.

        Raises:
            RemoteError: the broker refused it.
        """
        header = AckMessageRequestHeader(
            consumer_group=self.group,
            topic=msg.ack_topic(self.group),
            queue_id=msg.extra_info.queue_id,
            extra_info=msg.receipt_handle,
            offset=msg.extra_info.queue_offset,
        )
        await self._client.invoke_ok(msg.broker_addr, RequestCode.ACK_MESSAGE, to_ext(header))

    async def change_invisible_duration(self, msg: PopMessage, duration_s: float) -> PopMessage:
        """CHANGE_MESSAGE_INVISIBLETIME; returns the message with its new handle (ck start =
        the message's own offset, as proxy.md section 3.2 says).

        Raises:
            RemoteError: the broker refused it.
        """
        header = ChangeInvisibleTimeRequestHeader(
            consumer_group=self.group,
            topic=msg.ack_topic(self.group),
            queue_id=msg.extra_info.queue_id,
            extra_info=msg.receipt_handle,
            offset=msg.extra_info.queue_offset,
            invisible_time=int(duration_s * 1000),
        )
        response = await self._client.invoke_ok(
            msg.broker_addr, RequestCode.CHANGE_MESSAGE_INVISIBLETIME, to_ext(header)
        )
        got = from_ext(ChangeInvisibleTimeResponseHeader, response.ext_fields)
        old = msg.extra_info
        orderly = old.revive_qid == codec.POP_ORDER_REVIVE_QUEUE
        extra = codec.ExtraInfo(
            ck_queue_offset=old.ck_queue_offset if orderly else old.queue_offset,
            pop_time=got.pop_time,
            invisible_time=got.invisible_time,
            revive_qid=got.revive_qid,
            topic_type=old.topic_type,
            broker_name=old.broker_name,
            queue_id=old.queue_id,
            queue_offset=old.queue_offset,
            commit_log_offset=old.commit_log_offset,
        )
        return PopMessage(
            message=msg.message, extra_info=extra, topic=msg.topic, broker_addr=msg.broker_addr
        )
