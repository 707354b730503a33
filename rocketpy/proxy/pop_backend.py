"""The brokers' POP operations as the proxy's consumer RPCs need them: interface and values.

Owns: :class:`PopBackend` (the consumer half of upstream's ``MessageService``: ``popMessage``,
``ackMessage``, ``changeInvisibleTime``, ``sendMessageBack``; ``MessagingBackend`` extends it) and
:class:`PopOutcome`. ``ClusterBackend`` implements it in ``rocketpy/proxy/cluster_pop.py``
(POP_MESSAGE, ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME, CONSUMER_SEND_MSG_BACK on its transport:
remoting, or in-process in Local mode). Must not: know gRPC messages or do I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol

from rocketpy.client.simple_consumer import PopMessage
from rocketpy.remoting.protocol.headers.broker import ConsumerSendMsgBackRequestHeader
from rocketpy.remoting.protocol.headers.pop import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    PopMessageRequestHeader,
)


class PopStatus(Enum):
    """``PopStatus``: what a pop ended with."""

    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    POLLING_FULL = "POLLING_FULL"
    POLLING_NOT_FOUND = "POLLING_NOT_FOUND"


@dataclass(frozen=True, slots=True)
class PopOutcome:
    """``PopResult``: the status and, when FOUND, the messages with their ExtraInfo handles
    (``POP_CK``, eight fields; the proxy appends the commit-log offset)."""

    status: PopStatus
    messages: list[PopMessage] = field(default_factory=list)


class PopBackend(Protocol):
    """POP on the masters: each call names the master's address (from the topic's route)."""

    async def pop_message(
        self, broker_name: str, broker_addr: str, header: PopMessageRequestHeader, timeout_s: float
    ) -> PopOutcome:
        """POP_MESSAGE; a timeout is ``POLLING_NOT_FOUND`` (the long poll ran out).

        Raises:
            ProxyError: the broker refused the pop (mapped code) or is unreachable.
        """
        ...

    async def ack_message(
        self, broker_addr: str, header: AckMessageRequestHeader, timeout_s: float
    ) -> bool:
        """ACK_MESSAGE; True when the broker answered SUCCESS (``AckStatus.OK``).

        Raises:
            ProxyError: PROXY_TIMEOUT, or the broker is unreachable.
        """
        ...

    async def change_invisible_time(
        self, broker_addr: str, header: ChangeInvisibleTimeRequestHeader, timeout_s: float
    ) -> ChangeInvisibleTimeResponseHeader:
        """CHANGE_MESSAGE_INVISIBLETIME: the new pop time, invisible time and revive queue.

        Raises:
            ProxyError: the broker refused (INTERNAL_SERVER_ERROR), PROXY_TIMEOUT, unreachable.
        """
        ...

    async def send_message_back(
        self, broker_addr: str, header: ConsumerSendMsgBackRequestHeader, timeout_s: float
    ) -> None:
        """CONSUMER_SEND_MSG_BACK (``delayLevel`` -1: straight to ``%DLQ%<group>``).

        Raises:
            ProxyError: the broker refused (mapped code), PROXY_TIMEOUT, unreachable.
        """
        ...
