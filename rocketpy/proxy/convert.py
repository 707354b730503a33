"""A popped message as an ``apache.rocketmq.v2.Message``, and the proxy's filter of a pop result.

Owns: :func:`build_message` (``GrpcConverter.buildMessage``: user properties = every property that
is not a system key; system properties tag, keys, message id (UNIQ_KEY, else the msg id), MD5 body
digest in upper-case hex, encoding, message type, born/store timestamps and hosts, delivery
timestamp, message group, receipt handle, queue id/offset, delivery attempt = reconsumeTimes + 1,
trace context, dead-letter origin) and :func:`filter_message` (``PopMessageResultFilterImpl``: a
tag the subscription does not hold -> NO_MATCH, ``reconsumeTimes >= maxAttempts`` -> TO_DLQ),
with :func:`subscription_tags` (``FilterAPI.build`` for TAG expressions). Must not: do I/O. Pure.

Differs from upstream on purpose: ``body_encoding`` is always IDENTITY, because the decoder hands
over uncompressed bodies (upstream keeps GZIP from the stored sysFlag on an uncompressed body);
``invisible_duration`` is filled from the handle (upstream leaves it unset; clients ignore it).
"""

from __future__ import annotations

import hashlib
from enum import Enum
from typing import Final

from rocketpy.client.message import MessageExt
from rocketpy.common.message.const import MessageConst
from rocketpy.proxy.pb import definition_pb2 as pb
from rocketpy.proxy.send import (
    BORN_HOST,
    SHARDING_KEY,
    SYSTEM_PROPERTY_KEYS,
    TIMER_DELIVER_MS,
    TRACE_CONTEXT,
)

TIMER_DELAY_SEC: Final = "TIMER_DELAY_SEC"
DELAY_LEVEL: Final = "DELAY"  # PROPERTY_DELAY_TIME_LEVEL
DLQ_ORIGIN_TOPIC: Final = "DLQ_ORIGIN_TOPIC"
DLQ_ORIGIN_MESSAGE_ID: Final = "DLQ_ORIGIN_MESSAGE_ID"
#: ``SubscriptionData.SUB_ALL``.
SUB_ALL: Final = "*"
#: User properties the converter hides besides ``STRING_HASH_SET`` (set by the proxy itself).
_HIDDEN: Final = SYSTEM_PROPERTY_KEYS | {TRACE_CONTEXT, SHARDING_KEY}


class FilterResult(Enum):
    """``PopMessageResultFilter.FilterResult``."""

    MATCH = "MATCH"
    NO_MATCH = "NO_MATCH"
    TO_DLQ = "TO_DLQ"


def subscription_tags(expression: str) -> frozenset[str] | None:
    """``FilterAPI.build`` for a TAG expression: the tag set, None for "all" (``*`` or blank)."""
    text = expression.strip()
    if not text or text == SUB_ALL:
        return None
    tags = frozenset(t.strip() for t in text.split("||") if t.strip())
    return tags or None


def filter_message(msg: MessageExt, tags: frozenset[str] | None, max_attempts: int) -> FilterResult:
    """``PopMessageResultFilterImpl.filterMessage``."""
    if tags is not None and (msg.tags or "") not in tags:
        return FilterResult.NO_MATCH
    if msg.reconsume_times >= max_attempts:
        return FilterResult.TO_DLQ
    return FilterResult.MATCH


def _timestamp(ms: int) -> dict[str, int]:
    return {"seconds": ms // 1000, "nanos": (ms % 1000) * 1_000_000}


def _message_type(props: dict[str, str]) -> pb.MessageType:
    if props.get(MessageConst.TRAN_MSG) == "true":
        return pb.MessageType.TRANSACTION
    if DELAY_LEVEL in props or TIMER_DELIVER_MS in props or TIMER_DELAY_SEC in props:
        return pb.MessageType.DELAY
    if SHARDING_KEY in props:
        return pb.MessageType.FIFO
    return pb.MessageType.NORMAL


def build_message(msg: MessageExt, topic: str, handle: str, now_ms: int) -> pb.Message:
    """``GrpcConverter.buildMessage`` of a popped message whose receipt handle is ``handle``.

    Args:
        msg: the message as the pop answered it.
        topic: the topic the client subscribed (a redelivery comes from the pop retry topic).
        handle: the receipt handle (ExtraInfo + commit-log offset); "" for none.
        now_ms: the wall clock, for a ``TIMER_DELAY_SEC`` delivery time.
    """
    props = msg.properties
    system = pb.SystemProperties(
        message_id=props.get(MessageConst.UNIQ_KEY) or msg.msg_id,
        body_digest=pb.Digest(
            type=pb.DigestType.MD5,
            checksum=hashlib.md5(msg.body).hexdigest().upper(),  # noqa: S324
        ),
        body_encoding=pb.Encoding.IDENTITY,
        message_type=_message_type(props),
        born_timestamp=_timestamp(msg.born_timestamp),
        born_host=props.get(BORN_HOST) or f"{msg.born_host[0]}:{msg.born_host[1]}",
        store_timestamp=_timestamp(msg.store_timestamp),
        store_host=f"{msg.store_host[0]}:{msg.store_host[1]}",
        queue_id=msg.queue_id,
        queue_offset=msg.queue_offset,
        delivery_attempt=msg.reconsume_times + 1,
    )
    tag = props.get(MessageConst.TAGS)
    if tag is not None:
        system.tag = tag
    keys = props.get(MessageConst.KEYS)
    if keys is not None:
        system.keys.extend(keys.split(" "))
    if TIMER_DELAY_SEC in props:
        system.delivery_timestamp.FromMilliseconds(now_ms + int(props[TIMER_DELAY_SEC]) * 1000)
    elif TIMER_DELIVER_MS in props:
        system.delivery_timestamp.FromMilliseconds(int(props[TIMER_DELIVER_MS]))
    group = props.get(SHARDING_KEY)
    if group is not None:
        system.message_group = group
    if handle:
        system.receipt_handle = handle
        fields = handle.split(" ")
        if len(fields) > 2 and fields[2].isdigit():
            system.invisible_duration.FromMilliseconds(int(fields[2]))
    trace = props.get(TRACE_CONTEXT)
    if trace is not None:
        system.trace_context = trace
    origin_topic, origin_id = props.get(DLQ_ORIGIN_TOPIC), props.get(DLQ_ORIGIN_MESSAGE_ID)
    if origin_topic is not None and origin_id is not None:
        system.dead_letter_queue.CopyFrom(
            pb.DeadLetterQueue(topic=origin_topic, message_id=origin_id)
        )
    user = {k: v for k, v in props.items() if k not in _HIDDEN}
    return pb.Message(
        topic=pb.Resource(name=topic), user_properties=user, system_properties=system, body=msg.body
    )
