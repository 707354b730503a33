"""``bin/mqbroker`` as a real process next to a real ``bin/mqnamesrv``."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path

import pytest

from rocketpy.common.codes import ResponseCode
from tests.helpers.broker_client import JavaLikeClient, decode_records
from tests.helpers.processes import BROKER_BOOT, run_bin, start_broker, start_namesrv

pytestmark = pytest.mark.process


def _cluster_addrs(tmp: Path, namesrv: str) -> list[str]:
    out = run_bin(["mqadmin", "clusterList", "-n", namesrv], tmp)
    assert out.returncode == 0, out.stderr
    return [line.split()[3] for line in out.stdout.splitlines()[1:] if line.strip()]


def test_broker_boot_line_registration_and_sigterm(tmp_path: Path) -> None:
    """1. Start mqnamesrv and mqbroker (listenPort=0). 2. Parse the boot line. 3. mqadmin
    clusterList. 4. SIGTERM the broker.
    Expected: the boot line names broker-a, 127.0.0.1 and the real port, and the NameServer;
    clusterList lists exactly that address; the broker exits 0, its log shows the stop phases in
    STYLE.md order, and clusterList no longer lists it."""
    namesrv, ns_addr = start_namesrv(tmp_path)
    try:
        broker, addr = start_broker(tmp_path, ns_addr)
        try:
            match = BROKER_BOOT.search(broker.output())
            assert match is not None
            assert match.group(1) == "broker-a"
            assert match.group(3) == ns_addr
            host, port = addr.rsplit(":", 1)
            assert host == "127.0.0.1"
            assert int(port) > 0
            assert _cluster_addrs(tmp_path, ns_addr) == [addr]
        finally:
            assert broker.stop() == 0, broker.output()
        events = [
            json.loads(line).get("event", "")
            for line in (tmp_path / "logs" / "broker.log").read_text().splitlines()
        ]
        phases = [e for e in events if e.startswith("broker shutdown")]
        assert phases == [
            "broker shutdown: unregister from name servers",
            "broker shutdown: stop accepting, finish in-flight requests",
            "broker shutdown: persist metadata",
            "broker shutdown: flush commit log and queues, write checkpoint, close files",
            "broker shutdown: done",
        ]
        assert _cluster_addrs(tmp_path, ns_addr) == []
    finally:
        assert namesrv.stop() == 0, namesrv.output()


def test_broker_print_config_and_bad_config(tmp_path: Path) -> None:
    """-p prints broker and store keys and exits 0; -n overrides the file; a bad value exits 2
    with one line naming the key."""
    conf = tmp_path / "b.conf"
    conf.write_text("brokerName=b1\nnamesrvAddr=10.0.0.1:9876\nstorePathRootDir=/x/store\n")
    printed = run_bin(["mqbroker", "-c", str(conf), "-n", "127.0.0.1:9876", "-p"], tmp_path)
    assert printed.returncode == 0, printed.stderr
    lines = printed.stdout.splitlines()
    assert "brokerName=b1" in lines
    assert "namesrvAddr=127.0.0.1:9876" in lines
    assert "storePathRootDir=/x/store" in lines
    assert "brokerRole=ASYNC_MASTER" in lines
    conf.write_text("listenPort=-5\n")
    bad = run_bin(["mqbroker", "-c", str(conf)], tmp_path)
    assert bad.returncode == 2
    assert bad.stderr.strip().count("\n") == 0
    assert "listenPort" in bad.stderr


async def _send_all(addr: str, count: int) -> list[bytes]:
    client = JavaLikeClient()
    acked: list[bytes] = []
    try:
        for i in range(count):
            body = f"durable-{i:04d}".encode() + b"." * 200
            resp = await client.send(addr, "Durable", body)
            assert resp.code == ResponseCode.SUCCESS, resp.remark
            acked.append(body)
    finally:
        await client.close()
    return acked


async def _read_all(addr: str, count: int) -> list[bytes]:
    client = JavaLikeClient()
    got: list[bytes] = []
    try:
        offset = 0
        async with asyncio.timeout(20):
            while offset < count:
                resp = await client.pull(
                    addr, "reader", "Durable", offset, expression="*", suspend_ms=1000
                )
                if resp.code == ResponseCode.SUCCESS and resp.body is not None:
                    got.extend(m.body for m in decode_records(resp.body))
                offset = int(resp.ext("nextBeginOffset") or offset)
    finally:
        await client.close()
    return got


def test_broker_sigkill_restart_keeps_acknowledged_messages(tmp_path: Path) -> None:
    """1. Send 400 messages (the 64 KiB commit log rolls several times), each acknowledged.
    2. SIGKILL the broker. 3. Start a broker on the same store.
    Expected: after abnormal recovery every acknowledged message is readable, in order."""
    namesrv, ns_addr = start_namesrv(tmp_path)
    store = tmp_path / "store"
    try:
        broker, addr = start_broker(tmp_path, ns_addr, store=store)
        try:
            acked = asyncio.run(_send_all(addr, 400))
        finally:
            broker.proc.send_signal(signal.SIGKILL)
            broker.stop()
        assert (store / "abort").exists()
        again, addr2 = start_broker(tmp_path, ns_addr, store=store)
        try:
            assert asyncio.run(_read_all(addr2, 400)) == acked
        finally:
            assert again.stop() == 0, again.output()
    finally:
        namesrv.stop()
