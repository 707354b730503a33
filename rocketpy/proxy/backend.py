"""What the gRPC side needs from the brokers: one interface for Cluster and Local mode.

Owns: :class:`MessagingBackend` (the part of upstream's ``MessagingProcessor``/``ServiceManager``
the implemented RPCs use: routes, topic and group configs, sending, ending transactions,
registering producer groups, and the brokers' transaction check-backs handed up) and the values
crossing it. ``rocketpy/proxy/cluster_backend.py`` implements it over a transport: remoting in
Cluster mode (``mqproxy``), or in Local mode (``mqbroker --enable-proxy``) a transport that
``cli`` builds to call its broker's processors in-process, so that ``rocketpy.proxy`` never
imports ``rocketpy.broker``. Must not: know about gRPC messages.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Protocol

from rocketpy.client.admin import TopicRoute
from rocketpy.proxy.pop_backend import PopBackend
from rocketpy.proxy.route import TopicMessageType
from rocketpy.proxy.send import OutgoingMessage
from rocketpy.proxy.transaction import TransactionCheck
from rocketpy.remoting.protocol.headers.transaction import EndTransactionRequestHeader


@dataclass(frozen=True, slots=True)
class GroupSettings:
    """The part of a ``SubscriptionGroupConfig`` the proxy hands to consumers.

    Attributes:
        consume_message_orderly: a FIFO group (``subscription.fifo``, one assignment per queue).
        retry_max_times: ``backoff_policy.max_attempts`` is this plus one.
    """

    consume_message_orderly: bool = False
    retry_max_times: int = 16


@dataclass(frozen=True, slots=True, kw_only=True)
class SendOutcome:
    """A broker's answer to one send (``SendResult``).

    Attributes:
        send_status: ``SEND_OK``, ``FLUSH_DISK_TIMEOUT``, ``FLUSH_SLAVE_TIMEOUT`` or
            ``SLAVE_NOT_AVAILABLE``.
        offset_msg_id: the broker's offset message id (store host + commit-log offset).
        queue_id: the queue the broker stored it in.
        queue_offset: its consume-queue offset.
        transaction_id: the header's ``transactionId`` (UNIQ_KEY of a half message), if any.
    """

    send_status: str
    offset_msg_id: str
    queue_id: int
    queue_offset: int
    transaction_id: str


class MessagingBackend(PopBackend, Protocol):
    """The brokers as the proxy's RPC handlers see them (POP: ``rocketpy/proxy/pop_backend.py``)."""

    #: Told of every CHECK_TRANSACTION_STATE a broker sends this proxy (set by the activity).
    on_transaction_check: Callable[[TransactionCheck], None] | None

    async def start(self) -> None:
        """Get ready (nothing is dialled before the first request)."""
        ...

    async def stop(self) -> None:
        """Close every connection (idempotent)."""
        ...

    async def topic_route(self, topic: str) -> TopicRoute:
        """The topic's route (cached).

        Raises:
            ProxyError: TOPIC_NOT_FOUND, or the failure to reach a NameServer.
        """
        ...

    async def topic_message_type(self, topic: str, route: TopicRoute) -> TopicMessageType:
        """The topic's ``message.type`` from its topic config (cached); UNSPECIFIED when no
        broker of ``route`` has the topic."""
        ...

    async def send_message(
        self, broker_name: str, broker_addr: str, queue_id: int,
        messages: Sequence[OutgoingMessage], timeout_s: float,
    ) -> SendOutcome:  # fmt: skip
        """Store ``messages`` (one topic) in ``queue_id`` of the master ``broker_name`` at
        ``broker_addr``: one message as SEND_MESSAGE_V2, several as one SEND_BATCH_MESSAGE
        (``ClusterMessageService.sendMessage``), so a batch has one outcome.

        Raises:
            ProxyError: the broker refused (mapped code), PROXY_TIMEOUT, or it is unreachable.
        """
        ...

    async def end_transaction(self, broker_addr: str, header: EndTransactionRequestHeader) -> None:
        """END_TRANSACTION (37), oneway, to the broker holding the half message.

        Raises:
            ProxyError: INTERNAL_SERVER_ERROR when the broker cannot be reached.
        """
        ...

    async def register_producer(
        self, broker_addrs: Collection[str], client_id: str, groups: Collection[str]
    ) -> None:
        """HEART_BEAT (34) naming ``groups`` as producer groups of ``client_id`` to each broker,
        so their check-backs reach this proxy; a broker that fails is logged and skipped."""
        ...

    async def subscription_group(self, group: str) -> GroupSettings:
        """The group's config (cached): GET_SUBSCRIPTIONGROUP_CONFIG (352) to a master of the
        cluster ``rocketMQClusterName``; the defaults when no broker knows the group."""
        ...
