"""The fuzz tool against real daemons, small (issue 25, item 6): ``make test`` runs the tool
every time; ``make fuzz`` runs the 10^6-frame campaign (tests/chaos/test_fuzz_campaign.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rocketpy.client.admin import AdminClient, TopicSpec
from rocketpy.common.codes import RequestCode, ResponseCode
from tests.helpers.broker_client import JavaLikeClient
from tests.helpers.fuzz_campaign import (
    Target,
    log_tracebacks,
    rss,
    rss_bound_mb,
    run_fuzz,
    tracebacks,
)
from tests.helpers.processes import start_broker, start_namesrv

pytestmark = pytest.mark.process

TOPIC = "FuzzTopic"


async def _create_topic(ns: str, addr: str) -> None:
    admin = AdminClient(ns)
    try:
        await admin.create_topic(
            addr, TopicSpec(topic=TOPIC, read_queue_nums=4, write_queue_nums=4)
        )
    finally:
        await admin.close()


async def _still_serves(ns: str, broker: str) -> None:
    admin = AdminClient(ns)
    try:
        assert (await admin.topic_route(TOPIC)).brokers
    finally:
        await admin.close()
    client = JavaLikeClient()
    try:
        resp = await client.send(broker, TOPIC, b"after-fuzz")
        assert resp.code == ResponseCode.SUCCESS, resp.remark
    finally:
        await client.close()


@pytest.mark.timeout(120)
def test_fuzz_tool_against_namesrv_and_broker(tmp_path: Path) -> None:
    """1. Start mqnamesrv and a broker; create FuzzTopic. 2. Run the fuzz tool with 10,000
    frames against each (seeded).
    Expected: both runs exit 0 with no violation, every control probe answered and frames
    counted exactly; the daemons are alive with no traceback, RSS within the campaign's bound,
    and still route and store a message."""
    namesrv, ns = start_namesrv(tmp_path)
    broker, addr = start_broker(tmp_path, ns)
    try:
        asyncio.run(_create_topic(ns, addr))
        before = {"namesrv": rss(namesrv), "broker": rss(broker)}
        runtime_info = RequestCode.GET_BROKER_RUNTIME_INFO
        targets = [
            Target("namesrv", ns),
            Target("broker", addr, codes="broker", probe_code=runtime_info),
        ]
        for seed, target in enumerate(targets):
            result = run_fuzz(target, 10_000, seed=seed, topic=TOPIC, timeout_s=50)
            print(target.name, {k: result[k] for k in ("frames", "frames_per_s", "answers")})
            assert result["violations"] == {}, result["output"]
            assert result["returncode"] == 0, result["output"]
            assert result["frames"] == 10_000
            assert int(str(result["probes_ok"])) >= 1
            assert int(str(result["peer_closes"])) > 0  # the fatal frames were sent and closed on
        asyncio.run(_still_serves(ns, addr))
        for name, daemon in (("namesrv", namesrv), ("broker", broker)):
            assert daemon.proc.poll() is None, daemon.tail(3000)
            assert rss(daemon) <= rss_bound_mb(before[name]), (name, before[name], rss(daemon))
            assert not tracebacks(daemon), tracebacks(daemon)
        assert not log_tracebacks(tmp_path)
    finally:
        broker.stop()
        namesrv.stop()
