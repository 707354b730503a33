"""TransactionalMessageCheckService: the periodic check-back of undecided half messages.

Owns: the loop that runs :meth:`TransactionalMessageService.check` every
``transactionCheckInterval`` (read each round, so UPDATE_BROKER_CONFIG applies), on a master
only (started and stopped with the schedule service); and the listener's two outcomes: a due
half message becomes a oneway CHECK_TRANSACTION_STATE (39) on a live channel of its producer
group (header + the message re-encoded under its real topic and queue as the body), a half
message checked too often goes to ``TRANS_CHECK_MAX_TIME_TOPIC``. Mirrors
``broker/transaction/TransactionalMessageCheckService``,
``AbstractTransactionalMessageCheckListener.sendCheckMessage``,
``DefaultTransactionalMessageCheckListener.resolveDiscardMsg`` and
``Broker2Client.checkProducerTransactionState`` (5.3.x). Must not: decide a transaction (the
producer answers with END_TRANSACTION).

No live producer of the group: the check is skipped with a warning (as upstream); the put-back
copy counted the check, so a group that never returns is discarded after
``transactionCheckMax`` rounds.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Callable

import structlog

from rocketpy.broker.broker2client import check_producer_transaction_state
from rocketpy.broker.runtime import BrokerRuntime
from rocketpy.broker.store_api import StoredMessage
from rocketpy.broker.transaction import util
from rocketpy.broker.transaction.service import TransactionalMessageService
from rocketpy.common.errors import CodecError
from rocketpy.common.message.const import MessageConst
from rocketpy.common.message.decoder import decode_record, encode_offset_msg_id
from rocketpy.common.message.record import encode_record
from rocketpy.remoting.protocol.body.config_shapes import PERM_READ, PERM_WRITE
from rocketpy.remoting.protocol.headers.transaction import CheckTransactionStateRequestHeader
from rocketpy.remoting.transport.dispatch import Channel

log = structlog.get_logger(__name__)

#: ``TCMT_QUEUE_NUMS``.
CHECK_MAX_TIME_QUEUE_NUMS = 1


class TransactionalMessageCheckService:
    """The check loop and its listener."""

    def __init__(
        self,
        rt: BrokerRuntime,
        service: TransactionalMessageService,
        *,
        on_failure: Callable[[BaseException], None] | None = None,
    ) -> None:
        """Args: ``rt`` the shared broker state (config, producers, store); ``service`` the
        half/op queues; ``on_failure`` is told when the loop dies of a bug."""
        self._rt = rt
        self._service = service
        #: Told when the loop dies of a bug (the broker stops).
        self.on_failure = on_failure
        self._stop = asyncio.Event()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        """True while the loop runs."""
        return self._task is not None and not self._task.done()

    async def start(self) -> None:
        """Start the loop (idempotent)."""
        if self.running:
            return
        self._stop.clear()
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"{self._rt.config.broker_name}/transaction-check"
        )
        self._task.add_done_callback(self._task_done)
        log.info("Start transaction check service thread!")

    async def stop(self) -> None:
        """Stop the loop (idempotent)."""
        self._stop.set()
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        log.info("End transaction check service thread!")

    def wakeup(self) -> None:
        """Run a round now (tests and admin use)."""
        self._wake.set()

    def _task_done(self, task: asyncio.Task[None]) -> None:
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            log.error("transaction check task failed", exc_info=exc)
            if self.on_failure is not None:
                self.on_failure(exc)

    async def _run(self) -> None:
        while not self._stop.is_set():
            interval_s = self._rt.config.transaction_check_interval_ms / 1000
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(interval_s):
                    await self._wake.wait()
            self._wake.clear()
            if self._stop.is_set():
                return
            await self.check_once()

    async def check_once(self) -> int:
        """``onWaitEnd``: one check round (nothing on a slave).

        Returns:
            How many half messages were checked back.
        """
        rt = self._rt
        if rt.is_slave:
            return 0
        cfg = rt.config
        begin = rt.clock.wall_ms()
        log.info("Begin to check prepare message", begin=begin)
        try:
            checked = await self._service.check(
                cfg.transaction_timeout_ms,
                cfg.transaction_check_max,
                self.resolve_half,
                self.resolve_discard,
            )
        except (OSError, TimeoutError) as e:
            log.warning("Check error", error=repr(e))
            return 0
        log.info("End to check prepare message", consumed_ms=rt.clock.wall_ms() - begin)
        return checked

    # -- listener ----------------------------------------------------------------------

    def _available_channel(self, group: str) -> Channel | None:
        """``ProducerManager.getAvailableChannel``: a live channel of ``group``, at random."""
        channels = self._rt.producers.groups.get(group)
        if not channels:
            return None
        live = [c for c in channels if not c.is_closed]
        if not live:
            return None
        return live[self._rt.rng.randrange(len(live))]

    async def resolve_half(self, msg: StoredMessage) -> None:
        """``sendCheckMessage``: CHECK_TRANSACTION_STATE for the put-back copy ``msg`` to a live
        producer of its group."""
        group = msg.properties.get(MessageConst.PGROUP, "")
        channel = self._available_channel(group)
        if channel is None:
            log.warning("Check transaction failed, channel is null", group=group)
            return
        request = self.check_request(msg)
        if request is not None:
            check_producer_transaction_state(channel, *request)

    def check_request(
        self, msg: StoredMessage
    ) -> tuple[CheckTransactionStateRequestHeader, bytes] | None:
        """CHECK_TRANSACTION_STATE's header and body for the stored half message ``msg``; None
        when the record cannot be read back or names no real queue."""
        rt = self._rt
        where = util.real_queue(msg.properties)
        raw = rt.store.select_one_message_by_offset(msg.commit_log_offset)
        if where is None or raw is None:
            log.error(
                "Send check message error, half message unreadable", offset=msg.commit_log_offset
            )
            return None
        try:
            record = decode_record(raw, check_crc=False)
        except CodecError:
            log.exception("Send check message error", offset=msg.commit_log_offset)
            return None
        body = encode_record(dataclasses.replace(record, topic=where[0], queue_id=where[1]))
        uniq = msg.properties.get(MessageConst.UNIQ_KEY)
        header = CheckTransactionStateRequestHeader(
            topic=msg.topic,
            tran_state_table_offset=msg.queue_offset,
            commit_log_offset=msg.commit_log_offset,
            msg_id=uniq,
            transaction_id=uniq,
            offset_msg_id=encode_offset_msg_id(rt.store_host, msg.commit_log_offset),
            bname=rt.config.broker_name,
        )
        return header, body

    async def resolve_discard(self, msg: StoredMessage) -> None:
        """``resolveDiscardMsg``: park ``msg`` in ``TRANS_CHECK_MAX_TIME_TOPIC``."""
        log.error(
            "MsgExt has been checked too many times, so discard it by moving it to system "
            "topic TRANS_CHECK_MAXTIME_TOPIC",
            real_topic=msg.properties.get(MessageConst.REAL_TOPIC),
            uniq_key=msg.properties.get(MessageConst.UNIQ_KEY),
        )
        self._rt.topics.create_in_send_back(
            util.CHECK_MAX_TIME_TOPIC, CHECK_MAX_TIME_QUEUE_NUMS, PERM_READ | PERM_WRITE
        )
        result = await self._service.put(util.discard_message(msg))
        if not result.stored:
            log.error(
                "Put checked-too-many-time half message to TRANS_CHECK_MAXTIME_TOPIC failed",
                status=result.status.value,
            )
