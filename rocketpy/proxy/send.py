"""SendMessage's pure half: validate a gRPC ``Message``, turn it into a remoting send, pick a queue.

Owns: ``SendMessageActivity.buildMessage``/``buildMessageProperty``/``buildSysFlag`` and its
validators (``GrpcValidator.validateTopic``/``validateTag``, body size, keys, message group,
delivery time), ``TopicMessageType.parseFromMessageProperty`` with
``DefaultTopicMessageTypeValidator``, the queue choice of ``SendMessageQueueSelector`` (a message
group picks ``writeQueues[Hashing.consistentHash(group.hashCode(), n)]``, otherwise round robin)
and ``convertToSendMessageResponse``'s status per entry (proxy.md section 2). Must not: do I/O
(``rocketpy/proxy/messaging.py`` calls the backend with what this builds).
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from rocketpy.common.javahash import java_string_hash
from rocketpy.common.message.const import MessageConst
from rocketpy.common.message.record import COMPRESSED_FLAG, TRANSACTION_PREPARED_TYPE
from rocketpy.proxy.config import ProxyConfig
from rocketpy.proxy.pb import definition_pb2 as pb
from rocketpy.proxy.route import TopicMessageType
from rocketpy.proxy.status import ProxyError

SHARDING_KEY: Final = "__SHARDINGKEY"  # PROPERTY_SHARDING_KEY
TIMER_DELIVER_MS: Final = "TIMER_DELIVER_MS"
TRACE_CONTEXT: Final = "TRACE_CONTEXT"
BORN_HOST: Final = "__BORNHOST"
BORN_TIMESTAMP: Final = "BORN_TIMESTAMP"
CHECK_IMMUNITY_TIME_IN_SECONDS: Final = "CHECK_IMMUNITY_TIME_IN_SECONDS"
#: Keys a user property may not use (``MessageConst.STRING_HASH_SET``).
SYSTEM_PROPERTY_KEYS: Final = frozenset(
    {
        "TRACE_ON", "MSG_REGION", "KEYS", "TAGS", "WAIT", "DELAY", "RETRY_TOPIC", "REAL_TOPIC",
        "REAL_QID", "TRAN_MSG", "PGROUP", "MIN_OFFSET", "MAX_OFFSET", "BUYER_ID",
        "ORIGIN_MESSAGE_ID", "TRANSFER_FLAG", "CORRECTION_FLAG", "MQ2_FLAG", "RECONSUME_TIME",
        "UNIQ_KEY", "MAX_RECONSUME_TIMES", "CONSUME_START_TIME", "POP_CK", "POP_CK_OFFSET",
        "1ST_POP_TIME", "TRAN_PREPARED_QUEUE_OFFSET", "DUP_INFO", "EXTEND_UNIQ_INFO",
        "INSTANCE_ID", "CORRELATION_ID", "REPLY_TO_CLIENT", "TTL", "ARRIVE_TIME",
        "PUSH_REPLY_TIME", "CLUSTER", "MSG_TYPE", "INNER_MULTI_QUEUE_OFFSET", "TIMER_DELAY_MS",
        "TIMER_DELAY_SEC", "TIMER_DELIVER_MS", "TIMER_ENQUEUE_MS", "TIMER_DEQUEUE_MS",
        "TIMER_ROLL_TIMES", "TIMER_OUT_MS", "TIMER_DEL_UNIQKEY", "TIMER_DELAY_LEVEL",
        "__BORNHOST", "BORN_TIMESTAMP", "DLQ_ORIGIN_TOPIC", "DLQ_ORIGIN_MESSAGE_ID", "__CRC32#",
    }
)  # fmt: skip
#: ``TopicValidator.SYSTEM_TOPIC_SET`` (plus every ``rmq_sys_`` topic): not for clients.
SYSTEM_TOPICS: Final = frozenset(
    {
        "TBW102", "SCHEDULE_TOPIC_XXXX", "BenchmarkTest", "RMQ_SYS_TRANS_HALF_TOPIC",
        "RMQ_SYS_TRACE_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC", "TRANS_CHECK_MAX_TIME_TOPIC",
        "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT",
    }
)  # fmt: skip
TOPIC_MAX_LENGTH: Final = 127
_TOPIC_CHARS: Final = re.compile(r"[%|a-zA-Z0-9_-]+")
#: Guava ``LinearCongruentialGenerator``'s multiplier.
_LCG_MULTIPLIER: Final = 2862933555777941757
_MASK64: Final = (1 << 64) - 1


@dataclass(frozen=True, slots=True, kw_only=True)
class OutgoingMessage:
    """One gRPC message as the broker will store it."""

    topic: str
    body: bytes
    properties: dict[str, str]
    sys_flag: int
    born_timestamp_ms: int
    message_id: str
    message_group: str


def validate_topic(topic: str) -> None:
    """``GrpcValidator.validateTopic``: ``Validators.checkTopic`` and no system topic.

    Raises:
        ProxyError: ILLEGAL_TOPIC.
    """
    if not topic.strip():
        raise ProxyError(pb.Code.ILLEGAL_TOPIC, "The specified topic is blank.")
    if _TOPIC_CHARS.fullmatch(topic) is None:
        raise ProxyError(
            pb.Code.ILLEGAL_TOPIC,
            "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$",
        )
    if len(topic) > TOPIC_MAX_LENGTH:
        raise ProxyError(
            pb.Code.ILLEGAL_TOPIC, "The specified topic is longer than topic max length."
        )
    if topic in SYSTEM_TOPICS or topic.startswith("rmq_sys_"):
        raise ProxyError(pb.Code.ILLEGAL_TOPIC, "cannot access system topic")


def _has_control(text: str) -> bool:
    """Guava ``CharMatcher.javaIsoControl``: U+0000-U+001F and U+007F-U+009F."""
    return any(ord(c) <= 0x1F or 0x7F <= ord(c) <= 0x9F for c in text)


def _validate_tag(tag: str) -> None:
    if not tag:
        return
    if not tag.strip():
        raise ProxyError(
            pb.Code.ILLEGAL_MESSAGE_TAG, "tag cannot be the char sequence of whitespace"
        )
    if "|" in tag:
        raise ProxyError(pb.Code.ILLEGAL_MESSAGE_TAG, "tag cannot contain '|'")
    if _has_control(tag):
        raise ProxyError(pb.Code.ILLEGAL_MESSAGE_TAG, "tag cannot contain control character")


def _validate_key(key: str) -> None:
    if key and not key.strip():
        raise ProxyError(
            pb.Code.ILLEGAL_MESSAGE_KEY, "key cannot be the char sequence of whitespace"
        )
    if _has_control(key):
        raise ProxyError(pb.Code.ILLEGAL_MESSAGE_KEY, "key cannot contain control character")


def _validate_group(group: str, max_bytes: int) -> None:
    if not group.strip():
        raise ProxyError(
            pb.Code.ILLEGAL_MESSAGE_GROUP, "message group cannot be the char sequence of whitespace"
        )
    if max_bytes > 0 and len(group.encode()) >= max_bytes:
        raise ProxyError(
            pb.Code.ILLEGAL_MESSAGE_GROUP, f"message group exceed the max size {max_bytes}"
        )
    if _has_control(group):
        raise ProxyError(
            pb.Code.ILLEGAL_MESSAGE_GROUP, "message group cannot contain control character"
        )


def _validate_body(body: bytes, config: ProxyConfig) -> None:
    if config.enable_message_body_empty_check and not body:
        raise ProxyError(pb.Code.MESSAGE_BODY_EMPTY, "message body cannot be empty")
    limit = config.max_message_size_bytes
    if limit > 0 and len(body) > limit:
        raise ProxyError(
            pb.Code.MESSAGE_BODY_TOO_LARGE, f"message body cannot exceed the max {limit}"
        )


def _timestamp_ms(ts: object) -> int:
    """``Timestamps.toMillis`` of a ``google.protobuf.Timestamp``."""
    seconds = int(getattr(ts, "seconds", 0))
    nanos = int(getattr(ts, "nanos", 0))
    return seconds * 1000 + nanos // 1_000_000


def _user_properties(msg: pb.Message, config: ProxyConfig) -> tuple[dict[str, str], int]:
    """The user properties (validated) and their size in bytes."""
    props = dict(msg.user_properties)
    if len(props) > config.user_property_max_num:
        raise ProxyError(
            pb.Code.MESSAGE_PROPERTIES_TOO_LARGE,
            f"too many user properties, max is {config.user_property_max_num}",
        )
    size = 0
    for key, value in props.items():
        if key in SYSTEM_PROPERTY_KEYS:
            raise ProxyError(
                pb.Code.ILLEGAL_MESSAGE_PROPERTY_KEY, f"property is used by system: {key}"
            )
        if _has_control(key) or _has_control(value):
            raise ProxyError(
                pb.Code.ILLEGAL_MESSAGE_PROPERTY_KEY, "property cannot contain control character"
            )
        size += len(key.encode()) + len(value.encode())
    return props, size


def _tag_and_keys(sp: pb.SystemProperties, props: dict[str, str]) -> int:
    """Set ``TAGS`` and ``KEYS`` (space-joined); their size in bytes."""
    _validate_tag(sp.tag)
    if sp.tag:
        props[MessageConst.TAGS] = sp.tag
    size = len(sp.tag.encode())
    for key in sp.keys:
        _validate_key(key)
        size += len(key.encode())
    if sp.keys:
        props[MessageConst.KEYS] = " ".join(sp.keys)
    return size


def _type_and_delivery(
    sp: pb.SystemProperties, props: dict[str, str], config: ProxyConfig, now_ms: int
) -> None:
    """``TRAN_MSG`` for a transaction message, ``TIMER_DELIVER_MS`` for a delivery time."""
    if sp.message_type == pb.MessageType.TRANSACTION:
        props[MessageConst.TRAN_MSG] = "true"
        if sp.HasField("orphaned_transaction_recovery_duration"):
            props[CHECK_IMMUNITY_TIME_IN_SECONDS] = str(
                sp.orphaned_transaction_recovery_duration.seconds
            )
    if sp.HasField("delivery_timestamp"):
        deliver_ms = _timestamp_ms(sp.delivery_timestamp)
        if config.max_delay_time_ms > 0 and deliver_ms - now_ms > config.max_delay_time_ms:
            raise ProxyError(
                pb.Code.ILLEGAL_DELIVERY_TIME,
                f"the max delay time of message is too large, max is {config.max_delay_time_ms}",
            )
        props[TIMER_DELIVER_MS] = str(deliver_ms)


def build_properties(
    msg: pb.Message, config: ProxyConfig, remote_host: str, now_ms: int
) -> dict[str, str]:
    """``buildMessageProperty``: user properties plus the system ones the broker stores.

    Raises:
        ProxyError: a property, tag, key, id, group or delivery time the proxy refuses.
    """
    props, size = _user_properties(msg, config)
    sp = msg.system_properties
    size += _tag_and_keys(sp, props)
    limit = config.max_user_property_size_bytes
    if size > limit:
        raise ProxyError(
            pb.Code.MESSAGE_PROPERTIES_TOO_LARGE,
            f"the total size of user property is too large, max is {limit}",
        )
    if not sp.message_id.strip():
        raise ProxyError(pb.Code.ILLEGAL_MESSAGE_ID, "message id cannot be empty")
    props[MessageConst.UNIQ_KEY] = sp.message_id
    _type_and_delivery(sp, props, config, now_ms)
    props[MessageConst.RECONSUME_TIME] = str(sp.delivery_attempt)
    props[MessageConst.PGROUP] = msg.topic.name  # the topic is the producer group (checker)
    if sp.message_group:
        _validate_group(sp.message_group, config.max_message_group_size_bytes)
        props[SHARDING_KEY] = sp.message_group
    if sp.trace_context:
        props[TRACE_CONTEXT] = sp.trace_context
    born_host = sp.born_host if sp.born_host.strip() else remote_host
    if born_host.strip():
        props[BORN_HOST] = born_host
    props[BORN_TIMESTAMP] = str(_timestamp_ms(sp.born_timestamp))
    return props


def build_sys_flag(msg: pb.Message) -> int:
    """``buildSysFlag``: GZIP -> compressed; TRANSACTION -> prepared."""
    flag = 0
    if msg.system_properties.body_encoding == pb.Encoding.GZIP:
        flag |= COMPRESSED_FLAG
    if msg.system_properties.message_type == pb.MessageType.TRANSACTION:
        flag |= TRANSACTION_PREPARED_TYPE
    return flag


def build_message(
    msg: pb.Message, config: ProxyConfig, remote_host: str, now_ms: int | None = None
) -> OutgoingMessage:
    """One gRPC message, validated, as the broker will receive it.

    Raises:
        ProxyError: what the proxy refuses (see :func:`build_properties`).
    """
    _validate_body(msg.body, config)
    now = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    props = build_properties(msg, config, remote_host, now)
    return OutgoingMessage(
        topic=msg.topic.name,
        body=msg.body,
        properties=props,
        sys_flag=build_sys_flag(msg),
        born_timestamp_ms=int(props[BORN_TIMESTAMP]),
        message_id=msg.system_properties.message_id,
        message_group=msg.system_properties.message_group,
    )


def message_type_of(properties: Mapping[str, str]) -> TopicMessageType:
    """``TopicMessageType.parseFromMessageProperty``."""
    if properties.get(MessageConst.TRAN_MSG) == "true":
        return TopicMessageType.TRANSACTION
    if any(
        k in properties
        for k in (MessageConst.DELAY, TIMER_DELIVER_MS, "TIMER_DELAY_SEC", "TIMER_DELAY_MS")
    ):
        return TopicMessageType.DELAY
    if SHARDING_KEY in properties:
        return TopicMessageType.FIFO
    return TopicMessageType.NORMAL


def check_message_type(topic_type: TopicMessageType, message_type: TopicMessageType) -> None:
    """``DefaultTopicMessageTypeValidator.validate``.

    Raises:
        ProxyError: MESSAGE_PROPERTY_CONFLICT_WITH_TYPE.
    """
    if message_type == TopicMessageType.UNSPECIFIED or topic_type not in (
        message_type,
        TopicMessageType.MIXED,
    ):
        raise ProxyError(
            pb.Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
            f"TopicMessageType validate failed, the expected type is {topic_type}, "
            f"but actual type is {message_type}",
        )


def consistent_hash(value: int, buckets: int) -> int:
    """Guava ``Hashing.consistentHash(long, int)`` (Lamping and Veach's jump hash)."""
    if buckets <= 0:
        raise ValueError(f"buckets must be positive: {buckets}")
    state = value & _MASK64
    candidate = 0
    while True:
        state = (_LCG_MULTIPLIER * state + 1) & _MASK64
        upper = state >> 33  # a 31-bit value, as Java's (int) (state >>> 33)
        nxt = int((candidate + 1) / ((upper + 1) / 2.0**31))
        if 0 <= nxt < buckets:
            candidate = nxt
        else:
            return candidate


def select_by_group(queues: Sequence[object], message_group: str) -> int:
    """The index ``SendMessageQueueSelector`` picks for a message group among ``queues``."""
    return consistent_hash(java_string_hash(message_group), len(queues))


#: Broker send status name -> entry code (built once: protobuf enum attributes are slow lookups).
_SEND_STATUS_CODES: Final[dict[str, pb.Code]] = {
    "SEND_OK": pb.Code.OK,
    "FLUSH_DISK_TIMEOUT": pb.Code.MASTER_PERSISTENCE_TIMEOUT,
    "FLUSH_SLAVE_TIMEOUT": pb.Code.SLAVE_PERSISTENCE_TIMEOUT,
    "SLAVE_NOT_AVAILABLE": pb.Code.HA_NOT_AVAILABLE,
}
_OK: Final = pb.Code.OK
_INTERNAL: Final = pb.Code.INTERNAL_SERVER_ERROR


def entry_status(send_status: str) -> pb.Status:
    """The status of one ``SendResultEntry`` for a broker send status name."""
    code = _SEND_STATUS_CODES.get(send_status, _INTERNAL)
    message = "OK" if code == _OK else f"send message failed, sendStatus={send_status}"
    return pb.Status(code=code, message=message)
