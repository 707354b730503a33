"""Brokers in controller mode against three real mqcontroller processes (issue 7 section 1).

Scenarios R-01 (persistent ids), B-01 (start-up: fenced, master registers as brokerId 0) and the
controller half of B-02 (failover, old master rejoins as slave). Until AutoSwitch HA is wired
into the broker the SyncStateSet only ever holds the master, so the failover test runs the
controllers with ``enableElectUncleanMaster=true``: the survivor is elected from outside the set.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from rocketpy.client.admin import AdminClient
from rocketpy.common import fastjson
from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.transport.client import RemotingClient
from tests.helpers.broker_client import JavaLikeClient
from tests.helpers.processes import Daemon, start_broker, start_controllers, start_namesrv

pytestmark = pytest.mark.process

CONTROLLER_KEYS = "enableElectUncleanMaster=true\n"
BROKER_KEYS = (
    "enableControllerMode=true\nbrokerHeartbeatInterval=200\ncontrollerHeartBeatTimeoutMills=1500\n"
    "syncBrokerMetadataPeriod=500\ncheckSyncStateSetPeriod=500\nsyncControllerMetadataPeriod=1000\n"
    "haListenPort=0\n"
)
TOPIC = "CtlModeTopic"


def _identity(store: Path) -> str:
    return (store / "brokerIdentity").read_text(encoding="utf-8")


async def _broker_addrs(ns: str) -> dict[int, str]:
    admin = AdminClient(ns)
    try:
        info = await admin.cluster_info()
    finally:
        await admin.close()
    found = info.brokers.get("broker-a")
    return dict(found.broker_addrs) if found else {}


async def _wait_addrs(ns: str, want: dict[int, str], timeout_s: float) -> float:
    """Wait until the NameServer's broker-a addresses are ``want``; return the seconds taken."""
    began = time.monotonic()
    async with asyncio.timeout(timeout_s):
        while (got := await _broker_addrs(ns)) != want:
            del got
            await asyncio.sleep(0.05)
    return time.monotonic() - began


async def _epochs(addr: str) -> list[int]:
    client = RemotingClient(name="test")
    try:
        request = RemotingCommand.request(RequestCode.GET_BROKER_EPOCH_CACHE, None)
        resp = await client.invoke(addr, request, 5)
    finally:
        await client.close()
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return [e["epoch"] for e in fastjson.loads(resp.body or b"{}")["epochList"]]


async def _send(addr: str) -> int:
    client = JavaLikeClient()
    try:
        return (await client.send(addr, TOPIC, b"hello")).code
    finally:
        await client.close()


async def _send_until_ok(addr: str, timeout_s: float) -> None:
    async with asyncio.timeout(timeout_s):
        while await _send(addr) != ResponseCode.SUCCESS:
            await asyncio.sleep(0.05)


def _start(tmp: Path, ns: str, tag: str, controllers: list[str]) -> tuple[Daemon, str]:
    extra = BROKER_KEYS + f"controllerAddr={';'.join(controllers)}\n"
    return start_broker(tmp, ns, extra=extra, tag=tag, store=tmp / tag)


def test_controller_mode_failover_and_rejoin(tmp_path: Path) -> None:
    """1. Start mqnamesrv, three mqcontrollers (unclean election on) and brokers b1 then b2 of
    broker-a in controller mode.
    2. Check: identity files hold ids 1 and 2; the NameServer shows b1 as brokerId 0 and b2 as
    brokerId 2; b1 accepts a send, b2 refuses it; b1's epoch file holds epoch 1.
    3. SIGKILL b1. Expected: within 5 s the NameServer shows b2 as brokerId 0, b2 accepts a
    send and its epoch file holds epoch 2.
    4. Restart b1 on its store. Expected: it keeps id 1 (no temp file left) and rejoins as
    slave: the NameServer shows {0: b2, 1: b1}."""
    namesrv, ns = start_namesrv(tmp_path)
    daemons: dict[str, Daemon] = {}
    ctl_daemons, ctl_addrs, _ = start_controllers(tmp_path, 3, CONTROLLER_KEYS)
    try:
        daemons["b1"], b1 = _start(tmp_path, ns, "b1", ctl_addrs)
        daemons["b2"], b2 = _start(tmp_path, ns, "b2", ctl_addrs)
        asyncio.run(_wait_addrs(ns, {0: b1, 2: b2}, 15))
        assert _identity(tmp_path / "b1") == "DefaultCluster#broker-a#1"
        assert _identity(tmp_path / "b2") == "DefaultCluster#broker-a#2"
        assert asyncio.run(_send(b1)) == ResponseCode.SUCCESS
        assert asyncio.run(_send(b2)) != ResponseCode.SUCCESS
        assert asyncio.run(_epochs(b1)) == [1]

        killed = daemons.pop("b1")
        killed.proc.kill()
        killed.stop()  # reaps the process and closes its pipes
        took = asyncio.run(_wait_addrs(ns, {0: b2}, 10))
        assert took < 5.0, f"failover took {took:.1f} s"
        asyncio.run(_send_until_ok(b2, 5))
        assert asyncio.run(_epochs(b2)) == [2]

        daemons["b1"], b1_again = _start(tmp_path, ns, "b1", ctl_addrs)
        asyncio.run(_wait_addrs(ns, {0: b2, 1: b1_again}, 10))
        assert _identity(tmp_path / "b1") == "DefaultCluster#broker-a#1"
        assert not (tmp_path / "b1" / "brokerIdentity-temp").exists()
        assert asyncio.run(_send(b1_again)) != ResponseCode.SUCCESS
    except BaseException:
        for name, d in daemons.items():
            print(f"===== {name}\n{d.output()[-6000:]}")
        raise
    finally:
        for d in daemons.values():
            d.stop()
        for d in ctl_daemons:
            d.stop()
        assert namesrv.stop() == 0, namesrv.output()
