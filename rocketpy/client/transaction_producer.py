"""The transactional producer: half message, local transaction, END_TRANSACTION, check-back.

Owns: :class:`TransactionProducer` (``TransactionMQProducer`` with
``DefaultMQProducerImpl.sendMessageInTransaction``/``endTransaction``/``checkTransactionState``
and ``ClientRemotingProcessor.checkTransactionState``): a half message is sent with
``TRAN_MSG=true``, ``PGROUP`` and the prepared transaction type; once stored, the local
transaction runs and its outcome goes to the broker as a oneway END_TRANSACTION (37); a
CHECK_TRANSACTION_STATE (39) the broker sends on this producer's connections runs the checker
and is answered with END_TRANSACTION ``fromTransactionCheck=true`` on the same connection.
Must not: retry an END_TRANSACTION (the broker's check-back is the retry) or block the
connection's reader while a checker runs (each check runs as an owned task).
"""

from __future__ import annotations

import enum
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final

import structlog

from rocketpy.client.message import Message, MessageExt, SendResult, SendStatus, decode_message_exts
from rocketpy.client.producer import _CODE_SEND, Producer, _Payload
from rocketpy.common.codes import RequestCode
from rocketpy.common.errors import CodecError, RemotingError
from rocketpy.common.message.const import MessageConst
from rocketpy.common.message.decoder import decode_offset_msg_id
from rocketpy.common.message.record import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
)
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.protocol.headers.base import from_ext, to_ext
from rocketpy.remoting.protocol.headers.transaction import (
    CheckTransactionStateRequestHeader,
    EndTransactionRequestHeader,
)
from rocketpy.remoting.transport.dispatch import RequestContext

log = structlog.get_logger(__name__)


class LocalTransactionState(enum.Enum):
    """``LocalTransactionState`` (``UNKNOW`` as upstream spells it)."""

    COMMIT_MESSAGE = "COMMIT_MESSAGE"
    ROLLBACK_MESSAGE = "ROLLBACK_MESSAGE"
    UNKNOW = "UNKNOW"


_TYPES: Final = {
    LocalTransactionState.COMMIT_MESSAGE: TRANSACTION_COMMIT_TYPE,
    LocalTransactionState.ROLLBACK_MESSAGE: TRANSACTION_ROLLBACK_TYPE,
    LocalTransactionState.UNKNOW: TRANSACTION_NOT_TYPE,
}

StateOrAwaitable = LocalTransactionState | Awaitable[LocalTransactionState]
#: ``TransactionListener.executeLocalTransaction(msg, arg)``.
LocalExecutor = Callable[[Message, Any], StateOrAwaitable]
#: ``TransactionListener.checkLocalTransaction(msg)``.
TransactionChecker = Callable[[MessageExt], StateOrAwaitable]


@dataclass(slots=True, kw_only=True)
class TransactionSendResult(SendResult):
    """``TransactionSendResult``: the half message's send result and the local outcome."""

    local_transaction_state: LocalTransactionState = LocalTransactionState.UNKNOW


async def _resolve(value: StateOrAwaitable) -> LocalTransactionState:
    return await value if inspect.isawaitable(value) else value


class TransactionProducer(Producer):
    """An asyncio ``TransactionMQProducer``.

    Args:
        group: producer group (the broker asks a live producer of it about undecided
            transactions).
        namesrv_addr: ``host:port[;host:port...]``.
        checker: answers the broker's check of a transaction whose outcome it did not learn
            (``checkLocalTransaction``); sync or async.
        **kwargs: as :class:`~rocketpy.client.producer.Producer`.
    """

    def __init__(
        self, group: str, namesrv_addr: str, *, checker: TransactionChecker, **kwargs: Any
    ) -> None:
        super().__init__(group, namesrv_addr, **kwargs)
        self.checker = checker
        self._client.register(RequestCode.CHECK_TRANSACTION_STATE, self._on_check)

    async def send_message_in_transaction(
        self,
        msg: Message,
        executor: LocalExecutor,
        arg: Any = None,
        timeout_s: float | None = None,
    ) -> TransactionSendResult:
        """``sendMessageInTransaction``: send ``msg`` as a half message, run ``executor(msg,
        arg)`` once it is stored, and tell the broker the outcome (oneway).

        A failed half send runs no local transaction and the result says ROLLBACK_MESSAGE; an
        executor that raises counts as UNKNOW (the broker will check back); a lost
        END_TRANSACTION is healed by the broker's check-back.

        Raises:
            ClientError: no route, bad body, or the half message could not be sent (a broker
                with ``rejectTransactionMessage=true`` answers NO_PERMISSION, retried on
                another broker like any send).
            RemoteError: the broker refused the half message with a code that is not retried.
        """
        props = dict(msg.properties)
        props[MessageConst.TRAN_MSG] = "true"
        props[MessageConst.PGROUP] = self.group
        # ignore DelayTimeLevel parameter, as upstream (a delivery time stays: the commit files
        # the message under the broker's timer)
        half = Message(
            topic=msg.topic,
            body=msg.body,
            tags=msg.tags,
            keys=msg.keys,
            properties=props,
            flag=msg.flag,
            deliver_time_ms=msg.deliver_time_ms,
        )
        text, body, sys_flag, uniq = self._encode(half)
        info = await self._info(msg.topic)
        payload = _Payload(
            _CODE_SEND, text, body, sys_flag | TRANSACTION_PREPARED_TYPE, msg.flag, uniq
        )
        sent = await self._send_with_retries(info, None, payload, timeout_s)
        await self._client.heartbeat_all(only_new=True)  # the broker must know us to check
        state = LocalTransactionState.ROLLBACK_MESSAGE
        if sent.status is SendStatus.SEND_OK:
            try:
                state = await _resolve(executor(half, arg))
            except Exception:
                log.exception("executeLocalTransaction exception", msg_id=sent.msg_id)
                state = LocalTransactionState.UNKNOW
        await self._end_transaction(sent, state)
        return TransactionSendResult(
            status=sent.status,
            msg_id=sent.msg_id,
            offset_msg_id=sent.offset_msg_id,
            message_queue=sent.message_queue,
            queue_offset=sent.queue_offset,
            transaction_id=sent.transaction_id,
            region_id=sent.region_id,
            trace_on=sent.trace_on,
            local_transaction_state=state,
        )

    async def _end_transaction(self, sent: SendResult, state: LocalTransactionState) -> None:
        """``endTransaction``: the oneway END_TRANSACTION to the half message's broker."""
        try:
            _, commit_log_offset = decode_offset_msg_id(sent.offset_msg_id)
        except (CodecError, ValueError):
            log.warning("end transaction: bad offset msg id", offset_msg_id=sent.offset_msg_id)
            return
        header = EndTransactionRequestHeader(
            topic=sent.message_queue.topic,
            producer_group=self.group,
            tran_state_table_offset=sent.queue_offset,
            commit_log_offset=commit_log_offset,
            commit_or_rollback=_TYPES[state],
            from_transaction_check=False,
            msg_id=sent.msg_id,
            transaction_id=sent.transaction_id,
            bname=sent.message_queue.broker_name,
        )
        addr = self._routes.master_addr(sent.message_queue.broker_name)
        if addr is None:
            log.warning("end transaction: no master", broker=sent.message_queue.broker_name)
            return
        try:
            await self._client.invoke_oneway(
                addr, RequestCode.END_TRANSACTION, dict(to_ext(header))
            )
        except (RemotingError, TimeoutError) as e:
            log.warning("end transaction failed, the broker will check back", error=str(e))

    async def _on_check(self, ctx: RequestContext, request: RemotingCommand) -> None:
        """CHECK_TRANSACTION_STATE (oneway): run the checker in an owned task."""
        try:
            header = from_ext(CheckTransactionStateRequestHeader, request.ext_fields)
            msgs = decode_message_exts(request.body or b"", header.bname or "")
        except CodecError as e:
            log.warning("checkTransactionState: bad request", error=str(e))
            return
        if not msgs:
            log.warning("checkTransactionState, decode message failed")
            return
        msg = msgs[0]
        group = msg.properties.get(MessageConst.PGROUP)
        if group != self.group:
            log.debug("checkTransactionState, pick producer group failed", group=group)
            return
        self._client.tasks.spawn(
            self._check_and_end(ctx, header, msg), name=f"producer/check/{msg.msg_id}"
        )

    async def _check_and_end(
        self, ctx: RequestContext, header: CheckTransactionStateRequestHeader, msg: MessageExt
    ) -> None:
        """``checkTransactionState`` + ``processTransactionState``."""
        try:
            state = await _resolve(self.checker(msg))
        except Exception:
            log.exception(
                "Broker call checkTransactionState, but checkLocalTransactionState exception"
            )
            state = LocalTransactionState.UNKNOW
        end = EndTransactionRequestHeader(
            topic=msg.topic,
            producer_group=self.group,
            tran_state_table_offset=header.tran_state_table_offset,
            commit_log_offset=header.commit_log_offset,
            commit_or_rollback=_TYPES[state],
            from_transaction_check=True,
            msg_id=msg.properties.get(MessageConst.UNIQ_KEY) or msg.msg_id,
            transaction_id=header.transaction_id,
            bname=header.bname,
        )
        if not ctx.channel.is_closed:
            ctx.channel.invoke_oneway(
                RemotingCommand.request(RequestCode.END_TRANSACTION, dict(to_ext(end)), oneway=True)
            )


__all__ = [
    "LocalTransactionState",
    "TransactionProducer",
    "TransactionSendResult",
]
