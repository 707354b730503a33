"""``mqadmin getBrokerEpoch`` against real processes (O-03; GET_BROKER_EPOCH_CACHE, 1007).

One mqnamesrv with an embedded single-node controller (``enableControllerInNamesrv=true``,
profile CTRL1), a controller-mode broker ``broker-a`` and a plain broker ``broker-b``.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from rocketpy.client.admin import AdminClient
from rocketpy.common.codes import ResponseCode
from rocketpy.tools.children import free_ports
from tests.helpers.broker_client import JavaLikeClient
from tests.helpers.processes import Daemon, run_bin, start_broker, start_namesrv

pytestmark = pytest.mark.process

CONTROLLER_BOOT = re.compile(
    r"The ControllerManager boot success\. serializeType=JSON, address (\S+)"
)
BROKER_KEYS = (
    "enableControllerMode=true\nbrokerHeartbeatInterval=200\ncontrollerHeartBeatTimeoutMills=1500\n"
    "syncBrokerMetadataPeriod=500\nsyncControllerMetadataPeriod=1000\nhaListenPort=0\n"
)
EPOCH_LINE = re.compile(r"#Epoch: EpochEntry\{epoch=(\d+), startOffset=(\d+), endOffset=(\d+)\}")


async def _wait_master(ns: str, timeout_s: float) -> str:
    admin = AdminClient(ns)
    try:
        async with asyncio.timeout(timeout_s):
            while True:
                found = (await admin.cluster_info()).brokers.get("broker-a")
                if found is not None and 0 in found.broker_addrs:
                    return found.broker_addrs[0]
                await asyncio.sleep(0.05)
    finally:
        await admin.close()


async def _send(addr: str, count: int) -> None:
    client = JavaLikeClient()
    try:
        for i in range(count):
            resp = await client.send(addr, "EpochTopic", b"epoch-%d" % i)
            assert resp.code == ResponseCode.SUCCESS, resp.remark
    finally:
        await client.close()


def test_admin_get_broker_epoch(tmp_path: Path) -> None:
    """1. Start mqnamesrv with an embedded controller, broker-a in controller mode and plain
    broker-b; wait until broker-a is master (brokerId 0); send 3 messages to it.
    2. getBrokerEpoch -b broker-a; -b <broker-a address>; -c DefaultCluster.
    Expected: broker-a's block names cluster, broker, address and brokerId 0 and one epoch
    ``epoch=1, startOffset=0, endOffset=<max offset>`` with max offset > 0 (the last epoch ends
    at the max offset); with -c broker-b is listed as not in controller mode and the command
    still exits 0; an unknown broker name fails with one stderr line."""
    (port,) = free_ports(1)
    namesrv, ns = start_namesrv(
        tmp_path,
        "enableControllerInNamesrv=true\ncontrollerDLegerGroup=group1\n"
        f"controllerDLegerPeers=n0-127.0.0.1:{port}\ncontrollerDLegerSelfId=n0\n"
        f"controllerStorePath={tmp_path / 'raft'}\ncontrollerStartupGraceMs=0\n",
    )
    daemons: list[Daemon] = [namesrv]
    try:
        controller = namesrv.wait_for(CONTROLLER_BOOT).group(1)
        extra = BROKER_KEYS + f"controllerAddr={controller}\n"
        a, a_addr = start_broker(tmp_path, ns, extra=extra, tag="a")
        daemons.append(a)
        b, b_addr = start_broker(tmp_path, ns, name="broker-b", tag="b")
        daemons.append(b)
        assert asyncio.run(_wait_master(ns, 20)) == a_addr
        asyncio.run(_send(a_addr, 3))

        by_name = run_bin(["mqadmin", "getBrokerEpoch", "-b", "broker-a", "-n", ns], tmp_path)
        assert by_name.returncode == 0, by_name.stdout + by_name.stderr
        out = by_name.stdout
        assert f"#clusterName\tDefaultCluster\n#brokerName\tbroker-a\n#brokerAddr\t{a_addr}" in out
        assert "#brokerId\t0" in out
        epochs = EPOCH_LINE.findall(out)
        assert len(epochs) == 1, out
        assert epochs[0][:2] == ("1", "0"), out
        assert int(epochs[0][2]) > 0
        by_addr = run_bin(["mqadmin", "getBrokerEpoch", "-b", a_addr, "-n", ns], tmp_path)
        assert by_addr.returncode == 0, by_addr.stderr
        assert EPOCH_LINE.findall(by_addr.stdout) == epochs

        cluster = run_bin(["mqadmin", "getBrokerEpoch", "-c", "DefaultCluster", "-n", ns], tmp_path)
        assert cluster.returncode == 0, cluster.stdout + cluster.stderr
        assert EPOCH_LINE.findall(cluster.stdout) == epochs
        assert f"#brokerAddr\t{b_addr}\n#Epoch: none (the broker is not in controller mode)" in (
            cluster.stdout
        )
        unknown = run_bin(["mqadmin", "getBrokerEpoch", "-b", "nope", "-n", ns], tmp_path)
        assert unknown.returncode == 1
        assert unknown.stderr.strip().startswith("getBrokerEpoch command failed: broker 'nope'")
    except BaseException:
        for d in daemons:
            print(d.output()[-4000:])
        raise
    finally:
        for d in reversed(daemons):
            d.stop()
