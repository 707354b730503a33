"""What a commit-log append takes and returns: one message, a batch, the outcome.

Owns: :class:`MessageToStore` (``MessageExtBrokerInner``), :class:`MessageBatch`
(``MessageExtBatch``), :class:`PutResult` (``PutMessageResult`` + ``AppendMessageResult``),
:class:`PutMessageStatus` and the send lane's :class:`Appender`: the one vocabulary of a put,
used by the store, the broker's send path and HA alike. Pure values.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final, NamedTuple, Self

from rocketpy.common.message.const import MessageConst
from rocketpy.common.message.properties import encode_properties, waits_for_store
from rocketpy.common.message.record import Address
from rocketpy.common.types import JAVA_INT_MAX, JAVA_INT_MIN, JAVA_LONG_MAX, JAVA_LONG_MIN


class PutMessageStatus(enum.StrEnum):
    """``PutMessageStatus`` names a broker can observe (the store, its flush and its HA)."""

    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    CREATE_MAPPED_FILE_FAILED = "CREATE_MAPPED_FILE_FAILED"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    OS_PAGE_CACHE_BUSY = "OS_PAGE_CACHE_BUSY"
    IN_SYNC_REPLICAS_NOT_ENOUGH = "IN_SYNC_REPLICAS_NOT_ENOUGH"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"


#: Statuses whose message IS stored (the send response carries msgId/queueOffset).
STORED_STATUSES: Final = frozenset(
    {
        PutMessageStatus.PUT_OK,
        PutMessageStatus.FLUSH_DISK_TIMEOUT,
        PutMessageStatus.FLUSH_SLAVE_TIMEOUT,
        PutMessageStatus.SLAVE_NOT_AVAILABLE,
    }
)


# Not frozen: one per put on the send path (a frozen ``__init__`` costs twice as much). Treat as
# read-only. Not keyword-only: the send path builds one per message positionally (a third of
# the keyword call's cost); elsewhere keywords read better.
@dataclass(slots=True)
class MessageToStore:
    """What a producer sent, before the broker assigns offsets and the store timestamp."""

    topic: str
    queue_id: int
    body: bytes
    flag: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: Address = ("127.0.0.1", 0)
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    properties: str = ""
    wait_store: bool = True

    @classmethod
    def with_properties(
        cls,
        *,
        topic: str,
        queue_id: int,
        body: bytes,
        properties: Mapping[str, str],
        flag: int = 0,
        sys_flag: int = 0,
        born_timestamp: int = 0,
        born_host: Address = ("127.0.0.1", 0),
        reconsume_times: int = 0,
        prepared_transaction_offset: int = 0,
    ) -> Self:
        """A message whose properties are a map: encoded once here, and its ``WAIT``
        property read into :attr:`wait_store`."""
        return cls(
            topic=topic,
            queue_id=queue_id,
            body=body,
            flag=flag,
            sys_flag=sys_flag,
            born_timestamp=born_timestamp,
            born_host=born_host,
            reconsume_times=reconsume_times,
            prepared_transaction_offset=prepared_transaction_offset,
            properties=encode_properties(properties),
            wait_store=waits_for_store(properties.get(MessageConst.WAIT)),
        )


# Not frozen: one per append, and a frozen ``__init__`` costs twice as much. Treat as read-only.
# Positional fields: the append path builds one per message without keywords.
@dataclass(slots=True)
class PutResult:
    """Outcome of one put (a batch reports its first record's offsets and all msg ids,
    joined with ``,``)."""

    status: PutMessageStatus
    wrote_offset: int = -1
    wrote_bytes: int = 0
    msg_id: str = ""
    queue_offset: int = -1
    store_timestamp: int = 0
    msg_num: int = 0

    @property
    def stored(self) -> bool:
        """True when the message is in the commit log (even if flush/replication timed out)."""
        return self.status in STORED_STATUSES


# Not frozen: one per batch send. Treat as read-only.
@dataclass(slots=True, kw_only=True)
class MessageBatch:
    """``MessageExtBatch``: the messages of one SEND_BATCH_MESSAGE, for one queue. Everything
    but each message's flag, body and properties text is shared, and encoded once. ``items``
    are ``(flag, body, properties text)``: :class:`BatchItem` s or plain tuples."""

    topic: str
    queue_id: int
    items: list[tuple[int, bytes, str]]
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: Address = ("127.0.0.1", 0)
    reconsume_times: int = 0
    wait_store: bool = True
    #: Each item's UNIQ_KEY, when the sender has read them from the properties already (the
    #: index then takes them from the batch's dispatch hint instead of reading them again).
    uniqs: list[str] | None = None


def fields_fit(m: MessageToStore) -> bool:
    """Whether the record's int32/int64 fields can hold ``m``'s values (SYSFLAG, FLAG,
    QUEUEID, RECONSUMETIMES, BORNTIMESTAMP, PREPARED_TRANSACTION_OFFSET)."""
    return (
        JAVA_INT_MIN <= m.sys_flag <= JAVA_INT_MAX
        and JAVA_INT_MIN <= m.flag <= JAVA_INT_MAX
        and JAVA_INT_MIN <= m.queue_id <= JAVA_INT_MAX
        and JAVA_INT_MIN <= m.reconsume_times <= JAVA_INT_MAX
        and JAVA_LONG_MIN <= m.born_timestamp <= JAVA_LONG_MAX
        and JAVA_LONG_MIN <= m.prepared_transaction_offset <= JAVA_LONG_MAX
    )


def batch_fields_fit(batch: MessageBatch) -> bool:
    """:func:`fields_fit` for a batch: the shared fields and every item's flag."""
    return (
        JAVA_INT_MIN <= batch.sys_flag <= JAVA_INT_MAX
        and JAVA_INT_MIN <= batch.queue_id <= JAVA_INT_MAX
        and JAVA_INT_MIN <= batch.reconsume_times <= JAVA_INT_MAX
        and JAVA_LONG_MIN <= batch.born_timestamp <= JAVA_LONG_MAX
        and _flags_fit(batch.items)
    )


def _flags_fit(items: list[tuple[int, bytes, str]]) -> bool:
    """Every item's flag within int32 (one comprehension, not a generator resumed per item)."""
    if not items:
        return True
    flags: list[int] = [item[0] for item in items]
    return min(flags) >= JAVA_INT_MIN and max(flags) <= JAVA_INT_MAX


class Appender(NamedTuple):
    """The send lane's appends, with no await (``nowait_appender``): ``one`` as
    ``put_message_nowait``; ``run`` a run of single messages with their UNIQ_KEYs, written
    together: each one's message id and queue offset in the run's order, or None -- nothing
    written -- where ``one`` must take them in turn (a new segment, a record that is not a
    plain message)."""

    one: Callable[[MessageToStore], PutResult | None]
    run: Callable[[list[MessageToStore], list[str]], list[tuple[str, int]] | None]
