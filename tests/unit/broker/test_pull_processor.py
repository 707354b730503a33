"""Pull, heartbeat and consumer-manage processors over an in-memory store."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from rocketpy.broker.long_polling import PullRequestHoldService
from rocketpy.common.aio import wait_until
from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.remoting.protocol.body.heartbeat import (
    ConsumerData,
    HeartbeatData,
    SubscriptionData,
    encode_heartbeat,
)
from rocketpy.remoting.protocol.command import RemotingCommand
from tests.unit.broker.support import Harness, decode_records
from tests.unit.broker.test_send_processor import v2

MakeHarness = Callable[..., Harness]


def _heartbeat(group: str, *subs: SubscriptionData) -> bytes:
    return encode_heartbeat(
        HeartbeatData(
            client_id="10.0.0.5@1#1",
            consumer_data_set=(ConsumerData(group_name=group, subscription_data_set=subs),),
        )
    )


def _pull(topic: str, offset: int, *, sys_flag: int = 0, **extra: str) -> dict[str, str]:
    ext = {
        "consumerGroup": "g",
        "topic": topic,
        "queueId": "0",
        "queueOffset": str(offset),
        "maxMsgNums": "32",
        "sysFlag": str(sys_flag),
        "commitOffset": "0",
        "suspendTimeoutMillis": "15000",
        "subVersion": "0",
    }
    ext.update(extra)
    return ext


async def _send(h: Harness, topic: str, tag: str) -> None:
    resp = await h.call(
        RequestCode.SEND_MESSAGE_V2, v2(topic, props={"UNIQ_KEY": tag, "TAGS": tag}), tag.encode()
    )
    assert resp is not None
    assert resp.code == ResponseCode.SUCCESS


async def test_heartbeat_registers_consumer_and_creates_retry_topic(harness: MakeHarness) -> None:
    """HEART_BEAT with group g subscribed to T: %RETRY%g exists (1 queue, RW), the consumer list
    has the client id, the response carries IS_SUPPORT_HEART_BEAT_V2; an unknown group's
    consumer list is SYSTEM_ERROR "no consumer for this group"."""
    h = harness()
    resp = await h.call(RequestCode.HEART_BEAT, None, _heartbeat("g", SubscriptionData(topic="T")))
    assert resp is not None
    assert resp.ext("IS_SUPPORT_HEART_BEAT_V2") == "true"
    retry = h.rt.topics.select("%RETRY%g")
    assert retry is not None
    assert (retry.read_queue_nums, retry.perm) == (1, 6)
    resp = await h.call(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "g"})
    assert resp is not None
    assert resp.body == b'{"consumerIdList":["10.0.0.5@1#1"]}'
    resp = await h.call(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "nobody"})
    assert resp is not None
    assert (resp.code, resp.remark) == (
        ResponseCode.SYSTEM_ERROR,
        "no consumer for this group, nobody",
    )


async def test_pull_checks_and_status_mapping(harness: MakeHarness) -> None:
    """1. Pull before any heartbeat -> SUBSCRIPTION_NOT_EXIST. 2. Unknown topic ->
    TOPIC_NOT_EXIST. 3. Queue 9 -> INVALID_PARAMETER. 4. Heartbeat for T with TagA.
    5. Pull an empty T from 0 -> PULL_NOT_FOUND, from 5 -> PULL_OFFSET_MOVED (next 0).
    6. After TagB then TagA, pull from 0 -> SUCCESS with only the TagA record, header filled;
    pull at the end -> PULL_NOT_FOUND remark OFFSET_OVERFLOW_ONE."""
    h = harness()
    await _send(h, "T", "TagX")
    h.store.queues[("T", 0)].clear()
    resp = await h.call(RequestCode.PULL_MESSAGE, _pull("T", 0))
    assert resp is not None
    assert resp.code == ResponseCode.SUBSCRIPTION_NOT_EXIST
    resp = await h.call(RequestCode.PULL_MESSAGE, _pull("Nope", 0))
    assert resp is not None
    assert resp.code == ResponseCode.TOPIC_NOT_EXIST
    resp = await h.call(RequestCode.PULL_MESSAGE, _pull("T", 0, queueId="9"))
    assert resp is not None
    assert resp.code == ResponseCode.INVALID_PARAMETER
    sub = SubscriptionData(topic="T", sub_string="TagA", tags_set=("TagA",), code_set=(2598919,))
    await h.call(RequestCode.HEART_BEAT, None, _heartbeat("g", sub))
    resp = await h.call(RequestCode.PULL_MESSAGE, _pull("T", 0))
    assert resp is not None
    assert (resp.code, resp.remark) == (ResponseCode.PULL_NOT_FOUND, "NO_MESSAGE_IN_QUEUE")
    resp = await h.call(RequestCode.PULL_MESSAGE, _pull("T", 5))
    assert resp is not None
    assert (resp.code, resp.ext("nextBeginOffset")) == (ResponseCode.PULL_OFFSET_MOVED, "0")
    await _send(h, "T", "TagB")
    await _send(h, "T", "TagA")
    resp = await h.call(RequestCode.PULL_MESSAGE, _pull("T", 0))
    assert resp is not None
    assert resp.code == ResponseCode.SUCCESS
    assert resp.body is not None
    assert [m.body for m in decode_records(resp.body)] == [b"TagA"]
    assert {k: resp.ext(k) for k in ("nextBeginOffset", "minOffset", "maxOffset")} == {
        "nextBeginOffset": "2",
        "minOffset": "0",
        "maxOffset": "2",
    }
    assert resp.ext("suggestWhichBrokerId") == "0"
    resp = await h.call(RequestCode.PULL_MESSAGE, _pull("T", 2))
    assert resp is not None
    assert (resp.code, resp.remark) == (ResponseCode.PULL_NOT_FOUND, "OFFSET_OVERFLOW_ONE")


async def test_pull_with_subscription_flag_and_commit_offset(harness: MakeHarness) -> None:
    """ali-ons style: SUBSCRIPTION flag with 'TagA || TagB' needs no heartbeat; COMMIT_OFFSET
    stores commitOffset for the group; a bad expression type is refused."""
    h = harness()
    await _send(h, "T", "TagB")
    resp = await h.call(
        RequestCode.PULL_MESSAGE,
        _pull("T", 0, sys_flag=0x4 | 0x1, subscription="TagA || TagB", commitOffset="7"),
    )
    assert resp is not None
    assert resp.code == ResponseCode.SUCCESS
    assert h.rt.offsets.query_offset("g", "T", 0) == 7
    resp = await h.call(
        RequestCode.PULL_MESSAGE,
        _pull("T", 0, sys_flag=0x4, subscription="a > 1", expressionType="SQL92"),
    )
    assert resp is not None
    assert resp.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED


async def test_pull_long_polling_wakes_on_send(harness: MakeHarness) -> None:
    """1. Heartbeat, then a pull with SUSPEND at the end of the queue -> no response (parked).
    2. A message is sent to that queue.
    Expected: the parked pull is answered on its channel with SUCCESS and the new record."""
    h = harness()
    await h.call(RequestCode.HEART_BEAT, None, _heartbeat("g", SubscriptionData(topic="T")))
    await _send(h, "T", "TagA")
    hold = PullRequestHoldService(
        max_offset=h.store.max_offset_in_queue, wake_up=h.pull.wake_up, check_interval_ms=60_000
    )
    h.pull.attach(hold)
    h.store.add_arrival_listener(hold.notify_message_arriving)
    await hold.start()
    try:
        async with asyncio.timeout(5):
            assert await h.call(RequestCode.PULL_MESSAGE, _pull("T", 1, sys_flag=0x2)) is None
            assert len(hold) == 1
            await _send(h, "T", "TagB")
            await wait_until(lambda: bool(h.channel.sent), 2)
    finally:
        await hold.stop()
    woken: RemotingCommand = h.channel.sent[0]
    assert woken.code == ResponseCode.SUCCESS
    assert woken.ext("nextBeginOffset") == "2"


@pytest.mark.parametrize(
    ("committed", "zero_if_not_found", "queue_has_data", "expected"),
    [
        (5, None, True, (ResponseCode.SUCCESS, "5")),
        (None, "false", True, (ResponseCode.QUERY_NOT_FOUND, None)),
        (None, None, True, (ResponseCode.SUCCESS, "0")),
        (None, None, False, (ResponseCode.QUERY_NOT_FOUND, None)),
    ],
)
async def test_query_consumer_offset_rules(
    harness: MakeHarness,
    committed: int | None,
    zero_if_not_found: str | None,
    queue_has_data: bool,
    expected: tuple[int, str | None],
) -> None:
    """client-flows.md 4.2: committed -> it; none + setZeroIfNotFound=false -> QUERY_NOT_FOUND;
    none on a young queue with offset 0 in memory -> 0; none on an empty queue ->
    QUERY_NOT_FOUND."""
    h = harness()
    await _send(h, "T", "TagA")
    if not queue_has_data:
        h.store.queues[("T", 0)].clear()
    if committed is not None:
        h.rt.offsets.commit_offset("p", "g", "T", 0, committed)
    ext = {"consumerGroup": "g", "topic": "T", "queueId": "0"}
    if zero_if_not_found is not None:
        ext["setZeroIfNotFound"] = zero_if_not_found
    resp = await h.call(RequestCode.QUERY_CONSUMER_OFFSET, ext)
    assert resp is not None
    assert (resp.code, resp.ext("offset")) == expected


async def test_update_consumer_offset_needs_group_and_topic(harness: MakeHarness) -> None:
    """UPDATE_CONSUMER_OFFSET: unknown group -> SUBSCRIPTION_GROUP_NOT_EXIST, unknown topic ->
    TOPIC_NOT_EXIST, else stored (no monotonic check)."""
    h = harness(autoCreateSubscriptionGroup=False)
    ext = {"consumerGroup": "g", "topic": "T", "queueId": "0", "commitOffset": "3"}
    resp = await h.call(RequestCode.UPDATE_CONSUMER_OFFSET, ext)
    assert resp is not None
    assert resp.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
    ext["consumerGroup"] = "TOOLS_CONSUMER"
    resp = await h.call(RequestCode.UPDATE_CONSUMER_OFFSET, ext)
    assert resp is not None
    assert resp.code == ResponseCode.TOPIC_NOT_EXIST
    await _send(h, "T", "TagA")
    resp = await h.call(RequestCode.UPDATE_CONSUMER_OFFSET, ext)
    assert resp is not None
    assert resp.code == ResponseCode.SUCCESS
    assert h.rt.offsets.query_offset("TOOLS_CONSUMER", "T", 0) == 3
