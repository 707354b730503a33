"""The consumer RPCs: ReceiveMessage, AckMessage, ChangeInvisibleDuration, ForwardMessageToDLQ.

Owns: :class:`ConsumerActivity`, mirroring upstream's ``ReceiveMessageActivity`` (polling time from
``long_polling_timeout`` or the deadline, clamped to ``grpcClientConsumer{Min,Max}LongPolling
TimeoutMillis`` and cut to the deadline, else ILLEGAL_POLLING_TIME; invisible time within
``minInvisibleTimeMillsForRecv``-``maxInvisibleTimeMills`` unless auto renew; the master of the
requested broker name, broker-wide pop, orderly for a ``consumeMessageOrderly`` group),
``ConsumerProcessor.popMessage`` with ``PopMessageResultFilterImpl`` (a tag mismatch is acked and
dropped, ``reconsumeTimes >= maxAttempts``, the group's ``retryMaxTimes + 1``, goes to
``%DLQ%<group>`` and is dropped), ``ReceiveMessageResponseStreamWriter``'s statuses,
``AckMessageActivity`` (per-entry status; one common code or MULTIPLE_RESULTS),
``ChangeInvisibleDurationActivity`` and ``ForwardMessageToDLQActivity`` +
``ProducerProcessor.forwardMessageToDeadLetterQueue`` (CONSUMER_SEND_MSG_BACK with delay level -1,
then ack); proxy.md section 2. Auto renew lives in ``rocketpy/proxy/renew.py``. Must not: touch gRPC
objects (``rocketpy/proxy/grpc_server.py`` writes the stream) or import the broker.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Final

import structlog
from google.protobuf.message import Message

from rocketpy.client.admin import TopicRoute
from rocketpy.common.aio import TaskSet
from rocketpy.proxy.backend import MessagingBackend
from rocketpy.proxy.client_settings import ClientRegistry
from rocketpy.proxy.config import ProxyConfig
from rocketpy.proxy.convert import FilterResult, build_message, filter_message, subscription_tags
from rocketpy.proxy.messaging import CallContext, validate_group
from rocketpy.proxy.pb import definition_pb2 as pb
from rocketpy.proxy.pb import service_pb2 as spb
from rocketpy.proxy.pop_backend import PopStatus
from rocketpy.proxy.receipt_handle import (
    changed_handle,
    check_receipt_handle,
    create_handle,
    decode_handle,
    handle_topic,
)
from rocketpy.proxy.renew import ReceiptHandleManager, TrackedHandle
from rocketpy.proxy.route import MASTER_ID, PERM_READ
from rocketpy.proxy.send import validate_topic
from rocketpy.proxy.status import ProxyError, status
from rocketpy.remoting.protocol.headers.broker import ConsumerSendMsgBackRequestHeader
from rocketpy.remoting.protocol.headers.pop import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    PopMessageRequestHeader,
)

log = structlog.get_logger(__name__)

#: ``ProxyUtils.MAX_MSG_NUMS_FOR_POP_REQUEST``.
MAX_MSG_NUMS_FOR_POP_REQUEST: Final = 32
INIT_MODE_MAX: Final = 1  # ConsumeInitMode.MAX
#: ``ILLEGAL_POLLING_TIME_INTRODUCED_CLIENT_VERSION``: older clients get BAD_REQUEST.
ILLEGAL_POLLING_TIME_CLIENT_VERSION: Final = "5.0.3"
#: ``ReceiveMessageResponseStreamWriter.NACK_INVISIBLE_TIME``: unwritten messages come back soon.
NACK_INVISIBLE_TIME_MS: Final = 1000
#: The DLQ send asks for the DLQ outright (``delayLevel`` -1).
DLQ_DELAY_LEVEL: Final = -1
#: How long a ReceiveMessage waits for Settings still in flight on the Telemetry stream.
SETTINGS_WAIT_S: Final = 1.0
SETTINGS_POLL_S: Final = 0.01


@dataclass(slots=True)
class Received:
    """What one ReceiveMessage answers: the ``status`` and the converted messages, with the
    handles of the messages (so unwritten ones can be nacked)."""

    status: pb.Status
    messages: list[pb.Message] = field(default_factory=list)
    group: str = ""
    topic: str = ""


def _duration_ms(d: object) -> int:
    seconds = int(getattr(d, "seconds", 0))
    nanos = int(getattr(d, "nanos", 0))
    return seconds * 1000 + nanos // 1_000_000


class ConsumerActivity:
    """The consumer RPCs over a backend.

    Args:
        config: the proxy's settings.
        backend: the brokers.
        clients: the Settings each client sent (request timeout, subscription); FIFO and max
            attempts are the group's config (``MessagingBackend.subscription_group``).
        renew: the auto-renew table (``DefaultReceiptHandleManager``).
    """

    def __init__(
        self,
        config: ProxyConfig,
        backend: MessagingBackend,
        clients: ClientRegistry,
        renew: ReceiptHandleManager,
    ) -> None:
        self.config = config
        self.backend = backend
        self.clients = clients
        self.renew = renew
        self._turn = itertools.count()
        self._wall_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000
        self._tasks = TaskSet("proxy/consumer")

    @classmethod
    def create(
        cls, config: ProxyConfig, backend: MessagingBackend, clients: ClientRegistry
    ) -> ConsumerActivity:
        """The activity with an auto-renew table sized by ``config``."""
        renew = ReceiptHandleManager(config.renew_ahead_time_ms, config.renew_max_time_ms)
        return cls(config, backend, clients, renew)

    def unary_rpcs(self) -> dict[str, Callable[[Any, CallContext], Awaitable[Message]]]:
        """The unary RPCs this activity answers, by method name."""
        return {
            "AckMessage": self.ack_message,
            "ChangeInvisibleDuration": self.change_invisible_duration,
            "ForwardMessageToDeadLetterQueue": self.forward_message_to_dead_letter_queue,
        }

    def on_termination(
        self, fn: Callable[[Any, CallContext], Awaitable[Message]]
    ) -> Callable[[Any, CallContext], Awaitable[Message]]:
        """``fn`` (NotifyClientTermination), then the client's held handles are released."""

        async def terminate(req: Any, call: CallContext) -> Message:
            try:
                return await fn(req, call)
            finally:
                await self.release_client(call.client_id)

        return terminate

    def nack_later(self, received: Received, unsent: list[pb.Message], call: CallContext) -> None:
        """Nack (in a task owned by this activity) what a broken stream did not write."""
        if unsent:
            self._tasks.spawn(self.nack(received, unsent, call), name="proxy/nack")

    async def stop(self) -> None:
        """Cancel pending nacks."""
        await self._tasks.cancel_all()

    # -- helpers --------------------------------------------------------------------------

    def _budget_s(self, call: CallContext) -> float:
        budget = self.config.proxy_request_timeout_ms / 1000
        if call.time_remaining_s is not None:
            budget = min(budget, max(call.time_remaining_s, 0.05))
        return budget

    async def _master(self, topic: str, broker_name: str, *, readable: bool = False) -> str:
        """The master address of ``broker_name`` in ``topic``'s route.

        Raises:
            ProxyError: FORBIDDEN when the route names no such master.
        """
        route = await self.backend.topic_route(topic)
        for broker in route.brokers:
            addr = broker.broker_addrs.get(MASTER_ID)
            if broker.broker_name != broker_name or not addr:
                continue
            if not readable or _readable(route, broker_name):
                return addr
        raise ProxyError(pb.Code.FORBIDDEN, f"no master of {broker_name} serves {topic}")

    async def _read_master(self, topic: str, broker_name: str) -> tuple[str, str]:
        """``ReceiveMessageQueueSelector``: the requested broker's master, else any readable
        master in turn.

        Raises:
            ProxyError: FORBIDDEN "no readable queue".
        """
        if broker_name.strip():
            try:
                return broker_name, await self._master(topic, broker_name, readable=True)
            except ProxyError:
                pass
        route = await self.backend.topic_route(topic)
        names = sorted(
            b.broker_name
            for b in route.brokers
            if b.broker_addrs.get(MASTER_ID) and _readable(route, b.broker_name)
        )
        if not names:
            raise ProxyError(pb.Code.FORBIDDEN, "no readable queue")
        name = names[next(self._turn) % len(names)]
        return name, await self._master(topic, name)

    async def _settings(self, call: CallContext) -> tuple[pb.Settings, CallContext]:
        """The client's Settings, and ``call`` with the time spent waiting for them taken off
        its deadline. The 5.x clients write their Settings on the Telemetry stream and return
        from ``startup()`` without waiting for the answer, so a first ReceiveMessage can
        overtake them: wait up to :data:`SETTINGS_WAIT_S` (half the deadline at most).

        Raises:
            ProxyError: UNRECOGNIZED_CLIENT_TYPE when no Settings came.
        """
        loop = asyncio.get_running_loop()
        started = loop.time()
        budget = SETTINGS_WAIT_S
        if call.time_remaining_s is not None:
            budget = min(budget, call.time_remaining_s / 2)
        while (state := self.clients.get(call.client_id)) is None:
            if loop.time() - started >= budget:
                raise ProxyError(
                    pb.Code.UNRECOGNIZED_CLIENT_TYPE,
                    f"cannot find client settings for this client, clientId: {call.client_id}",
                )
            await asyncio.sleep(SETTINGS_POLL_S)
        waited = loop.time() - started
        if waited > 0 and call.time_remaining_s is not None:
            call = dataclasses.replace(call, time_remaining_s=call.time_remaining_s - waited)
        return state.settings, call

    def _polling_ms(
        self, req: spb.ReceiveMessageRequest, settings: pb.Settings, call: CallContext
    ) -> int:
        """``ReceiveMessageActivity``'s polling time.

        Raises:
            ProxyError: ILLEGAL_POLLING_TIME (BAD_REQUEST for clients before 5.0.3) when the
                deadline leaves less than the minimum.
        """
        low = self.config.grpc_client_consumer_min_long_polling_timeout_ms
        high = self.config.grpc_client_consumer_max_long_polling_timeout_ms
        remaining = None if call.time_remaining_s is None else int(call.time_remaining_s * 1000)
        if req.HasField("long_polling_timeout"):
            polling = _duration_ms(req.long_polling_timeout)
        elif remaining is not None:
            polling = remaining - _duration_ms(settings.request_timeout) // 2
        else:
            polling = high
        polling = min(max(polling, low), high)
        if remaining is not None and polling > remaining:
            if remaining >= low:
                return remaining
            version = call.client_version
            code = (
                pb.Code.BAD_REQUEST
                if not version or version < ILLEGAL_POLLING_TIME_CLIENT_VERSION
                else pb.Code.ILLEGAL_POLLING_TIME
            )
            raise ProxyError(
                code,
                "The deadline time remaining is not enough for polling, "
                "please check network condition",
            )
        return polling

    def _invisible_ms(self, req: spb.ReceiveMessageRequest) -> int:
        if self.config.enable_proxy_auto_renew and req.auto_renew:
            return self.config.renew_slice_time_ms
        invisible = _duration_ms(req.invisible_duration)
        self._validate_invisible(invisible, self.config.min_invisible_time_ms_for_recv)
        return invisible

    def _validate_invisible(self, invisible_ms: int, low: int) -> None:
        """``validateInvisibleTime``.

        Raises:
            ProxyError: ILLEGAL_INVISIBLE_TIME.
        """
        if invisible_ms < low:
            raise ProxyError(pb.Code.ILLEGAL_INVISIBLE_TIME, "the invisibleTime is too small")
        if invisible_ms > self.config.max_invisible_time_ms:
            raise ProxyError(pb.Code.ILLEGAL_INVISIBLE_TIME, "the invisibleTime is too large")

    # -- ReceiveMessage -------------------------------------------------------------------

    async def receive_message(self, req: spb.ReceiveMessageRequest, call: CallContext) -> Received:
        """``ReceiveMessageActivity.receiveMessage`` up to the stream writer's status.

        Raises:
            ProxyError: any refusal before or during the pop (the stream carries its status).
        """
        settings, call = await self._settings(call)
        polling_ms = self._polling_ms(req, settings, call)
        topic, group = req.message_queue.topic.name, req.group.name
        validate_topic(topic)
        validate_group(group)
        invisible_ms = self._invisible_ms(req)
        expression = req.filter_expression
        sql = expression.type == pb.FilterType.SQL
        tags = None if sql else subscription_tags(expression.expression)
        broker_name, addr = await self._read_master(topic, req.message_queue.broker.name)
        # getClientSettings merges the group's current config (352) into the client's on every
        # receive: FIFO = consumeMessageOrderly, max attempts = retryMaxTimes + 1.
        group_config = await self.backend.subscription_group(group)
        header = PopMessageRequestHeader(
            consumer_group=group,
            topic=topic,
            queue_id=-1,
            max_msg_nums=min(max(req.batch_size, 1), MAX_MSG_NUMS_FOR_POP_REQUEST),
            invisible_time=invisible_ms,
            poll_time=polling_ms,
            born_time=self._wall_ms(),
            init_mode=INIT_MODE_MAX,
            exp_type="SQL92" if sql else "TAG",
            exp=expression.expression.strip() or "*",
            order=group_config.consume_message_orderly,
            attempt_id=req.attempt_id if req.HasField("attempt_id") else None,
        )
        if call.time_remaining_s is not None:
            timeout_s = max(call.time_remaining_s, 0.05)
        else:
            timeout_s = (polling_ms + self.config.proxy_request_timeout_ms) / 1000
        outcome = await self.backend.pop_message(broker_name, addr, header, timeout_s)
        if outcome.status == PopStatus.POLLING_FULL:
            return Received(status(pb.Code.TOO_MANY_REQUESTS, "polling full"))
        if outcome.status != PopStatus.FOUND:
            return Received(status(pb.Code.MESSAGE_NOT_FOUND, "no new message"))
        max_attempts = group_config.retry_max_times + 1
        now_ms = self._wall_ms()
        out = Received(status(pb.Code.OK), group=group, topic=topic)
        for popped in outcome.messages:
            msg = popped.message
            handle = create_handle(popped.receipt_handle, msg.commit_log_offset)
            verdict = filter_message(msg, None if sql else tags, max_attempts)
            if verdict == FilterResult.NO_MATCH:
                await self._quiet(self._ack(group, topic, handle, call), "ack of unmatched", handle)
                continue
            if verdict == FilterResult.TO_DLQ:
                dlq = self._forward_to_dlq(group, topic, handle, msg.msg_id, call)
                await self._quiet(dlq, "forward to DLQ", handle)
                continue
            if self.config.enable_proxy_auto_renew and req.auto_renew:
                self.renew.add(
                    call.client_id,
                    TrackedHandle(
                        group=group,
                        topic=topic,
                        message_id=msg.msg_id,
                        handle=handle,
                        reconsume_times=msg.reconsume_times,
                    ),
                    now_ms,
                )
            out.messages.append(build_message(msg, topic, handle, now_ms))
        if not out.messages:
            return Received(status(pb.Code.MESSAGE_NOT_FOUND, "no match message"))
        return out

    async def _quiet(self, step: Awaitable[object], what: str, handle: str) -> None:
        """Run a side step of the pop filter; its failure is logged (the message comes back)."""
        try:
            await step
        except ProxyError as e:
            log.warning(f"{what} failed", handle=handle, error=str(e))

    async def nack(self, received: Received, unsent: list[pb.Message], call: CallContext) -> None:
        """``processThrowableWhenWriteMessage``: messages the stream could not write become
        visible again after 1 s."""
        for msg in unsent:
            handle = msg.system_properties.receipt_handle
            try:
                await self._change(
                    received.group, received.topic, handle, NACK_INVISIBLE_TIME_MS, call
                )
            except ProxyError as e:
                log.warning("nack of an unwritten message failed", handle=handle, error=str(e))

    # -- auto renew ----------------------------------------------------------------------

    async def renew_due(self) -> None:
        """One round of ``DefaultReceiptHandleManager.scheduleRenewTask``: extend the handles
        about to expire; a failure is logged and the handle expires (the message comes back)."""
        timeout_s = self.config.proxy_request_timeout_ms / 1000
        for task in self.renew.due(self._wall_ms()):
            tracked = task.tracked
            try:
                new = await self.change_handle(
                    tracked.group, tracked.topic, tracked.handle,
                    invisible_ms=task.invisible_ms, timeout_s=timeout_s,
                )  # fmt: skip
            except ProxyError as e:
                log.warning("renew receipt handle failed", handle=tracked.handle, error=str(e))
                continue
            if not task.last:
                self.renew.renewed(task.client_id, tracked, new)

    async def release_client(self, client_id: str) -> None:
        """``clearGroup``: a client that left gets its held messages back on the queue after
        ``invisibleTimeMillisWhenClear`` (1 s)."""
        timeout_s = self.config.proxy_request_timeout_ms / 1000
        for tracked in self.renew.remove_client(client_id):
            try:
                await self.change_handle(
                    tracked.group, tracked.topic, tracked.handle,
                    invisible_ms=NACK_INVISIBLE_TIME_MS, timeout_s=timeout_s,
                )  # fmt: skip
            except ProxyError as e:
                log.warning("clear receipt handle failed", handle=tracked.handle, error=str(e))

    # -- AckMessage -----------------------------------------------------------------------

    async def ack_message(
        self, req: spb.AckMessageRequest, call: CallContext
    ) -> spb.AckMessageResponse:
        """``AckMessageActivity.ackMessage``: each entry on its own, one status for all."""
        topic, group = req.topic.name, req.group.name
        validate_topic(topic)
        validate_group(group)
        entries = await asyncio.gather(
            *(self._ack_entry(group, topic, e, call) for e in req.entries)
        )
        codes = {e.status.code for e in entries}
        if len(codes) > 1:
            top = status(pb.Code.MULTIPLE_RESULTS)
        elif codes:
            top = status(next(iter(codes)))
        else:
            top = status(pb.Code.INTERNAL_SERVER_ERROR, "ack message result is empty")
        return spb.AckMessageResponse(status=top, entries=entries)

    async def _ack_entry(
        self, group: str, topic: str, entry: spb.AckMessageEntry, call: CallContext
    ) -> spb.AckMessageResultEntry:
        handle = self.renew.latest(call.client_id, group, entry.message_id, entry.receipt_handle)
        out = spb.AckMessageResultEntry(message_id=entry.message_id, receipt_handle=handle)
        try:
            ok = await self._ack(group, topic, handle, call)
        except ProxyError as e:
            out.status.CopyFrom(status(e.code, e.message))
            return out
        self.renew.remove(call.client_id, group, entry.message_id)
        if ok:
            out.status.CopyFrom(status(pb.Code.OK))
        else:
            out.status.CopyFrom(
                status(pb.Code.INTERNAL_SERVER_ERROR, "ack failed: status is abnormal")
            )
        return out

    async def _ack(self, group: str, topic: str, text: str, call: CallContext) -> bool:
        handle = decode_handle(text)
        check_receipt_handle(handle, self._wall_ms())
        addr = await self._master(topic, handle.broker_name)
        header = AckMessageRequestHeader(
            consumer_group=group,
            topic=handle_topic(handle, topic, group),
            queue_id=handle.queue_id,
            extra_info=text,
            offset=handle.queue_offset,
        )
        return await self.backend.ack_message(addr, header, self._budget_s(call))

    # -- ChangeInvisibleDuration ----------------------------------------------------------

    async def change_invisible_duration(
        self, req: spb.ChangeInvisibleDurationRequest, call: CallContext
    ) -> spb.ChangeInvisibleDurationResponse:
        """``ChangeInvisibleDurationActivity``: OK carries the new handle."""
        topic, group = req.topic.name, req.group.name
        validate_topic(topic)
        validate_group(group)
        invisible_ms = _duration_ms(req.invisible_duration)
        self._validate_invisible(invisible_ms, 0)
        text = self.renew.latest(call.client_id, group, req.message_id, req.receipt_handle)
        new = await self._change(group, topic, text, invisible_ms, call)
        self.renew.remove(call.client_id, group, req.message_id)
        return spb.ChangeInvisibleDurationResponse(status=status(pb.Code.OK), receipt_handle=new)

    async def _change(
        self, group: str, topic: str, text: str, invisible_ms: int, call: CallContext
    ) -> str:
        handle = decode_handle(text)
        check_receipt_handle(handle, self._wall_ms())
        return await self.change_handle(
            group, topic, text, invisible_ms=invisible_ms, timeout_s=self._budget_s(call)
        )

    async def change_handle(
        self, group: str, topic: str, text: str, *, invisible_ms: int, timeout_s: float
    ) -> str:
        """CHANGE_MESSAGE_INVISIBLETIME for the handle ``text``; the new handle.

        Raises:
            ProxyError: a garbled handle, or the broker's refusal.
        """
        handle = decode_handle(text)
        addr = await self._master(topic, handle.broker_name)
        header = ChangeInvisibleTimeRequestHeader(
            consumer_group=group,
            topic=handle_topic(handle, topic, group),
            queue_id=handle.queue_id,
            extra_info=text,
            offset=handle.queue_offset,
            invisible_time=invisible_ms,
        )
        got = await self.backend.change_invisible_time(addr, header, timeout_s)
        return changed_handle(handle, got.pop_time, got.invisible_time, got.revive_qid)

    # -- ForwardMessageToDeadLetterQueue --------------------------------------------------

    async def forward_message_to_dead_letter_queue(
        self, req: spb.ForwardMessageToDeadLetterQueueRequest, call: CallContext
    ) -> spb.ForwardMessageToDeadLetterQueueResponse:
        """``ForwardMessageToDLQActivity``."""
        topic, group = req.topic.name, req.group.name
        validate_topic(topic)
        validate_group(group)
        text = self.renew.latest(call.client_id, group, req.message_id, req.receipt_handle)
        ok = await self._forward_to_dlq(group, topic, text, req.message_id, call)
        self.renew.remove(call.client_id, group, req.message_id)
        code = pb.Code.OK if ok else pb.Code.INTERNAL_SERVER_ERROR
        return spb.ForwardMessageToDeadLetterQueueResponse(status=status(code))

    async def _forward_to_dlq(
        self, group: str, topic: str, text: str, message_id: str, call: CallContext
    ) -> bool:
        """``forwardMessageToDeadLetterQueue``: send back with delay level -1, then ack.

        Raises:
            ProxyError: INVALID_RECEIPT_HANDLE without a commit-log offset, or a broker refusal.
        """
        handle = decode_handle(text)
        if handle.commit_log_offset < 0:
            raise ProxyError(pb.Code.INVALID_RECEIPT_HANDLE, "commit log offset is empty")
        addr = await self._master(topic, handle.broker_name)
        header = ConsumerSendMsgBackRequestHeader(
            offset=handle.commit_log_offset,
            group=group,
            delay_level=DLQ_DELAY_LEVEL,
            origin_msg_id=message_id,
            origin_topic=handle_topic(handle, topic, group),
            max_reconsume_times=0,
        )
        await self.backend.send_message_back(addr, header, self._budget_s(call))
        log.info("message forwarded to the DLQ", group=group, topic=topic, message_id=message_id)
        return await self._ack(group, topic, text, call)


def _readable(route: TopicRoute, broker_name: str) -> bool:
    return any(q.broker_name == broker_name and q.perm & PERM_READ for q in route.queues)
