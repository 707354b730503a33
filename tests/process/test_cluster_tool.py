"""``make cluster``'s tool: start a throwaway cluster, see it serve, stop it in order."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest

from rocketpy.proxy.pb import definition_pb2 as pb
from rocketpy.proxy.pb import service_pb2 as spb
from rocketpy.proxy.pb import service_pb2_grpc
from tests.helpers.processes import bin_env, run_bin

pytestmark = pytest.mark.process


def _tool(action: str, directory: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "rocketpy.tools.cluster",
            action,
            "--dir",
            str(directory),
            "--base-port",
            "0",
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=bin_env(directory / "test-logs"),
        check=False,
    )


def test_cluster_start_prints_addresses_and_stop_cleans_up(tmp_path: Path) -> None:
    """1. start on free ports. 2. The summary names each address and how to stop. 3. mqadmin
    clusterList, run at once, lists the three brokers of broker-a, one of them the master
    (BID 0): start waited for the election. 4. stop ends every recorded
    process, brokers before NameServer; the three controllers form one group and the three
    controller-mode brokers one broker-set."""
    directory = tmp_path / "cluster"
    started = _tool("start", directory)
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        assert "make cluster-stop" in started.stdout
        match = re.search(r"NAMESRV_ADDR=(\S+)", started.stdout)
        assert match is not None
        assert "warning" not in started.stdout
        # start returns once the controllers elected a master and every broker registered:
        # clients find a route right away, no polling.
        listed = run_bin(["mqadmin", "clusterList", "-n", match.group(1)], tmp_path)
        assert listed.returncode == 0, listed.stderr
        members = json.loads((directory / "cluster.json").read_text())["members"]
        assert [m["role"] for m in members] == ["namesrv", *["controller"] * 3, *["broker"] * 3]
        rows = [line.split() for line in listed.stdout.splitlines() if "broker-a  " in line]
        assert len(rows) == 3, listed.stdout
        assert "0" in [row[2] for row in rows], listed.stdout
        meta = run_bin(["mqadmin", "getControllerMetaData", "-a", members[1]["address"]], tmp_path)
        assert meta.returncode == 0, meta.stderr
        assert meta.stdout.count("#Peer:") == 3
    finally:
        stopped = _tool("stop", directory)
    assert stopped.returncode == 0
    assert stopped.stdout.index("stopped broker-a-n0") < stopped.stdout.index("stopped namesrv")
    assert not (directory / "cluster.json").exists()


def test_cluster_embedded_controllers_in_namesrvs(tmp_path: Path) -> None:
    """1. start --embedded on free ports. 2. Wait until a NameServer lists broker-a.
    Expected: three NameServers carry the controller group (each recorded twice: as namesrv
    and as controller, same pid; no mqcontroller process); the brokers register with all three
    NameServers; getControllerMetaData on an embedded controller names three peers and a
    leader; getSyncStateSet names a master; stop ends every process and removes the state."""
    directory = tmp_path / "cluster"
    started = _tool("start", directory, "--embedded")
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        members = json.loads((directory / "cluster.json").read_text())["members"]
        assert [m["role"] for m in members] == [*["namesrv", "controller"] * 3, *["broker"] * 3]
        assert members[0]["pid"] == members[1]["pid"]
        assert all(m["name"].startswith(("namesrv", "controller", "broker")) for m in members)
        namesrvs = [m["address"] for m in members if m["role"] == "namesrv"]
        controllers = [m["address"] for m in members if m["role"] == "controller"]
        assert f"NAMESRV_ADDR={';'.join(namesrvs)}" in started.stdout
        deadline = time.monotonic() + 30
        while True:
            listed = [run_bin(["mqadmin", "clusterList", "-n", ns], tmp_path) for ns in namesrvs]
            if all("broker-a  " in out.stdout for out in listed) or time.monotonic() > deadline:
                break
            time.sleep(0.3)
        assert all("broker-a  " in out.stdout for out in listed), [o.stdout for o in listed]
        meta = run_bin(["mqadmin", "getControllerMetaData", "-a", controllers[1]], tmp_path)
        assert meta.returncode == 0, meta.stderr
        assert meta.stdout.count("#Peer:") == 3
        assert re.search(r"#ControllerLeaderAddress\t127\.0\.0\.1:\d+", meta.stdout)
        sss = run_bin(
            ["mqadmin", "getSyncStateSet", "-a", controllers[0], "-b", "broker-a"], tmp_path
        )
        assert re.search(r"#MasterAddr\t127\.0\.0\.1:\d+", sss.stdout), sss.stdout + sss.stderr
    finally:
        stopped = _tool("stop", directory)
    assert stopped.returncode == 0
    assert not (directory / "cluster.json").exists()
    assert not any(_alive(m["pid"]) for m in members)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize("mode", ["local", "cluster"])
def test_cluster_with_a_grpc_proxy_prints_its_endpoints(tmp_path: Path, mode: str) -> None:
    """``make cluster PROXY=local|cluster``: 1. start --proxy <mode> on free ports. 2. local:
    each broker is followed by a "proxy" member with its pid (``--enable-proxy``); cluster: one
    mqproxy process after the brokers. 3. GRPC_ENDPOINTS lists them. 4. A 5.x client's QueryRoute
    and SendMessage through the first endpoint succeed for a topic made with mqadmin. 5. stop
    ends every process."""
    directory = tmp_path / "cluster"
    started = _tool("start", directory, "--proxy", mode)
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        members = json.loads((directory / "cluster.json").read_text())["members"]
        roles = [m["role"] for m in members]
        if mode == "local":
            assert roles == ["namesrv", *["controller"] * 3, *["broker", "proxy"] * 3]
            assert all(members[i]["pid"] == members[i + 1]["pid"] for i in (4, 6, 8))
        else:
            assert roles == ["namesrv", *["controller"] * 3, *["broker"] * 3, "proxy"]
        proxies = [m["address"] for m in members if m["role"] == "proxy"]
        assert f"GRPC_ENDPOINTS={';'.join(proxies)}" in started.stdout
        namesrv = members[0]["address"]
        made = run_bin(
            ["mqadmin", "updateTopic", "-n", namesrv, "-c", "DefaultCluster", "-t", "ToolTopic",
             "-a", "+message.type=NORMAL"],
            tmp_path,
        )  # fmt: skip
        assert made.returncode == 0, made.stdout + made.stderr
        assert asyncio.run(_route_and_send(proxies[0])) == pb.Code.OK
    finally:
        stopped = _tool("stop", directory)
    assert stopped.returncode == 0
    assert not any(_alive(m["pid"]) for m in members)


async def _route_and_send(endpoint: str) -> int:
    """QueryRoute (retried while the new topic reaches the NameServer), then one SendMessage;
    the send's status code."""
    meta = (("x-mq-client-id", "tool@1"), ("x-mq-language", "PYTHON"))
    async with grpc.aio.insecure_channel(endpoint) as channel:
        stub = service_pb2_grpc.MessagingServiceStub(channel)
        async with asyncio.timeout(30):
            while True:
                route = await stub.QueryRoute(
                    spb.QueryRouteRequest(topic=pb.Resource(name="ToolTopic")),
                    metadata=meta, timeout=5,
                )  # fmt: skip
                if route.status.code == pb.Code.OK:
                    break
                await asyncio.sleep(0.3)
        msg = pb.Message(
            topic=pb.Resource(name="ToolTopic"), body=b"hello",
            system_properties=pb.SystemProperties(
                message_id="TOOL1", message_type=pb.MessageType.NORMAL
            ),
        )  # fmt: skip
        sent = await stub.SendMessage(
            spb.SendMessageRequest(messages=[msg]), metadata=meta, timeout=10
        )
        return int(sent.status.code)
