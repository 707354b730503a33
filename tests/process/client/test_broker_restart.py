"""Producer and PushConsumer across a broker restart (SYNC_FLUSH): SIGTERM and SIGKILL."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest

from rocketpy.client.message import Message, MessageExt, SendStatus
from rocketpy.client.producer import Producer
from rocketpy.client.push_consumer import ConsumeStatus, PushConsumer
from rocketpy.common.aio import wait_until
from rocketpy.common.errors import ClientError, RemotingError
from tests.helpers.cluster import FAST_DELAY_LEVELS, start_cluster
from tests.helpers.processes import start_broker

pytestmark = pytest.mark.process

BROKER_EXTRA = "flushDiskType=SYNC_FLUSH\nflushConsumerOffsetInterval=100\n"


def _consumer(namesrv: str, group: str, topic: str, got: list[bytes]) -> PushConsumer:
    async def listener(msgs: list[MessageExt]) -> ConsumeStatus:
        got.extend(m.body for m in msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        group,
        namesrv,
        rebalance_interval_s=0.5,
        persist_offset_interval_s=0.1,
        poll_namesrv_interval_s=0.3,
        pull_delay_on_error_s=0.1,
    )
    consumer.subscribe(topic)
    consumer.register_listener(listener)
    return consumer


async def _keep_sending(
    producer: Producer, topic: str, ok: list[bytes], stop: asyncio.Event
) -> None:
    """Send ``live-<n>`` messages until ``stop``; record the bodies that got SEND_OK."""
    n = 0
    while not stop.is_set():
        body = f"live-{n}".encode()
        n += 1
        try:
            result = await producer.send(Message(topic=topic, body=body), timeout_s=1.0)
        except (ClientError, RemotingError):
            await asyncio.sleep(0.05)
            continue
        if result.status is SendStatus.SEND_OK:
            ok.append(body)
        await asyncio.sleep(0.005)


@pytest.mark.parametrize("kill", [False, True], ids=["sigterm", "sigkill"])
async def test_broker_restart_loses_no_send_ok_and_consumer_resumes(
    tmp_path: Path, kill: bool
) -> None:
    """1. namesrv + SYNC_FLUSH broker. 2. Consumer C1 consumes 10 messages, commits, shuts down.
    3. A producer keeps sending; after 10 SEND_OKs the broker is stopped (SIGTERM) or killed
    (SIGKILL) and restarted on the same store (new port). 4. Once 10 more SEND_OKs arrived the
    producer stops. 5. Consumer C2 of the same group starts.
    Expected: C2 receives every SEND_OK message of step 3 and none of step 2 (it resumed from the
    committed offsets)."""
    cluster = start_cluster(tmp_path, BROKER_EXTRA)
    broker = cluster.broker
    topic, group = "RestartT", "restart_cg"
    producer = Producer("restart_pg", cluster.namesrv_addr, poll_namesrv_interval_s=0.3)
    await producer.start()
    first: list[bytes] = []
    second: list[bytes] = []
    ok: list[bytes] = []
    stop_sending = asyncio.Event()
    try:
        async with asyncio.timeout(45):
            await producer.send(Message(topic=topic, body=b"phase1-seed"))
            c1 = _consumer(cluster.namesrv_addr, group, topic, first)
            await c1.start()
            await wait_until(lambda: len(c1.assigned_queues()) >= 4, 10)
            phase1 = [f"phase1-{i}".encode() for i in range(10)]
            for body in phase1:
                await producer.send(Message(topic=topic, body=body))
            await wait_until(lambda: set(phase1) <= set(first), 10)
            await c1.shutdown()
            await asyncio.sleep(0.3)  # the broker writes consumerOffset.json every 100 ms
            sender = asyncio.create_task(_keep_sending(producer, topic, ok, stop_sending))
            await wait_until(lambda: len(ok) >= 10, 10)
            if kill:
                broker.proc.kill()
                broker.stop()
            else:
                assert broker.stop() == 0, broker.output()
            before = len(ok)
            broker, _ = start_broker(
                tmp_path, cluster.namesrv_addr, extra=FAST_DELAY_LEVELS + BROKER_EXTRA
            )
            cluster.broker = broker
            await wait_until(lambda: len(ok) >= before + 10, 15)
            stop_sending.set()
            await sender
            c2 = _consumer(cluster.namesrv_addr, group, topic, second)
            await c2.start()
            try:
                await wait_until(lambda: set(ok) <= set(second), 15)
            finally:
                await c2.shutdown()
    finally:
        stop_sending.set()
        await producer.shutdown()
        with contextlib.suppress(AssertionError):
            cluster.stop()
    assert not set(second) & {*phase1, b"phase1-seed"}
    assert set(ok) <= set(second)
