"""5.x timer messages through an in-process broker: the send hook, the wheel, delivery, roll,
cancel and GET_TIMER_CHECK_POINT (``timer_store.py``, ``timer_hook.py``)."""

from __future__ import annotations

import asyncio
import time

import pytest

from rocketpy.broker.service import BrokerService
from rocketpy.broker.timer_hook import TIMER_TOPIC
from rocketpy.common.codes import ResponseCode
from tests.helpers.broker_client import JavaLikeClient, decode_records
from tests.integration.broker.conftest import BrokerFactory, dispatched

pytestmark = pytest.mark.integration

FAST = {"timerPrecisionMs": 100, "timerFlushIntervalMs": 100}


async def _arrivals(
    broker: BrokerService, client: JavaLikeClient, topic: str, count: int, timeout_s: float
) -> dict[bytes, tuple[float, dict[str, str]]]:
    """Pull ``topic`` queue 0 until ``count`` messages arrived; body -> (wall time seen in ms,
    properties)."""
    seen: dict[bytes, tuple[float, dict[str, str]]] = {}
    offset = 0
    async with asyncio.timeout(timeout_s):
        while len(seen) < count:
            resp = await client.pull(broker.address, "g", topic, offset, expression="*",
                                     suspend_ms=200)  # fmt: skip
            now = time.time() * 1000
            if resp.code == ResponseCode.SUCCESS and resp.body is not None:
                for m in decode_records(resp.body):
                    seen.setdefault(m.body, (now, dict(m.properties)))
            offset = int(resp.ext("nextBeginOffset") or offset)
            await asyncio.sleep(0.01)
    return seen


async def test_timer_messages_delivered_at_their_time_in_mixed_order(
    broker_factory: BrokerFactory, client: JavaLikeClient
) -> None:
    """1. Send timer messages due in 2.0, 0.5, 1.5, 1.0 s (TIMER_DELIVER_MS, TIMER_DELAY_MS,
    TIMER_DELAY_SEC forms). Expected: SEND_OK into rmq_sys_wheel_timer; each appears on T no
    earlier than its time and within 0.5 s after (precision 100 ms), with REAL_TOPIC/REAL_QID
    gone and TIMER_OUT_MS/TIMER_ENQUEUE_MS/TIMER_DEQUEUE_MS set."""
    broker = await broker_factory(store=FAST)
    addr = broker.address
    now = int(time.time() * 1000)
    due = {b"m2000": now + 2000, b"m500": now + 500, b"m1500": now + 1500}
    for body, at in due.items():
        resp = await client.send(addr, "T", body, props={"TIMER_DELIVER_MS": str(at)})
        assert resp.code == ResponseCode.SUCCESS, resp.remark
    resp = await client.send(addr, "T", b"m1000", props={"TIMER_DELAY_MS": "1000"})
    assert resp.code == ResponseCode.SUCCESS
    due[b"m1000"] = now + 1000
    resp = await client.send(addr, "T", b"s1", props={"TIMER_DELAY_SEC": "1"})
    assert resp.code == ResponseCode.SUCCESS
    due[b"s1"] = now + 1000
    await dispatched(broker, TIMER_TOPIC, 5)
    assert broker.store.max_offset_in_queue("T", 0) == 0
    seen = await _arrivals(broker, client, "T", 5, 10)
    for body, at in due.items():
        arrived, props = seen[body]
        assert at - 50 <= arrived <= at + 600, (body, arrived - at)
        assert "REAL_TOPIC" not in props
        assert "REAL_QID" not in props
        assert {"TIMER_OUT_MS", "TIMER_ENQUEUE_MS", "TIMER_DEQUEUE_MS"} <= props.keys()
