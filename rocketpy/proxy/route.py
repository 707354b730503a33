"""Routes as the gRPC clients see them: a NameServer route rewritten to the proxy's endpoints.

Owns: the pure conversions of ``RouteActivity`` (``queryRoute``: ``genMessageQueueFromQueueData``,
``buildBrokerMap``, ``convertToPermission``, ``convertToAddressList``, ``parseTopicMessageType``;
``queryAssignment``) and ``TopicConfig.getTopicMessageType`` (proxy.md section 2). In Cluster mode
every broker address is replaced by the hosts of the request's ``endpoints`` with the proxy's
gRPC port, so clients only ever talk to the proxy. Must not: do I/O (the backend fetches routes
and topic configs; ``rocketpy/proxy/messaging.py`` calls these).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Final

from rocketpy.client.admin import BrokerInfo, QueueInfo, TopicRoute
from rocketpy.proxy.pb import definition_pb2 as pb

PERM_WRITE: Final = 0x2  # PermName.PERM_WRITE
PERM_READ: Final = 0x4  # PermName.PERM_READ
MASTER_ID: Final = 0  # MixAll.MASTER_ID
#: The topic attribute holding the message type (``TopicAttributes.TOPIC_MESSAGE_TYPE_ATTRIBUTE``).
MESSAGE_TYPE_ATTRIBUTE: Final = "message.type"


class TopicMessageType(StrEnum):
    """``TopicMessageType``: what a topic accepts."""

    UNSPECIFIED = "UNSPECIFIED"
    NORMAL = "NORMAL"
    FIFO = "FIFO"
    DELAY = "DELAY"
    TRANSACTION = "TRANSACTION"
    MIXED = "MIXED"


def topic_message_type(attributes: Mapping[str, str] | None) -> TopicMessageType:
    """``TopicConfig.getTopicMessageType``: the ``message.type`` attribute, NORMAL without one.

    An attribute written as ``+message.type`` (mqadmin's add syntax) counts too; an unknown
    value is UNSPECIFIED (Java's ``valueOf`` would throw; the send then fails the type check).
    """
    if not attributes:
        return TopicMessageType.NORMAL
    value = attributes.get(MESSAGE_TYPE_ATTRIBUTE, attributes.get("+" + MESSAGE_TYPE_ATTRIBUTE))
    if value is None:
        return TopicMessageType.NORMAL
    try:
        return TopicMessageType(value)
    except ValueError:
        return TopicMessageType.UNSPECIFIED


_ACCEPT: Final[dict[TopicMessageType, tuple[pb.MessageType, ...]]] = {
    TopicMessageType.NORMAL: (pb.MessageType.NORMAL,),
    TopicMessageType.FIFO: (pb.MessageType.FIFO,),
    TopicMessageType.TRANSACTION: (pb.MessageType.TRANSACTION,),
    TopicMessageType.DELAY: (pb.MessageType.DELAY,),
    TopicMessageType.MIXED: (
        pb.MessageType.NORMAL,
        pb.MessageType.FIFO,
        pb.MessageType.DELAY,
        pb.MessageType.TRANSACTION,
    ),
}


def accept_message_types(kind: TopicMessageType) -> tuple[pb.MessageType, ...]:
    """``parseTopicMessageType``: the ``accept_message_types`` of every queue of the topic."""
    return _ACCEPT.get(kind, (pb.MessageType.MESSAGE_TYPE_UNSPECIFIED,))


def permission(perm: int) -> pb.Permission:
    """``convertToPermission``: broker perm bits -> ``Permission``."""
    readable, writable = bool(perm & PERM_READ), bool(perm & PERM_WRITE)
    if readable and writable:
        return pb.Permission.READ_WRITE
    if readable:
        return pb.Permission.READ
    if writable:
        return pb.Permission.WRITE
    return pb.Permission.NONE


def proxy_endpoints(
    requested: pb.Endpoints, grpc_port: int, *, use_request_port: bool
) -> pb.Endpoints:
    """``convertToAddressList``: the request's hosts, each with the proxy's gRPC port (or the
    request's own port with ``useEndpointPortFromRequest``)."""
    scheme = requested.scheme or pb.AddressScheme.IPv4
    return pb.Endpoints(
        scheme=scheme,
        addresses=[
            pb.Address(host=a.host, port=a.port if use_request_port else grpc_port)
            for a in requested.addresses
        ],
    )


def broker_endpoints(broker_addr: str, grpc_port: int) -> pb.Endpoints:
    """Local mode (``LocalTopicRouteService.getTopicRouteForProxy``): the broker's own host with
    the gRPC port, where that broker's in-process proxy listens."""
    host = broker_addr.rsplit(":", 1)[0].strip("[]")
    if ":" in host:
        scheme = pb.AddressScheme.IPv6
    elif host.replace(".", "").isdigit():
        scheme = pb.AddressScheme.IPv4
    else:
        scheme = pb.AddressScheme.DOMAIN_NAME
    return pb.Endpoints(scheme=scheme, addresses=[pb.Address(host=host, port=grpc_port)])


def _endpoints_of(addr: str, endpoints: pb.Endpoints, local_port: int | None) -> pb.Endpoints:
    return endpoints if local_port is None else broker_endpoints(addr, local_port)


def _brokers(
    brokers: list[BrokerInfo], endpoints: pb.Endpoints, local_port: int | None
) -> dict[str, list[pb.Broker]]:
    """``buildBrokerMap`` with every address replaced by ``endpoints`` (Cluster mode) or, with
    ``local_port``, by the broker's host and that port (Local mode)."""
    out: dict[str, list[pb.Broker]] = {}
    for info in brokers:
        out[info.broker_name] = [
            pb.Broker(
                name=info.broker_name, id=broker_id,
                endpoints=_endpoints_of(info.broker_addrs[broker_id], endpoints, local_port),
            )
            for broker_id in sorted(info.broker_addrs)
        ]  # fmt: skip
    return out


def _queues_of(
    q: QueueInfo, topic: pb.Resource, accept: tuple[pb.MessageType, ...], broker: pb.Broker
) -> list[pb.MessageQueue]:
    """``genMessageQueueFromQueueData``: ids from 0, read-only first, then write-only, then
    read-write; a queue set with neither bit gets NONE queues."""
    readable, writable = bool(q.perm & PERM_READ), bool(q.perm & PERM_WRITE)
    r = w = rw = n = 0
    if readable and writable:
        rw = min(q.write_queue_nums, q.read_queue_nums)
        r, w = q.read_queue_nums - rw, q.write_queue_nums - rw
    elif writable:
        w = q.write_queue_nums
    elif readable:
        r = q.read_queue_nums
    else:
        n = max(1, q.write_queue_nums, q.read_queue_nums)
    perms = (
        [pb.Permission.READ] * r
        + [pb.Permission.WRITE] * w
        + [pb.Permission.READ_WRITE] * rw
        + [pb.Permission.NONE] * n
    )
    return [
        pb.MessageQueue(
            topic=topic, id=i, permission=p, broker=broker, accept_message_types=list(accept)
        )
        for i, p in enumerate(perms)
    ]


def message_queues(
    topic: pb.Resource, route: TopicRoute, endpoints: pb.Endpoints, kind: TopicMessageType,
    *, local_port: int | None = None,
) -> list[pb.MessageQueue]:  # fmt: skip
    """QueryRoute's ``message_queues``: per queue data and per broker id of that name (slaves
    too), the queues of :func:`_queues_of`, every broker at ``endpoints`` (Local mode, with
    ``local_port``: at its own host and that port)."""
    brokers = _brokers(route.brokers, endpoints, local_port)
    accept = accept_message_types(kind)
    out: list[pb.MessageQueue] = []
    for q in route.queues:
        members = brokers.get(q.broker_name)
        if members is None:
            break  # upstream stops at the first queue data without broker data
        for broker in members:
            out.extend(_queues_of(q, topic, accept, broker))
    return out


def assignments(
    topic: pb.Resource, route: TopicRoute, endpoints: pb.Endpoints, *, fifo: bool,
    local_port: int | None = None,
) -> list[pb.Assignment]:  # fmt: skip
    """QueryAssignment's ``assignments``: per readable broker-set with a master, one queue with
    id -1 (the proxy pops broker-wide), or for an orderly group one per read queue id; brokers
    at ``endpoints`` or, with ``local_port``, at their own host and that port."""
    brokers = {b.broker_name: b for b in route.brokers}
    out: list[pb.Assignment] = []
    for q in route.queues:
        info = brokers.get(q.broker_name)
        if not (q.perm & PERM_READ) or q.read_queue_nums <= 0 or info is None:
            continue
        master = info.broker_addrs.get(MASTER_ID)
        if master is None:
            continue
        where = _endpoints_of(master, endpoints, local_port)
        broker = pb.Broker(name=q.broker_name, id=MASTER_ID, endpoints=where)
        ids = range(q.read_queue_nums) if fifo else (-1,)
        out.extend(
            pb.Assignment(
                message_queue=pb.MessageQueue(
                    topic=topic, id=i, permission=permission(q.perm), broker=broker
                )
            )
            for i in ids
        )
    return out
