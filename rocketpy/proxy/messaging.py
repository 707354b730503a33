"""The RPCs of ``apache.rocketmq.v2.MessagingService`` the proxy answers, over a backend.

Owns: :class:`MessagingActivity`, one method per implemented RPC, mirroring upstream's
``RouteActivity`` (QueryRoute, QueryAssignment), ``ClientActivity`` (Heartbeat, Telemetry Settings,
NotifyClientTermination) and ``SendMessageActivity`` + ``ProducerProcessor`` (SendMessage:
validation, topic message-type check, queue choice, SEND_MESSAGE_V2 or, for several messages,
SEND_BATCH_MESSAGE through the backend; a stored half message is recorded for EndTransaction,
which ``rocketpy/proxy/transaction_service.py`` serves with the check-back relay). Every
method takes a :class:`CallContext` (what the gRPC layer read from the call's metadata) and
returns the response message or raises :class:`ProxyError`; ``rocketpy/proxy/grpc_server.py``
turns that into the response's ``status`` (proxy.md section 2). Must not: touch gRPC objects,
or import the broker.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass

import structlog

from rocketpy.client.admin import TopicRoute
from rocketpy.common.errors import CodecError
from rocketpy.common.message.decoder import decode_offset_msg_id
from rocketpy.common.message.record import TRANSACTION_PREPARED_TYPE
from rocketpy.proxy.backend import MessagingBackend, SendOutcome
from rocketpy.proxy.client_settings import ClientRegistry, answer
from rocketpy.proxy.config import ProxyConfig
from rocketpy.proxy.pb import definition_pb2 as pb
from rocketpy.proxy.pb import service_pb2 as spb
from rocketpy.proxy.route import (
    MASTER_ID,
    PERM_WRITE,
    assignments,
    message_queues,
    proxy_endpoints,
)
from rocketpy.proxy.send import (
    OutgoingMessage,
    build_message,
    check_message_type,
    entry_status,
    message_type_of,
    select_by_group,
    validate_topic,
)
from rocketpy.proxy.status import ProxyError, status
from rocketpy.proxy.transaction_service import TransactionService

log = structlog.get_logger(__name__)

#: ``MixAll.isSysConsumerGroup``.
SYS_CONSUMER_GROUP_PREFIX = "CID_RMQ_SYS_"


@dataclass(frozen=True, slots=True, kw_only=True)
class CallContext:
    """What one call carries besides its request (``ProxyContext``).

    Attributes:
        client_id: ``x-mq-client-id``.
        remote_host: the peer's host (born host of messages that name none).
        language: ``x-mq-language``.
        client_version: ``x-mq-client-version``.
        time_remaining_s: the call's deadline, if the client set one.
    """

    client_id: str
    remote_host: str = ""
    language: str = ""
    client_version: str = ""
    time_remaining_s: float | None = None


@dataclass(frozen=True, slots=True)
class WriteQueue:
    """``AddressableMessageQueue``: a writable master queue with its broker address."""

    broker_name: str
    queue_id: int
    broker_addr: str


def validate_group(group: str) -> None:
    """``GrpcValidator.validateConsumerGroup``.

    Raises:
        ProxyError: ILLEGAL_CONSUMER_GROUP.
    """
    if not group.strip():
        raise ProxyError(pb.Code.ILLEGAL_CONSUMER_GROUP, "the specified group is blank")
    if group.startswith(SYS_CONSUMER_GROUP_PREFIX):
        raise ProxyError(pb.Code.ILLEGAL_CONSUMER_GROUP, "cannot use system consumer group")


class MessagingActivity:
    """The implemented RPCs.

    Args:
        config: the proxy's settings.
        backend: the brokers (Cluster: remoting).
        grpc_port: the proxy's bound gRPC port (routes carry it; ``grpcServerPort`` may be 0).
    """

    def __init__(
        self,
        config: ProxyConfig,
        backend: MessagingBackend,
        grpc_port: int,
    ) -> None:
        self.config = config
        self.backend = backend
        self.grpc_port = grpc_port
        self.clients = ClientRegistry(config.grpc_client_idle_time_ms / 1000)
        self.transactions = TransactionService(backend, self.clients, config.proxy_name)
        self._round_robin = itertools.count()
        #: topic -> (route, its write queues): rebuilt only when the backend's route changes.
        self._write_queues: dict[str, tuple[TopicRoute, list[WriteQueue]]] = {}
        self._now = time.monotonic

    @property
    def _local_port(self) -> int | None:
        """Local mode routes to each broker's host with the gRPC port; Cluster mode to the
        request's endpoints."""
        return self.grpc_port if self.config.proxy_mode.lower() == "local" else None

    def _endpoints(self, requested: pb.Endpoints) -> pb.Endpoints:
        return proxy_endpoints(
            requested, self.grpc_port, use_request_port=self.config.use_endpoint_port_from_request
        )

    async def query_route(
        self, req: spb.QueryRouteRequest, call: CallContext
    ) -> spb.QueryRouteResponse:
        """``RouteActivity.queryRoute``."""
        topic = req.topic.name
        validate_topic(topic)
        route = await self.backend.topic_route(topic)
        kind = await self.backend.topic_message_type(topic, route)
        queues = message_queues(
            req.topic, route, self._endpoints(req.endpoints), kind, local_port=self._local_port
        )
        return spb.QueryRouteResponse(status=status(pb.Code.OK), message_queues=queues)

    async def query_assignment(
        self, req: spb.QueryAssignmentRequest, call: CallContext
    ) -> spb.QueryAssignmentResponse:
        """``RouteActivity.queryAssignment``: an orderly group gets every read queue."""
        validate_topic(req.topic.name)
        validate_group(req.group.name)
        route = await self.backend.topic_route(req.topic.name)
        group = await self.backend.subscription_group(req.group.name)
        found = assignments(
            req.topic, route, self._endpoints(req.endpoints),
            fifo=group.consume_message_orderly, local_port=self._local_port,
        )  # fmt: skip
        if not found:
            return spb.QueryAssignmentResponse(
                status=status(pb.Code.FORBIDDEN, "no readable queue")
            )
        return spb.QueryAssignmentResponse(status=status(pb.Code.OK), assignments=found)

    async def heartbeat(
        self, req: spb.HeartbeatRequest, call: CallContext
    ) -> spb.HeartbeatResponse:
        """``ClientActivity.heartbeat``: only a client that sent its Settings is known."""
        state = self.clients.touch(call.client_id, self._now())
        if state is None:
            raise ProxyError(
                pb.Code.UNRECOGNIZED_CLIENT_TYPE,
                f"cannot find client settings for this client, clientId: {call.client_id}",
            )
        if state.settings.HasField("subscription"):
            validate_group(req.group.name)
        return spb.HeartbeatResponse(status=status(pb.Code.OK))

    async def notify_client_termination(
        self, req: spb.NotifyClientTerminationRequest, call: CallContext
    ) -> spb.NotifyClientTerminationResponse:
        """``ClientActivity.notifyClientTermination``: forget the client."""
        if self.clients.remove(call.client_id) is None:
            raise ProxyError(
                pb.Code.UNRECOGNIZED_CLIENT_TYPE,
                f"cannot find client settings for this client, clientId: {call.client_id}",
            )
        log.info("client terminated", client_id=call.client_id)
        return spb.NotifyClientTerminationResponse(status=status(pb.Code.OK))

    async def telemetry_settings(
        self, settings: pb.Settings, call: CallContext
    ) -> spb.TelemetryCommand:
        """``ClientActivity.processClientSettings``: store (a consumer's under its group's
        config), answer with the merged settings.

        Raises:
            ValueError: settings with neither publishing nor subscription (the gRPC layer
                answers INVALID_ARGUMENT, as upstream).
            ProxyError: the group's config cannot be read.
        """
        if not (settings.HasField("publishing") or settings.HasField("subscription")):
            raise ValueError("settings is invalid")
        group = None
        if settings.HasField("subscription"):
            group = await self.backend.subscription_group(settings.subscription.group.name)
        state = self.clients.update(call.client_id, settings, self._now(), group)
        reply = answer(state.settings, self.config)
        return spb.TelemetryCommand(status=status(pb.Code.OK), settings=reply)

    def expire_clients(self) -> list[str]:
        """Drop clients silent for longer than ``grpcClientIdleTimeMills``."""
        return self.clients.expire(self._now())

    async def send_message(
        self, req: spb.SendMessageRequest, call: CallContext
    ) -> spb.SendMessageResponse:
        """``SendMessageActivity.sendMessage`` + ``ProducerProcessor.sendMessage``: a request's
        messages go to one queue in one request."""
        if not req.messages:
            raise ProxyError(pb.Code.MESSAGE_CORRUPTED, "no message to send")
        topic = req.messages[0].topic
        validate_topic(topic.name)
        outgoing: list[OutgoingMessage] = []
        for msg in req.messages:
            if msg.topic != topic:
                raise ProxyError(pb.Code.MESSAGE_CORRUPTED, "topic in message is not same")
            outgoing.append(build_message(msg, self.config, call.remote_host))
        route = await self.backend.topic_route(topic.name)
        if self.config.enable_topic_message_type_check:
            kind = await self.backend.topic_message_type(topic.name, route)
            for out in outgoing:
                check_message_type(kind, message_type_of(out.properties))
        queue = self._select_queue(
            self._queues_of(topic.name, route),
            outgoing[0].message_group if len(outgoing) == 1 else "",
        )
        result = await self.backend.send_message(
            queue.broker_name, queue.broker_addr, queue.queue_id, outgoing,
            self._send_timeout(call),
        )  # fmt: skip
        # convertToSendMessageResponse: one entry per broker result (a batch has one, whose
        # message id is the messages' ids joined with "," as the batch's SendResult.msgId).
        entry = spb.SendResultEntry(status=entry_status(result.send_status))
        if entry.status.code == pb.Code.OK and outgoing[0].sys_flag & TRANSACTION_PREPARED_TYPE:
            self._record_half(topic.name, queue.broker_name, result)
        if entry.status.code == pb.Code.OK:
            entry.message_id = ",".join(out.message_id for out in outgoing)
            entry.transaction_id = result.transaction_id
            entry.offset = result.queue_offset
        return spb.SendMessageResponse(status=status(entry.status.code), entries=[entry])

    def _record_half(self, topic: str, broker_name: str, result: SendOutcome) -> None:
        """Remember where a half message lives, for EndTransaction (group = topic)."""
        try:
            _, commit_log_offset = decode_offset_msg_id(result.offset_msg_id)
        except (CodecError, ValueError):
            log.warning("half message without offset id", offset_msg_id=result.offset_msg_id)
            return
        self.transactions.record_half(
            topic, broker_name, result.queue_offset, commit_log_offset, result.transaction_id
        )

    async def end_transaction(
        self, req: spb.EndTransactionRequest, call: CallContext
    ) -> spb.EndTransactionResponse:
        """``EndTransactionActivity.endTransaction``."""
        validate_topic(req.topic.name)
        self.clients.touch(call.client_id, self._now())
        return await self.transactions.end_transaction(req)

    def _send_timeout(self, call: CallContext) -> float:
        budget = self.config.proxy_request_timeout_ms / 1000
        if call.time_remaining_s is not None:
            budget = min(budget, max(call.time_remaining_s, 0.05))
        return budget

    def _queues_of(self, topic: str, route: TopicRoute) -> list[WriteQueue]:
        """``write_queues(route)``, kept while the backend serves the same route object."""
        cached = self._write_queues.get(topic)
        if cached is not None and cached[0] is route:
            return cached[1]
        queues = write_queues(route)
        if len(self._write_queues) >= 4096:  # topics come and go: never grow without bound
            self._write_queues.clear()
        self._write_queues[topic] = (route, queues)
        return queues

    def _select_queue(self, queues: list[WriteQueue], message_group: str) -> WriteQueue:
        """``SendMessageQueueSelector``: every master's write queues sorted by (broker, id); a
        message group hashes onto them, otherwise round robin. The client's queue is ignored.

        Raises:
            ProxyError: FORBIDDEN when no queue is writable.
        """
        if not queues:
            raise ProxyError(pb.Code.FORBIDDEN, "no writable queue")
        if message_group:
            return queues[select_by_group(queues, message_group)]
        return queues[next(self._round_robin) % len(queues)]


def write_queues(route: TopicRoute) -> list[WriteQueue]:
    """``MessageQueueSelector``'s write queues of a route: writable queue data whose broker-set
    has a master, ``writeQueueNums`` queues each, sorted by broker name and queue id."""
    masters = {b.broker_name: b.broker_addrs.get(MASTER_ID) for b in route.brokers}
    out = [
        WriteQueue(q.broker_name, i, addr)
        for q in route.queues
        if q.perm & PERM_WRITE and (addr := masters.get(q.broker_name))
        for i in range(q.write_queue_nums)
    ]
    return sorted(out, key=lambda w: (w.broker_name, w.queue_id))
