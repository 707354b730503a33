"""The extFields each client and mqadmin request puts on the wire (issue 23).

A tiny in-process RemotingServer stands in for both the NameServer and the broker: it records
every request's code and extFields in arrival order and answers SUCCESS with a body the caller
can decode. Each case calls one client method and compares what arrived with the dict the
client built by hand before it encoded through the typed headers, so converting a request to
its header class cannot change a key, a value's spelling (``true``/``false``, decimal ints) or
add or drop a field.

Key order is compared too, except where noted: Java's ``makeCustomHeaderToNet`` fills a
``HashMap``, so no reader depends on it, but unchanged order means unchanged bytes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import pytest

from rocketpy.client.admin import AdminClient, TopicSpec
from rocketpy.client.instance import ClientInstance
from rocketpy.client.pull_api import (
    FLAG_COMMIT_OFFSET,
    FLAG_SUBSCRIPTION,
    FLAG_SUSPEND,
    build_subscription,
    pull_message,
    query_consumer_offset,
    queue_offset,
    update_consumer_offset,
)
from rocketpy.client.push_consumer import PushConsumer
from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.remoting.protocol.body.broker import MessageQueue
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.transport.dispatch import ProcessorRegistry, RequestContext
from rocketpy.remoting.transport.server import RemotingServer
from tests.helpers.client_messages import message_at

pytestmark = pytest.mark.integration

Ext = list[tuple[str, str]]

#: Bodies the callers decode; other codes get none.
_BODIES: dict[int, bytes] = {
    RequestCode.GET_TOPIC_STATS_INFO: b'{"offsetTable":{}}',
    RequestCode.GET_CONSUME_STATS: b'{"offsetTable":{},"consumeTps":0.0}',
    RequestCode.GET_CONSUMER_LIST_BY_GROUP: b'{"consumerIdList":["c1"]}',
}


@dataclass
class Recorder:
    """What arrived: (code, extFields items in wire order) per request."""

    server: RemotingServer
    seen: list[tuple[int, Ext]] = field(default_factory=list)

    @property
    def addr(self) -> str:
        return self.server.address

    def take(self) -> tuple[int, Ext]:
        assert len(self.seen) == 1, self.seen
        return self.seen.pop()


@pytest.fixture
async def recorder() -> AsyncIterator[Recorder]:
    registry = ProcessorRegistry()
    server = RemotingServer(registry, name="recorder")
    rec = Recorder(server)

    async def record(ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
        rec.seen.append((req.code, list((req.ext_fields or {}).items())))
        return req.make_response(ResponseCode.SUCCESS, body=_BODIES.get(req.code))

    registry.register_default(record)
    await server.start()
    try:
        yield rec
    finally:
        await server.stop(timeout_s=2.0)


def _check(got: tuple[int, Ext], code: int, expected: dict[str, str], *, ordered: bool) -> None:
    assert got[0] == code
    assert dict(got[1]) == expected
    if ordered:
        assert got[1] == list(expected.items())


_MQ = MessageQueue(topic="T", broker_name="broker-a", queue_id=3)

Call = Callable[[AdminClient, str], Awaitable[object]]

# (request, the AdminClient call, code, the extFields the hand-built dict had, ordered)
_ADMIN_CASES: list[tuple[str, Call, int, dict[str, str], bool]] = [
    (
        "topic_route",
        lambda a, _: a.topic_route("T"),
        RequestCode.GET_ROUTEINFO_BY_TOPIC,
        {"topic": "T"},
        True,
    ),
    (
        "put_kv_config",
        lambda a, _: a.put_kv_config("NS", "k", "v"),
        RequestCode.PUT_KV_CONFIG,
        {"namespace": "NS", "key": "k", "value": "v"},
        True,
    ),
    (
        "delete_kv_config",
        lambda a, _: a.delete_kv_config("NS", "k"),
        RequestCode.DELETE_KV_CONFIG,
        {"namespace": "NS", "key": "k"},
        True,
    ),
    (
        "delete_topic_in_namesrv",
        lambda a, _: a.delete_topic_in_namesrv("T", "C"),
        RequestCode.DELETE_TOPIC_IN_NAMESRV,
        {"topic": "T", "clusterName": "C"},
        True,
    ),
    (
        "create_topic",
        lambda a, b: a.create_topic(b, TopicSpec(topic="T", read_queue_nums=4, perm=4)),
        RequestCode.UPDATE_AND_CREATE_TOPIC,
        {
            "topic": "T",
            "defaultTopic": "TBW102",
            "readQueueNums": "4",
            "writeQueueNums": "8",
            "perm": "4",
            "topicFilterType": "SINGLE_TAG",
            "topicSysFlag": "0",
            "order": "false",
        },
        True,
    ),
    (
        "create_topic_ordered_with_attributes",
        lambda a, b: a.create_topic(
            b, TopicSpec(topic="T", topic_sys_flag=1, order=True, attributes="+a=b")
        ),
        RequestCode.UPDATE_AND_CREATE_TOPIC,
        {
            "topic": "T",
            "defaultTopic": "TBW102",
            "readQueueNums": "8",
            "writeQueueNums": "8",
            "perm": "6",
            "topicFilterType": "SINGLE_TAG",
            "topicSysFlag": "1",
            "order": "true",
            "attributes": "+a=b",
        },
        True,
    ),
    (
        "create_topic_empty_attributes",
        lambda a, b: a.create_topic(b, TopicSpec(topic="T", attributes="")),
        RequestCode.UPDATE_AND_CREATE_TOPIC,
        {
            "topic": "T",
            "defaultTopic": "TBW102",
            "readQueueNums": "8",
            "writeQueueNums": "8",
            "perm": "6",
            "topicFilterType": "SINGLE_TAG",
            "topicSysFlag": "0",
            "order": "false",
        },
        True,
    ),
    (
        "delete_topic_in_broker",
        lambda a, b: a.delete_topic_in_broker(b, "T"),
        RequestCode.DELETE_TOPIC_IN_BROKER,
        {"topic": "T"},
        True,
    ),
    (
        "topic_stats",
        lambda a, b: a.topic_stats(b, "T"),
        RequestCode.GET_TOPIC_STATS_INFO,
        {"topic": "T"},
        True,
    ),
    (
        "consume_stats",
        lambda a, b: a.consume_stats(b, "G", "T"),
        RequestCode.GET_CONSUME_STATS,
        {"consumerGroup": "G", "topic": "T"},
        True,
    ),
    (
        "consume_stats_all_topics",
        lambda a, b: a.consume_stats(b, "G", None),
        RequestCode.GET_CONSUME_STATS,
        {"consumerGroup": "G"},
        True,
    ),
    (
        "broker_stats_data",
        lambda a, b: a.broker_stats_data(b, "TOPIC_PUT_NUMS", "T"),
        RequestCode.VIEW_BROKER_STATS_DATA,
        {"statsName": "TOPIC_PUT_NUMS", "statsKey": "T"},
        True,
    ),
    (
        "topic_consume_by_who",
        lambda a, b: a.topic_consume_by_who(b, "T"),
        RequestCode.QUERY_TOPIC_CONSUME_BY_WHO,
        {"topic": "T"},
        True,
    ),
    (
        "reset_offset_by_time",
        lambda a, b: a.reset_offset(b, "T", "G", 1700000000000),
        RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
        {"topic": "T", "group": "G", "timestamp": "1700000000000", "isForce": "true"},
        True,
    ),
    (
        "reset_offset_of_one_queue",
        lambda a, b: a.reset_offset(b, "T", "G", -1, queue_id=2, offset=42),
        RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
        {
            "topic": "T",
            "group": "G",
            "timestamp": "-1",
            "isForce": "true",
            "queueId": "2",
            "offset": "42",
        },
        True,
    ),
    (
        "search_offset",
        lambda a, b: a.search_offset(b, "T", 1, 1700000000000),
        RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
        {"topic": "T", "queueId": "1", "timestamp": "1700000000000"},
        True,
    ),
    (
        "view_message",
        lambda a, b: a.view_message(b, 123456789012),
        RequestCode.VIEW_MESSAGE_BY_ID,
        {"offset": "123456789012"},
        True,
    ),
    (
        "query_message",
        lambda a, b: a.query_message(b, "T", "K", max_num=32, begin=0, end=99, unique=False),
        RequestCode.QUERY_MESSAGE,
        {"topic": "T", "key": "K", "maxNum": "32", "beginTimestamp": "0", "endTimestamp": "99"},
        True,
    ),
    (
        "query_message_unique",
        lambda a, b: a.query_message(b, "T", "K", max_num=32, begin=0, end=99, unique=True),
        RequestCode.QUERY_MESSAGE,
        {
            "topic": "T",
            "key": "K",
            "maxNum": "32",
            "beginTimestamp": "0",
            "endTimestamp": "99",
            "_UNIQUE_KEY_QUERY": "true",
        },
        True,
    ),
    (
        "pull_one",
        lambda a, b: a.pull_one(b, "broker-a", _MQ, 7),
        RequestCode.PULL_MESSAGE,
        {
            "consumerGroup": "TOOLS_CONSUMER",
            "topic": "T",
            "queueId": "3",
            "queueOffset": "7",
            "maxMsgNums": "1",
            "sysFlag": "4",
            "commitOffset": "0",
            "suspendTimeoutMillis": "0",
            "subscription": "*",
            "subVersion": "0",
            "expressionType": "TAG",
            "bname": "broker-a",
        },
        # The header's field order puts subVersion before subscription; only the order moved.
        False,
    ),
]


@pytest.mark.parametrize(
    ("call", "code", "expected", "ordered"),
    [c[1:] for c in _ADMIN_CASES],
    ids=[c[0] for c in _ADMIN_CASES],
)
async def test_admin_request_ext_fields_unchanged(
    recorder: Recorder, call: Call, code: int, expected: dict[str, str], ordered: bool
) -> None:
    """1. An AdminClient whose NameServer and broker are the recorder makes one request.
    2. The recorder saw exactly that request, with the extFields the hand-built dict had."""
    admin = AdminClient(recorder.addr, timeout_s=3.0)
    try:
        await call(admin, recorder.addr)
    finally:
        await admin.close()
    _check(recorder.take(), code, expected, ordered=ordered)


@pytest.fixture
async def client(recorder: Recorder) -> AsyncIterator[ClientInstance]:
    instance = ClientInstance(recorder.addr, instance_name="wire", name="wire-test")
    instance.routes.brokers["broker-a"] = {0: recorder.addr}
    try:
        yield instance
    finally:
        await instance.close()


@pytest.mark.parametrize("with_subscription", [True, False])
async def test_pull_message_ext_fields_unchanged(
    recorder: Recorder, client: ClientInstance, with_subscription: bool
) -> None:
    """1. pull_message with and without FLAG_SUBSCRIPTION.
    2. The PULL_MESSAGE extFields are the hand-built ones; ``subscription`` only with the flag."""
    sub = build_subscription("T", "a || b", version=1700000000123)
    flag = FLAG_COMMIT_OFFSET | FLAG_SUSPEND | (FLAG_SUBSCRIPTION if with_subscription else 0)
    await pull_message(
        client, recorder.addr, "G", _MQ, 5, sub=sub, max_nums=32, sys_flag=flag,
        commit_offset=4, suspend_timeout_ms=15000, timeout_s=3.0,
    )  # fmt: skip
    expected = {
        "consumerGroup": "G",
        "topic": "T",
        "queueId": "3",
        "queueOffset": "5",
        "maxMsgNums": "32",
        "sysFlag": str(flag),
        "commitOffset": "4",
        "suspendTimeoutMillis": "15000",
        "subVersion": "1700000000123",
        "expressionType": "TAG",
        "bname": "broker-a",
    }
    if with_subscription:
        expected["subscription"] = "a || b"
    _check(recorder.take(), RequestCode.PULL_MESSAGE, expected, ordered=True)


async def test_consumer_offset_requests_ext_fields_unchanged(
    recorder: Recorder, client: ClientInstance
) -> None:
    """1. QUERY_CONSUMER_OFFSET, UPDATE_CONSUMER_OFFSET, GET_MAX/MIN_OFFSET and
       SEARCH_OFFSET_BY_TIMESTAMP of one queue.
    2. Each carries the hand-built extFields, ``bname`` included."""
    await query_consumer_offset(client, "G", _MQ)
    _check(
        recorder.take(),
        RequestCode.QUERY_CONSUMER_OFFSET,
        {"consumerGroup": "G", "topic": "T", "queueId": "3", "bname": "broker-a"},
        ordered=True,
    )
    await update_consumer_offset(client, "G", _MQ, 99)
    _check(
        recorder.take(),
        RequestCode.UPDATE_CONSUMER_OFFSET,
        {
            "consumerGroup": "G",
            "topic": "T",
            "queueId": "3",
            "commitOffset": "99",
            "bname": "broker-a",
        },
        ordered=True,
    )
    queue_only = {"topic": "T", "queueId": "3", "bname": "broker-a"}
    for code in (RequestCode.GET_MAX_OFFSET, RequestCode.GET_MIN_OFFSET):
        await queue_offset(client, _MQ, code)
        _check(recorder.take(), code, queue_only, ordered=True)
    await queue_offset(client, _MQ, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, 1700000000000)
    _check(
        recorder.take(),
        RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
        {**queue_only, "timestamp": "1700000000000"},
        # The header's field order puts timestamp before bname; only the order moved.
        ordered=False,
    )


@pytest.mark.parametrize(
    ("producer", "consumer"), [("P", None), (None, "G"), ("P", "G"), (None, None)]
)
async def test_unregister_client_ext_fields_unchanged(
    recorder: Recorder, client: ClientInstance, producer: str | None, consumer: str | None
) -> None:
    """1. unregister_all with each combination of groups.
    2. UNREGISTER_CLIENT carries clientID and only the groups given."""
    await client.unregister_all(producer, consumer)
    expected = {"clientID": client.client_id}
    if producer is not None:
        expected["producerGroup"] = producer
    if consumer is not None:
        expected["consumerGroup"] = consumer
    _check(recorder.take(), RequestCode.UNREGISTER_CLIENT, expected, ordered=True)


async def test_route_fetch_ext_fields_unchanged(recorder: Recorder, client: ClientInstance) -> None:
    """1. The route cache fetches a topic's route.
    2. GET_ROUTEINFO_BY_TOPIC carries only the topic."""
    await client.routes.update("T")
    _check(recorder.take(), RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"}, ordered=True)


async def test_push_consumer_requests_ext_fields_unchanged(recorder: Recorder) -> None:
    """1. A push consumer asks for its group's consumer ids, then sends a message back.
    2. GET_CONSUMER_LIST_BY_GROUP and CONSUMER_SEND_MSG_BACK carry the hand-built extFields."""
    consumer = PushConsumer("G", recorder.addr, instance_name="wire", max_reconsume_times=5)
    consumer._client.routes.brokers["b"] = {0: recorder.addr}
    try:
        await consumer._consumer_ids(MessageQueue(topic="T", broker_name="b", queue_id=0))
        _check(
            recorder.take(),
            RequestCode.GET_CONSUMER_LIST_BY_GROUP,
            {"consumerGroup": "G"},
            ordered=True,
        )
        msg = message_at(7, props={"RETRY_TOPIC": "ORIG"})
        assert await consumer._send_back(msg, 3)
        _check(
            recorder.take(),
            RequestCode.CONSUMER_SEND_MSG_BACK,
            {
                "offset": "700",
                "group": "G",
                "delayLevel": "3",
                "originMsgId": "7",
                "originTopic": "ORIG",
                "unitMode": "false",
                "maxReconsumeTimes": "5",
                "bname": "b",
            },
            ordered=True,
        )
    finally:
        await consumer._client.close()
