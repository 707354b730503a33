"""Retry, DLQ, delayed delivery, orderly locks and consumer-group notifications over TCP."""

from __future__ import annotations

import asyncio

import pytest

from rocketpy.common.aio import wait_until
from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.remoting.protocol.body.broker import MessageQueue
from tests.helpers.broker_client import JavaLikeClient, decode_records, subscription
from tests.integration.broker.conftest import BrokerFactory, dispatched

pytestmark = pytest.mark.integration


async def test_broker_send_back_retry_delay_then_dlq(
    broker_factory: BrokerFactory, client: JavaLikeClient
) -> None:
    """1. A message on T; consumer g (maxReconsumeTimes 1) sends it back with delayLevel 1 (1 s).
    2. Wait for it in %RETRY%g. 3. Send the retried copy back again.
    Expected: the retry copy appears in %RETRY%g only after its delay, with RETRY_TOPIC=T and
    reconsumeTimes 1; the second send-back goes to %DLQ%g at once (reconsumeTimes 1 >= 1)."""
    broker = await broker_factory()
    addr = broker.address
    await client.send(addr, "T", b"payload", tags="TagA")
    await client.heartbeat(addr, "g", (subscription("T"),))
    await dispatched(broker, "T", 1)
    first = await client.pull(addr, "g", "T", 0)
    assert first.body is not None
    original = decode_records(first.body)[0]
    loop = asyncio.get_running_loop()
    sent_at = loop.time()
    back = {
        "offset": str(original.commit_log_offset),
        "group": "g",
        "delayLevel": "1",
        "originMsgId": "X",
        "originTopic": "T",
        "maxReconsumeTimes": "1",
    }
    assert (
        await client.call(addr, RequestCode.CONSUMER_SEND_MSG_BACK, back)
    ).code == ResponseCode.SUCCESS
    assert broker.store.max_offset_in_queue("%RETRY%g", 0) == 0
    async with asyncio.timeout(10):
        while broker.store.max_offset_in_queue("%RETRY%g", 0) == 0:
            await asyncio.sleep(0.02)
    assert loop.time() - sent_at >= 0.9
    retry = await client.pull(addr, "g", "%RETRY%g", 0)
    assert retry.body is not None
    copy = decode_records(retry.body)[0]
    assert (copy.body, copy.reconsume_times, copy.properties["RETRY_TOPIC"]) == (b"payload", 1, "T")
    back["offset"] = str(copy.commit_log_offset)
    assert (
        await client.call(addr, RequestCode.CONSUMER_SEND_MSG_BACK, back)
    ).code == ResponseCode.SUCCESS
    await dispatched(broker, "%DLQ%g", 1)
    dlq = await client.pull(addr, "g", "%DLQ%g", 0, expression="*")
    assert dlq.code == ResponseCode.SUCCESS
    assert dlq.body is not None
    assert decode_records(dlq.body)[0].reconsume_times == 2


async def test_broker_delay_level_delivered_after_delay(
    broker_factory: BrokerFactory, client: JavaLikeClient
) -> None:
    """A message with DELAY=2 (2 s with levels '1s 2s 3s') is invisible on T until about 2 s
    later, then readable with its UNIQ_KEY and without DELAY."""
    broker = await broker_factory()
    addr = broker.address
    loop = asyncio.get_running_loop()
    started = loop.time()
    resp = await client.send(addr, "T", b"later", props={"DELAY": "2", "UNIQ_KEY": "U-DELAY"})
    assert resp.code == ResponseCode.SUCCESS
    assert broker.store.max_offset_in_queue("T", 0) == 0
    async with asyncio.timeout(10):
        while broker.store.max_offset_in_queue("T", 0) == 0:
            await asyncio.sleep(0.02)
    assert loop.time() - started >= 1.9
    pulled = await client.pull(addr, "g", "T", 0, expression="*")
    assert pulled.body is not None
    msg = decode_records(pulled.body)[0]
    assert msg.properties["UNIQ_KEY"] == "U-DELAY"
    assert "DELAY" not in msg.properties


async def test_broker_lock_unlock_and_dlq_while_locked(
    broker_factory: BrokerFactory, client: JavaLikeClient
) -> None:
    """1. Client A locks T queues 0 and 1 for group g. 2. Client B asks for queue 1.
    3. A unlocks queue 1; B asks again.
    Expected: A gets both, B nothing, then B gets queue 1; while g holds locks a client-side
    %RETRY%g send is redirected to %DLQ%g (client-flows.md 2.3 step 4)."""
    broker = await broker_factory()
    addr = broker.address
    await client.send(addr, "T", b"x")
    q0 = MessageQueue(topic="T", broker_name="broker-a", queue_id=0)
    q1 = MessageQueue(topic="T", broker_name="broker-a", queue_id=1)
    other = JavaLikeClient()
    try:
        assert await client.lock(addr, "g", [q0, q1]) == (q0, q1)
        assert await other.lock(addr, "g", [q1]) == ()
        await client.lock(addr, "g", [q1], unlock=True)
        assert await other.lock(addr, "g", [q1]) == (q1,)
        resp = await client.send(addr, "%RETRY%g", b"r", reconsume_times=1, max_reconsume_times=16)
        assert resp.code == ResponseCode.SUCCESS
        await dispatched(broker, "%DLQ%g", 1)
    finally:
        await other.close()


async def test_broker_notifies_consumer_ids_changed(
    broker_factory: BrokerFactory, client: JavaLikeClient
) -> None:
    """1. Consumer A joins g. 2. Consumer B joins g. 3. B's connection closes.
    Expected: A receives NOTIFY_CONSUMER_IDS_CHANGED (oneway, consumerGroup=g) when B joins and
    again when B leaves; GET_CONSUMER_LIST_BY_GROUP lists both, then only A."""
    broker = await broker_factory()
    addr = broker.address
    await client.heartbeat(addr, "g", (subscription("T"),))
    joiner = JavaLikeClient()
    await joiner.heartbeat(addr, "g", (subscription("T"),))
    await wait_until(lambda: len(client.notified) >= 2, 5)
    note = client.notified[-1]
    assert (note.code, note.ext("consumerGroup"), note.is_oneway) == (
        RequestCode.NOTIFY_CONSUMER_IDS_CHANGED,
        "g",
        True,
    )
    resp = await client.call(addr, RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "g"})
    assert resp.body is not None
    assert sorted(resp.body.decode().split('"')[3::2]) == sorted(
        [client.client_id, joiner.client_id]
    )
    count = len(client.notified)
    await joiner.close()
    await wait_until(lambda: len(client.notified) > count, 5)
    group = broker.consumers.group("g")
    assert group is not None
    assert group.client_ids() == [client.client_id]
