"""Timer messages through slave acting master as real processes (acceptance S-02 for timers):
the acting slave runs the wheel, escapes what falls due to another group's master, and skips
what the dead master had delivered (its checkpoint reached the slave by slave sync)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.store.timer.record import decode_checkpoint
from tests.helpers.broker_client import decode_records, subscription
from tests.helpers.processes import start_broker, start_namesrv
from tests.process.test_acting_master_process import (
    GROUP,
    MASTER_A,
    MASTER_B,
    NAMESRV,
    SLAVE_A,
    TOPIC,
    Cluster,
    wait_until_async,
)

pytestmark = pytest.mark.process

TIMER = "timerPrecisionMs=100\ntimerFlushIntervalMs=200\nslaveSynchronizeIntervalMs=200\n"


async def _setup(c: Cluster) -> tuple[str, str, str]:
    c.daemons["b"], b = start_broker(c.tmp, c.ns, name="broker-b", extra=MASTER_B + TIMER, tag="b")
    c.daemons["m"], master = start_broker(c.tmp, c.ns, extra=MASTER_A + TIMER, tag="master")
    await wait_until_async(c.member_ids, {0})
    c.daemons["s"], slave = start_broker(c.tmp, c.ns, extra=SLAVE_A + TIMER, tag="slave")
    await wait_until_async(c.member_ids, {0, 1})
    for addr in (b, master, slave):
        beat = await c.client.heartbeat(addr, GROUP, (subscription(TOPIC),))
        assert beat.code == ResponseCode.SUCCESS
        ext = {"topic": TOPIC, "defaultTopic": "TBW102", "readQueueNums": "1",
               "writeQueueNums": "1", "perm": "6", "topicFilterType": "SINGLE_TAG"}  # fmt: skip
        resp = await c.client.call(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, ext)
        assert resp.code == ResponseCode.SUCCESS, resp.remark
    return b, master, slave


async def _bodies(c: Cluster, addr: str) -> list[bytes]:
    resp = await c.client.pull(addr, GROUP, TOPIC, 0)
    ok = resp.code == ResponseCode.SUCCESS and resp.body
    return [m.body for m in decode_records(resp.body or b"")] if ok else []


async def _slave_synced_past(c: Cluster, slave: str, at: int) -> bool:
    """Whether the slave's timercheck says the master processed both timer records and read
    past ``at``'s slot."""
    resp = await c.client.call(slave, RequestCode.GET_TIMER_CHECK_POINT)
    if resp.code != ResponseCode.SUCCESS or not resp.body:
        return False
    cp = decode_checkpoint(resp.body)
    return cp.master_timer_queue_offset == 2 and cp.last_read_time_ms > at


async def _scenario(c: Cluster) -> None:
    b, master, slave = await _setup(c)
    now = int(time.time() * 1000)
    early_at, late_at = now + 300, now + 8000
    for body, at in ((b"early", early_at), (b"late", late_at)):
        resp = await c.client.send(master, TOPIC, body, props={"TIMER_DELIVER_MS": str(at)})
        assert resp.code == ResponseCode.SUCCESS, resp.remark
    # the master delivers "early"; the slave holds both timer records and the master's
    # checkpoint (queue offset 2, read past "early")
    async with asyncio.timeout(15):
        while await _bodies(c, master) != [b"early"]:
            await asyncio.sleep(0.05)
    await wait_until_async(lambda: _slave_synced_past(c, slave, early_at), True)
    killed = c.daemons.pop("m")
    killed.proc.kill()
    killed.stop()
    await c.wait_route({0: slave}, 4)
    # the acting slave's wheel escapes "late" to broker-b at its time, never "early" again
    async with asyncio.timeout(20):
        while b"late" not in await _bodies(c, b):
            await asyncio.sleep(0.05)
    arrived = time.time() * 1000
    assert late_at - 50 <= arrived <= late_at + 1500, arrived - late_at
    assert await _bodies(c, b) == [b"late"]
    assert await _bodies(c, slave) == [b"early"]  # replicated from the master, nothing added


def test_s02_timer_on_acting_slave_escapes_due_and_skips_delivered(tmp_path: Path) -> None:
    """1. NameServer (supportActingMaster), broker-b, broker-a's master and slave with
    enableSlaveActingMaster/enableRemoteEscape, timerPrecisionMs=100, slave sync every 200 ms.
    2. Send to broker-a's master "early" (due in 0.3 s) and "late" (due in 8 s); wait until the
    master delivered "early" and the slave's timercheck holds the master's queue offset 2 and a
    read time past "early" (what slave sync copies every 200 ms).
    3. SIGKILL the master. Expected: the slave acts as brokerId 0; its wheel escapes "late" to
    broker-b at its time; "early" is not delivered a second time anywhere."""
    namesrv, ns = start_namesrv(tmp_path, NAMESRV)
    cluster = Cluster(tmp_path)
    cluster.ns = ns

    async def run() -> None:
        try:
            await _scenario(cluster)
        finally:
            await cluster.client.close()

    try:
        asyncio.run(run())
    finally:
        for d in cluster.daemons.values():
            d.stop()
        assert namesrv.stop() == 0, namesrv.output()
