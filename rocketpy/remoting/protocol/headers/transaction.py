"""Headers of the transactional-message requests: END_TRANSACTION (37) and
CHECK_TRANSACTION_STATE (39).

Owns: :class:`EndTransactionRequestHeader` and :class:`CheckTransactionStateRequestHeader`, typed
as upstream declares them (codes.md; ``remoting/protocol/header/EndTransactionRequestHeader``
and ``CheckTransactionStateRequestHeader``, 5.3.x). ``bname`` is the ``RpcRequestHeader`` field
the 5.x client and broker add. Must not: convert values itself (``base.py`` does, once).
"""

from __future__ import annotations

from dataclasses import dataclass

from rocketpy.remoting.protocol.headers.base import wire


@dataclass(frozen=True, slots=True, kw_only=True)
class EndTransactionRequestHeader:
    """``EndTransactionRequestHeader``: ``commitOrRollback`` is a transaction type of the sys
    flag (0 not-type / unknown, 8 commit, 12 rollback)."""

    topic: str | None = wire("topic", default=None)
    producer_group: str = wire("producerGroup")
    tran_state_table_offset: int = wire("tranStateTableOffset")
    commit_log_offset: int = wire("commitLogOffset")
    commit_or_rollback: int = wire("commitOrRollback")
    from_transaction_check: bool | None = wire("fromTransactionCheck", default=None)
    msg_id: str = wire("msgId")
    transaction_id: str | None = wire("transactionId", default=None)
    bname: str | None = wire("bname", default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckTransactionStateRequestHeader:
    """``CheckTransactionStateRequestHeader``: ``msgId`` and ``transactionId`` are the half
    message's UNIQ_KEY, ``offsetMsgId`` its offset message id."""

    topic: str | None = wire("topic", default=None)
    tran_state_table_offset: int = wire("tranStateTableOffset")
    commit_log_offset: int = wire("commitLogOffset")
    msg_id: str | None = wire("msgId", default=None)
    transaction_id: str | None = wire("transactionId", default=None)
    offset_msg_id: str | None = wire("offsetMsgId", default=None)
    bname: str | None = wire("bname", default=None)
