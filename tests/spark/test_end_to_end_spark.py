"""End to end: a real mqnamesrv + mqbroker receive sends and pulls, write metrics dumps, and the
Spark job turns those dumps into a report with plots."""

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

pytestmark = [pytest.mark.spark, pytest.mark.process]


def _dumped_puts(directory: Path) -> int:
    total = 0
    for path in directory.glob("*.jsonl"):
        for line in path.read_text().splitlines():
            total = max(total, json.loads(line)["totals"]["putMsgs"])
    return total


async def test_end_to_end_dumps_to_report(spark: Any, tmp_path: Path) -> None:
    """1. Start mqnamesrv and mqbroker (metricsDumpInterval=1000). 2. Send 200 messages of 256 B
    to TopicE over about 2 s. 3. Wait for a dump showing them; SIGTERM the broker. 4. Run the job
    with 1 s windows.
    Expected: 0 corrupt lines; the summary row for broker-a/TopicE has in_msgs 200 and
    in_mb 200*256/MiB; latency percentiles are positive; the boot role change is in the
    timeline; the three plots are non-empty PNGs."""
    from analytics.throughput import run  # noqa: PLC0415 - needs pyspark

    dumps = tmp_path / "dumps"
    namesrv, ns_addr = start_namesrv(tmp_path)
    try:
        broker, addr = start_broker(
            tmp_path, ns_addr, extra=f"metricsDumpInterval=1000\nmetricsDumpDir={dumps}\n"
        )
        client = JavaLikeClient()
        try:
            for i in range(200):
                async with asyncio.timeout(10):
                    resp = await client.send(addr, "TopicE", b"e" * 256, queue_id=i % 4)
                assert resp.code == ResponseCode.SUCCESS, resp.remark
                if i % 50 == 49:
                    await asyncio.sleep(0.5)  # spread the load over a few dump intervals
            await wait_until(lambda: _dumped_puts(dumps) >= 200, timeout_s=15)
        finally:
            await client.close()
            assert broker.stop() == 0, broker.output()
    finally:
        assert namesrv.stop() == 0, namesrv.output()
    report = run(spark, [str(dumps)], tmp_path / "report", 1000)
    assert report.result.corrupt == 0
    row = next(r for r in report.summary if r["topic"] == "TopicE")
    assert (row["broker"], row["in_msgs"]) == ("broker-a", 200)
    assert row["in_mb"] == pytest.approx(200 * 256 / 1024 / 1024)
    assert row["broker_p50_ms"] > 0
    assert row["broker_p99_ms"] >= row["broker_p50_ms"]
    assert [(f["from_role"], f["to_role"]) for f in report.result.failovers] == [
        (None, "ASYNC_MASTER")
    ]
    assert [p.name for p in report.plots] == [
        "throughput.png",
        "latency.png",
        "replication_lag.png",
    ]
    assert all(
        p.read_bytes().startswith(b"\x89PNG") and p.stat().st_size > 10_000 for p in report.plots
    )
