"""END_TRANSACTION (37): a producer's commit or rollback of a half message.

Owns: ``processRequest`` in upstream's order: a slave answers SLAVE_NOT_AVAILABLE; an unknown
(not-type) outcome or an unknown type is ignored without a response; the half message is read
at ``commitLogOffset`` and must be a half message of the request's producer group at
``tranStateTableOffset`` (``checkPrepareMessage``), and past its custom immunity only a
check's answer may end it (``rejectCommitOrRollback``, ILLEGAL_OPERATION); a commit stores the
real message (``endMessageTransaction``, delay levels and timer delivery applied as upstream's
put hook does) and
then the op message, a rollback only the op message. Every answer, oneway requests excepted,
is a response. Mirrors ``broker/processor/EndTransactionProcessor`` (5.3.x). Must not: scan
or check half messages (``rocketpy/broker/transaction/``).

A transaction already ended during this run (by id) is not ended again: a repeated commit is
answered SUCCESS without a second real message, so a late answer to an earlier check (a
put-back copy has new offsets) cannot deliver a message twice.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import structlog

from rocketpy.broker.processors.put_status import STORED_CODES, put_failure
from rocketpy.broker.runtime import BrokerRuntime
from rocketpy.broker.store_api import StoredMessage
from rocketpy.broker.timer_hook import TIMER_NEEDLE, TimerRefusal
from rocketpy.broker.transaction import util
from rocketpy.broker.transaction.service import TransactionalMessageService
from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.common.message.const import MessageConst
from rocketpy.common.message.properties import decode_properties, encode_properties
from rocketpy.common.message.record import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
)
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.protocol.headers.base import from_ext
from rocketpy.remoting.protocol.headers.transaction import EndTransactionRequestHeader
from rocketpy.remoting.transport.dispatch import Processor, RequestContext
from rocketpy.store.commit_log.put_types import MessageToStore

log = structlog.get_logger(__name__)

#: ``SendRoute.schedule_route``: (topic, queue id, sys flag, props) -> where to store,
#: or a timer refusal.
ApplyDelay = Callable[[str, int, int, dict[str, str]], tuple[str, int] | TimerRefusal]


class EndTransactionProcessor:
    """END_TRANSACTION."""

    def __init__(
        self, rt: BrokerRuntime, service: TransactionalMessageService, apply_delay: ApplyDelay
    ) -> None:
        """Args: ``rt`` the shared broker state; ``service`` the half/op queues;
        ``apply_delay`` routes a committed message with a delay level or a delivery time (the
        schedule hook)."""
        self._rt = rt
        self._service = service
        self._apply_delay = apply_delay

    def handlers(self) -> Mapping[int, Processor]:
        """Request code -> processor."""
        return {RequestCode.END_TRANSACTION: self.end_transaction}

    async def end_transaction(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand | None:
        """``processRequest``; None (no response) for an unknown outcome."""
        h = from_ext(EndTransactionRequestHeader, request.ext_fields)
        rt = self._rt
        if rt.is_slave:
            log.warning("Message store is slave mode, so end transaction is forbidden.")
            return request.make_response(ResponseCode.SLAVE_NOT_AVAILABLE)
        kind = h.commit_or_rollback
        if kind not in (TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE):
            if kind == TRANSACTION_NOT_TYPE:
                log.warning(
                    "The producer end transaction, and it's pending status",
                    producer=ctx.channel.peer,
                    from_check=bool(h.from_transaction_check),
                    msg_id=h.msg_id,
                )
            return None
        if h.from_transaction_check or kind == TRANSACTION_ROLLBACK_TYPE:
            log.warning(
                "end transaction",
                producer=ctx.channel.peer,
                commit=kind == TRANSACTION_COMMIT_TYPE,
                from_check=bool(h.from_transaction_check),
                msg_id=h.msg_id,
            )
        half = self._service.look_half(h.commit_log_offset)
        if half is None:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, "Find prepared transaction message failed"
            )
        if self._reject(h, half):
            log.warning(
                "Message commit/rollback fail [producer end]. currentTimeMillis - bornTime > "
                "checkImmunityTime, wait check",
                msg_id=h.msg_id,
                commit_log_offset=h.commit_log_offset,
            )
            return request.make_response(ResponseCode.ILLEGAL_OPERATION)
        remark = _check_prepare_message(half, h)
        if remark is not None:
            return request.make_response(ResponseCode.SYSTEM_ERROR, remark)
        tid = half.properties.get(util.TRANSACTION_ID) or half.properties.get(
            MessageConst.UNIQ_KEY, ""
        )
        if tid and self._service.ended(tid) is not None:
            log.warning(
                "transaction already ended", transaction_id=tid, commit_log=h.commit_log_offset
            )
            await self._service.delete_prepare_message(half)
            return request.make_response(ResponseCode.SUCCESS)
        if kind == TRANSACTION_COMMIT_TYPE:
            response = await self._commit(request, half, h.commit_log_offset)
            if response.code != ResponseCode.SUCCESS:
                return response
        await self._service.delete_prepare_message(half)
        if tid:
            self._service.mark_ended(tid, kind)
        return request.make_response(ResponseCode.SUCCESS)

    def _reject(self, h: EndTransactionRequestHeader, half: StoredMessage) -> bool:
        """``rejectCommitOrRollback``."""
        if h.from_transaction_check:
            return False
        text = half.properties.get(MessageConst.CHECK_IMMUNITY_TIME_IN_SECONDS)
        if not text:
            return False
        age = self._rt.clock.wall_ms() - half.born_timestamp
        return age > util.end_immunity_time_ms(text, self._rt.config.transaction_timeout_ms)

    async def _commit(
        self, request: RemotingCommand, half: StoredMessage, commit_log_offset: int
    ) -> RemotingCommand:
        """Store the real message (``sendFinalMessage``)."""
        msg = util.end_message(half, commit_log_offset)
        if msg is None:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, "Find prepared transaction message failed"
            )
        routed = self._delayed(msg)
        if isinstance(routed, TimerRefusal):
            return request.make_response(routed.code, routed.remark)
        result = await self._service.put(routed)
        if result.status in STORED_CODES:
            return request.make_response(ResponseCode.SUCCESS)
        code, remark = put_failure(
            result.status,
            "The message is illegal, maybe msg body or properties length not matched. msg body "
            f"length limit {self._rt.max_message_size}B, msg properties length limit 32KB.",
        )
        return request.make_response(code, remark)

    def _delayed(self, msg: MessageToStore) -> MessageToStore | TimerRefusal:
        """The committed message routed as the schedule hook does when it has ``DELAY`` or a
        timer property (``TIMER_DELIVER_MS`` ...: into the timer topic)."""
        text = msg.properties
        if f"{MessageConst.DELAY}\x01" not in text and TIMER_NEEDLE not in text:
            return msg
        props = decode_properties(text)
        routed = self._apply_delay(msg.topic, msg.queue_id, msg.sys_flag, props)
        if isinstance(routed, TimerRefusal):
            return routed
        topic, queue_id = routed
        if topic == msg.topic:
            return msg
        msg.topic, msg.queue_id, msg.properties = topic, queue_id, encode_properties(props)
        return msg


def _check_prepare_message(half: StoredMessage, h: EndTransactionRequestHeader) -> str | None:
    """``checkPrepareMessage``: the refusal remark, or None."""
    if half.properties.get(MessageConst.PGROUP) != h.producer_group:
        return "The producer group wrong"
    if half.queue_offset != h.tran_state_table_offset:
        return "The transaction state table offset wrong"
    if half.commit_log_offset != h.commit_log_offset:
        return "The commit log offset wrong"
    return None
