"""ScheduleMessageService delivery and the admin processor over an in-memory store."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from rocketpy.broker.config_files import delay_offset_path
from rocketpy.broker.processors.admin import AdminProcessor
from rocketpy.broker.schedule import ScheduleMessageService, parse_delay_levels
from rocketpy.common import fastjson
from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.common.errors import ConfigError
from rocketpy.remoting.protocol.body.config_shapes import DelayOffsetTable
from tests.unit.broker.support import Harness
from tests.unit.broker.test_send_processor import v2

MakeHarness = Callable[..., Harness]


def test_parse_delay_levels_units() -> None:
    """'1s 5s 1m 2h 1d' -> ms per 1-based level; garbage raises ConfigError."""
    assert parse_delay_levels("1s 5s 1m 2h 1d") == {
        1: 1_000,
        2: 5_000,
        3: 60_000,
        4: 7_200_000,
        5: 86_400_000,
    }
    with pytest.raises(ConfigError):
        parse_delay_levels("1x")


async def test_schedule_delivers_when_due_and_persists(
    harness: MakeHarness, tmp_path: Path
) -> None:
    """1. Send DELAY=2 (5 s) to T queue 1. 2. deliver_level(2) at +1 s, +2 s and at +5 s.
    Expected: not delivered early (returns the remaining 4000, then 3000 ms); delivered at
    +5 s into T queue 1 with DELAY removed, WAIT=false, same UNIQ_KEY and body;
    delayOffset.json has level 2 -> 1 after persist."""
    h = harness()
    props = {"UNIQ_KEY": "U9", "DELAY": "2", "TAGS": "TagA"}
    resp = await h.call(RequestCode.SEND_MESSAGE_V2, v2("T", queue_id=1, props=props), b"later")
    assert resp is not None
    assert resp.code == ResponseCode.SUCCESS
    svc = ScheduleMessageService(
        h.store,
        parse_delay_levels("1s 5s"),
        tmp_path,
        reput=h.store.put_message,
        clock=h.clock,
    )
    h.clock.advance(1_000)
    assert await svc.deliver_level(2) == 4_000
    assert ("T", 1) not in h.store.queues
    h.clock.advance(1_000)  # the remembered head: the same answer as a fresh read
    assert await svc.deliver_level(2) == 3_000
    assert ("T", 1) not in h.store.queues
    h.clock.advance(3_000)
    assert await svc.deliver_level(2) == 0
    real = h.store.queues[("T", 1)][0]
    assert real.body == b"later"
    assert "DELAY" not in real.properties
    assert (real.properties["WAIT"], real.properties["UNIQ_KEY"]) == ("false", "U9")
    async with asyncio.timeout(5):
        await svc.persist()
    assert fastjson.loads(delay_offset_path(tmp_path).read_text())["offsetTable"] == {"2": 1}
    assert svc.snapshot().offset_table == {2: 1}


async def test_schedule_goes_on_from_the_held_batch_in_order(
    harness: MakeHarness, tmp_path: Path
) -> None:
    """1. Send DELAY=1 (1 s) messages m0..m3 to T queue 0, 300 ms apart. 2. deliver_level(1)
    when m0 is due, then as each next one comes due; then move the level's progress back to 1
    (a slave's sync) and deliver again.
    Expected: each round delivers exactly the due ones, in order, and answers the time until
    the next; after the sync m1.. are delivered again from the store (the held batch is
    dropped, not replayed from a stale position)."""
    h = harness()
    for i in range(4):
        props = {"UNIQ_KEY": f"U{i}", "DELAY": "1"}
        resp = await h.call(RequestCode.SEND_MESSAGE_V2, v2("T", queue_id=0, props=props),
                            f"m{i}".encode())  # fmt: skip
        assert resp is not None
        assert resp.code == ResponseCode.SUCCESS
        h.clock.advance(300)
    svc = ScheduleMessageService(
        h.store, parse_delay_levels("1s"), tmp_path, reput=h.store.put_message, clock=h.clock
    )
    h.clock.advance(-200)  # m0 was sent 1000 ms ago: due now; m1 in 300 ms
    assert await svc.deliver_level(1) == 300
    h.clock.advance(100)
    assert await svc.deliver_level(1) == 200
    h.clock.advance(500)  # m1 and m2 due, m3 in 300 ms
    assert await svc.deliver_level(1) == 300
    assert [m.body for m in h.store.queues[("T", 0)]] == [b"m0", b"m1", b"m2"]
    await svc.apply_synced(DelayOffsetTable(offset_table={1: 1}))
    h.clock.advance(300)
    assert await svc.deliver_level(1) == 0
    delivered = [m.body for m in h.store.queues[("T", 0)]]
    assert delivered == [b"m0", b"m1", b"m2", b"m1", b"m2", b"m3"]
    assert svc.snapshot().offset_table == {1: 4}


def _admin(h: Harness) -> AdminProcessor:
    admin = AdminProcessor(h.rt, delay_offsets=lambda: DelayOffsetTable(offset_table={1: 4}))
    h.handlers.update(admin.handlers())
    return admin


async def test_admin_topic_attributes_alter(harness: MakeHarness) -> None:
    """1. UPDATE_AND_CREATE_TOPIC T with attributes '+message.type=FIFO'. 2. Again with
    '+reserve.time=5'. 3. With '-message.type'. 4. With '+message.type=FAST', then 'bad'.
    5. With '+message.type=MIXED' (enableMixedMessageType off).
    Expected: GET_TOPIC_CONFIG shows {message.type: FIFO}, then both keys, then reserve.time
    only; step 4 answers SYSTEM_ERROR with upstream's messages and changes nothing; step 5
    INVALID_PARAMETER 'MIXED message type is not supported.'."""
    h = harness()
    _admin(h)
    create = {
        "topic": "T",
        "defaultTopic": "TBW102",
        "readQueueNums": "4",
        "writeQueueNums": "4",
        "perm": "6",
        "topicFilterType": "SINGLE_TAG",
    }

    async def alter(attributes: str) -> tuple[int, str | None]:
        resp = await h.call(
            RequestCode.UPDATE_AND_CREATE_TOPIC, {**create, "attributes": attributes}
        )
        assert resp is not None
        return resp.code, resp.remark

    async def attributes() -> object:
        resp = await h.call(RequestCode.GET_TOPIC_CONFIG, {"topic": "T"})
        assert resp is not None
        assert resp.body is not None
        return fastjson.loads(resp.body)["attributes"]

    assert (await alter("+message.type=FIFO"))[0] == ResponseCode.SUCCESS
    assert await attributes() == {"message.type": "FIFO"}
    assert (await alter("+reserve.time=5"))[0] == ResponseCode.SUCCESS
    assert await attributes() == {"message.type": "FIFO", "reserve.time": "5"}
    assert (await alter("-message.type"))[0] == ResponseCode.SUCCESS
    assert await attributes() == {"reserve.time": "5"}
    assert await alter("+message.type=FAST") == (
        ResponseCode.SYSTEM_ERROR,
        "value is not in set: [DELAY, FIFO, MIXED, NORMAL, TRANSACTION, UNSPECIFIED]",
    )
    assert await alter("bad") == (
        ResponseCode.SYSTEM_ERROR,
        "delete attribute format is wrong: bad",
    )
    assert await attributes() == {"reserve.time": "5"}
    assert await alter("+message.type=MIXED") == (
        ResponseCode.INVALID_PARAMETER,
        "MIXED message type is not supported.",
    )
    h2 = harness(enableMixedMessageType=True)
    _admin(h2)
    resp = await h2.call(
        RequestCode.UPDATE_AND_CREATE_TOPIC, {**create, "attributes": "+message.type=MIXED"}
    )
    assert resp is not None
    assert resp.code == ResponseCode.SUCCESS
    found = h2.rt.topics.select("T")
    assert found is not None
    assert found.attributes == {"message.type": "MIXED"}


async def test_admin_get_subscription_group_config(harness: MakeHarness) -> None:
    """1. GET_SUBSCRIPTIONGROUP_CONFIG for a group made orderly. 2. For an unknown group with
    autoCreateSubscriptionGroup off. 3. With it on.
    Expected: the group's JSON with consumeMessageOrderly true; SUBSCRIPTION_GROUP_NOT_EXIST
    'No group in this broker'; with auto-creation the group is created, as upstream's
    findSubscriptionGroupConfig does."""
    h = harness(autoCreateSubscriptionGroup=False)
    _admin(h)
    body = fastjson.dumps({"groupName": "gOrder", "consumeMessageOrderly": True}).encode()
    resp = await h.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body)
    assert resp is not None
    assert resp.code == ResponseCode.SUCCESS
    resp = await h.call(RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG, {"group": "gOrder"})
    assert resp is not None
    assert resp.code == ResponseCode.SUCCESS
    assert resp.body is not None
    got = fastjson.loads(resp.body)
    assert (got["groupName"], got["consumeMessageOrderly"]) == ("gOrder", True)
    resp = await h.call(RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG, {"group": "nope"})
    assert resp is not None
    assert (resp.code, resp.remark) == (
        ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
        "No group in this broker",
    )
    assert h.rt.groups.get("nope") is None
    h2 = harness()
    _admin(h2)
    resp = await h2.call(RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG, {"group": "fresh"})
    assert resp is not None
    assert resp.code == ResponseCode.SUCCESS
    assert h2.rt.groups.get("fresh") is not None


async def test_admin_topic_create_update_delete(harness: MakeHarness) -> None:
    """UPDATE_AND_CREATE_TOPIC creates T (8/8 perm 6); system topics are refused; GET_TOPIC_CONFIG
    returns it; GET_ALL_TOPIC_CONFIG has the wrapper keys; DELETE_TOPIC_IN_BROKER removes it."""
    h = harness()
    _admin(h)
    create = {
        "topic": "T",
        "defaultTopic": "TBW102",
        "readQueueNums": "8",
        "writeQueueNums": "8",
        "perm": "6",
        "topicFilterType": "SINGLE_TAG",
        "order": "false",
    }
    resp = await h.call(RequestCode.UPDATE_AND_CREATE_TOPIC, create)
    assert resp is not None
    assert resp.code == ResponseCode.SUCCESS
    resp = await h.call(RequestCode.UPDATE_AND_CREATE_TOPIC, {**create, "topic": "TBW102"})
    assert resp is not None
    assert resp.code == ResponseCode.INVALID_PARAMETER
    resp = await h.call(RequestCode.GET_TOPIC_CONFIG, {"topic": "T"})
    assert resp is not None
    assert resp.body is not None
    assert fastjson.loads(resp.body)["writeQueueNums"] == 8
    resp = await h.call(RequestCode.GET_ALL_TOPIC_CONFIG)
    assert resp is not None
    assert resp.body is not None
    body = fastjson.loads(resp.body)
    assert list(body) == [
        "dataVersion",
        "mappingDataVersion",
        "topicConfigTable",
        "topicQueueMappingDetailMap",
        "topicQueueMappingInfoMap",
    ]
    assert "T" in body["topicConfigTable"]
    resp = await h.call(RequestCode.GET_ALL_DELAY_OFFSET)
    assert resp is not None
    assert resp.body == b'{"offsetTable":{1:4}}'
    resp = await h.call(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "T"})
    assert resp is not None
    assert resp.code == ResponseCode.SUCCESS
    assert h.rt.topics.select("T") is None


async def test_admin_consume_stats_and_server_side_reset(harness: MakeHarness) -> None:
    """1. Three messages on T queue 0; group g committed 1. 2. GET_CONSUME_STATS.
    3. INVOKE_BROKER_TO_RESET_OFFSET to timestamp 0.
    Expected: stats show brokerOffset 3 / consumerOffset 1 for queue 0; the reset answers
    {queue 0 -> 0}, the committed offset is 0 and the next pull gets PULL_OFFSET_MOVED with
    nextBeginOffset 0."""
    h = harness()
    _admin(h)
    for _ in range(3):
        await h.call(RequestCode.SEND_MESSAGE_V2, v2("T"), b"x")
    h.rt.groups.find("g")
    h.rt.offsets.commit_offset("p", "g", "T", 0, 1)
    resp = await h.call(RequestCode.GET_CONSUME_STATS, {"consumerGroup": "g", "topic": "T"})
    assert resp is not None
    assert resp.body is not None
    assert (
        b'{"brokerName":"broker-a","queueId":0,"topic":"T"}:{"brokerOffset":3,"consumerOffset":1'
        in resp.body
    )
    reset = {"topic": "T", "group": "g", "timestamp": "0", "isForce": "true", "queueId": "-1"}
    resp = await h.call(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, reset)
    assert resp is not None
    assert resp.code == ResponseCode.SUCCESS
    assert resp.body is not None
    assert b'{"brokerName":"broker-a","queueId":0,"topic":"T"}:0' in resp.body
    assert h.rt.offsets.query_offset("g", "T", 0) == 0
    pull = {
        "consumerGroup": "g",
        "topic": "T",
        "queueId": "0",
        "queueOffset": "1",
        "maxMsgNums": "32",
        "sysFlag": "4",
        "commitOffset": "0",
        "suspendTimeoutMillis": "0",
        "subVersion": "0",
        "subscription": "*",
    }
    resp = await h.call(RequestCode.PULL_MESSAGE, pull)
    assert resp is not None
    assert (resp.code, resp.ext("nextBeginOffset")) == (ResponseCode.PULL_OFFSET_MOVED, "0")
