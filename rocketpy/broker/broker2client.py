"""Broker2Client: the requests a broker starts towards its clients, on their own channels.

Owns: NOTIFY_CONSUMER_IDS_CHANGED (40, oneway, to every live channel of a consumer group) and
CHECK_TRANSACTION_STATE (39, oneway, header + one stored message as the body, to one producer
channel). Mirrors ``broker/client/net/Broker2Client`` (``notifyConsumerIdsChanged``,
``checkProducerTransactionState``). Must not: choose channels or decide when to send (the
client managers and the transaction check do).
"""

from __future__ import annotations

from collections.abc import Sequence

from rocketpy.common.codes import RequestCode
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.protocol.headers.base import to_ext
from rocketpy.remoting.protocol.headers.broker import GroupRequestHeader
from rocketpy.remoting.protocol.headers.transaction import CheckTransactionStateRequestHeader
from rocketpy.remoting.transport.dispatch import Channel


def notify_consumer_ids_changed(group: str, channels: Sequence[Channel]) -> None:
    """``notifyConsumerIdsChanged``: a oneway request on every channel still open."""
    header = to_ext(GroupRequestHeader(consumer_group=group))
    for channel in channels:
        if not channel.is_closed:
            channel.invoke_oneway(
                RemotingCommand.request(
                    RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, dict(header), oneway=True
                )
            )


def check_producer_transaction_state(
    channel: Channel, header: CheckTransactionStateRequestHeader, body: bytes
) -> None:
    """``checkProducerTransactionState``: ask one producer about a half message (``body`` is
    the message as the client decodes it)."""
    channel.invoke_oneway(
        RemotingCommand.request(
            RequestCode.CHECK_TRANSACTION_STATE, dict(to_ext(header)), body, oneway=True
        )
    )
