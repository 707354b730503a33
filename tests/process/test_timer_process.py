"""Timer messages on a real ``bin/mqbroker``: SIGKILL with pending timers then restart, SIGTERM
persists ``config/timercheck``, and a delay-level message next to timer messages."""

from __future__ import annotations

import asyncio
import json
import random
import signal
import time
from pathlib import Path

import pytest

from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.store.timer.record import decode_checkpoint
from tests.helpers.broker_client import JavaLikeClient, decode_records
from tests.helpers.processes import Daemon, start_broker, start_namesrv

pytestmark = pytest.mark.process

TOPIC = "TimerTopic"
EXTRA = (
    "timerPrecisionMs=100\ntimerFlushIntervalMs=200\nmessageDelayLevel=1s 2s 3s\n"
    "scheduleScanInterval=50\nflushDelayOffsetInterval=200\n"
)
Arrivals = dict[bytes, list[float]]


def _now_ms() -> float:
    return time.time() * 1000


async def _send(addr: str, due: dict[bytes, int]) -> None:
    """Send each body with TIMER_DELIVER_MS (a body starting with b'level' uses DELAY=2)."""
    client = JavaLikeClient()
    try:
        for body, at in due.items():
            props = {"DELAY": "2"} if body.startswith(b"level") else {"TIMER_DELIVER_MS": str(at)}
            resp = await client.send(addr, TOPIC, body, props=props)
            assert resp.code == ResponseCode.SUCCESS, (body, resp.remark)
    finally:
        await client.close()


async def _collect(addr: str, seen: Arrivals, until: int, timeout_s: float) -> None:
    """Pull the topic from 0 until ``until`` distinct bodies were seen, noting when each copy
    was first read (a copy = its queue offset)."""
    client = JavaLikeClient()
    offsets: set[int] = set()
    offset = 0
    try:
        async with asyncio.timeout(timeout_s):
            while len(seen) < until:
                resp = await client.pull(addr, "reader", TOPIC, offset, expression="*",
                                         suspend_ms=200)  # fmt: skip
                now = _now_ms()
                if resp.code == ResponseCode.SUCCESS and resp.body is not None:
                    for m in decode_records(resp.body):
                        if m.queue_offset not in offsets:
                            offsets.add(m.queue_offset)
                            seen.setdefault(m.body, []).append(now)
                offset = int(resp.ext("nextBeginOffset") or offset)
                await asyncio.sleep(0.02)
    finally:
        await client.close()


def _recover_line(daemon: Daemon, log_dir: Path) -> dict[str, object]:
    found: dict[str, object] = {}
    for line in (log_dir / "broker.log").read_text(errors="replace").splitlines():
        if "Timer recover ok" in line:
            found = json.loads(line)
    return found


def test_timer_sigkill_with_pending_timers_then_restart(tmp_path: Path) -> None:
    """1. mqbroker (timerPrecisionMs=100): send 12 timer messages due 1.0 .. 6.5 s ahead in
    shuffled order and one delay-level-2 (2 s) message. 2. Read until the first three timer
    messages arrived. 3. SIGKILL the broker, start it again on the same store.
    Expected: every message arrives (at least once), none before its time; the ones due after
    the restart within 1 s of their time, the ones due while it was down right after it came
    back; recovery starts from the checkpoint (the log's recovery line names it)."""
    namesrv, ns_addr = start_namesrv(tmp_path)
    store = tmp_path / "store"
    seen: Arrivals = {}
    try:
        broker, addr = start_broker(tmp_path, ns_addr, store=store, extra=EXTRA, tag="a1")
        # Due times count from a running broker: a slow start must not make them past due.
        rng = random.Random(7)
        base = int(_now_ms()) + 300
        timers = [(f"t{i:02d}".encode(), base + 1000 + 500 * i) for i in range(12)]
        rng.shuffle(timers)
        due = dict(timers)
        due[b"level-2"] = base - 300 + 2000  # 2 s from its send, which follows
        try:
            asyncio.run(_send(addr, due))
            asyncio.run(_collect(addr, seen, 3, 15))
        finally:
            broker.proc.send_signal(signal.SIGKILL)
            broker.stop()
        killed_at = _now_ms()
        assert (store / "abort").exists()
        again, addr2 = start_broker(tmp_path, ns_addr, store=store, extra=EXTRA, tag="a2")
        back_at = _now_ms()
        try:
            asyncio.run(_collect(addr2, seen, len(due), 30))
            line = _recover_line(again, tmp_path / "logs-a2")
        finally:
            assert again.stop() == 0, again.tail(4000)
    finally:
        namesrv.stop()
    assert set(seen) == set(due)
    assert int(str(line["check_queue_offset"])) > 0, line
    for body, at in due.items():
        first = seen[body][0]
        assert first >= at - 50, (body, first - at)
        if killed_at < at and at > back_at:
            assert first <= at + 1000, (body, first - at)
        elif killed_at < at:
            assert first <= back_at + 1500, (body, first - back_at)


async def _wait_pending(addr: str, count: int, timeout_s: float) -> None:
    """Wait until GET_TIMER_METRICS counts ``count`` pending messages of the topic."""
    client = JavaLikeClient()
    try:
        async with asyncio.timeout(timeout_s):
            while True:
                resp = await client.call(addr, RequestCode.GET_TIMER_METRICS)
                assert resp.code == ResponseCode.SUCCESS
                body = json.loads(resp.body or b"{}")
                if body["timingCount"].get(TOPIC, {}).get("count") == count:
                    return
                await asyncio.sleep(0.05)
    finally:
        await client.close()


def test_timer_sigterm_persists_checkpoint(tmp_path: Path) -> None:
    """1. A broker whose periodic timer flush is a minute away (timerFlushIntervalMs=60000):
    send three timer messages due 3 s ahead; wait until GET_TIMER_METRICS counts them pending.
    2. SIGTERM. Expected: exit 0; config/timercheck (written only at load and at stop here)
    holds queue offset 3 and a read time before the messages' slot. 3. Restart. Expected: the
    three arrive at their time."""
    namesrv, ns_addr = start_namesrv(tmp_path)
    store = tmp_path / "store"
    seen: Arrivals = {}
    try:
        slow_flush = EXTRA.replace("timerFlushIntervalMs=200", "timerFlushIntervalMs=60000")
        broker, addr = start_broker(tmp_path, ns_addr, store=store, extra=slow_flush, tag="b1")
        at = int(_now_ms()) + 3000  # from a running broker, as above
        due = {b"x1": at, b"x2": at + 100, b"x3": at + 200}
        try:
            asyncio.run(_send(addr, due))
            asyncio.run(_wait_pending(addr, 3, 10))
        finally:
            assert broker.stop() == 0, broker.tail(4000)  # SIGTERM (a second one would force)
        cp = decode_checkpoint((store / "config" / "timercheck").read_bytes())
        assert cp.last_timer_queue_offset == 3
        assert cp.master_timer_queue_offset == 3
        assert 0 < cp.last_read_time_ms < at
        again, addr2 = start_broker(tmp_path, ns_addr, store=store, extra=EXTRA, tag="b2")
        back_at = _now_ms()
        try:
            asyncio.run(_collect(addr2, seen, 3, 15))
        finally:
            assert again.stop() == 0, again.tail(4000)
    finally:
        namesrv.stop()
    for body, when in due.items():
        # on time, or right after the restart when that came later (a loaded machine)
        assert when - 50 <= seen[body][0] <= max(when, back_at + 500) + 1000, (
            body, seen[body][0] - when, back_at - when,
        )  # fmt: skip
