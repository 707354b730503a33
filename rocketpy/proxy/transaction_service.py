"""Transactions through the proxy: half messages remembered, ended, and checked back over Telemetry.

Owns: :class:`TransactionService` (upstream ``TransactionService``/``ClusterTransactionService``
with ``EndTransactionActivity`` and the check-back half of ``ProxyClientRemotingProcessor`` and
``GrpcClientChannel``): records each stored half message by ``producerGroup@transactionId``
(the producer group of a gRPC producer is the topic); EndTransaction takes the record and sends
END_TRANSACTION (37) oneway to the master of its broker (``fromTransactionCheck`` for
SOURCE_SERVER_CHECK); producers whose Settings publish TRANSACTION (or MIXED) topics get those
topics registered as producer groups with the topics' masters (HEART_BEAT, at once and every
``PRODUCER_HEARTBEAT_S``), so a broker's CHECK_TRANSACTION_STATE reaches this proxy, which records
it and writes ``recover_orphaned_transaction_command`` to the Telemetry stream of one live
producer of that group, chosen at random (proxy.md sections 1.4 and 2). Must not: import the
broker or touch gRPC objects (the Telemetry stream is a callback on the client's state).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

import structlog

from rocketpy.client.admin import TopicRoute
from rocketpy.client.instance import client_ip
from rocketpy.proxy.backend import MessagingBackend
from rocketpy.proxy.client_settings import ClientRegistry, ClientState
from rocketpy.proxy.pb import definition_pb2 as pb
from rocketpy.proxy.pb import service_pb2 as spb
from rocketpy.proxy.route import MASTER_ID, TopicMessageType
from rocketpy.proxy.status import ProxyError, status
from rocketpy.proxy.transaction import (
    TransactionCheck,
    TransactionDataManager,
    end_transaction_header,
    grpc_message,
)

log = structlog.get_logger(__name__)

#: ``ClusterTransactionService``'s producer heartbeat period (``transactionHeartbeatPeriodSecond``).
PRODUCER_HEARTBEAT_S = 20.0
#: Topic types whose producers the brokers may check back.
_CHECKED_TYPES = (TopicMessageType.TRANSACTION, TopicMessageType.MIXED)


def _masters(route: TopicRoute) -> list[str]:
    return [a for b in route.brokers if (a := b.broker_addrs.get(MASTER_ID))]


class TransactionService:
    """Open transactions and producer registration.

    Args:
        backend: the brokers.
        clients: the gRPC clients (their settings and Telemetry streams).
        proxy_name: names this proxy's client id with the brokers.
    """

    def __init__(self, backend: MessagingBackend, clients: ClientRegistry, proxy_name: str) -> None:
        self.backend = backend
        self.clients = clients
        self.data = TransactionDataManager()
        self.client_id = f"{client_ip()}@{proxy_name}"
        #: producer groups (topics) registered with the brokers, re-sent every heartbeat
        self.groups: set[str] = set()
        self._now: Callable[[], float] = time.monotonic
        self._rng = random.Random()  # noqa: S311 - picks a client, not a secret
        backend.on_transaction_check = self.on_check

    def record_half(
        self, group: str, broker_name: str, queue_offset: int, commit_log_offset: int,
        transaction_id: str,
    ) -> None:  # fmt: skip
        """A half message was stored (``addTransactionDataByBrokerName``)."""
        self.data.add(
            group, broker_name, queue_offset, commit_log_offset, transaction_id, self._now()
        )

    async def end_transaction(self, req: spb.EndTransactionRequest) -> spb.EndTransactionResponse:
        """``EndTransactionActivity.endTransaction``.

        Raises:
            ProxyError: INVALID_TRANSACTION_ID (blank id), INTERNAL_SERVER_ERROR (no record,
                no master of its broker, or the broker unreachable).
        """
        if not req.transaction_id.strip():
            raise ProxyError(pb.Code.INVALID_TRANSACTION_ID, "transaction id cannot be empty")
        topic = req.topic.name
        data = self.data.poll(topic, req.transaction_id, self._now())
        if data is None:
            raise ProxyError(
                pb.Code.INTERNAL_SERVER_ERROR,
                f"cannot found transaction data, group: {topic}, id: {req.transaction_id}",
            )
        route = await self.backend.topic_route(topic)
        addr = next(
            (
                b.broker_addrs.get(MASTER_ID)
                for b in route.brokers
                if b.broker_name == data.broker_name
            ),
            None,
        )
        if addr is None:
            raise ProxyError(
                pb.Code.INTERNAL_SERVER_ERROR, f"no master of broker {data.broker_name}"
            )
        header = end_transaction_header(
            topic, topic, data, req.message_id, req.resolution, req.source
        )
        await self.backend.end_transaction(addr, header)
        return spb.EndTransactionResponse(status=status(pb.Code.OK))

    async def on_producer_settings(self, settings: pb.Settings) -> None:
        """Register the producer's TRANSACTION/MIXED topics with their masters (at once, so a
        check-back can come before the first periodic heartbeat)."""
        added: set[str] = set()
        for resource in settings.publishing.topics:
            topic = resource.name
            if topic in self.groups:
                continue
            try:
                route = await self.backend.topic_route(topic)
                kind = await self.backend.topic_message_type(topic, route)
            except ProxyError as e:
                log.warning("cannot register producer group", topic=topic, error=e.message)
                continue
            if kind in _CHECKED_TYPES:
                added.add(topic)
                await self.backend.register_producer(_masters(route), self.client_id, [topic])
        self.groups |= added

    async def heartbeat(self) -> None:
        """``scanProducerHeartBeat``: every registered group again to its topic's masters."""
        by_addr: dict[str, set[str]] = {}
        for topic in sorted(self.groups):
            try:
                route = await self.backend.topic_route(topic)
            except ProxyError as e:
                log.warning("producer heartbeat: no route", topic=topic, error=e.message)
                continue
            for addr in _masters(route):
                by_addr.setdefault(addr, set()).add(topic)
        for addr, groups in by_addr.items():
            await self.backend.register_producer([addr], self.client_id, sorted(groups))

    def _live_producer(self, group: str) -> ClientState | None:
        """A client with an open Telemetry stream whose Settings publish ``group``."""
        live = [
            state
            for state in self.clients.all()
            if state.push is not None
            and any(t.name == group for t in state.settings.publishing.topics)
        ]
        return self._rng.choice(live) if live else None

    def on_check(self, check: TransactionCheck) -> None:
        """A broker checks a half message back: record it and ask a live producer."""
        group = check.producer_group
        target = self._live_producer(group)
        if target is None or target.push is None:
            log.warning("no live producer for transaction check", group=group)
            return
        self.data.add(
            group, check.broker_name, check.tran_state_table_offset, check.commit_log_offset,
            check.transaction_id, self._now(),
        )  # fmt: skip
        command = spb.TelemetryCommand(
            status=status(pb.Code.OK),
            recover_orphaned_transaction_command=spb.RecoverOrphanedTransactionCommand(
                message=grpc_message(check.message), transaction_id=check.transaction_id
            ),
        )
        log.info(
            "transaction check relayed", group=group, client_id=target.client_id,
            transaction_id=check.transaction_id,
        )  # fmt: skip
        target.push(command)
