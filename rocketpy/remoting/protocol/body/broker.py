"""JSON bodies of client <-> broker requests other than the heartbeat.

Owns: :class:`MessageQueue` and the bodies of LOCK/UNLOCK_BATCH_MQ, GET_CONSUMER_LIST_BY_GROUP,
GET_CONSUMER_CONNECTION_LIST, GET_CONSUME_STATS, GET_TOPIC_STATS_INFO, GET_BROKER_RUNTIME_INFO
(``KVTable``), RESET_CONSUMER_CLIENT_OFFSET (``ResetOffsetBody``) and CHECK_CLIENT_CONFIG, with
their fastjson encoding and lenient decoding. Mirrors ``common/message/MessageQueue`` and
``remoting/protocol/body/{LockBatchRequestBody,UnlockBatchRequestBody,LockBatchResponseBody,
GetConsumerListByGroupResponseBody,Connection,ConsumerConnection,ConsumeStats,OffsetWrapper,
TopicStatsTable,TopicOffset,KVTable,ResetOffsetBody,CheckClientRequestBody}`` (codes.md section 5).
Pure.

``Map<MessageQueue, ...>`` fields are written the way fastjson writes non-String keys: each key is
the queue's JSON object (``{{"brokerName":"b","queueId":0,"topic":"T"}:7}``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rocketpy.common import fastjson
from rocketpy.common.codes import LanguageCode
from rocketpy.common.errors import CodecError
from rocketpy.common.fastjson import Bean, BeanKey, JavaSet
from rocketpy.remoting.protocol.body.heartbeat import SubscriptionData


def _obj(value: Any, name: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise CodecError(f"expected an object, got {type(value).__name__}", field=name)
    return value


def _load(body: bytes | None, name: str) -> Mapping[str, Any]:
    if not body:
        raise CodecError("body is empty", field=name)
    return _obj(fastjson.loads(body), name)


def _list(obj: Mapping[str, Any], key: str) -> Sequence[Any]:
    value = obj.get(key)
    if value is None:
        return ()
    if not isinstance(value, list):
        raise CodecError(f"expected an array, got {type(value).__name__}", field=key)
    return value


def _str(obj: Mapping[str, Any], key: str) -> str:
    value = obj.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise CodecError(f"expected a string, got {value!r}", field=key)
    return value


def _int(obj: Mapping[str, Any], key: str) -> int:
    value = obj.get(key, 0)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise CodecError(f"expected an integer, got {value!r}", field=key)
    return value


@dataclass(frozen=True, slots=True, kw_only=True, order=True)
class MessageQueue:
    """``MessageQueue``; ordering is Java's ``compareTo`` (topic, broker name, queue id)."""

    topic: str
    broker_name: str
    queue_id: int

    def to_json_value(self) -> Bean:
        """The fastjson value of this bean."""
        return Bean(brokerName=self.broker_name, queueId=self.queue_id, topic=self.topic)

    def to_key(self) -> BeanKey:
        """This queue as a map key (``Map<MessageQueue, ...>``)."""
        return BeanKey(brokerName=self.broker_name, queueId=self.queue_id, topic=self.topic)

    @classmethod
    def from_json_value(cls, value: Any) -> MessageQueue:
        """Read a decoded JSON object."""
        obj = _obj(value, "messageQueue")
        return cls(
            topic=_str(obj, "topic"),
            broker_name=_str(obj, "brokerName"),
            queue_id=_int(obj, "queueId"),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class LockBatchRequestBody:
    """``LockBatchRequestBody`` / ``UnlockBatchRequestBody`` (same shape)."""

    consumer_group: str
    client_id: str
    mq_set: tuple[MessageQueue, ...]
    only_this_broker: bool = False

    def to_json_value(self) -> Bean:
        """The fastjson value of this bean."""
        return Bean(
            clientId=self.client_id,
            consumerGroup=self.consumer_group,
            mqSet=JavaSet(mq.to_json_value() for mq in self.mq_set),
            onlyThisBroker=self.only_this_broker,
        )


def decode_lock_batch_request(body: bytes | None) -> LockBatchRequestBody:
    """Parse a LOCK_BATCH_MQ / UNLOCK_BATCH_MQ body.

    Raises:
        CodecError: missing body, not JSON, or a field of the wrong type.
    """
    obj = _load(body, "lockBatchRequestBody")
    return LockBatchRequestBody(
        consumer_group=_str(obj, "consumerGroup"),
        client_id=_str(obj, "clientId"),
        mq_set=tuple(MessageQueue.from_json_value(m) for m in _list(obj, "mqSet")),
        only_this_broker=bool(obj.get("onlyThisBroker", False)),
    )


def encode_lock_batch_request(body: LockBatchRequestBody) -> bytes:
    """Compact JSON of a lock/unlock request."""
    return fastjson.dumps(body.to_json_value()).encode()


def encode_lock_batch_response(locked: Sequence[MessageQueue]) -> bytes:
    """``LockBatchResponseBody``: ``{"lockOKMQSet":[...]}``."""
    return fastjson.dumps(Bean(lockOKMQSet=JavaSet(mq.to_json_value() for mq in locked))).encode()


def decode_lock_batch_response(body: bytes | None) -> tuple[MessageQueue, ...]:
    """The queues of a ``LockBatchResponseBody``."""
    obj = _load(body, "lockBatchResponseBody")
    return tuple(MessageQueue.from_json_value(m) for m in _list(obj, "lockOKMQSet"))


def encode_consumer_list(client_ids: Sequence[str]) -> bytes:
    """``GetConsumerListByGroupResponseBody``: ``{"consumerIdList":[...]}``."""
    return fastjson.dumps(Bean(consumerIdList=list(client_ids))).encode()


def decode_consumer_list(body: bytes | None) -> tuple[str, ...]:
    """The ids of a ``GetConsumerListByGroupResponseBody``."""
    obj = _load(body, "consumerIdList")
    return tuple(str(c) for c in _list(obj, "consumerIdList"))


@dataclass(frozen=True, slots=True, kw_only=True)
class Connection:
    """``Connection``: one client channel."""

    client_id: str
    client_addr: str
    language: int
    version: int

    def to_json_value(self) -> Bean:
        """The fastjson value of this bean (language by enum name)."""
        try:
            language: str = LanguageCode(self.language).name
        except ValueError:
            language = LanguageCode.OTHER.name
        return Bean(
            clientAddr=self.client_addr,
            clientId=self.client_id,
            language=language,
            version=self.version,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerConnection:
    """``ConsumerConnection`` (GET_CONSUMER_CONNECTION_LIST 203)."""

    connections: tuple[Connection, ...]
    subscription_table: Mapping[str, SubscriptionData]
    consume_type: str
    message_model: str
    consume_from_where: str

    def to_json_value(self) -> Bean:
        """The fastjson value of this bean."""
        return Bean(
            connectionSet=JavaSet(c.to_json_value() for c in self.connections),
            consumeFromWhere=self.consume_from_where,
            consumeType=self.consume_type,
            messageModel=self.message_model,
            subscriptionTable={k: v.to_json_value() for k, v in self.subscription_table.items()},
        )


def encode_consumer_connection(conn: ConsumerConnection) -> bytes:
    """Compact JSON of a ``ConsumerConnection``."""
    return fastjson.dumps(conn.to_json_value()).encode()


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetWrapper:
    """``OffsetWrapper``: one queue's broker, consumer and pull offsets."""

    broker_offset: int
    consumer_offset: int
    pull_offset: int
    last_timestamp: int

    def to_json_value(self) -> Bean:
        """The fastjson value of this bean."""
        return Bean(
            brokerOffset=self.broker_offset,
            consumerOffset=self.consumer_offset,
            lastTimestamp=self.last_timestamp,
            pullOffset=self.pull_offset,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumeStats:
    """``ConsumeStats`` (GET_CONSUME_STATS 208).

    ``consume_tps`` is a Java double upstream; we count whole messages per second, and fastjson
    reads the integer into the double field unchanged.
    """

    offset_table: Mapping[MessageQueue, OffsetWrapper]
    consume_tps: int = 0

    def to_json_value(self) -> Bean:
        """The fastjson value of this bean."""
        return Bean(
            consumeTps=self.consume_tps,
            offsetTable={
                mq.to_key(): w.to_json_value() for mq, w in sorted(self.offset_table.items())
            },
        )


def encode_consume_stats(stats: ConsumeStats) -> bytes:
    """Compact JSON of a ``ConsumeStats``."""
    return fastjson.dumps(stats.to_json_value()).encode()


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicOffset:
    """``TopicOffset``: one queue's min/max offset and last store time."""

    min_offset: int
    max_offset: int
    last_update_timestamp: int

    def to_json_value(self) -> Bean:
        """The fastjson value of this bean."""
        return Bean(
            lastUpdateTimestamp=self.last_update_timestamp,
            maxOffset=self.max_offset,
            minOffset=self.min_offset,
        )


def encode_topic_stats(table: Mapping[MessageQueue, TopicOffset]) -> bytes:
    """``TopicStatsTable``: ``{"offsetTable":{<queue>:<TopicOffset>}}``."""
    return fastjson.dumps(
        Bean(offsetTable={mq.to_key(): t.to_json_value() for mq, t in sorted(table.items())})
    ).encode()


def encode_kv_table(table: Mapping[str, str]) -> bytes:
    """``KVTable``: ``{"table":{...}}`` with string values."""
    return fastjson.dumps(Bean(table=dict(table))).encode()


def encode_reset_offset_body(offsets: Mapping[MessageQueue, int]) -> bytes:
    """``ResetOffsetBody``: ``{"offsetTable":{<queue>:offset}}``."""
    return fastjson.dumps(
        Bean(offsetTable={mq.to_key(): off for mq, off in sorted(offsets.items())})
    ).encode()


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckClientRequestBody:
    """``CheckClientRequestBody`` (CHECK_CLIENT_CONFIG 46)."""

    client_id: str
    group: str
    subscription_data: SubscriptionData | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


def decode_check_client_request(body: bytes | None) -> CheckClientRequestBody:
    """Parse a CHECK_CLIENT_CONFIG body.

    Raises:
        CodecError: missing body, not JSON, or a field of the wrong type.
    """
    obj = _load(body, "checkClientRequestBody")
    sub = obj.get("subscriptionData")
    return CheckClientRequestBody(
        client_id=_str(obj, "clientId"),
        group=_str(obj, "group"),
        subscription_data=None if sub is None else SubscriptionData.from_json_value(sub),
    )
