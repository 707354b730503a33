"""What a commit-log append takes and returns: one message, a batch, the outcome.

Owns: :class:`MessageToStore`, :class:`MessageBatch` (``MessageExtBatch``),
:class:`AppendResult` and :class:`PutStatus`. Pure values.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from rocketpy.common.message.record import Address
from rocketpy.common.types import JAVA_INT_MAX, JAVA_INT_MIN, JAVA_LONG_MAX, JAVA_LONG_MIN


class PutStatus(enum.Enum):
    """``PutMessageStatus`` values this store produces."""

    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    CREATE_MAPPED_FILE_FAILED = "CREATE_MAPPED_FILE_FAILED"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"


# Not frozen: one per put on the send path (a frozen ``__init__`` costs twice as much). Treat as
# read-only.
@dataclass(slots=True, kw_only=True)
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


# Not frozen: one per append, and a frozen ``__init__`` costs twice as much. Treat as read-only.
# Positional fields: the append path builds one per message without keywords.
@dataclass(slots=True)
class AppendResult:
    """Outcome of one put (a batch reports its first record's offsets and all msg ids)."""

    status: PutStatus
    wrote_offset: int = -1
    wrote_bytes: int = 0
    msg_id: str = ""
    queue_offset: int = -1
    store_timestamp: int = 0
    msg_num: int = 0


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
        and all(JAVA_INT_MIN <= flag <= JAVA_INT_MAX for flag, _, _ in batch.items)
    )
