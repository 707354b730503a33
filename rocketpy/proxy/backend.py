"""What the gRPC side needs from the brokers: one interface, a Cluster and (later) a Local one.

Owns: :class:`MessagingBackend` (the part of upstream's ``MessagingProcessor``/``ServiceManager``
the implemented RPCs use: routes, topic message types, sending) and the values crossing it.
``rocketpy/proxy/cluster_backend.py`` implements it over remoting (Cluster mode, ``mqproxy``);
a Local implementation calling broker processors in-process is injected by ``cli`` so that
``rocketpy.proxy`` never imports ``rocketpy.broker``. Must not: know about gRPC messages.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from rocketpy.client.admin import TopicRoute
from rocketpy.proxy.pop_backend import PopBackend
from rocketpy.proxy.route import TopicMessageType
from rocketpy.proxy.send import OutgoingMessage


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
