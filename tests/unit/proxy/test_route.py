"""QueryRoute/QueryAssignment conversions (``RouteActivity``), without I/O."""

from __future__ import annotations

from rocketpy.client.admin import BrokerInfo, QueueInfo, TopicRoute
from rocketpy.proxy.messaging import write_queues
from rocketpy.proxy.pb import definition_pb2 as pb
from rocketpy.proxy.route import (
    TopicMessageType,
    accept_message_types,
    assignments,
    message_queues,
    proxy_endpoints,
    topic_message_type,
)

TOPIC = pb.Resource(name="T")
ENDPOINTS = pb.Endpoints(
    scheme=pb.AddressScheme.IPv4, addresses=[pb.Address(host="10.0.0.9", port=8081)]
)


def _route(*queues: QueueInfo, brokers: tuple[BrokerInfo, ...] | None = None) -> TopicRoute:
    if brokers is None:
        brokers = tuple(
            BrokerInfo("c", q.broker_name, {0: f"{q.broker_name}:10911"}) for q in queues
        )
    return TopicRoute(list(queues), list(brokers))


def test_route_rewrites_every_broker_to_the_proxy_endpoint_with_its_bound_port() -> None:
    requested = pb.Endpoints(
        scheme=pb.AddressScheme.IPv4, addresses=[pb.Address(host="127.0.0.1", port=1)]
    )
    got = proxy_endpoints(requested, 45678, use_request_port=False)
    assert [(a.host, a.port) for a in got.addresses] == [("127.0.0.1", 45678)]
    assert proxy_endpoints(requested, 45678, use_request_port=True).addresses[0].port == 1


def test_route_queue_ids_read_only_then_write_only_then_read_write() -> None:
    route = _route(QueueInfo("b", read_queue_nums=4, write_queue_nums=2, perm=6))
    queues = message_queues(TOPIC, route, ENDPOINTS, TopicMessageType.NORMAL)
    assert [(q.id, q.permission) for q in queues] == [
        (0, pb.Permission.READ), (1, pb.Permission.READ),
        (2, pb.Permission.READ_WRITE), (3, pb.Permission.READ_WRITE),
    ]  # fmt: skip
    assert all(q.broker.endpoints == ENDPOINTS and q.broker.name == "b" for q in queues)
    assert all(list(q.accept_message_types) == [pb.MessageType.NORMAL] for q in queues)


def test_route_lists_slaves_too_and_unreadable_sets_get_none_queues() -> None:
    broker = BrokerInfo("c", "b", {0: "m:1", 1: "s:1"})
    route = _route(QueueInfo("b", 2, 2, perm=0), brokers=(broker,))
    queues = message_queues(TOPIC, route, ENDPOINTS, TopicMessageType.FIFO)
    assert [(q.broker.id, q.id, q.permission) for q in queues] == [
        (0, 0, pb.Permission.NONE), (0, 1, pb.Permission.NONE),
        (1, 0, pb.Permission.NONE), (1, 1, pb.Permission.NONE),
    ]  # fmt: skip
    assert list(queues[0].accept_message_types) == [pb.MessageType.FIFO]


def test_route_topic_message_type_from_attributes() -> None:
    assert topic_message_type(None) == TopicMessageType.NORMAL
    assert topic_message_type({"message.type": "FIFO"}) == TopicMessageType.FIFO
    assert topic_message_type({"+message.type": "DELAY"}) == TopicMessageType.DELAY
    assert topic_message_type({"message.type": "bogus"}) == TopicMessageType.UNSPECIFIED
    assert len(accept_message_types(TopicMessageType.MIXED)) == 4
    assert accept_message_types(TopicMessageType.UNSPECIFIED) == (
        pb.MessageType.MESSAGE_TYPE_UNSPECIFIED,
    )


def test_assignment_one_broker_wide_queue_per_readable_master_or_each_for_fifo() -> None:
    route = _route(QueueInfo("a", 3, 3, 6), QueueInfo("b", 2, 2, 2))  # b: write-only
    found = assignments(TOPIC, route, ENDPOINTS, fifo=False)
    assert [(a.message_queue.broker.name, a.message_queue.id) for a in found] == [("a", -1)]
    fifo = assignments(TOPIC, route, ENDPOINTS, fifo=True)
    assert [a.message_queue.id for a in fifo] == [0, 1, 2]


def test_write_queues_sorted_over_masters_only() -> None:
    masterless = BrokerInfo("c", "z", {1: "slave:1"})
    route = _route(
        QueueInfo("b", 2, 2, 6), QueueInfo("a", 1, 1, 6), QueueInfo("z", 4, 4, 6),
        brokers=(BrokerInfo("c", "b", {0: "b:1"}), BrokerInfo("c", "a", {0: "a:1"}), masterless),
    )  # fmt: skip
    assert [(w.broker_name, w.queue_id, w.broker_addr) for w in write_queues(route)] == [
        ("a", 0, "a:1"), ("b", 0, "b:1"), ("b", 1, "b:1"),
    ]  # fmt: skip


def test_local_mode_routes_each_broker_to_its_own_host_with_the_grpc_port() -> None:
    """Local mode: every broker id keeps its own host (master and slave differ) with the gRPC
    port; the request's endpoints are not used. Host kinds give the scheme."""
    broker = BrokerInfo("c", "b", {0: "10.0.0.1:10911", 1: "broker-b-s:10911"})
    route = _route(QueueInfo("b", 1, 1, perm=6), brokers=(broker,))
    queues = message_queues(TOPIC, route, ENDPOINTS, TopicMessageType.NORMAL, local_port=8081)
    got = [(q.broker.id, q.broker.endpoints) for q in queues]
    assert [(i, e.scheme, [(a.host, a.port) for a in e.addresses]) for i, e in got] == [
        (0, pb.AddressScheme.IPv4, [("10.0.0.1", 8081)]),
        (1, pb.AddressScheme.DOMAIN_NAME, [("broker-b-s", 8081)]),
    ]
    [assigned] = assignments(TOPIC, route, ENDPOINTS, fifo=False, local_port=8081)
    assert [(a.host, a.port) for a in assigned.message_queue.broker.endpoints.addresses] == [
        ("10.0.0.1", 8081)
    ]
    v6 = BrokerInfo("c", "b", {0: "[::1]:10911"})
    [q6] = message_queues(
        TOPIC, _route(QueueInfo("b", 1, 1, 6), brokers=(v6,)), ENDPOINTS,
        TopicMessageType.NORMAL, local_port=9,
    )  # fmt: skip
    assert q6.broker.endpoints.scheme == pb.AddressScheme.IPv6
    assert q6.broker.endpoints.addresses[0].host == "::1"
