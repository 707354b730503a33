"""Client message values: what a producer sends, what a consumer receives, what a send returns.

Owns: :class:`Message` (``common/message/Message``), :class:`MessageExt` (``MessageClientExt``: a
pulled message with its ids and store coordinates), :class:`SendStatus` and :class:`SendResult`
(``client/producer/SendResult``), and building a :class:`MessageExt` from a pulled record. Pure.
"""

from __future__ import annotations

import enum
import socket
import struct
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from rocketpy.client.codec import (
    BORNHOST_V6_FLAG,
    COMPRESSED_FLAG,
    MAGIC_V1,
    MAGIC_V2,
    STOREHOST_V6_FLAG,
    RawRecord,
    encode_offset_msg_id,
    uncompress_body,
)
from rocketpy.common.message.const import MessageConst
from rocketpy.common.message.properties import decode_properties, property_value
from rocketpy.remoting.protocol.body.broker import MessageQueue

Address = tuple[str, int]

#: TOTALSIZE .. BODYLEN of a record whose hosts are both IPv4 (codec.py's table), each host read
#: as one uint64 (address << 32 | port) so it can key the host caches.
_V4_HEAD: Final = struct.Struct(">iiiiiqqiqQqQiqi")
_V4_HEAD_SIZE: Final = _V4_HEAD.size
_INT8: Final = struct.Struct(">b")
_INT16: Final = struct.Struct(">h")
_V6_HOSTS: Final = BORNHOST_V6_FLAG | STOREHOST_V6_FLAG
_UINT64_MASK: Final = 0xFFFFFFFFFFFFFFFF


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


class MessageExt:
    """A consumed message (``MessageClientExt``). Treat as read-only.

    ``msg_id`` is the producer's ``UNIQ_KEY`` when present, else the offset id (as Java's
    ``MessageClientExt.getMsgId``); ``offset_msg_id`` encodes the store host and commit-log offset.

    ``properties`` may be given as the record's raw text (``properties_text``, plus ``extra``
    entries laid over it): the map is then built on first use. A consumer that reads only the
    body and ids never pays for it (a third of decoding a pulled record). Not a dataclass for
    that reason; equality and repr compare and show the fields as one would.
    """

    __slots__ = (
        "_extra",
        "_properties",
        "_text",
        "body",
        "born_host",
        "born_timestamp",
        "broker_name",
        "commit_log_offset",
        "flag",
        "msg_id",
        "offset_msg_id",
        "prepared_transaction_offset",
        "queue_id",
        "queue_offset",
        "reconsume_times",
        "store_host",
        "store_size",
        "store_timestamp",
        "sys_flag",
        "topic",
    )

    # Positional order is the field order below (the pull decoder passes them positionally).
    def __init__(  # noqa: PLR0917 -- one parameter per MessageClientExt field
        self,
        topic: str,
        body: bytes,
        properties: dict[str, str] | None,
        msg_id: str,
        offset_msg_id: str,
        broker_name: str,
        queue_id: int,
        queue_offset: int,
        commit_log_offset: int,
        store_size: int,
        flag: int,
        sys_flag: int,
        born_timestamp: int,
        born_host: Address,
        store_timestamp: int,
        store_host: Address,
        reconsume_times: int,
        prepared_transaction_offset: int,
        properties_text: str = "",
        extra: Mapping[str, str] | None = None,
    ) -> None:
        self.topic = topic
        self.body = body
        self._properties = properties
        self._text = properties_text
        self._extra = extra
        self.msg_id = msg_id
        self.offset_msg_id = offset_msg_id
        self.broker_name = broker_name
        self.queue_id = queue_id
        self.queue_offset = queue_offset
        self.commit_log_offset = commit_log_offset
        self.store_size = store_size
        self.flag = flag
        self.sys_flag = sys_flag
        self.born_timestamp = born_timestamp
        self.born_host = born_host
        self.store_timestamp = store_timestamp
        self.store_host = store_host
        self.reconsume_times = reconsume_times
        self.prepared_transaction_offset = prepared_transaction_offset

    @property
    def properties(self) -> dict[str, str]:
        """The message's properties (built from the record's text on first use)."""
        props = self._properties
        if props is None:
            props = self._properties = decode_properties(self._text)
            if self._extra:
                props.update(self._extra)
            self._text, self._extra = "", None
        return props

    @properties.setter
    def properties(self, value: dict[str, str]) -> None:
        self._properties = value
        self._text, self._extra = "", None

    @property
    def tags(self) -> str | None:
        """The ``TAGS`` property."""
        return self.properties.get(MessageConst.TAGS)

    @property
    def keys(self) -> str | None:
        """The ``KEYS`` property."""
        return self.properties.get(MessageConst.KEYS)

    @property
    def message_queue(self) -> MessageQueue:
        """The queue this message was pulled from."""
        return MessageQueue(topic=self.topic, broker_name=self.broker_name, queue_id=self.queue_id)

    def replace(self, **changes: Any) -> MessageExt:
        """A copy with ``changes`` (constructor field names), as ``dataclasses.replace``."""
        fields = {name: getattr(self, name) for name in _EXT_FIELDS}
        fields.update(changes)
        return MessageExt(**fields)

    def _values(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in _EXT_FIELDS)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not MessageExt:
            return NotImplemented
        assert isinstance(other, MessageExt)  # noqa: S101 - narrowed for mypy
        return self._values() == other._values()

    __hash__ = None  # type: ignore[assignment]  # mutable, compared by value (as a dataclass)

    def __repr__(self) -> str:
        inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in _EXT_FIELDS)
        return f"MessageExt({inner})"


#: MessageExt's fields in constructor order (what equality, repr and replace cover).
_EXT_FIELDS: Final = (
    "topic",
    "body",
    "properties",
    "msg_id",
    "offset_msg_id",
    "broker_name",
    "queue_id",
    "queue_offset",
    "commit_log_offset",
    "store_size",
    "flag",
    "sys_flag",
    "born_timestamp",
    "born_host",
    "store_timestamp",
    "store_host",
    "reconsume_times",
    "prepared_transaction_offset",
)


def message_ext_from_record(rec: RawRecord, broker_name: str) -> MessageExt:
    """Build a :class:`MessageExt` from a decoded record (body uncompressed, properties parsed)."""
    props = decode_properties(rec.properties)
    offset_id = encode_offset_msg_id(rec.store_host, rec.physical_offset)
    return MessageExt(
        topic=rec.topic,
        body=uncompress_body(rec.body, rec.sys_flag),
        properties=props,
        msg_id=props.get(MessageConst.UNIQ_KEY) or offset_id,
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


#: Memo of IPv4 hosts read as ``address << 32 | port``: their ``(ip, port)`` tuple and the
#: offset-id characters of a store host. Few distinct keys (brokers, producer connections);
#: cleared when it grows past :data:`_HOST_MEMO_MAX`. Only this module touches it.
_HOSTS: Final[dict[int, Address]] = {}
_ID_PREFIXES: Final[dict[int, str]] = {}
_HOST_MEMO_MAX: Final = 4096


def _host(key: int) -> Address:
    """The ``(ip, port)`` of ``key``, memoised."""
    if len(_HOSTS) >= _HOST_MEMO_MAX:
        _HOSTS.clear()
    addr = _HOSTS[key] = (socket.inet_ntoa((key >> 32).to_bytes(4, "big")), key & 0xFFFFFFFF)
    return addr


def _id_prefix(key: int) -> str:
    """The first 16 offset-id characters of store host ``key``, memoised."""
    if len(_ID_PREFIXES) >= _HOST_MEMO_MAX:
        _ID_PREFIXES.clear()
    prefix = _ID_PREFIXES[key] = f"{key:016X}"
    return prefix


class _PullBodyReader:
    """Decodes the IPv4-host records of one pull body."""

    __slots__ = ("_broker_name", "_extra", "_tags")

    def __init__(
        self,
        broker_name: str,
        tags: Collection[str] | None,
        extra: Mapping[str, str] | None,
    ) -> None:
        self._broker_name = broker_name
        self._tags = tags
        self._extra = extra

    def read(self, data: bytes, pos: int) -> tuple[MessageExt | None, int]:
        """The record at ``pos`` (None when its tag is filtered out) and where it ends.

        Raises:
            ValueError: an IPv6 host (not handled here), bad magic or size, a negative length,
                bad UTF-8, or lengths that disagree with TOTALSIZE.
            struct.error: a field past the end.
        """
        (
            size,
            magic,
            _crc,
            qid,
            flag,
            qoff,
            phys,
            sys_flag,
            born_ts,
            born,
            store_ts,
            store,
            reconsume,
            prepared,
            body_len,
        ) = _V4_HEAD.unpack_from(data, pos)
        rec_end = pos + size
        if sys_flag & _V6_HOSTS or size <= 0 or rec_end > len(data):
            raise ValueError("not a complete IPv4-host record")
        at = pos + _V4_HEAD_SIZE
        payload = data[at : at + body_len]
        at += body_len
        if magic == MAGIC_V1:
            (topic_len,) = _INT8.unpack_from(data, at)
            at += 1
        elif magic == MAGIC_V2:
            (topic_len,) = _INT16.unpack_from(data, at)
            at += 2
        else:
            raise ValueError(f"magic {magic & 0xFFFFFFFF:#x}")
        topic = data[at : at + topic_len].decode()
        at += topic_len
        (props_len,) = _INT16.unpack_from(data, at)
        if body_len < 0 or topic_len < 0 or props_len < 0 or at + 2 + props_len != rec_end:
            raise ValueError("record size disagrees with its fields")
        # The properties map is built only if the consumer reads it (MessageExt.properties).
        text = data[at + 2 : rec_end].decode()
        if self._tags is not None and property_value(text, MessageConst.TAGS) not in self._tags:
            return None, rec_end
        extra = self._extra
        if sys_flag & COMPRESSED_FLAG:
            payload = uncompress_body(payload, sys_flag)
        born_host = _HOSTS.get(born) or _host(born)
        store_host = _HOSTS.get(store) or _host(store)
        prefix = _ID_PREFIXES.get(store) or _id_prefix(store)
        offset_id = f"{prefix}{phys & _UINT64_MASK:016X}"
        if extra and MessageConst.UNIQ_KEY in extra:
            uniq: str | None = extra[MessageConst.UNIQ_KEY]
        else:
            uniq = property_value(text, MessageConst.UNIQ_KEY)
        msg = MessageExt(
            topic, payload, None, uniq or offset_id, offset_id, self._broker_name, qid, qoff,
            phys, size, flag, sys_flag, born_ts, born_host, store_ts, store_host, reconsume,
            prepared, text, extra,
        )  # fmt: skip
        return msg, rec_end


def decode_message_exts(
    body: bytes,
    broker_name: str,
    *,
    tags: Collection[str] | None = None,
    extra_properties: Mapping[str, str] | None = None,
) -> list[MessageExt]:
    """The records of a PULL_MESSAGE body as :class:`MessageExt` in one pass.

    Gives what :func:`decode_records` + :func:`message_ext_from_record` give, faster: a record
    whose hosts are both IPv4 (the common case) takes one struct unpack and cached host tuples
    and offset-id prefixes. Any other record (IPv6 hosts, or one that does not decode) goes
    through :class:`RawRecord`, which decodes it or raises with the field and offset.

    Args:
        body: records back to back.
        broker_name: the broker they were pulled from.
        tags: keep only messages whose ``TAGS`` is in it (``processPullResult``); None keeps all.
        extra_properties: set on every kept message (``MIN_OFFSET``/``MAX_OFFSET``).

    Raises:
        MessageCodecError: a record does not decode.
    """
    out: list[MessageExt] = []
    reader = _PullBodyReader(broker_name, tags, extra_properties)
    read, end = reader.read, len(body)
    pos = 0
    while pos < end:
        try:
            msg, pos = read(body, pos)
        except (struct.error, ValueError):
            rec = RawRecord(memoryview(body), pos)
            pos += rec.store_size
            msg = message_ext_from_record(rec, broker_name)
            if tags is not None and msg.tags not in tags:
                continue
            if extra_properties:
                msg.properties.update(extra_properties)
        if msg is not None:
            out.append(msg)
    return out


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
    "decode_message_exts",
    "message_ext_from_record",
]
