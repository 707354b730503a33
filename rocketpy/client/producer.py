"""The producer: send, send to a chosen queue, batch, oneway.

Owns: :class:`Producer` (``DefaultMQProducer`` / ``DefaultMQProducerImpl.sendDefaultImpl``,
``sendSelectImpl``, ``sendKernelImpl``): queue selection, the SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE
requests (client-flows.md section 2.2), retries on another broker, the response -> ``SendResult``
mapping. Must not: log per message or re-encode constant header fields per send (the send path is
the benchmark's hot path: one dict copy, one properties string, one frame).
"""

from __future__ import annotations

import asyncio
import os
import random
import time
import zlib
from collections.abc import Callable, Sequence
from typing import Any, Final

from rocketpy.client.instance import ClientInstance
from rocketpy.client.message import Message, MessageQueue, SendResult, SendStatus
from rocketpy.client.route_cache import DEFAULT_TOPIC, DEFAULT_TOPIC_QUEUE_NUMS, TopicPublishInfo
from rocketpy.common.codes import LanguageCode, RequestCode, ResponseCode
from rocketpy.common.errors import (
    ClientError,
    ConnectFailed,
    ConnectionClosed,
    RemoteError,
    RequestTimeout,
)
from rocketpy.common.message.batch_body import encode_batch_body
from rocketpy.common.message.client_id import UniqIdGenerator
from rocketpy.common.message.const import MessageConst
from rocketpy.common.message.properties import encode_properties
from rocketpy.common.message.record import COMPRESSED_FLAG, COMPRESSION_ZLIB
from rocketpy.remoting.protocol.command import CURRENT_VERSION, RemotingCommand, next_opaque
from rocketpy.remoting.protocol.headers.base import ext_encoder
from rocketpy.remoting.protocol.headers.broker import SendMessageRequestHeaderV2

#: The SendMessageRequestHeaderV2 fields set per send, in the order _request passes them: topic,
#: queue id, sys flag, born timestamp, flag, properties, batch, broker name.
_SEND_HEADER_FIELDS: Final = ("b", "e", "f", "g", "h", "i", "m", "n")

MessageQueueSelector = Callable[[Sequence[MessageQueue], Message, Any], MessageQueue]
"""``MessageQueueSelector.select(mqs, msg, arg)``: pick one of the topic's publish queues."""

_STATUS: Final[dict[int, SendStatus]] = {
    ResponseCode.SUCCESS: SendStatus.SEND_OK,
    ResponseCode.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE,
}
MAX_MESSAGE_SIZE: Final = 4 * 1024 * 1024
#: A send waiting for an unreachable broker or a masterless route re-checks after 20 ms, then
#: 40, 80, ... at most every 200 ms, until its budget ends.
_FIRST_PAUSE_S: Final = 0.02
_MAX_PAUSE_S: Final = 0.2
_CODE_SEND: Final = int(RequestCode.SEND_MESSAGE_V2)
_CODE_BATCH: Final = int(RequestCode.SEND_BATCH_MESSAGE)
_LANGUAGE: Final = int(LanguageCode.PYTHON)


class _Payload:
    """What one send puts on the wire besides the queue: encoded once, reused by retries."""

    __slots__ = ("body", "code", "flag", "props", "sys_flag", "uniq")

    def __init__(  # noqa: PLR0917 - a plain record
        self, code: int, props: str, body: bytes, sys_flag: int, flag: int, uniq: str
    ) -> None:
        self.code = code
        self.props = props
        self.body = body
        self.sys_flag = sys_flag
        self.flag = flag
        self.uniq = uniq


class Producer:
    """An asyncio ``DefaultMQProducer``.

    Args:
        group: producer group.
        namesrv_addr: ``host:port[;host:port...]``.
        send_timeout_s: default budget of one send, retries included.
        retry_times_when_send_failed: extra attempts on another broker.
        compress_msg_body_over_bytes: bodies at least this long are zlib-compressed.
        instance_name: the part of the client id after ``ip@`` (default ``pid#nanos``).
    """

    def __init__(
        self,
        group: str,
        namesrv_addr: str,
        *,
        send_timeout_s: float = 3.0,
        retry_times_when_send_failed: int = 2,
        compress_msg_body_over_bytes: int = 4096,
        max_message_size: int = MAX_MESSAGE_SIZE,
        instance_name: str | None = None,
        poll_namesrv_interval_s: float = 30.0,
        heartbeat_interval_s: float = 30.0,
    ) -> None:
        self.group = group
        self.send_timeout_s = send_timeout_s
        self.retry_times_when_send_failed = retry_times_when_send_failed
        self._compress_over = compress_msg_body_over_bytes
        self._max_size = max_message_size
        self._client = ClientInstance(
            namesrv_addr,
            instance_name=instance_name,
            request_timeout_s=send_timeout_s,
            poll_namesrv_interval_s=poll_namesrv_interval_s,
            heartbeat_interval_s=heartbeat_interval_s,
            name="producer",
        )
        self._client.producer_groups = (group,)
        self._routes = self._client.routes
        self._publish = self._routes.publish
        self._ids = UniqIdGenerator(
            self._client.client_ip,
            os.getpid(),
            random.getrandbits(32),
            now_ms=time.time_ns() // 1_000_000,
        )
        # SEND_MESSAGE_V2's header (client-flows.md section 2.2): the constant fields rendered
        # once, the per-message ones per send.
        template = SendMessageRequestHeaderV2(
            a=group, b="", c=DEFAULT_TOPIC, d=DEFAULT_TOPIC_QUEUE_NUMS, e=0, f=0, g=0, h=0, j=0,
            k=False, m=False,
        )  # fmt: skip
        self._send_header: Final = ext_encoder(template, _SEND_HEADER_FIELDS)

    @property
    def client_id(self) -> str:
        """``ip@instanceName``."""
        return self._client.client_id

    async def start(self) -> None:
        """Start the route-refresh and heartbeat timers (no broker connection yet)."""
        self._client.start()

    async def shutdown(self) -> None:
        """Unregister from every broker, stop the timers, close connections (idempotent)."""
        if self._client.stop_event.is_set():
            return
        await self._client.unregister_all(self.group, None)
        await self._client.close()

    async def _info(self, topic: str) -> TopicPublishInfo:
        """The topic's publish info, fetched on first use. Once known it may have no queue for
        a while (its master died): the send loop waits for the route to come back."""
        info = self._publish.get(topic)
        if info is None:
            self._client.check_started()
            info = await self._routes.publish_info(topic)
        return info

    async def _info_with_queues(self, topic: str) -> TopicPublishInfo:
        """The topic's publish info with at least one queue (re-fetched when it has none)."""
        info = self._publish.get(topic)
        if info is None or not info.queues:
            self._client.check_started()
            info = await self._routes.publish_info(topic)
        return info

    def _new_id(self) -> str:
        return self._ids.create(time.time_ns() // 1_000_000)

    def _encode(self, msg: Message, *, compress: bool = True) -> tuple[str, bytes, int, str]:
        """(properties, body, sysFlag, uniq id) of a single message."""
        body = msg.body
        if not body:
            raise ClientError("the message body length is zero")
        if len(body) > self._max_size:
            raise ClientError(f"the message body size over max value, MAX: {self._max_size}")
        props = msg.properties.copy()
        uniq = props.pop(MessageConst.UNIQ_KEY, None) or self._new_id()
        if msg.tags:
            props[MessageConst.TAGS] = msg.tags
        if msg.keys:
            props[MessageConst.KEYS] = msg.keys
        if msg.delay_level > 0:
            props[MessageConst.DELAY] = str(msg.delay_level)
        if msg.deliver_time_ms > 0:
            props[MessageConst.TIMER_DELIVER_MS] = str(msg.deliver_time_ms)
        props[MessageConst.WAIT] = "true"
        props[MessageConst.UNIQ_KEY] = uniq
        sys_flag = 0
        if compress and len(body) >= self._compress_over:
            body = zlib.compress(body, 5)
            sys_flag = COMPRESSED_FLAG | COMPRESSION_ZLIB
        return encode_properties(props), body, sys_flag, uniq

    def _request(self, mq: MessageQueue, p: _Payload) -> RemotingCommand:
        ext = self._send_header(
            mq.topic, mq.queue_id, p.sys_flag, time.time_ns() // 1_000_000, p.flag, p.props,
            p.code == _CODE_BATCH, mq.broker_name,
        )  # fmt: skip
        return RemotingCommand(
            code=p.code,
            language=_LANGUAGE,
            version=CURRENT_VERSION,
            opaque=next_opaque(),
            ext_fields=ext,
            body=p.body,
        )

    async def send(
        self,
        msg: Message,
        timeout_s: float | None = None,
        *,
        queue: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
    ) -> SendResult:
        """Send one message and wait for the broker's answer.

        Without ``queue``/``selector`` queues are taken round-robin and a failed attempt is
        retried up to ``retry_times_when_send_failed`` times on another broker; with either, the
        message goes to that queue once.

        Args:
            msg: the message.
            timeout_s: budget for the whole send (default ``send_timeout_s``).
            queue: send to exactly this queue.
            selector: ``selector(queues, msg, arg)`` picks the queue.
            arg: passed to ``selector``.

        Returns:
            The :class:`SendResult` (``msg_id`` is the message's UNIQ_KEY).

        Raises:
            ClientError: no route, empty or oversized body, or every attempt failed.
            RemoteError: the broker refused with a code that is not retried.
        """
        props, body, sys_flag, uniq = self._encode(msg)
        if selector is not None:
            info = await self._info_with_queues(msg.topic)
            queue = selector(info.queues, msg, arg)
        else:
            info = await self._info(msg.topic)
        payload = _Payload(_CODE_SEND, props, body, sys_flag, msg.flag, uniq)
        return await self._send_with_retries(info, queue, payload, timeout_s)

    async def _send_with_retries(
        self,
        info: TopicPublishInfo,
        queue: MessageQueue | None,
        payload: _Payload,
        timeout_s: float | None,
    ) -> SendResult:
        """``sendDefaultImpl``'s loop, following a failover within the send's budget: after a
        failure the topic's route is re-fetched at once (shared, rate-limited) and the broker
        set aside; a broker that cannot be reached, or a route without a master, is waited
        for with a growing pause (nothing was sent, so no attempt is spent and no duplicate
        made) until the budget ends. Attempts that reached a broker count toward
        ``retry_times_when_send_failed``."""
        loop = asyncio.get_running_loop()
        budget = self.send_timeout_s if timeout_s is None else timeout_s
        deadline = loop.time() + budget
        attempts = 1 if queue is not None else 1 + self.retry_times_when_send_failed
        remoting = self._client.remoting
        routes = self._routes
        topic = info.topic
        last_broker: str | None = None
        last_error: Exception | None = None
        sent = 0
        pause = _FIRST_PAUSE_S
        while sent < attempts and loop.time() < deadline:
            info = self._publish.get(topic) or info
            target = self._target(info, queue, last_broker)
            if isinstance(target, ClientError):
                last_error = target
                pause = await self._pause(topic, None, pause, deadline)
                continue
            mq, addr = target
            last_broker = mq.broker_name
            request = self._request(mq, payload)
            try:
                conn = remoting.connection_nowait(addr) or await remoting.connection(addr)
            except ConnectFailed as e:
                last_error = e
                routes.isolate(mq.broker_name)
                pause = await self._pause(topic, addr, pause, deadline)
                continue
            except ConnectionClosed as e:  # this client was closed
                last_error = e
                break
            sent += 1
            try:
                response = await conn.invoke(request, deadline - loop.time())
            except (ConnectionClosed, RequestTimeout) as e:
                last_error = e
                routes.isolate(mq.broker_name)
                await routes.refresh_after_failure(topic)
                continue
            status = _STATUS.get(response.code)
            if status is not None:
                return _result(status, response, mq, payload.uniq)
            error = RemoteError.for_code(response.code, response.remark or "")
            if not error.retriable:  # DefaultMQProducer.retryResponseCodes, in the errors table
                raise error
            last_error = error
            await routes.refresh_after_failure(topic)
        cost_ms = (budget - (deadline - loop.time())) * 1000
        raise ClientError(
            f"Send [{sent}] times, still failed, cost [{cost_ms:.0f}]ms,"
            f" Topic: {topic}, last error: {last_error}"
        ) from last_error

    def _target(
        self, info: TopicPublishInfo, queue: MessageQueue | None, last_broker: str | None
    ) -> tuple[MessageQueue, str] | ClientError:
        """The queue and master address of the next attempt, or why there is none now."""
        if queue is None and not info.queues:
            return ClientError(f"No route info of this topic: {info.topic} (no master)")
        mq = queue if queue is not None else info.select(last_broker, self._routes.isolated)
        addr = info.broker_addrs.get(mq.broker_name) or self._routes.master_addr(mq.broker_name)
        if addr is None:
            return ClientError(f"The broker[{mq.broker_name}] not exist")
        return mq, addr

    async def _pause(
        self, topic: str, failed_addr: str | None, pause: float, deadline: float
    ) -> float:
        """Re-fetch the route; unless it moved away from ``failed_addr`` (or now has queues),
        wait ``pause`` (jittered, within the deadline). Returns the next, doubled pause."""
        await self._routes.refresh_after_failure(topic)
        info = self._publish.get(topic)
        if info is not None and info.queues and failed_addr not in info.broker_addrs.values():
            return pause
        loop = asyncio.get_running_loop()
        wait = min(pause * (0.5 + random.random() / 2), deadline - loop.time())  # noqa: S311
        if wait > 0:
            await asyncio.sleep(wait)
        return min(pause * 2, _MAX_PAUSE_S)

    async def send_batch(
        self,
        msgs: Sequence[Message],
        timeout_s: float | None = None,
        *,
        queue: MessageQueue | None = None,
    ) -> SendResult:
        """Send messages of one topic as one SEND_BATCH_MESSAGE (``MessageBatch``): stored as
        consecutive offsets of one queue.

        Returns:
            The :class:`SendResult`; ``msg_id`` is the messages' UNIQ_KEYs joined with ``,``.

        Raises:
            ClientError: empty batch, mixed topics, delayed, timer or retry-topic messages, no
                route.
            RemoteError: the broker refused the batch.
        """
        if not msgs:
            raise ClientError("MessageBatch is empty")
        topic = msgs[0].topic
        items: list[tuple[int, bytes, str]] = []
        ids: list[str] = []
        for msg in msgs:
            if msg.topic != topic:
                raise ClientError("The topic of the messages in one batch should be the same")
            if msg.delay_level > 0:
                raise ClientError("TimeDelayLevel is not supported for batching")
            if msg.deliver_time_ms > 0:
                raise ClientError("timer messages are not supported for batching")
            if topic.startswith("%RETRY%"):
                raise ClientError("Retry Group is not supported for batching")
            props, body, _, uniq = self._encode(msg, compress=False)  # batches never compress
            items.append((msg.flag, body, props))
            ids.append(uniq)
        body = encode_batch_body(items)
        if len(body) > self._max_size:
            raise ClientError(f"the message body size over max value, MAX: {self._max_size}")
        batch_props = encode_properties(
            {
                MessageConst.WAIT: "true",
                MessageConst.UNIQ_KEY: self._new_id(),
            }
        )
        info = await self._info(topic)
        payload = _Payload(_CODE_BATCH, batch_props, body, 0, 0, ",".join(ids))
        return await self._send_with_retries(info, queue, payload, timeout_s)

    async def send_oneway(self, msg: Message, *, queue: MessageQueue | None = None) -> None:
        """Send without waiting for an answer (``sendOneway``): no result, no retry.

        Raises:
            ClientError: no route, bad body.
            ConnectionClosed: the broker could not be reached.
        """
        props, body, sys_flag, _ = self._encode(msg)
        info = await self._info_with_queues(msg.topic)
        mq = queue if queue is not None else info.select()
        addr = info.broker_addrs.get(mq.broker_name) or self._routes.master_addr(mq.broker_name)
        if addr is None:
            raise ClientError(f"The broker[{mq.broker_name}] not exist")
        request = self._request(mq, _Payload(_CODE_SEND, props, body, sys_flag, msg.flag, ""))
        async with asyncio.timeout(self.send_timeout_s):
            conn = await self._client.remoting.connection(addr)
        conn.invoke_oneway(request)

    async def fetch_publish_queues(self, topic: str) -> list[MessageQueue]:
        """The topic's publish queues (``fetchPublishMessageQueues``)."""
        return list((await self._info_with_queues(topic)).queues)


def _result(
    status: SendStatus, response: RemotingCommand, mq: MessageQueue, uniq: str
) -> SendResult:
    ext = response.ext_fields or {}
    queue_id = int(ext.get("queueId", mq.queue_id))
    if queue_id != mq.queue_id:
        mq = MessageQueue(topic=mq.topic, broker_name=mq.broker_name, queue_id=queue_id)
    return SendResult(
        status=status,
        msg_id=uniq,
        offset_msg_id=ext.get("msgId", ""),
        message_queue=mq,
        queue_offset=int(ext.get("queueOffset", -1)),
        transaction_id=ext.get("transactionId"),
        region_id=ext.get("MSG_REGION") or "DefaultRegion",
        trace_on=ext.get("TRACE_ON") != "false",
    )
