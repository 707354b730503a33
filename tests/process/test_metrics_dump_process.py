"""Metrics dumps from a real ``bin/mqbroker`` receiving real sends."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from rocketpy.common.aio import wait_until
from rocketpy.common.codes import ResponseCode
from tests.helpers.broker_client import JavaLikeClient
from tests.helpers.processes import start_broker, start_namesrv

pytestmark = pytest.mark.process


def _records(directory: Path) -> list[dict[str, Any]]:
    out = []
    for path in sorted(directory.glob("broker-broker-a-0.*.jsonl")):
        out.extend(json.loads(line) for line in path.read_text().splitlines() if line)
    return out


def _put_total(directory: Path) -> int:
    records = _records(directory)
    return int(records[-1]["totals"]["putMsgs"]) if records else 0


async def test_metrics_dump_from_real_broker(tmp_path: Path) -> None:
    """1. Start mqnamesrv and mqbroker with metricsDumpInterval=1000 and a dump dir. 2. Send 30
    messages of 100 bytes to TopicM queue 1. 3. Wait until a dump shows them. 4. SIGTERM.
    Expected: every line parses as version 1 with this broker's identity and role; the sum of
    dPutMsgs over all records is 30 (the stop writes a last record) and dPutBytes 3,000; queue
    TopicM/1 has putMsgs 30; a boot ROLE_CHANGE event is present; send latency counts 30 sends;
    timestamps increase."""
    dump_dir = tmp_path / "dumps"
    namesrv, ns_addr = start_namesrv(tmp_path)
    try:
        broker, addr = start_broker(
            tmp_path, ns_addr, extra=f"metricsDumpInterval=1000\nmetricsDumpDir={dump_dir}\n"
        )
        client = JavaLikeClient()
        try:
            for _ in range(30):
                async with asyncio.timeout(10):
                    resp = await client.send(addr, "TopicM", b"x" * 100, queue_id=1)
                assert resp.code == ResponseCode.SUCCESS, resp.remark
            await wait_until(lambda: _put_total(dump_dir) >= 30, timeout_s=15)
        finally:
            await client.close()
            assert broker.stop() == 0, broker.output()
    finally:
        assert namesrv.stop() == 0, namesrv.output()
    records = _records(dump_dir)
    assert all(r["version"] == 1 for r in records)
    assert {(r["node"]["brokerName"], r["node"]["role"]) for r in records} == {
        ("broker-a", "ASYNC_MASTER")
    }
    assert sum(r["totals"]["dPutMsgs"] for r in records) == 30
    assert sum(r["totals"]["dPutBytes"] for r in records) == 3000
    last = records[-1]
    queue = next(q for q in last["queues"] if q["topic"] == "TopicM")
    assert (queue["queueId"], queue["putMsgs"]) == (1, 30)
    assert sum(last["sendLatency"]["counts"]) >= 30
    events = [e for r in records for e in r["events"]]
    assert [(e["fromRole"], e["toRole"]) for e in events] == [(None, "ASYNC_MASTER")]
    stamps = [r["ts"] for r in records]
    assert stamps == sorted(stamps)
    assert last["store"]["maxPhyOffset"] > 3000
