"""``bin/mqcontroller`` as three real processes: leader election, a fake broker's registration and
master, liveness-driven re-election, leader SIGKILL, lost majority, follower redirection, malformed
requests (scenarios C-01, C-12, C-14, C-16, P-05)."""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.common.errors import RemotingError
from rocketpy.remoting.transport.client import RemotingClient
from rocketpy.tools.children import free_ports
from tests.helpers.controller_client import FakeBroker
from tests.helpers.processes import Daemon, run_bin, start_controllers, start_namesrv

EMBEDDED_BOOT = re.compile(
    r"The ControllerManager boot success\. serializeType=JSON, address (\S+)"
)

pytestmark = pytest.mark.process


@pytest.fixture
def group(tmp_path: Path) -> Iterator[tuple[list[Daemon], list[str]]]:
    daemons, addrs, _ = start_controllers(tmp_path)
    yield daemons, addrs
    for d in daemons:
        d.stop()


@pytest.fixture
async def client() -> AsyncIterator[RemotingClient]:
    c = RemotingClient(name="fake-broker", connect_timeout_s=1.0)
    yield c
    await c.close()


async def _leader(client: RemotingClient, addrs: list[str], timeout_s: float = 10.0) -> str:
    """Poll CONTROLLER_GET_METADATA_INFO until one node says it is the serving leader."""
    probe = FakeBroker(client, 0, "")
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for addr in addrs:
            with contextlib.suppress(RemotingError, TimeoutError):
                meta = await probe.call(addr, RequestCode.CONTROLLER_GET_METADATA_INFO)
                if meta.ext("isLeader") == "true":
                    return addr
        await asyncio.sleep(0.05)
    raise AssertionError(f"no controller leader among {addrs}")


async def _beat(broker: FakeBroker, addrs: list[str]) -> None:
    """A broker's heartbeat sender: to every controller every 200 ms (1 s timeout)."""
    while True:
        for addr in addrs:
            with contextlib.suppress(RemotingError, TimeoutError, OSError):
                await broker.heartbeat(addr, timeout_ms=1000)
        await asyncio.sleep(0.2)


async def test_c12_c14_controller_group_failover(
    group: tuple[list[Daemon], list[str]], client: RemotingClient
) -> None:
    """1. Three mqcontroller processes elect a leader. 2. Fake brokers 1 and 2 join through the
    leader, heart-beat to all three, 1 is elected and the set becomes {1,2}; a follower answers
    writes with 2007 and names the leader in its metadata. 3. Broker 1's heartbeats stop.
    Expected: the leader elects 2 (masterEpoch 2) within 5 s. 4. SIGKILL the leader. Expected: a
    new leader within 10 s reports master 2 / epoch 2. 5. Stop one more controller. Expected:
    writes on the survivor fail (2007 or SYSTEM_ERROR); a malformed request gets SYSTEM_ERROR
    naming the field and the node keeps answering metadata."""
    daemons, addrs = group
    leader = await _leader(client, addrs)
    c2 = RemotingClient(name="b2")
    b1 = FakeBroker(client, 1, "127.0.0.1:10911")
    b2 = FakeBroker(c2, 2, "127.0.0.1:10912")
    async with asyncio.TaskGroup() as tg:
        beat1 = tg.create_task(_beat(b1, addrs))
        beat2 = tg.create_task(_beat(b2, addrs))
        try:
            await b1.join(leader)
            await b2.join(leader)
            assert (await b1.elect_me(leader)).code == ResponseCode.SUCCESS
            assert (await b1.alter(leader, {1, 2}, 1, 1)).code == ResponseCode.SUCCESS
            follower = next(a for a in addrs if a != leader)
            refused = await b2.next_id(follower)
            assert refused.code == ResponseCode.CONTROLLER_NOT_LEADER
            meta = await b2.call(follower, RequestCode.CONTROLLER_GET_METADATA_INFO)
            assert meta.ext("controllerLeaderAddress") == leader
            beat1.cancel()
            started = time.monotonic()
            await _wait_master(b2, leader, 2, 5.0)
            assert time.monotonic() - started < 5.0
            killed = addrs.index(leader)
            daemons[killed].proc.kill()
            daemons[killed].stop()
            rest = [a for a in addrs if a != leader]
            new_leader = await _leader(c2, rest)
            info = await b2.replica_info(new_leader)
            assert (info.ext("masterBrokerId"), info.ext("masterEpoch")) == ("2", "2")
            other = next(a for a in rest if a != new_leader)
            daemons[addrs.index(other)].stop()
            survivor = new_leader
            write = await b2.apply_id(survivor, broker_id=3)
            assert write.code in (ResponseCode.CONTROLLER_NOT_LEADER, ResponseCode.SYSTEM_ERROR)
            bad = await b2.call(
                survivor, RequestCode.CONTROLLER_REGISTER_BROKER, ext={"brokerName": "x"}
            )
            assert bad.code == ResponseCode.SYSTEM_ERROR
            assert "clusterName" in (bad.remark or "")
            alive = await b2.call(survivor, RequestCode.CONTROLLER_GET_METADATA_INFO)
            assert alive.code == ResponseCode.SUCCESS
        finally:
            beat1.cancel()
            beat2.cancel()
            await c2.close()


async def _wait_master(broker: FakeBroker, controller: str, master: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        info = await broker.replica_info(controller)
        if info.ext("masterBrokerId") == str(master):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"master {master} not elected within {timeout_s} s")


def test_mqcontroller_bad_config_exits_2(tmp_path: Path) -> None:
    """1. No controllerDLegerPeers; 2. a self id not among the peers. Expected: exit 2 with one
    line naming the key, before binding anything."""
    conf = tmp_path / "c.conf"
    conf.write_text("controllerDLegerSelfId=n0\n")
    missing = run_bin(["mqcontroller", "-c", str(conf)], tmp_path)
    assert missing.returncode == 2
    assert "controllerDLegerPeers" in missing.stderr
    assert missing.stderr.strip().count("\n") == 0
    conf.write_text("controllerDLegerPeers=n0-127.0.0.1:9877\ncontrollerDLegerSelfId=n9\n")
    stranger = run_bin(["mqcontroller", "-c", str(conf)], tmp_path)
    assert stranger.returncode == 2
    assert "controllerDLegerSelfId" in stranger.stderr


def test_namesrv_with_embedded_controller(tmp_path: Path) -> None:
    """1. mqnamesrv with enableControllerInNamesrv=true and a one-member controller group.
    Expected: both boot lines (NameServer, then ControllerManager on the DLedger port); the
    controller elects itself and mqadmin getControllerMetaData names it leader; SIGTERM stops
    both with exit 0."""
    (port,) = free_ports(1)
    daemon, _ = start_namesrv(
        tmp_path,
        "enableControllerInNamesrv=true\ncontrollerDLegerGroup=g1\n"
        f"controllerDLegerPeers=n0-127.0.0.1:{port}\ncontrollerDLegerSelfId=n0\n"
        f"controllerStorePath={tmp_path / 'raft'}\n"
        "controllerDLegerHeartBeatTimeIntervalMs=100\ncontrollerDLegerElectionTimeoutMs=300\n",
    )
    try:
        match = daemon.wait_for(EMBEDDED_BOOT)
        assert match.group(1) == f"127.0.0.1:{port}"
        deadline = time.monotonic() + 10
        while True:
            meta = run_bin(["mqadmin", "getControllerMetaData", "-a", match.group(1)], tmp_path)
            if "#ControllerLeaderId\tn0" in meta.stdout or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert "#ControllerLeaderId\tn0" in meta.stdout, meta.stdout + meta.stderr
    finally:
        assert daemon.stop() == 0, daemon.output()
