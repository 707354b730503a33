"""TransactionalMessageUtil: names and the messages the transaction paths store. Pure.

Owns: the system names (half/op topics, the ``d`` remove tag, the ``CID_RMQ_SYS_TRANS``
progress group, ``__transactionId__``), the half-message redirect (``parseHalfMessageInner``),
the committed message (``EndTransactionProcessor.endMessageTransaction``), a half message put
back for a check (``renewHalfMessageInner``), the op message (``makeOpMessageInner``), the
discarded message (``DefaultTransactionalMessageCheckListener.toMessageExtBrokerInner``) and the
check-count rule (``needDiscard``). Mirrors ``broker/transaction/queue/TransactionalMessageUtil``
and the builders of ``TransactionalMessageBridge`` (5.3.x). Must not: touch the store or the
network.

Decided: the committed record drops ``REAL_TOPIC``, ``REAL_QID`` and ``TRAN_MSG``, as
``endMessageTransaction`` intends (upstream renders the properties text before it clears them,
so its record keeps them); every other property of the half message is kept.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from rocketpy.broker import topic_validator as tv
from rocketpy.broker.store_api import StoredMessage
from rocketpy.common.message.const import MessageConst
from rocketpy.common.message.record import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_TYPE_MASK,
)
from rocketpy.store.commit_log.put_types import MessageToStore

HALF_TOPIC: Final = tv.RMQ_SYS_TRANS_HALF_TOPIC
OP_TOPIC: Final = tv.RMQ_SYS_TRANS_OP_HALF_TOPIC
CHECK_MAX_TIME_TOPIC: Final = tv.RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC
#: ``MixAll.CID_SYS_RMQ_TRANS``: the group whose offsets record the check's progress.
CID_SYS_RMQ_TRANS: Final = "CID_RMQ_SYS_TRANS"
REMOVE_TAG: Final = "d"
OFFSET_SEPARATOR: Final = ","
TRANSACTION_ID: Final = "__transactionId__"


def reset_transaction_value(sys_flag: int, transaction_type: int) -> int:
    """``MessageSysFlag.resetTransactionValue``."""
    return (sys_flag & ~TRANSACTION_TYPE_MASK) | transaction_type


def transaction_type(sys_flag: int) -> int:
    """``MessageSysFlag.getTransactionValue``."""
    return sys_flag & TRANSACTION_TYPE_MASK


def half_route(
    topic: str, queue_id: int, sys_flag: int, props: dict[str, str]
) -> tuple[str, int, int]:
    """``parseHalfMessageInner``: where a prepared message is stored. The real topic and queue
    go into ``props`` (with ``__transactionId__`` = UNIQ_KEY); the record is a plain message of
    ``RMQ_SYS_TRANS_HALF_TOPIC`` queue 0 (transaction type reset), which no consumer of the
    real topic sees.

    Returns:
        (half topic, 0, sys flag).
    """
    uniq = props.get(MessageConst.UNIQ_KEY)
    if uniq:
        props[TRANSACTION_ID] = uniq
    props[MessageConst.REAL_TOPIC] = topic
    props[MessageConst.REAL_QID] = str(queue_id)
    return HALF_TOPIC, 0, reset_transaction_value(sys_flag, TRANSACTION_NOT_TYPE)


def real_queue(props: Mapping[str, str]) -> tuple[str, int] | None:
    """The half message's ``REAL_TOPIC``/``REAL_QID``, or None when either is missing or bad."""
    topic = props.get(MessageConst.REAL_TOPIC)
    qid = props.get(MessageConst.REAL_QID, "")
    if not topic or not qid.isdigit():
        return None
    return topic, int(qid)


def end_message(half: StoredMessage, commit_log_offset: int) -> MessageToStore | None:
    """``endMessageTransaction`` plus the commit branch of ``processRequest``: the real message
    (commit transaction type, ``PREPARED_TRANSACTION_OFFSET`` = the half message's offset),
    or None when the half message does not name its real queue."""
    where = real_queue(half.properties)
    if where is None:
        return None
    props = dict(half.properties)
    for key in (MessageConst.REAL_TOPIC, MessageConst.REAL_QID, MessageConst.TRAN_MSG):
        props.pop(key, None)
    props[MessageConst.WAIT] = "false"
    return MessageToStore.with_properties(
        topic=where[0],
        queue_id=where[1],
        body=half.body,
        flag=half.flag,
        properties=props,
        sys_flag=reset_transaction_value(half.sys_flag, TRANSACTION_COMMIT_TYPE),
        born_timestamp=half.born_timestamp,
        born_host=half.born_host,
        reconsume_times=half.reconsume_times,
        prepared_transaction_offset=commit_log_offset,
    )


def next_check_times(props: Mapping[str, str], check_max: int) -> int | None:
    """``needDiscard``: the ``TRANSACTION_CHECK_TIMES`` the next check records (1 on the first),
    or None when the message was checked ``check_max`` times and must be discarded."""
    text = props.get(MessageConst.TRANSACTION_CHECK_TIMES)
    if text is None:
        return 1
    try:
        times = int(text)
    except ValueError:
        times = -1  # upstream's getInt: an unreadable count checks again
    if times >= check_max:
        return None
    return times + 1


def renew_half(half: StoredMessage, props: Mapping[str, str]) -> MessageToStore:
    """``renewHalfMessageInner``: the half message stored again at the end of the half queue
    (with ``props``, e.g. a new check count), born fields kept."""
    renewed = dict(props)
    renewed[MessageConst.WAIT] = "false"
    return MessageToStore.with_properties(
        topic=half.topic,
        queue_id=half.queue_id,
        body=half.body,
        flag=half.flag,
        properties=renewed,
        sys_flag=half.sys_flag,
        born_timestamp=half.born_timestamp,
        born_host=half.born_host,
        reconsume_times=half.reconsume_times,
    )


def op_message(
    half_queue_offsets: str, queue_id: int, uniq: str, now_ms: int, host: tuple[str, int]
) -> MessageToStore:
    """``makeOpMessageInner`` of ``getOpMessage``: tag ``d``, body = the half queue offsets
    each followed by ``,``."""
    props = {
        MessageConst.TAGS: REMOVE_TAG,
        MessageConst.WAIT: "false",
        MessageConst.UNIQ_KEY: uniq,
    }
    return MessageToStore.with_properties(
        topic=OP_TOPIC,
        queue_id=queue_id,
        body=half_queue_offsets.encode("utf-8"),
        properties=props,
        born_timestamp=now_ms,
        born_host=host,
    )


def parse_op_body(body: bytes) -> list[int]:
    """The half queue offsets of an op message body (``"12,13,"``); unreadable entries are
    skipped (upstream's getLong gives -1, below every offset)."""
    out: list[int] = []
    for part in body.decode("utf-8", errors="replace").split(OFFSET_SEPARATOR):
        text = part.strip()
        if text.isdigit():
            out.append(int(text))
    return out


def discard_message(half: StoredMessage) -> MessageToStore:
    """``toMessageExtBrokerInner``: a half message checked too often, parked in
    ``TRANS_CHECK_MAX_TIME_TOPIC`` queue 0 (properties and sys flag kept)."""
    props = dict(half.properties)
    props[MessageConst.WAIT] = "false"
    return MessageToStore.with_properties(
        topic=CHECK_MAX_TIME_TOPIC,
        queue_id=0,
        body=half.body,
        flag=half.flag,
        properties=props,
        sys_flag=half.sys_flag,
        born_timestamp=half.born_timestamp,
        born_host=half.born_host,
        reconsume_times=half.reconsume_times,
    )


def immunity_time_ms(text: str, transaction_timeout_ms: int) -> int:
    """``TransactionalMessageServiceImpl.getImmunityTime``: ``CHECK_IMMUNITY_TIME_IN_SECONDS``
    in ms, or the transaction timeout when unreadable."""
    try:
        seconds = int(text)
    except ValueError:
        return transaction_timeout_ms
    return transaction_timeout_ms if seconds == -1 else seconds * 1000


def end_immunity_time_ms(text: str, transaction_timeout_ms: int) -> int:
    """``TransactionalMessageUtil.getImmunityTime`` (END_TRANSACTION's check): at least the
    transaction timeout."""
    try:
        ms = int(text) * 1000
    except ValueError:
        ms = 0
    return max(ms, transaction_timeout_ms)
