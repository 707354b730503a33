"""The asyncio Producer against a real namesrv + broker: send, queue choice, batch, oneway."""

from __future__ import annotations

import asyncio
import time

import pytest

from rocketpy.broker.store_api import StoredMessage
from rocketpy.client.message import Message, MessageQueue, SendStatus
from rocketpy.client.producer import Producer
from rocketpy.common.errors import ClientError
from rocketpy.common.message.decoder import decode_offset_msg_id
from tests.helpers.broker_client import JavaLikeClient, decode_records
from tests.helpers.cluster import Cluster, unique

pytestmark = pytest.mark.process


async def _pull_all(cluster: Cluster, topic: str, queue_id: int) -> list[StoredMessage]:
    client = JavaLikeClient()
    try:
        response = await client.pull(
            cluster.broker_addr, "inspect", topic, 0, queue_id=queue_id, expression="*"
        )
        return list(decode_records(response.body or b""))
    finally:
        await client.close()


async def _pull_n(cluster: Cluster, topic: str, queue_id: int, n: int) -> list[StoredMessage]:
    """Pull the queue from 0 until ``n`` records are there (the consume queue is built by the
    broker's reput, shortly after SEND_OK)."""
    while len(records := await _pull_all(cluster, topic, queue_id)) < n:
        await asyncio.sleep(0.02)
    return records


async def test_producer_send_auto_creates_topic_and_round_robins(cluster: Cluster) -> None:
    """1. Start a Producer. 2. Send 8 messages with tags, keys and a user property to a topic the
    NameServer does not know. 3. Pull each of the 4 auto-created queues with a plain client.
    Expected: every send is SEND_OK with a 32-char UNIQ_KEY msg_id and an offset msg id naming the
    broker; queue ids cycle over 0..3 (2 messages each, offsets 0 and 1); the stored records carry
    TAGS, KEYS, the user property and the UNIQ_KEY the result reported."""
    topic = unique("ProducerT")
    producer = Producer(unique("pg"), cluster.namesrv_addr)
    await producer.start()
    try:
        async with asyncio.timeout(20):
            results = [
                await producer.send(
                    Message(
                        topic=topic,
                        body=f"m{i}".encode(),
                        tags="TagA",
                        keys=f"k{i}",
                        properties={"color": "red"},
                    )
                )
                for i in range(8)
            ]
    finally:
        await producer.shutdown()
    assert {r.status for r in results} == {SendStatus.SEND_OK}
    assert sorted(r.message_queue.queue_id for r in results) == [0, 0, 1, 1, 2, 2, 3, 3]
    assert sorted((r.message_queue.queue_id, r.queue_offset) for r in results) == [
        (q, o) for q in range(4) for o in range(2)
    ]
    host, port = cluster.broker_addr.rsplit(":", 1)
    assert decode_offset_msg_id(results[0].offset_msg_id)[0] == (host, int(port))
    assert all(len(r.msg_id) == 32 for r in results)
    assert len({r.msg_id for r in results}) == 8
    by_id = {r.msg_id: r for r in results}
    stored = []
    async with asyncio.timeout(10):
        for q in range(4):
            stored += await _pull_n(cluster, topic, q, 2)
    assert len(stored) == 8
    for rec in stored:
        props = rec.properties
        assert props["TAGS"] == "TagA"
        assert props["color"] == "red"
        assert by_id[props["UNIQ_KEY"]].message_queue.queue_id == rec.queue_id
        assert props["KEYS"] == "k" + rec.body.decode()[1:]


async def test_producer_send_to_queue_selector_batch_and_oneway(cluster: Cluster) -> None:
    """1. Send one message to queue 2 explicitly and one through a selector choosing queue 1.
    2. Send a batch of 3 messages. 3. Send one oneway message to queue 3. 4. Send an empty body.
    Expected: the explicit and selected queues are used; the batch lands on one queue with 3
    consecutive offsets and 3 comma-joined msg ids; the oneway message is stored; the empty body
    raises ClientError before anything is sent."""
    topic = unique("ProducerQ")
    producer = Producer(unique("pg"), cluster.namesrv_addr)
    await producer.start()
    try:
        async with asyncio.timeout(20):
            queues = await producer.fetch_publish_queues(topic)
            r1 = await producer.send(Message(topic=topic, body=b"q2"), queue=queues[2])
            r2 = await producer.send(
                Message(topic=topic, body=b"q1"), selector=lambda mqs, _m, arg: mqs[arg], arg=1
            )
            batch = await producer.send_batch(
                [Message(topic=topic, body=f"b{i}".encode(), tags="B") for i in range(3)],
                queue=queues[0],
            )
            await producer.send_oneway(Message(topic=topic, body=b"ow"), queue=queues[3])
            with pytest.raises(ClientError):
                await producer.send(Message(topic=topic, body=b""))
            stored_q3 = await _pull_n(cluster, topic, 3, 1)
            stored_q0 = await _pull_n(cluster, topic, 0, 3)
    finally:
        await producer.shutdown()
    assert r1.message_queue == MessageQueue(topic=topic, broker_name="broker-a", queue_id=2)
    assert r2.message_queue.queue_id == 1
    assert batch.message_queue.queue_id == 0
    assert batch.queue_offset == 0
    ids = batch.msg_id.split(",")
    assert len(ids) == 3
    assert len(batch.offset_msg_id.split(",")) == 3
    assert [r.body for r in stored_q0] == [b"b0", b"b1", b"b2"]
    assert [r.queue_offset for r in stored_q0] == [0, 1, 2]
    assert [r.properties["UNIQ_KEY"] for r in stored_q0] == ids
    assert [r.body for r in stored_q3] == [b"ow"]


async def test_producer_send_without_namesrv_fails() -> None:
    """1. Point a Producer at a NameServer address nobody listens on. 2. Send.
    Expected: ClientError (no name server answered), within the send timeout."""
    producer = Producer("pg", "127.0.0.1:1", send_timeout_s=1.0)
    await producer.start()
    try:
        async with asyncio.timeout(5):
            with pytest.raises(ClientError):
                await producer.send(Message(topic="T", body=b"x"))
    finally:
        await producer.shutdown()


async def test_producer_timer_message_delivered_at_deliver_time(cluster: Cluster) -> None:
    """1. Send a Message with deliver_time_ms 1.5 s ahead to queue 0. 2. Try a batch holding a
    timer message. Expected: SEND_OK; nothing on the queue before the time, the message (with
    TIMER_DELIVER_MS) on it within 1.5 s after (default timerPrecisionMs=1000); the batch is
    refused by the client."""
    topic = unique("TimerT")
    producer = Producer(unique("pg"), cluster.namesrv_addr)
    await producer.start()
    try:
        at = time.time_ns() // 1_000_000 + 1500
        async with asyncio.timeout(10):
            result = await producer.send(
                Message(topic=topic, body=b"later", deliver_time_ms=at),
                queue=MessageQueue(topic=topic, broker_name="broker-a", queue_id=0),
            )
            assert result.status == SendStatus.SEND_OK
            with pytest.raises(ClientError, match="timer messages are not supported"):
                await producer.send_batch([Message(topic=topic, body=b"x", deliver_time_ms=at)])
    finally:
        await producer.shutdown()
    async with asyncio.timeout(10):
        while not (records := await _pull_all(cluster, topic, 0)):
            assert time.time_ns() // 1_000_000 < at + 1500
            await asyncio.sleep(0.05)
    arrived = time.time_ns() // 1_000_000
    assert at <= arrived <= at + 1500
    assert [r.body for r in records] == [b"later"]
    assert records[0].properties["TIMER_DELIVER_MS"] == str(at)
