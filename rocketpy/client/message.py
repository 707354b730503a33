"""Client message values: what a producer sends, what a consumer receives, what a send returns.

Owns: :class:`Message` (``common/message/Message``), :class:`MessageExt` (``MessageClientExt``: a
pulled message with its ids and store coordinates), :class:`SendStatus` and :class:`SendResult`
(``client/producer/SendResult``), and building :class:`MessageExt` from a pull body (records read by
:mod:`rocketpy.common.message.decoder`). Pure.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from rocketpy.common.message.const import MessageConst
from rocketpy.common.message.decoder import (
    HostKey,
    host_address,
    offset_id_prefix,
    offset_msg_id,
    read_record,
    uncompress_body,
)
from rocketpy.common.message.properties import decode_properties, property_value
from rocketpy.common.message.record import COMPRESSED_FLAG
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
        deliver_time_ms: 0 = deliver now; else the wall-clock time (epoch ms) at which a 5.x
            broker delivers it (``TIMER_DELIVER_MS``, Java's ``setDeliverTimeMs``). A time in
            the past is delivered at once; more than ``timerMaxDelaySec`` ahead is refused
            (MESSAGE_ILLEGAL). A ``delay_level`` wins over it.
    """

    topic: str
    body: bytes
    tags: str | None = None
    keys: str | None = None
    properties: dict[str, str] = field(default_factory=dict)
    delay_level: int = 0
    flag: int = 0
    deliver_time_ms: int = 0


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


class _PullBodyReader:
    """Decodes the records of one pull body. Its records share a few hosts: their addresses and
    offset-id prefixes are looked up once per body."""

    __slots__ = ("_broker_name", "_extra", "_hosts", "_prefixes", "_tags")

    def __init__(
        self,
        broker_name: str,
        tags: Collection[str] | None,
        extra: Mapping[str, str] | None,
    ) -> None:
        self._broker_name = broker_name
        self._tags = tags
        self._extra = extra
        self._hosts: dict[HostKey, Address] = {}
        self._prefixes: dict[HostKey, str] = {}

    def read(self, data: bytes, pos: int) -> tuple[MessageExt | None, int]:
        """The record at ``pos`` (None when its tag is filtered out) and where it ends.

        Raises:
            MessageCodecError: the record does not decode.
        """
        (
            size, _, _, qid, flag, qoff, phys, sys_flag, born_ts, born, store_ts, store,
            reconsume, prepared, body_at, body_len, topic, text,
        ) = read_record(data, pos)  # fmt: skip
        rec_end = pos + size
        # The properties map is built only if the consumer reads it (MessageExt.properties).
        if self._tags is not None and property_value(text, MessageConst.TAGS) not in self._tags:
            return None, rec_end
        payload = data[body_at : body_at + body_len]
        if sys_flag & COMPRESSED_FLAG:
            payload = uncompress_body(payload, sys_flag)
        hosts = self._hosts
        born_host = hosts.get(born) or hosts.setdefault(born, host_address(born))
        store_host = hosts.get(store) or hosts.setdefault(store, host_address(store))
        prefix = self._prefixes.get(store) or self._prefixes.setdefault(
            store, offset_id_prefix(store)
        )
        offset_id = offset_msg_id(prefix, phys)
        extra = self._extra
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
    """The records of a PULL_MESSAGE body as :class:`MessageExt` in one pass (``MessageDecoder.
    decodes`` then ``processPullResult``): bodies uncompressed, ``msg_id`` the ``UNIQ_KEY`` or
    else the offset id, the properties map built on first use.

    Args:
        body: records back to back.
        broker_name: the broker they were pulled from.
        tags: keep only messages whose ``TAGS`` is in it (``processPullResult``); None keeps all.
        extra_properties: set on every kept message (``MIN_OFFSET``/``MAX_OFFSET``).

    Raises:
        MessageCodecError: a record does not decode.
    """
    out: list[MessageExt] = []
    read = _PullBodyReader(broker_name, tags, extra_properties).read
    end = len(body)
    pos = 0
    while pos < end:
        msg, pos = read(body, pos)
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
]
