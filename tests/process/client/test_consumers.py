"""PullConsumer and PushConsumer against a real namesrv + broker (fast delay levels)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from rocketpy.client.message import Message, MessageExt
from rocketpy.client.producer import Producer
from rocketpy.client.pull_api import PullStatus
from rocketpy.client.pull_consumer import PullConsumer
from rocketpy.client.push_consumer import ConsumeOrderlyStatus, ConsumeStatus, PushConsumer
from rocketpy.common.aio import wait_until
from rocketpy.common.errors import ClientError, RemotingError
from tests.helpers.cluster import Cluster, unique

pytestmark = pytest.mark.process


@pytest.fixture
async def producer(cluster: Cluster) -> AsyncIterator[Producer]:
    p = Producer(unique("pg"), cluster.namesrv_addr)
    await p.start()
    try:
        yield p
    finally:
        await p.shutdown()


async def _create_topic(producer: Producer, topic: str) -> None:
    """Auto-create ``topic`` (4 queues) with one ``seed`` message (listeners ignore it)."""
    await producer.send(Message(topic=topic, body=b"seed"))


def _push(cluster: Cluster, group: str, topic: str, **kw: Any) -> PushConsumer:
    """A PushConsumer with test-speed timers (``topic`` is subscribed by the caller)."""
    return PushConsumer(
        group,
        cluster.namesrv_addr,
        rebalance_interval_s=1.0,
        persist_offset_interval_s=0.2,
        poll_namesrv_interval_s=0.5,
        pull_delay_on_error_s=0.2,
        **kw,
    )


async def test_pull_consumer_round_trip_offsets_and_tag_filter(
    cluster: Cluster, producer: Producer
) -> None:
    """1. Send 3 messages tagged A, B, A (with keys and a property) to queue 1 of a new topic.
    2. PullConsumer: fetch queues, pull queue 1 from 0 with "A", then with "*"; pull past the end;
    pull from an offset far beyond; read, store and read back the group's offset.
    Expected: 4 queues; "A" returns the two A messages (FOUND, next offset 3); "*" returns all 3
    with keys, property, MIN/MAX_OFFSET, UNIQ_KEY msg ids matching the send results; offset 3
    gives NO_NEW_MSG; offset 100 gives OFFSET_ILLEGAL; fetch_offset returns 0 before (young
    queue) and what was stored after."""
    topic = unique("PullT")
    consumer = PullConsumer(unique("cg"), cluster.namesrv_addr)
    await consumer.start()
    try:
        async with asyncio.timeout(20):
            queues = await producer.fetch_publish_queues(topic)
            sent = [
                await producer.send(
                    Message(
                        topic=topic,
                        body=f"b{i}".encode(),
                        tags=t,
                        keys=f"k{i}",
                        properties={"p": "v"},
                    ),
                    queue=queues[1],
                )
                for i, t in enumerate("ABA")
            ]
            mqs = await consumer.fetch_queues(topic)
            assert len(mqs) == 4
            mq = mqs[1]
            everything = await consumer.pull(mq, 0, block_s=1.0)
            while len(everything.msgs) < 3:  # the broker's reput makes them pullable shortly
                everything = await consumer.pull(mq, 0, block_s=1.0)
            only_a = await consumer.pull(mq, 0, expression="A")
            caught_up = await consumer.pull(mq, 3)
            illegal = await consumer.pull(mq, 100)
            before = await consumer.fetch_offset(mq)
            await consumer.update_offset(mq, 2)
            after = await consumer.fetch_offset(mq)
            assert await consumer.max_offset(mq) == 3
    finally:
        await consumer.shutdown()
    assert only_a.status is PullStatus.FOUND
    assert [m.body for m in only_a.msgs] == [b"b0", b"b2"]
    assert everything.next_begin_offset == 3
    assert [m.body for m in everything.msgs] == [b"b0", b"b1", b"b2"]
    assert [m.msg_id for m in everything.msgs] == [r.msg_id for r in sent]
    assert [m.offset_msg_id for m in everything.msgs] == [r.offset_msg_id for r in sent]
    first = everything.msgs[0]
    assert (first.keys, first.tags, first.properties["p"]) == ("k0", "A", "v")
    assert first.properties["MAX_OFFSET"] == "3"
    assert first.queue_offset == 0
    assert first.reconsume_times == 0
    assert first.store_timestamp >= first.born_timestamp - 1000
    assert caught_up.status is PullStatus.NO_NEW_MSG
    assert illegal.status is PullStatus.OFFSET_ILLEGAL
    # A new group on a young queue (min offset 0, still in memory) is told 0 (spec 4.2).
    assert (before, after) == (0, 2)


async def test_push_consumer_tag_filter_and_long_poll_latency(
    cluster: Cluster, producer: Producer
) -> None:
    """1. Create a topic. 2. Start a PushConsumer subscribed to "A || C" (from the first offset).
    3. Wait until it holds all 4 queues and its pulls are suspended. 4. Send A, B, C, then time a
    single A message sent while the consumer is parked.
    Expected: A and C arrive (B is filtered); the last message arrives within 200 ms of SEND_OK."""
    topic = unique("PushTag")
    await _create_topic(producer, topic)
    got: list[tuple[float, MessageExt]] = []

    async def listener(msgs: list[MessageExt]) -> ConsumeStatus:
        got.extend((time.monotonic(), m) for m in msgs if m.body != b"seed")
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = _push(cluster, unique("cg"), topic)
    consumer.subscribe(topic, "A || C")
    consumer.register_listener(listener)
    await consumer.start()
    try:
        async with asyncio.timeout(20):
            await wait_until(
                lambda: len([q for q in consumer.assigned_queues() if q.topic == topic]) == 4, 10
            )
            for tag in "ABC":
                await producer.send(Message(topic=topic, body=tag.encode(), tags=tag))
            await wait_until(lambda: len(got) >= 2, 10)
            await asyncio.sleep(0.3)  # let every queue's pull park on the broker again
            sent_at = time.monotonic()
            await producer.send(Message(topic=topic, body=b"late", tags="A"))
            await wait_until(lambda: len(got) >= 3, 5)
    finally:
        await consumer.shutdown()
    assert sorted(m.body for _, m in got) == [b"A", b"C", b"late"]
    assert got[-1][0] - sent_at < 0.2


async def test_push_consumer_reconsume_later_then_dlq(cluster: Cluster, producer: Producer) -> None:
    """1. A PushConsumer with max_reconsume_times=2 whose listener returns RECONSUME_LATER for
    message "retry-once" on its first delivery and always for "poison". 2. Send both.
    Expected: "retry-once" is delivered twice (reconsume_times 0 then 1, original topic restored);
    "poison" is delivered 3 times and then lands in %DLQ%group (pulled with a PullConsumer)."""
    topic = unique("PushRetry")
    group = unique("cg")
    await _create_topic(producer, topic)
    deliveries: list[MessageExt] = []

    async def listener(msgs: list[MessageExt]) -> ConsumeStatus:
        deliveries.extend(msgs)
        m = msgs[0]
        if m.body == b"poison" or (m.body == b"retry-once" and m.reconsume_times == 0):
            return ConsumeStatus.RECONSUME_LATER
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = _push(cluster, group, topic, max_reconsume_times=2)
    consumer.subscribe(topic)
    consumer.register_listener(listener)
    await consumer.start()
    dlq = PullConsumer(unique("dlqreader"), cluster.namesrv_addr, poll_namesrv_interval_s=0.5)
    await dlq.start()
    try:
        async with asyncio.timeout(30):
            await wait_until(
                lambda: len([q for q in consumer.assigned_queues() if q.topic == topic]) == 4, 10
            )
            await producer.send(Message(topic=topic, body=b"retry-once"))
            await producer.send(Message(topic=topic, body=b"poison"))
            await wait_until(lambda: sum(m.body == b"poison" for m in deliveries) >= 3, 25)
            dlq_topic = f"%DLQ%{group}"

            async def dlq_has_message() -> list[MessageExt]:
                while True:
                    try:
                        mq = (await dlq.fetch_queues(dlq_topic))[0]
                        result = await dlq.pull(mq, 0)
                        if result.msgs:
                            return result.msgs
                    except (ClientError, RemotingError):
                        pass  # the DLQ topic is not routable yet
                    await asyncio.sleep(0.1)

            dead = await dlq_has_message()
    finally:
        await dlq.shutdown()
        await consumer.shutdown()
    once = [m for m in deliveries if m.body == b"retry-once"]
    assert [m.reconsume_times for m in once] == [0, 1]
    assert {m.topic for m in once} == {topic}
    assert once[0].msg_id == once[1].msg_id
    poison = [m for m in deliveries if m.body == b"poison"]
    assert [m.reconsume_times for m in poison] == [0, 1, 2]
    assert [m.body for m in dead] == [b"poison"]


async def test_push_consumer_delay_level_message_waits(
    cluster: Cluster, producer: Producer
) -> None:
    """1. A PushConsumer on a new topic. 2. Send a message with delay level 2 (1 s here) and a
    normal one.
    Expected: the normal message arrives first; the delayed one at least ~1 s after its send."""
    topic = unique("PushDelay")
    await _create_topic(producer, topic)
    got: list[tuple[float, bytes]] = []

    async def listener(msgs: list[MessageExt]) -> ConsumeStatus:
        got.extend((time.monotonic(), m.body) for m in msgs if m.body != b"seed")
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = _push(cluster, unique("cg"), topic)
    consumer.subscribe(topic)
    consumer.register_listener(listener)
    await consumer.start()
    try:
        async with asyncio.timeout(20):
            await wait_until(
                lambda: len([q for q in consumer.assigned_queues() if q.topic == topic]) == 4, 10
            )
            sent_at = time.monotonic()
            await producer.send(Message(topic=topic, body=b"delayed", delay_level=2))
            await producer.send(Message(topic=topic, body=b"now"))
            await wait_until(lambda: len(got) >= 2, 10)
    finally:
        await consumer.shutdown()
    assert [b for _, b in got] == [b"now", b"delayed"]
    assert got[1][0] - sent_at >= 0.9


async def test_push_consumers_rebalance_share_queues_without_duplicates(
    cluster: Cluster, producer: Producer
) -> None:
    """1. Auto-create two topics of 4 queues each (8 queues for the group).
    2. Consumer A alone consumes batch 1 and commits. 3. Consumer B joins the group; wait until
    the 8 queues are split 4/4. 4. Send batch 2.
    Expected: every message of both batches is received exactly once in total; A and B hold
    disjoint queue sets covering all 8 queues."""
    group = unique("cg")
    topics = [unique("PushReb"), unique("PushReb")]
    for t in topics:
        await _create_topic(producer, t)
    got: list[tuple[str, bytes]] = []

    def make(name: str) -> PushConsumer:
        async def listener(msgs: list[MessageExt]) -> ConsumeStatus:
            got.extend((name, m.body) for m in msgs if m.body != b"seed")
            return ConsumeStatus.CONSUME_SUCCESS

        c = _push(cluster, group, topics[0])
        for t in topics:
            c.subscribe(t)
        c.register_listener(listener)
        return c

    def held(c: PushConsumer) -> set[object]:
        return {q for q in c.assigned_queues() if q.topic in topics}

    a, b = make("a"), make("b")
    await a.start()
    try:
        async with asyncio.timeout(40):
            await wait_until(lambda: len(held(a)) == 8, 10)
            batch1 = [f"one-{i}".encode() for i in range(24)]
            for i, body in enumerate(batch1):
                await producer.send(Message(topic=topics[i % 2], body=body))
            await wait_until(lambda: len(got) >= 24, 10)
            await asyncio.sleep(0.5)  # two offset persist rounds
            await b.start()
            await wait_until(lambda: len(held(a)) == 4 and len(held(b)) == 4, 15)
            batch2 = [f"two-{i}".encode() for i in range(24)]
            for i, body in enumerate(batch2):
                await producer.send(Message(topic=topics[i % 2], body=body))
            await wait_until(lambda: len(got) >= 48, 10)
            await asyncio.sleep(0.3)
            assert held(a).isdisjoint(held(b))
    finally:
        await b.shutdown()
        await a.shutdown()
    bodies = [body for _, body in got]
    assert sorted(bodies) == sorted(batch1 + batch2)
    assert {name for name, body in got if body.startswith(b"two")} == {"a", "b"}


async def test_push_consumer_orderly_keeps_queue_order(
    cluster: Cluster, producer: Producer
) -> None:
    """1. An orderly PushConsumer whose listener suspends the first delivery of message 3.
    2. Send 10 messages to queue 0.
    Expected: the delivered sequence is 0,1,2,3,3,4..9: nothing after 3 is delivered before 3 is
    consumed."""
    topic = unique("PushOrder")
    await _create_topic(producer, topic)
    seen: list[int] = []

    async def listener(msgs: list[MessageExt]) -> ConsumeOrderlyStatus:
        if msgs[0].body == b"seed":
            return ConsumeOrderlyStatus.SUCCESS
        n = int(msgs[0].body)
        seen.append(n)
        if n == 3 and seen.count(3) == 1:
            return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
        return ConsumeOrderlyStatus.SUCCESS

    consumer = _push(cluster, unique("cg"), topic, suspend_current_queue_s=0.2)
    consumer.subscribe(topic)
    consumer.register_listener(listener, orderly=True)
    await consumer.start()
    try:
        async with asyncio.timeout(20):
            await wait_until(
                lambda: len([q for q in consumer.assigned_queues() if q.topic == topic]) == 4, 10
            )
            queues = await producer.fetch_publish_queues(topic)
            for i in range(10):
                await producer.send(Message(topic=topic, body=str(i).encode()), queue=queues[2])
            await wait_until(lambda: len(seen) >= 11, 10)
    finally:
        await consumer.shutdown()
    assert seen == [0, 1, 2, 3, 3, 4, 5, 6, 7, 8, 9]
