"""A broker and a NameServer in-process on loopback, driven over TCP like a Java client."""

from __future__ import annotations

import asyncio

import pytest

from rocketpy.common import fastjson
from rocketpy.common.aio import wait_until
from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.common.message.batch_body import BatchItem
from rocketpy.common.message.decoder import decode_offset_msg_id
from rocketpy.common.message.properties import encode_properties
from rocketpy.namesrv.service import NamesrvService
from rocketpy.remoting.protocol.command import RemotingCommand
from tests.helpers.broker_client import JavaLikeClient, decode_records, subscription
from tests.integration.broker.conftest import BrokerFactory, dispatched

pytestmark = pytest.mark.integration


async def _cluster_info(client: JavaLikeClient, namesrv: NamesrvService) -> dict[str, object]:
    resp = await client.call(namesrv.address, RequestCode.GET_BROKER_CLUSTER_INFO)
    assert resp.code == ResponseCode.SUCCESS
    assert resp.body is not None
    info = fastjson.loads(resp.body)
    assert isinstance(info, dict)
    return info


async def _route_code(client: JavaLikeClient, namesrv: NamesrvService, topic: str) -> int:
    resp = await client.call(namesrv.address, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    return resp.code


async def test_broker_registers_and_auto_created_topic_becomes_routable(
    namesrv: NamesrvService, broker_factory: BrokerFactory, client: JavaLikeClient
) -> None:
    """1. Start a broker. 2. Read the NameServer's cluster info and the TBW102 route.
    3. Send to unknown TopicTest (auto-created from TBW102).
    Expected: the cluster lists broker-a at id 0 with the broker's real port; TBW102 is
    routable; TopicTest becomes routable without waiting for a registration period."""
    broker = await broker_factory(registerNameServerPeriod=60_000)
    info = await _cluster_info(client, namesrv)
    table = info["brokerAddrTable"]
    assert isinstance(table, dict)
    assert table["broker-a"]["brokerAddrs"] == {"0": broker.address}
    assert await _route_code(client, namesrv, "TBW102") == ResponseCode.SUCCESS
    assert await _route_code(client, namesrv, "TopicTest") == ResponseCode.TOPIC_NOT_EXIST
    resp = await client.send(broker.address, "TopicTest", b"hi")
    assert resp.code == ResponseCode.SUCCESS
    async with asyncio.timeout(5):
        while await _route_code(client, namesrv, "TopicTest") != ResponseCode.SUCCESS:
            await asyncio.sleep(0.02)


async def test_broker_produce_consume_round_trip(
    broker_factory: BrokerFactory, client: JavaLikeClient
) -> None:
    """1. Send 3 messages with tags, keys and a user property, and a batch of 2, to T queue 0.
    2. Heartbeat as push consumer g subscribed to T with 'TagA || TagB'. 3. Pull from 0.
    Expected: offsets 0..4 in order; the pull returns the TagA/TagB messages (not TagC nor the
    untagged batch) with body, keys and property intact; msgId decodes to this broker."""
    broker = await broker_factory()
    addr = broker.address
    for i, tag in enumerate(["TagA", "TagC", "TagB"]):
        resp = await client.send(
            addr, "T", f"m{i}".encode(), tags=tag, keys=f"k{i}", props={"color": "red"}
        )
        assert resp.code == ResponseCode.SUCCESS
        assert resp.ext("queueOffset") == str(i)
        assert decode_offset_msg_id(resp.ext("msgId") or "")[0] == ("127.0.0.1", broker.server.port)
    batch = [
        BatchItem(flag=0, body=b"b0", properties=encode_properties({"UNIQ_KEY": "B0"})),
        BatchItem(flag=0, body=b"b1", properties=encode_properties({"UNIQ_KEY": "B1"})),
    ]
    resp = await client.send_batch(addr, "T", batch)
    assert resp.code == ResponseCode.SUCCESS
    assert resp.ext("queueOffset") == "3"
    await client.heartbeat(addr, "g", (subscription("T", "TagA || TagB"),))
    await dispatched(broker, "T", 5)
    resp = await client.pull(addr, "g", "T", 0)
    assert resp.code == ResponseCode.SUCCESS
    assert resp.body is not None
    msgs = decode_records(resp.body)
    assert [m.body for m in msgs] == [b"m0", b"m2"]
    assert [m.properties["KEYS"] for m in msgs] == ["k0", "k2"]
    assert all(m.properties["color"] == "red" for m in msgs)
    assert resp.ext("nextBeginOffset") == "5"
    all_msgs = await client.pull(addr, "g2", "T", 0, expression="*")
    assert all_msgs.body is not None
    assert [m.body for m in decode_records(all_msgs.body)] == [
        b"m0",
        b"m1",
        b"m2",
        b"b0",
        b"b1",
    ]


async def test_broker_long_poll_wakes_on_arrival_and_times_out(
    broker_factory: BrokerFactory, client: JavaLikeClient
) -> None:
    """1. Consumer g pulls T/0 at the end with SUSPEND 10 s. 2. 100 ms later a producer sends.
    3. Another pull with SUSPEND 300 ms and nothing sent.
    Expected: the first pull returns SUCCESS with the new message well before 10 s; the second
    returns PULL_NOT_FOUND after about 300 ms."""
    broker = await broker_factory()
    addr = broker.address
    await client.send(addr, "T", b"first")
    await client.heartbeat(addr, "g", (subscription("T"),))
    await dispatched(broker, "T", 1)
    producer = JavaLikeClient()
    try:
        pull = asyncio.create_task(client.pull(addr, "g", "T", 1, suspend_ms=10_000))
        await wait_until(lambda: len(broker.hold) == 1, 5)
        assert (await producer.send(addr, "T", b"second")).code == ResponseCode.SUCCESS
        async with asyncio.timeout(3):
            resp = await pull
        assert resp.code == ResponseCode.SUCCESS
        assert resp.body is not None
        assert [m.body for m in decode_records(resp.body)] == [b"second"]
        loop = asyncio.get_running_loop()
        started = loop.time()
        resp = await client.pull(addr, "g", "T", 2, suspend_ms=300)
        elapsed = loop.time() - started
        assert resp.code == ResponseCode.PULL_NOT_FOUND
        assert 0.25 <= elapsed < 3
    finally:
        await producer.close()


async def test_broker_offsets_commit_and_query(
    broker_factory: BrokerFactory, client: JavaLikeClient
) -> None:
    """1. Send 2 messages. 2. Pull with COMMIT_OFFSET 1. 3. UPDATE_CONSUMER_OFFSET to 2 (oneway,
    as Java does). 4. QUERY_CONSUMER_OFFSET, GET_MAX_OFFSET, GET_MIN_OFFSET.
    Expected: the commit-on-pull stored 1; the oneway update stored 2; max offset 2, min 0."""
    broker = await broker_factory()
    addr = broker.address
    await client.send(addr, "T", b"a")
    await client.send(addr, "T", b"b")
    await client.heartbeat(addr, "g", (subscription("T"),))
    await dispatched(broker, "T", 2)
    await client.pull(addr, "g", "T", 1, commit_offset=1)
    query = {"consumerGroup": "g", "topic": "T", "queueId": "0"}
    assert (await client.call(addr, RequestCode.QUERY_CONSUMER_OFFSET, query)).ext("offset") == "1"
    conn = await client.remoting.connection(addr)
    conn.invoke_oneway(
        RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, {**query, "commitOffset": "2"})
    )
    await wait_until(lambda: broker.offsets.query_offset("g", "T", 0) == 2, 5)
    qid = {"topic": "T", "queueId": "0"}
    assert (await client.call(addr, RequestCode.GET_MAX_OFFSET, qid)).ext("offset") == "2"
    assert (await client.call(addr, RequestCode.GET_MIN_OFFSET, qid)).ext("offset") == "0"


async def test_broker_runtime_info_and_consume_stats(
    broker_factory: BrokerFactory, client: JavaLikeClient
) -> None:
    """1. Send 3 messages; pull 2, then the third with COMMIT_OFFSET 2. 2. GET_BROKER_RUNTIME_INFO
    and GET_CONSUME_STATS as mqadmin clusterList / consumerProgress do.
    Expected: msgPutTotalTodayNow 3, msgGetTotalTodayNow 3, the TPS and queue keys under both
    spellings mqadmin parses; consume stats show brokerOffset 3 and consumerOffset 2."""
    broker = await broker_factory()
    addr = broker.address
    for i in range(3):
        await client.send(addr, "T", f"m{i}".encode())
    await client.heartbeat(addr, "g", (subscription("T"),))
    await dispatched(broker, "T", 3)
    await client.pull(addr, "g", "T", 0, max_nums=2)
    await client.pull(addr, "g", "T", 2, max_nums=1, commit_offset=2)
    resp = await client.call(addr, RequestCode.GET_BROKER_RUNTIME_INFO)
    assert resp.body is not None
    table = fastjson.loads(resp.body)["table"]
    assert (table["msgPutTotalTodayNow"], table["msgGetTotalTodayNow"]) == ("3", "3")
    for key in ("putTps", "getTransferredTps", "getTransferedTps"):
        assert len(table[key].split(" ")) == 3
    assert table["sendThreadPoolQueueSize"] == "0"
    assert table["brokerVersionDesc"] == "V5_3_3"
    stats = await client.call(addr, RequestCode.GET_CONSUME_STATS, {"consumerGroup": "g"})
    assert stats.body is not None
    assert (
        b'{"brokerName":"broker-a","queueId":0,"topic":"T"}:{"brokerOffset":3,"consumerOffset":2'
        in stats.body
    )
