"""Metrics dumps from a real ``bin/mqbroker`` receiving real sends."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from rocketpy.common.aio import wait_until
from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.remoting.transport.client import RemotingClient
from tests.helpers.broker_client import JavaLikeClient
from tests.helpers.controller_client import FakeBroker
from tests.helpers.processes import start_broker, start_controllers, start_namesrv

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


def _controller_records(directory: Path) -> list[dict[str, Any]]:
    out = []
    for path in sorted(directory.glob("controller-group1-n0.*.jsonl")):
        out.extend(json.loads(line) for line in path.read_text().splitlines() if line)
    return out


async def test_metrics_dump_from_real_controller(tmp_path: Path) -> None:
    """1. Start a one-member mqcontroller group with metricsDumpInterval=200 (dump dir left at its
    default, ``<controllerStorePath>/metrics``). 2. A fake broker 1 of broker-a applies its id,
    registers and asks to be elected. 3. Wait until a dump shows the broker-set. 4. SIGTERM.
    Expected: every line is a version-1 controller record of n0, last as leader (boot role
    follower, then a ROLE_CHANGE to leader); the
    request counts (summed dCount) include one CONTROLLER_ELECT_MASTER (1002) and one
    CONTROLLER_REGISTER_BROKER (1003); exactly one ELECTION event, SUCCESS, master 1, epoch 1;
    the last record's broker-set broker-a has master 1, masterEpoch 1 and SyncStateSet [1]."""
    daemons, addrs, _ = start_controllers(tmp_path, 1, "metricsDumpInterval=200\n")
    dump_dir = tmp_path / "n0" / "raft" / "metrics"
    client = RemotingClient(name="fake-broker", connect_timeout_s=1.0)
    try:
        broker = FakeBroker(client, 1, "127.0.0.1:10911")

        def has_set() -> bool:
            records = _controller_records(dump_dir)
            return bool(records) and bool(records[-1]["brokerSets"])

        async with asyncio.timeout(20):
            while (await broker.call(addrs[0], RequestCode.CONTROLLER_GET_METADATA_INFO)).ext(
                "isLeader"
            ) != "true":
                await asyncio.sleep(0.05)
            await broker.join(addrs[0])
            # A lease far past the test's length: the check is the dump, not a heartbeat lapse,
            # and under load the 1 s lease of join() ran out before the last dump was written.
            await broker.heartbeat(addrs[0], timeout_ms=60_000)
            elected = await broker.elect_me(addrs[0])
            assert elected.code == ResponseCode.SUCCESS, elected.remark
            await wait_until(has_set, timeout_s=10)
    finally:
        # The controller stops before the fake broker's connection closes: a master's channel
        # closing makes it inactive and the controller re-elects (nobody left:
        # CONTROLLER_MASTER_NOT_AVAILABLE), an election the final dump showed when it won the
        # race with SIGTERM (seen in CI).
        assert daemons[0].stop() == 0, daemons[0].output()
        await client.close()
    records = _controller_records(dump_dir)
    assert all(r["version"] == 1 and r["node"]["type"] == "controller" for r in records)
    assert {r["node"]["controllerId"] for r in records} == {"n0"}
    last = records[-1]
    assert last["node"]["role"] == "leader"
    assert last["node"]["leaderId"] == "n0"
    roles = [(e["fromRole"], e["toRole"]) for r in records for e in r["events"] if "toRole" in e]
    assert roles[:2] == [(None, "follower"), ("follower", "leader")]
    sent: dict[int, int] = {}
    for r in records:
        for req in r["requests"]:
            sent[req["code"]] = sent.get(req["code"], 0) + req["dCount"]
    assert sent[1002] == 1
    assert sent[1003] == 1
    elections = [e for r in records for e in r["events"] if e["type"] == "ELECTION"]
    assert [
        (e["brokerName"], e["result"], e["masterBrokerId"], e["masterEpoch"]) for e in elections
    ] == [("broker-a", "SUCCESS", 1, 1)]
    (bset,) = last["brokerSets"]
    assert (bset["brokerName"], bset["masterBrokerId"], bset["masterEpoch"]) == ("broker-a", 1, 1)
    assert bset["syncStateSet"] == [1]
