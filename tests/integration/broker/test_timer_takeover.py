"""A broker that takes over the timer from a master (slave sync of GET_TIMER_CHECK_POINT, then
its own wheel): what the master's checkpoint says was delivered is not delivered again."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from rocketpy.broker.timer_hook import TIMER_TOPIC
from rocketpy.common.aio import wait_until
from rocketpy.common.codes import ResponseCode
from rocketpy.namesrv.service import NamesrvService
from rocketpy.store.timer.record import TimerCheckpointData, decode_checkpoint, encode_checkpoint
from tests.helpers.broker_client import JavaLikeClient, decode_records
from tests.integration.broker.conftest import BrokerFactory, dispatched

pytestmark = pytest.mark.integration

FAST = {"timerPrecisionMs": 100, "timerFlushIntervalMs": 100}


async def test_timer_takeover_skips_what_the_master_delivered(
    broker_factory: BrokerFactory, client: JavaLikeClient, tmp_path: Path
) -> None:
    """1. A broker whose wheel is not running (as a slave's): E due in 0.2 s and L due in 1.5 s
    land in rmq_sys_wheel_timer (offsets 0 and 1). 2. It adopts a master checkpoint saying
    offset 0 was processed and slots before E's were read past (read time after E). 3. After
    E's time it starts its wheel (as on promotion). Expected: timercheck holds the master's
    values; L arrives at its time; E, delivered by the master, is not delivered again."""
    broker = await broker_factory(store=FAST, store_root=tmp_path / "b")
    timer = broker.timer
    assert timer is not None
    await timer.stop()
    now = int(time.time() * 1000)
    e_at, l_at = now + 200, now + 1500
    for body, at in ((b"E", e_at), (b"L", l_at)):
        resp = await client.send(broker.address, "T", body, props={"TIMER_DELIVER_MS": str(at)})
        assert resp.code == ResponseCode.SUCCESS
    await dispatched(broker, TIMER_TOPIC, 2)
    master = TimerCheckpointData(
        last_read_time_ms=e_at + 100, last_timer_queue_offset=1, master_timer_queue_offset=1,
        timestamp=now, counter=9,
    )  # fmt: skip
    await timer.apply_synced_checkpoint(encode_checkpoint(master))
    stored = decode_checkpoint((tmp_path / "b" / "config" / "timercheck").read_bytes())
    assert (stored.last_read_time_ms, stored.master_timer_queue_offset) == (e_at + 100, 1)
    assert (stored.last_timer_queue_offset, stored.counter) == (0, 9)
    while time.time() * 1000 < e_at + 300:
        await asyncio.sleep(0.05)
    await timer.start()
    async with asyncio.timeout(10):
        while broker.store.max_offset_in_queue("T", 0) == 0:
            await asyncio.sleep(0.02)
    arrived = time.time() * 1000
    assert l_at - 50 <= arrived <= l_at + 600
    await asyncio.sleep(0.3)
    pulled = await client.pull(broker.address, "g", "T", 0, expression="*")
    assert [m.body for m in decode_records(pulled.body or b"")] == [b"L"]


def _stored_master_offset(timercheck: Path) -> int:
    """masterTimerQueueOffset in ``timercheck``; -1 before it is first written."""
    try:
        return decode_checkpoint(timercheck.read_bytes()).master_timer_queue_offset
    except FileNotFoundError:
        return -1


async def test_timer_checkpoint_synced_to_slave(
    broker_factory: BrokerFactory, namesrv: NamesrvService, client: JavaLikeClient, tmp_path: Path
) -> None:
    """1. A master delivers a timer message (its checkpoint: queue offset 1). 2. A SLAVE of the
    same name starts (slave sync every 100 ms). Expected: the slave's timercheck holds the
    master's masterTimerQueueOffset and read time, and its DataVersion."""
    master = await broker_factory(store=FAST, store_root=tmp_path / "m", brokerId=0)
    at = int(time.time() * 1000) + 200
    resp = await client.send(master.address, "T", b"x", props={"TIMER_DELIVER_MS": str(at)})
    assert resp.code == ResponseCode.SUCCESS
    assert master.timer is not None
    mt = master.timer
    await wait_until(lambda: mt.last_checkpoint.master_timer_queue_offset == 1, 5)
    await wait_until(lambda: mt.last_checkpoint.last_read_time_ms > at, 5)
    slave = await broker_factory(
        store=FAST, store_root=tmp_path / "s", brokerId=1, brokerRole="SLAVE",
        slaveSynchronizeIntervalMs=100,
    )  # fmt: skip
    assert slave.timer is not None
    st = slave.timer
    await wait_until(lambda: st.synced_offset == 1 and st.synced_read_ms > at, 10)
    timercheck = tmp_path / "s" / "config" / "timercheck"
    # Adopted first, then written (apply_synced_checkpoint awaits the flush): the file follows.
    await wait_until(lambda: _stored_master_offset(timercheck) == 1, 5)
    stored = decode_checkpoint(timercheck.read_bytes())
    assert stored.last_read_time_ms > at
    assert stored.last_timer_queue_offset == 0  # the slave's own wheel has read nothing yet
