"""What the proxy remembers of open transactions, and how a check-back reaches a gRPC client.

Owns: :class:`TransactionData` and :class:`TransactionDataManager` (upstream
``TransactionDataManager``: per ``producerGroup@transactionId`` the broker, the half message's
queue offset (``tranStateTableOffset``) and commit-log offset, recorded when a half message is
stored and when a broker checks one back, dropped when the transaction ends or after
``transactionDataExpireMillis``), :class:`TransactionCheck` (a broker's
CHECK_TRANSACTION_STATE as the backend hands it up), :func:`grpc_message` (``GrpcConverter.
buildMessage`` for the checked message: what the client's checker sees) and
:func:`end_transaction_header` (``TransactionService.genEndTransactionRequestHeader``). Pure: no
I/O; the caller passes the monotonic time. Must not: import the broker or know gRPC transport.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass
from typing import Final

from rocketpy.client.message import MessageExt
from rocketpy.common.message.const import MessageConst
from rocketpy.proxy.pb import definition_pb2 as pb
from rocketpy.proxy.send import SHARDING_KEY, SYSTEM_PROPERTY_KEYS, TIMER_DELIVER_MS
from rocketpy.remoting.protocol.headers.transaction import EndTransactionRequestHeader

#: ``MessageSysFlag.TRANSACTION_COMMIT_TYPE`` / ``TRANSACTION_ROLLBACK_TYPE``.
COMMIT_TYPE: Final = 0x2 << 2
ROLLBACK_TYPE: Final = 0x3 << 2
#: Records kept at most (``transactionDataMaxNum``) and how long (``transactionDataExpireMillis``).
MAX_RECORDS: Final = 1_000_000
EXPIRE_S: Final = 30.0 * 60


@dataclass(frozen=True, slots=True)
class TransactionData:
    """Where one half message lives (``TransactionData``)."""

    broker_name: str
    tran_state_table_offset: int
    commit_log_offset: int
    transaction_id: str
    expires_at: float


@dataclass(frozen=True, slots=True)
class TransactionCheck:
    """A broker's CHECK_TRANSACTION_STATE: who asks (``broker_name``, ``broker_addr``), about
    which half message (its queue and commit-log offsets, transaction id), with the message."""

    broker_name: str
    broker_addr: str
    tran_state_table_offset: int
    commit_log_offset: int
    transaction_id: str
    message: MessageExt

    @property
    def producer_group(self) -> str:
        """The half message's ``PGROUP`` (the topic for gRPC producers)."""
        return self.message.properties.get(MessageConst.PGROUP, "")


class TransactionDataManager:
    """``producerGroup@transactionId`` -> :class:`TransactionData`, oldest first."""

    def __init__(self, expire_s: float = EXPIRE_S, max_records: int = MAX_RECORDS) -> None:
        self._expire_s = expire_s
        self._max = max_records
        self._data: OrderedDict[tuple[str, str], TransactionData] = OrderedDict()

    def add(  # noqa: PLR0917 - one record's fields
        self, group: str, broker_name: str, queue_offset: int, commit_log_offset: int,
        transaction_id: str, now: float,
    ) -> TransactionData:  # fmt: skip
        """``addTransactionData``: remember (or refresh) where ``transaction_id`` lives."""
        self.expire(now)
        data = TransactionData(
            broker_name, queue_offset, commit_log_offset, transaction_id, now + self._expire_s
        )
        key = (group, transaction_id)
        self._data.pop(key, None)
        self._data[key] = data
        while len(self._data) > self._max:
            self._data.popitem(last=False)
        return data

    def poll(self, group: str, transaction_id: str, now: float) -> TransactionData | None:
        """``pollNoExpireTransactionData``: take the record out, unless it expired."""
        data = self._data.pop((group, transaction_id), None)
        if data is None or data.expires_at <= now:
            return None
        return data

    def expire(self, now: float) -> None:
        """Drop expired records (they are ordered by expiry)."""
        while self._data:
            key, data = next(iter(self._data.items()))
            if data.expires_at > now:
                return
            del self._data[key]

    def __len__(self) -> int:
        return len(self._data)


def end_transaction_header(  # noqa: PLR0917 - EndTransaction's fields
    topic: str, group: str, data: TransactionData, message_id: str,
    resolution: pb.TransactionResolution, source: pb.TransactionSource,
) -> EndTransactionRequestHeader:  # fmt: skip
    """END_TRANSACTION's header for a recorded transaction (``genEndTransactionRequestHeader``):
    COMMIT -> 8, ROLLBACK -> 12, anything else -> 0 (not a decision; the broker ignores it)."""
    kinds = {
        pb.TransactionResolution.COMMIT: COMMIT_TYPE,
        pb.TransactionResolution.ROLLBACK: ROLLBACK_TYPE,
    }
    return EndTransactionRequestHeader(
        topic=topic,
        producer_group=group,
        tran_state_table_offset=data.tran_state_table_offset,
        commit_log_offset=data.commit_log_offset,
        commit_or_rollback=kinds.get(resolution, 0),
        from_transaction_check=source == pb.TransactionSource.SOURCE_SERVER_CHECK,
        msg_id=message_id,
        transaction_id=data.transaction_id,
        bname=data.broker_name,
    )


def _message_type(props: dict[str, str]) -> pb.MessageType:
    """``GrpcConverter.buildMessageType``."""
    if props.get(MessageConst.TRAN_MSG) == "true":
        return pb.MessageType.TRANSACTION
    if any(
        k in props
        for k in (MessageConst.DELAY, TIMER_DELIVER_MS, "TIMER_DELAY_SEC", "TIMER_DELAY_MS")
    ):
        return pb.MessageType.DELAY
    if SHARDING_KEY in props:
        return pb.MessageType.FIFO
    return pb.MessageType.NORMAL


def grpc_message(msg: MessageExt) -> pb.Message:
    """``GrpcConverter.buildMessage``: the stored message as a gRPC ``Message`` (id = UNIQ_KEY,
    MD5 upper-case body digest, non-system properties as user properties)."""
    props = msg.properties
    sp = pb.SystemProperties(
        message_id=msg.msg_id,
        body_digest=pb.Digest(
            type=pb.DigestType.MD5,
            checksum=hashlib.md5(msg.body).hexdigest().upper(),  # noqa: S324 - upstream's digest
        ),
        body_encoding=pb.Encoding.IDENTITY,
        message_type=_message_type(props),
        born_host=msg.born_host[0],
        store_host=f"{msg.store_host[0]}:{msg.store_host[1]}",
        queue_id=msg.queue_id,
        queue_offset=msg.queue_offset,
        delivery_attempt=msg.reconsume_times + 1,
    )
    sp.born_timestamp.FromMilliseconds(msg.born_timestamp)
    sp.store_timestamp.FromMilliseconds(msg.store_timestamp)
    if tag := props.get(MessageConst.TAGS):
        sp.tag = tag
    if keys := props.get(MessageConst.KEYS):
        sp.keys.extend(k for k in keys.split(" ") if k)
    if group := props.get(SHARDING_KEY):
        sp.message_group = group
    if deliver := props.get(TIMER_DELIVER_MS):
        sp.delivery_timestamp.FromMilliseconds(int(deliver))
    user = {k: v for k, v in props.items() if k not in SYSTEM_PROPERTY_KEYS and k != SHARDING_KEY}
    return pb.Message(
        topic=pb.Resource(name=msg.topic), user_properties=user, system_properties=sp, body=msg.body
    )
