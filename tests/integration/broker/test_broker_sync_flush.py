"""SYNC_FLUSH sends through the broker: durable when answered, sharing fdatasync passes."""

from __future__ import annotations

import asyncio

import pytest

from rocketpy.common.codes import ResponseCode
from tests.helpers.broker_client import JavaLikeClient
from tests.integration.broker.conftest import BrokerFactory

pytestmark = pytest.mark.integration


async def test_broker_sync_flush_sends_share_fdatasync_beyond_send_slots(
    broker_factory: BrokerFactory, client: JavaLikeClient
) -> None:
    """1. SYNC_FLUSH broker with one send slot (sendMessageThreadPoolNums=1). 2. One send to
    create the topic, then 32 concurrent sends on one connection.
    Expected: all SEND_OK at distinct queue offsets, each durable when answered, in a handful
    of fdatasync passes: a send gives its slot back once its record is written, as
    upstream's send thread returns while the flush is pending (holding it through the wait
    let one send at a time reach the store: 32 passes)."""
    broker = await broker_factory(
        sendMessageThreadPoolNums=1, store={"flushDiskType": "SYNC_FLUSH"}
    )
    addr = broker.address
    assert (await client.send(addr, "SyncTopic", b"first")).code == ResponseCode.SUCCESS
    commit_log = broker.store.store.commit_log
    passes = commit_log.flusher.passes
    async with asyncio.timeout(20):
        responses = await asyncio.gather(
            *(client.send(addr, "SyncTopic", f"m{i}".encode()) for i in range(32))
        )
    assert {r.code for r in responses} == {ResponseCode.SUCCESS}
    assert sorted(int(r.ext("queueOffset") or "-1") for r in responses) == list(range(1, 33))
    assert commit_log.flushed_offset == commit_log.max_offset
    assert commit_log.flusher.passes - passes <= 8
