"""Client message values: what a producer sends, what a consumer receives, what a send returns.

Owns: :class:`Message` (``common/message/Message``), :class:`MessageExt` (``MessageClientExt``: a
pulled message with its ids and store coordinates), :class:`SendStatus` and :class:`SendResult`
(``client/producer/SendResult``), and building a :class:`MessageExt` from a pulled record. Pure.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from rocketpy.client.codec import (
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_KEY,
    RawRecord,
    decode_properties,
    encode_offset_msg_id,
    uncompress_body,
)
from rocketpy.remoting.protocol.body.broker import MessageQueue

Address = tuple[str, int]


@dataclass(slots=True, kw_only=True)
class Message:
    """A message to send.

    Attributes:
        topic: destination topic.
        body: payload bytes.
        tags: the ``TAGS`` property (one tag; consumers filter on it).
        keys: the ``KEYS`` property (space-separated business keys, indexed by the broker).
        properties: user properties (names must not contain ``\\x01``/``\\x02``).
        delay_level: 0 = deliver now; 1..18 = the broker's ``messageDelayLevel`` entry.
        flag: the user flag stored with the message.
    """

    topic: str
    body: bytes
    tags: str | None = None
    keys: str | None = None
    properties: dict[str, str] = field(default_factory=dict)
    delay_level: int = 0
    flag: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageExt:
    """A consumed message (``MessageClientExt``).

    ``msg_id`` is the producer's ``UNIQ_KEY`` when present, else the offset id (as Java's
    ``MessageClientExt.getMsgId``); ``offset_msg_id`` encodes the store host and commit-log offset.
    """

    topic: str
    body: bytes
    properties: dict[str, str]
    msg_id: str
    offset_msg_id: str
    broker_name: str
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    store_size: int
    flag: int
    sys_flag: int
    born_timestamp: int
    born_host: Address
    store_timestamp: int
    store_host: Address
    reconsume_times: int
    prepared_transaction_offset: int

    @property
    def tags(self) -> str | None:
        """The ``TAGS`` property."""
        return self.properties.get(PROPERTY_TAGS)

    @property
    def keys(self) -> str | None:
        """The ``KEYS`` property."""
        return self.properties.get(PROPERTY_KEYS)

    @property
    def message_queue(self) -> MessageQueue:
        """The queue this message was pulled from."""
        return MessageQueue(topic=self.topic, broker_name=self.broker_name, queue_id=self.queue_id)


def message_ext_from_record(rec: RawRecord, broker_name: str) -> MessageExt:
    """Build a :class:`MessageExt` from a decoded record (body uncompressed, properties parsed)."""
    props = decode_properties(rec.properties)
    offset_id = encode_offset_msg_id(rec.store_host, rec.physical_offset)
    return MessageExt(
        topic=rec.topic,
        body=uncompress_body(rec.body, rec.sys_flag),
        properties=props,
        msg_id=props.get(PROPERTY_UNIQ_KEY) or offset_id,
        offset_msg_id=offset_id,
        broker_name=broker_name,
        queue_id=rec.queue_id,
        queue_offset=rec.queue_offset,
        commit_log_offset=rec.physical_offset,
        store_size=rec.store_size,
        flag=rec.flag,
        sys_flag=rec.sys_flag,
        born_timestamp=rec.born_timestamp,
        born_host=rec.born_host,
        store_timestamp=rec.store_timestamp,
        store_host=rec.store_host,
        reconsume_times=rec.reconsume_times,
        prepared_transaction_offset=rec.prepared_transaction_offset,
    )


class SendStatus(enum.Enum):
    """``SendStatus``: the message is stored in every case; the flush/replication wait may not
    have finished."""

    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


# Not frozen: one per send on the producer's hot path (a frozen ``__init__`` costs twice as much).
# Treat as read-only.
@dataclass(slots=True, kw_only=True)
class SendResult:
    """``SendResult``.

    Attributes:
        status: how far the store went.
        msg_id: the client unique id (``UNIQ_KEY``); for a batch, the ids joined with ``,``.
        offset_msg_id: the broker's offset id(s) (``msgId`` of the response header).
        message_queue: where it was stored.
        queue_offset: consume-queue offset (the first one for a batch).
        transaction_id: the response's ``transactionId`` (5.x: the UNIQ_KEY).
        region_id: ``MSG_REGION`` from the response (``DefaultRegion`` when absent).
        trace_on: ``TRACE_ON`` from the response.
    """

    status: SendStatus
    msg_id: str
    offset_msg_id: str
    message_queue: MessageQueue
    queue_offset: int
    transaction_id: str | None = None
    region_id: str = "DefaultRegion"
    trace_on: bool = True


__all__ = [
    "Message",
    "MessageExt",
    "MessageQueue",
    "SendResult",
    "SendStatus",
    "message_ext_from_record",
]
