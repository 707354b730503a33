"""Delay levels do not block each other: ``schedule.py`` runs one loop per level (seed note: one
thread for all levels made a long level hold back a short one)."""

from __future__ import annotations

import asyncio

import pytest

from rocketpy.common.codes import ResponseCode
from tests.helpers.broker_client import JavaLikeClient, decode_records
from tests.integration.broker.conftest import BrokerFactory

pytestmark = pytest.mark.integration


async def test_delay_levels_long_level_does_not_hold_back_short_level(
    broker_factory: BrokerFactory, client: JavaLikeClient
) -> None:
    """1. Levels '1s 4s'. 2. Send 20 messages at level 2 (4 s), then one at level 1 (1 s).
    Expected: the level-1 message is on T after about 1 s (before 2 s), while no level-2 message
    is there yet; the level-2 ones follow after about 4 s."""
    broker = await broker_factory(messageDelayLevel="1s 4s")
    addr = broker.address
    loop = asyncio.get_running_loop()
    started = loop.time()
    for i in range(20):
        resp = await client.send(addr, "T", f"long-{i}".encode(), props={"DELAY": "2"})
        assert resp.code == ResponseCode.SUCCESS
    resp = await client.send(addr, "T", b"short", props={"DELAY": "1"})
    assert resp.code == ResponseCode.SUCCESS
    async with asyncio.timeout(10):
        while broker.store.max_offset_in_queue("T", 0) == 0:
            await asyncio.sleep(0.02)
    short_at = loop.time() - started
    pulled = await client.pull(addr, "g", "T", 0, expression="*")
    assert pulled.body is not None
    assert [m.body for m in decode_records(pulled.body)] == [b"short"]
    assert 0.9 <= short_at < 2.0, short_at
    async with asyncio.timeout(10):
        while broker.store.max_offset_in_queue("T", 0) < 21:
            await asyncio.sleep(0.05)
    assert loop.time() - started >= 3.9
