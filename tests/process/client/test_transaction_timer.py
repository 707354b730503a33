"""A transactional message with a delivery time: the half message keeps TIMER_DELIVER_MS and the
commit files the real message under the timer (upstream's put hook on END_TRANSACTION)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from rocketpy.client.message import Message, SendStatus
from rocketpy.client.transaction_producer import LocalTransactionState
from rocketpy.common.message.record import TRANSACTION_COMMIT_TYPE, TRANSACTION_TYPE_MASK
from tests.helpers.cluster import Cluster, start_cluster, unique
from tests.process.client.test_transaction import TXN_EXTRA, pull_topic, txn_producer

pytestmark = pytest.mark.process

COMMIT = LocalTransactionState.COMMIT_MESSAGE


@pytest.fixture(scope="module")
def timer_txn_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A namesrv + broker with a fast transaction check and timerPrecisionMs=100."""
    c = start_cluster(tmp_path_factory.mktemp("txn-timer"), TXN_EXTRA + "timerPrecisionMs=100\n")
    try:
        yield c
    finally:
        c.stop()


async def test_txn_commit_of_timer_message_arrives_at_its_time(
    timer_txn_cluster: Cluster,
) -> None:
    """1. A TransactionProducer sends a half message with deliver_time_ms 2 s ahead; the local
    transaction commits at once. Expected: SEND_OK/COMMIT_MESSAGE; the topic stays empty until
    the delivery time, then holds the message once (commit type, TIMER_DELIVER_MS kept) within
    0.6 s of it."""
    cluster = timer_txn_cluster
    topic = unique("TxnTimer")
    producer = txn_producer(cluster, lambda _m: COMMIT)
    await producer.start()
    due = int(time.time() * 1000) + 2000
    try:
        async with asyncio.timeout(20):
            result = await producer.send_message_in_transaction(
                Message(topic=topic, body=b"later", deliver_time_ms=due), lambda _m, _a: COMMIT
            )
            while not (msgs := await pull_topic(cluster.broker_addr, topic)):
                assert time.time() * 1000 < due + 600
                await asyncio.sleep(0.05)
            arrived = time.time() * 1000
    finally:
        await producer.shutdown()
    assert result.status is SendStatus.SEND_OK
    assert result.local_transaction_state is COMMIT
    assert due <= arrived <= due + 600
    [msg] = msgs
    assert msg.body == b"later"
    assert msg.sys_flag & TRANSACTION_TYPE_MASK == TRANSACTION_COMMIT_TYPE
    assert f"TIMER_DELIVER_MS\x01{due}\x02" in msg.properties
