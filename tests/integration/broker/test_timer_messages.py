"""5.x timer messages through an in-process broker: the send hook, the wheel, delivery, roll,
cancel and GET_TIMER_CHECK_POINT (``timer_store.py``, ``timer_hook.py``)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from rocketpy.broker.service import BrokerService
from rocketpy.broker.timer_hook import TIMER_TOPIC
from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.store.timer.record import decode_checkpoint
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


async def test_timer_message_beyond_window_rolls_then_arrives(
    broker_factory: BrokerFactory, client: JavaLikeClient
) -> None:
    """1. A broker whose roll window is 5 slots of 100 ms. 2. Send a message due in 1.5 s.
    Expected: it goes back through rmq_sys_wheel_timer (TIMER_ROLL_TIMES >= 1, more than one
    record in the timer topic) and reaches T at its time."""
    broker = await broker_factory(store={**FAST, "timerRollWindowSlot": 5})
    at = int(time.time() * 1000) + 1500
    resp = await client.send(broker.address, "T", b"rolled", props={"TIMER_DELIVER_MS": str(at)})
    assert resp.code == ResponseCode.SUCCESS
    seen = await _arrivals(broker, client, "T", 1, 10)
    arrived, props = seen[b"rolled"]
    assert at - 50 <= arrived <= at + 600
    assert int(props["TIMER_ROLL_TIMES"]) >= 1
    assert broker.store.max_offset_in_queue(TIMER_TOPIC, 0) >= 2


async def test_timer_message_cancelled_by_del_uniqkey(
    broker_factory: BrokerFactory, client: JavaLikeClient
) -> None:
    """1. Send A (UNIQ_KEY U-A) and B due at the same time D, then a cancel message due at D
    with TIMER_DEL_UNIQKEY = 'T+U-A'. Expected: B arrives at D; neither A nor the cancel
    message ever reaches T."""
    broker = await broker_factory(store=FAST)
    addr = broker.address
    at = str(int(time.time() * 1000) + 800)
    for body, props in (
        (b"A", {"TIMER_DELIVER_MS": at, "UNIQ_KEY": "U-A"}),
        (b"B", {"TIMER_DELIVER_MS": at, "UNIQ_KEY": "U-B"}),
        (b"cancel", {"TIMER_DELIVER_MS": at, "TIMER_DEL_UNIQKEY": "T+U-A"}),
    ):
        resp = await client.send(addr, "T", body, props=props)
        assert resp.code == ResponseCode.SUCCESS
    seen = await _arrivals(broker, client, "T", 1, 10)
    assert set(seen) == {b"B"}
    await asyncio.sleep(0.5)
    assert broker.store.max_offset_in_queue("T", 0) == 1
    timer = broker.timer
    assert timer is not None
    assert timer.metrics.count("T") == 0


async def test_timer_refusal_past_time_and_checkpoint(
    broker_factory: BrokerFactory, client: JavaLikeClient
) -> None:
    """1. timerMaxDelaySec=10: a message due in 11 s is refused with MESSAGE_ILLEGAL and
    upstream's remark, nothing stored. 2. A message due 5 s ago is stored straight into T
    (readable at once). 3. A message due in 0.3 s arrives; GET_TIMER_CHECK_POINT then answers
    the 56-byte checkpoint with the queue offset past it and a read time after its slot."""
    broker = await broker_factory(store={**FAST, "timerMaxDelaySec": 10})
    addr = broker.address
    now = int(time.time() * 1000)
    resp = await client.send(addr, "T", b"far", props={"TIMER_DELIVER_MS": str(now + 11_000)})
    assert resp.code == ResponseCode.MESSAGE_ILLEGAL
    assert resp.remark is not None
    assert resp.remark.startswith("timer message illegal, the delay time should not be bigger")
    assert "10000ms" in resp.remark
    resp = await client.send(addr, "T", b"past", props={"TIMER_DELIVER_MS": str(now - 5000)})
    assert resp.code == ResponseCode.SUCCESS
    await dispatched(broker, "T", 1)
    assert broker.store.max_offset_in_queue(TIMER_TOPIC, 0) == 0
    resp = await client.send(addr, "T", b"soon", props={"TIMER_DELAY_MS": "300"})
    assert resp.code == ResponseCode.SUCCESS
    await _arrivals(broker, client, "T", 2, 10)
    timer = broker.timer
    assert timer is not None
    async with asyncio.timeout(5):
        while timer.last_checkpoint.last_timer_queue_offset < 1:
            await asyncio.sleep(0.05)
    cp_resp = await client.call(addr, RequestCode.GET_TIMER_CHECK_POINT)
    assert cp_resp.code == ResponseCode.SUCCESS
    assert cp_resp.body is not None
    assert len(cp_resp.body) == 56
    cp = decode_checkpoint(cp_resp.body)
    assert cp.last_timer_queue_offset == cp.master_timer_queue_offset == 1
    assert cp.last_read_time_ms > now
    assert cp.counter >= 1
    metrics = await client.call(addr, RequestCode.GET_TIMER_METRICS)
    assert metrics.code == ResponseCode.SUCCESS
    assert metrics.body is not None
    assert b'"timingCount"' in metrics.body


async def test_timer_pending_survive_clean_restart(
    broker_factory: BrokerFactory, client: JavaLikeClient, tmp_path: Path
) -> None:
    """1. Send messages due in 1.5 and 2.5 s. 2. Stop the broker (as on SIGTERM) before either is
    due and start it again on the same store. Expected: timercheck and timermetrics (2 pending
    for T) were written at stop and are read back; both messages arrive once, at their time
    (at once on restart if the restart came later), and the count drops to 0."""
    root = tmp_path / "restart"
    broker = await broker_factory(store=FAST, store_root=root)
    now = int(time.time() * 1000)
    due = {b"r1500": now + 1500, b"r2500": now + 2500}
    for body, at in due.items():
        resp = await client.send(broker.address, "T", body, props={"TIMER_DELIVER_MS": str(at)})
        assert resp.code == ResponseCode.SUCCESS
    await dispatched(broker, TIMER_TOPIC, 2)
    timer = broker.timer
    assert timer is not None
    async with asyncio.timeout(5):
        while timer.queue_offset < 2:
            await asyncio.sleep(0.02)
    async with asyncio.timeout(10):
        await broker.stop()
    stored = decode_checkpoint((root / "config" / "timercheck").read_bytes())
    assert stored.last_timer_queue_offset == 2
    metrics = json.loads((root / "config" / "timermetrics").read_text())
    assert metrics["timingCount"]["T"]["count"] == 2
    again = await broker_factory(store=FAST, store_root=root)
    # A message that fell due while the broker was down is due at once on restart (under load
    # the stop and start can outlast the first due time).
    restarted = int(time.time() * 1000)
    assert again.timer is not None
    assert again.timer.metrics.count("T") == 2  # GET_TIMER_METRICS' counts survive a restart
    seen = await _arrivals(again, client, "T", 2, 10)
    for body, at in due.items():
        late = seen[body][0] - max(at, restarted)
        assert at - 50 <= seen[body][0], (body, seen[body][0] - at)
        assert late <= 600, (body, seen[body][0] - at, late)
    await asyncio.sleep(0.3)
    assert again.store.max_offset_in_queue("T", 0) == 2
    assert again.timer.metrics.count("T") == 0


async def test_timer_flow_control_per_slot(
    broker_factory: BrokerFactory, client: JavaLikeClient
) -> None:
    """1. timerCongestNumEachSlot=1. 2. Send A then B for the same time, each once the wheel
    holds the previous one. 3. Send C for that time. Expected: A and B SEND_OK (the slot held
    at most 1 when each came); C refused with SYSTEM_ERROR and upstream's flow-control remark
    (the slot holds 2 = twice the limit); another time's slot still accepts."""
    broker = await broker_factory(store={**FAST, "timerCongestNumEachSlot": 1})
    timer = broker.timer
    assert timer is not None
    at = str(int(time.time() * 1000) + 5000)
    for i, body in enumerate((b"A", b"B"), start=1):
        resp = await client.send(broker.address, "T", body, props={"TIMER_DELIVER_MS": at})
        assert resp.code == ResponseCode.SUCCESS
        async with asyncio.timeout(5):
            while timer.metrics.count("T") < i:
                await asyncio.sleep(0.02)
    resp = await client.send(broker.address, "T", b"C", props={"TIMER_DELIVER_MS": at})
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert resp.remark == (
        "timer message is under flow control, max num limit is 2 or the current value is "
        "greater than 1 and less than 2, trigger random flow control"
    )
    other = str(int(at) + 1000)
    resp = await client.send(broker.address, "T", b"D", props={"TIMER_DELIVER_MS": other})
    assert resp.code == ResponseCode.SUCCESS


async def test_timer_topic_sent_directly_without_real_topic_is_skipped(
    broker_factory: BrokerFactory, client: JavaLikeClient
) -> None:
    """1. A client sends straight to rmq_sys_wheel_timer: one record without TIMER_OUT_MS, one
    due already without REAL_TOPIC. 2. A regular timer message due in 0.3 s follows.
    Expected: the wheel skips both strays (nothing stored under an empty topic) and delivers
    the regular one."""
    broker = await broker_factory(store=FAST)
    addr = broker.address
    past = str(int(time.time() * 1000) - 1000)
    for props in ({}, {"TIMER_OUT_MS": past}):
        resp = await client.send(addr, TIMER_TOPIC, b"stray", props=props)
        assert resp.code == ResponseCode.SUCCESS
    resp = await client.send(addr, "T", b"ok", props={"TIMER_DELAY_MS": "300"})
    assert resp.code == ResponseCode.SUCCESS
    seen = await _arrivals(broker, client, "T", 1, 10)
    assert set(seen) == {b"ok"}
    assert broker.store.max_offset_in_queue("", 0) == 0
    timer = broker.timer
    assert timer is not None
    assert timer.queue_offset == 3
