"""SIGKILL and restart at the default segment sizes (issue 24): a controller-mode master and
slave and a classic slave come back within seconds, scanning only what was not dispatched, with
every acknowledged message.

The brokers run with upstream's 1 GiB CommitLog and 6 MB ConsumeQueue segments (the crash tests
elsewhere use 4-64 KiB ones, which never showed a recovery that grows with the segment). Each
broker's stores are deleted at the end: a segment takes its full size on disk when created.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import time
from pathlib import Path

import pytest

from rocketpy.client.admin import AdminClient, TopicSpec
from rocketpy.common.codes import ResponseCode
from rocketpy.common.errors import RemotingError
from tests.helpers.broker_client import JavaLikeClient, decode_records
from tests.helpers.controller_mode import (
    BROKER_KEYS,
    SAFE_BROKER_KEYS,
    SAFE_CONTROLLER_KEYS,
    broker_addrs,
    sync_state,
)
from tests.helpers.processes import Daemon, start_broker, start_controllers, start_namesrv

pytestmark = pytest.mark.process

TOPIC = "RestartTopic"
QUEUES = 4
DEFAULT_SEGMENTS = "mappedFileSizeCommitLog=1073741824\nmappedFileSizeConsumeQueue=6000000\n"
BOOT_LIMIT_S = 10.0


def _recovered(daemon: Daemon, deadline_s: float = 10.0) -> dict[str, object]:
    """The broker's last "commit log recovered" log line (JSON log in its log directory). The
    broker logs through a queue, so the line may land a moment after the boot line: wait for it
    up to ``deadline_s``."""
    log_dir = daemon.stderr_path.parent
    found: dict[str, object] = {}
    until = time.monotonic() + deadline_s
    while True:
        for line in (log_dir / "broker.log").read_text(errors="replace").splitlines():
            if "commit log recovered" in line:
                found = json.loads(line)
        if found or time.monotonic() >= until:
            return found
        time.sleep(0.1)


def _restart(tmp: Path, ns: str, tag: str, extra: str) -> tuple[Daemon, str, float]:
    began = time.monotonic()
    daemon, addr = start_broker(tmp, ns, extra=extra, tag=tag, store=tmp / tag)
    return daemon, addr, time.monotonic() - began


async def _create_topic(addrs: list[str]) -> None:
    admin = AdminClient("127.0.0.1:1")
    try:
        for addr in addrs:
            spec = TopicSpec(topic=TOPIC, read_queue_nums=QUEUES, write_queue_nums=QUEUES)
            await admin.create_topic(addr, spec)
    finally:
        await admin.close()


async def _send(addr: str, first: int, count: int, acked: dict[int, list[bytes]]) -> None:
    """Send ``count`` numbered messages round-robin over the queues; record the SEND_OK ones."""
    client = JavaLikeClient()
    try:
        async with asyncio.timeout(60):
            for i in range(first, first + count):
                body = f"msg-{i:06d}-".encode() * 20
                resp = await client.send(addr, TOPIC, body, queue_id=i % QUEUES)
                assert resp.code == ResponseCode.SUCCESS, (i, resp.code, resp.remark)
                acked.setdefault(i % QUEUES, []).append(body)
    finally:
        await client.close()


async def _read_all(addr: str, acked: dict[int, list[bytes]], timeout_s: float) -> None:
    """Pull every queue from 0 until every acknowledged body was read, in send order (a send
    that timed out and was retried may sit in between: at least once, in queue order)."""
    client = JavaLikeClient()
    try:
        async with asyncio.timeout(timeout_s):
            for q, want in acked.items():
                matched = offset = 0
                while matched < len(want):
                    resp = await client.pull(addr, "reader", TOPIC, offset, queue_id=q,
                                             expression="*", suspend_ms=300)  # fmt: skip
                    if resp.code == ResponseCode.SUCCESS and resp.body is not None:
                        for m in decode_records(resp.body):
                            if matched < len(want) and m.body == want[matched]:
                                matched += 1
                    offset = int(resp.ext("nextBeginOffset") or offset)
    finally:
        await client.close()


async def _wait_in_sync(controllers: list[str], want: frozenset[int], timeout_s: float) -> int:
    """Wait for broker-a's SyncStateSet to be ``want``; return the master's id."""
    async with asyncio.timeout(timeout_s):
        while True:
            with contextlib.suppress(RemotingError):
                master, _, members = await sync_state(controllers)
                if members == want and master is not None:
                    return master
            await asyncio.sleep(0.1)


async def _wait_master(ns: str, addr: str, timeout_s: float) -> None:
    async with asyncio.timeout(timeout_s):
        while (await broker_addrs(ns)).get(0) != addr:
            await asyncio.sleep(0.05)


def _kill(daemons: dict[str, Daemon], tag: str) -> None:
    daemons[tag].proc.kill()
    daemons.pop(tag).stop()


def _dump(daemons: dict[str, Daemon]) -> None:
    """Every broker's output tail (printed with a failure)."""
    for name, d in daemons.items():
        print(f"===== {name}\n{d.tail(6000)}")


def _assert_quick(daemon: Daemon, took: float, what: str) -> None:
    line = _recovered(daemon)
    assert took < BOOT_LIMIT_S, f"{what} booted in {took:.1f} s: {line}"
    assert line.get("start_from") == "dispatched", f"{what}: {line}"
    assert int(str(line.get("scanned_bytes"))) < 1 << 20, f"{what}: {line}"


def test_restart_default_segments_controller_mode_slave_then_master(tmp_path: Path) -> None:
    """1. NameServer, three controllers, b1 and b2 of broker-a in controller mode
    (allAckInSyncStateSet) with default segment sizes; 400 messages acknowledged by both.
    2. SIGKILL the slave b2, restart it. Expected: boot < 10 s, its recovery starts at the
    dispatched boundary and scans < 1 MiB; it rejoins the SyncStateSet.
    3. 200 more messages; SIGKILL the master b1: b2 takes over. Restart b1.
    Expected: b1 boots < 10 s the same way and rejoins as slave; every acknowledged message
    reads back from the new master, each queue in order."""
    namesrv, ns = start_namesrv(tmp_path)
    ctl_daemons, ctl, _ = start_controllers(tmp_path, 3, SAFE_CONTROLLER_KEYS)
    extra = BROKER_KEYS + SAFE_BROKER_KEYS + DEFAULT_SEGMENTS + f"controllerAddr={';'.join(ctl)}\n"
    daemons: dict[str, Daemon] = {}
    acked: dict[int, list[bytes]] = {}
    try:
        addrs = {}
        for tag in ("b1", "b2"):
            daemons[tag], addrs[tag], _ = _restart(tmp_path, ns, tag, extra)
        assert asyncio.run(_wait_in_sync(ctl, frozenset({1, 2}), 20)) == 1
        asyncio.run(_create_topic(list(addrs.values())))
        asyncio.run(_send(addrs["b1"], 0, 400, acked))

        _kill(daemons, "b2")
        daemons["b2"], addrs["b2"], took = _restart(tmp_path, ns, "b2", extra)
        _assert_quick(daemons["b2"], took, "slave b2")
        asyncio.run(_wait_in_sync(ctl, frozenset({1, 2}), 20))
        asyncio.run(_send_when_ready(addrs["b1"], acked, first=400))
        asyncio.run(_send(addrs["b1"], 401, 199, acked))

        _kill(daemons, "b1")
        asyncio.run(_wait_master(ns, addrs["b2"], 15))
        daemons["b1"], addrs["b1"], took = _restart(tmp_path, ns, "b1", extra)
        _assert_quick(daemons["b1"], took, "old master b1")
        asyncio.run(_wait_in_sync(ctl, frozenset({1, 2}), 20))
        asyncio.run(_read_all(addrs["b2"], acked, 30))
    except BaseException:
        _dump(daemons)
        raise
    finally:
        for d in daemons.values():
            d.stop()
        for d in ctl_daemons:
            d.stop()
        namesrv.stop()
        for tag in ("b1", "b2"):
            shutil.rmtree(tmp_path / tag, ignore_errors=True)


CLASSIC = (
    "haListenPort=0\nhaSendHeartbeatInterval=200\nhaHousekeepingInterval=3000\n"
    "haReconnectInterval=100\n"
)


def test_restart_default_segments_classic_slave_and_master(tmp_path: Path) -> None:
    """1. NameServer, a classic SYNC_MASTER and its SLAVE with default segment sizes; 400
    messages acknowledged (each waits for the slave).
    2. SIGKILL the slave, restart it. Expected: boot < 10 s, recovery from the dispatched
    boundary scanning < 1 MiB; 100 more sends succeed (the slave acks again).
    3. SIGKILL the master, restart it. Expected: the same; every acknowledged message reads
    back from it, each queue in order."""
    namesrv, ns = start_namesrv(tmp_path)
    daemons: dict[str, Daemon] = {}
    acked: dict[int, list[bytes]] = {}
    try:
        master_keys = CLASSIC + DEFAULT_SEGMENTS + "brokerId=0\nbrokerRole=SYNC_MASTER\n"
        master_keys += "inSyncReplicas=2\ntotalReplicas=2\nslaveTimeout=1500\n"
        daemons["m"], master, _ = _restart(tmp_path, ns, "m", master_keys)
        # The slave learns the master's HA address from its NameServer registration.
        slave_keys = CLASSIC + DEFAULT_SEGMENTS + "brokerId=1\nbrokerRole=SLAVE\n"
        daemons["s"], _, _ = _restart(tmp_path, ns, "s", slave_keys)
        asyncio.run(_create_topic([master]))
        asyncio.run(_send_when_ready(master, acked))
        asyncio.run(_send(master, 1, 399, acked))

        _kill(daemons, "s")
        daemons["s"], _, took = _restart(tmp_path, ns, "s", slave_keys)
        _assert_quick(daemons["s"], took, "classic slave")
        asyncio.run(_send_when_ready(master, acked, first=400))
        asyncio.run(_send(master, 401, 99, acked))

        _kill(daemons, "m")
        daemons["m"], master, took = _restart(tmp_path, ns, "m", master_keys)
        _assert_quick(daemons["m"], took, "classic master")
        asyncio.run(_read_all(master, acked, 30))
    except BaseException:
        _dump(daemons)
        raise
    finally:
        for d in daemons.values():
            d.stop()
        namesrv.stop()
        for tag in ("m", "s"):
            shutil.rmtree(tmp_path / tag, ignore_errors=True)


async def _send_when_ready(addr: str, acked: dict[int, list[bytes]], first: int = 0) -> None:
    """Send message ``first`` until SEND_OK (a SYNC_MASTER answers SLAVE_NOT_AVAILABLE until its
    slave has connected); record it."""
    client = JavaLikeClient()
    body = f"msg-{first:06d}-".encode() * 20
    try:
        async with asyncio.timeout(30):
            while True:
                resp = await client.send(addr, TOPIC, body, queue_id=first % QUEUES)
                if resp.code == ResponseCode.SUCCESS:
                    acked.setdefault(first % QUEUES, []).append(body)
                    return
                await asyncio.sleep(0.1)
    finally:
        await client.close()


def test_second_broker_on_a_locked_store_exits_naming_the_lock(tmp_path: Path) -> None:
    """1. Start a broker on a store. 2. Start a second broker on the same store.
    Expected: the second exits non-zero saying the lock is held, with the lock file's path,
    and leaves the running broker's files alone (its index files are all still there)."""
    namesrv, ns = start_namesrv(tmp_path)
    first, _ = start_broker(tmp_path, ns, tag="one", store=tmp_path / "store")
    try:
        index_files = sorted((tmp_path / "store" / "index").iterdir())
        second = Daemon(
            [str(first.argv[0]), "-c", str(tmp_path / "one.conf"), "-n", ns], tmp_path / "logs2"
        )
        code = second.proc.wait(30)
        out = second.output()
        second.stop()
        assert code != 0, out
        assert "Lock failed, MQ already started" in out, out
        assert str(tmp_path / "store" / "lock") in out, out
        assert sorted((tmp_path / "store" / "index").iterdir()) == index_files
    finally:
        first.stop()
        namesrv.stop()
