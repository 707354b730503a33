"""2m-2s-sync with a frozen slave (SIGSTOP): sends time out, nothing acknowledged is lost
(ha.md 2.4, 5.x semantics; issue 8)."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import pytest

from rocketpy.common.aio import wait_until
from rocketpy.common.codes import ResponseCode
from tests.helpers.broker_client import JavaLikeClient
from tests.helpers.processes import Daemon, start_broker, start_namesrv

pytestmark = pytest.mark.process

HA_KEYS = (
    "haListenPort=0\nhaSendHeartbeatInterval=200\nhaHousekeepingInterval=5000\n"
    "haReconnectInterval=100\n"
)
MASTER = HA_KEYS + "brokerId=0\nbrokerRole=SYNC_MASTER\ninSyncReplicas=2\ntotalReplicas=2\n"
MASTER += "slaveTimeout=1000\n"
SLAVE = HA_KEYS + "brokerId=1\nbrokerRole=SLAVE\n"
SEGMENT = 65536  # start_broker's mappedFileSizeCommitLog


def _on_disk(store: Path, offset: int, size: int) -> bytes:
    path = store / "commitlog" / f"{offset - offset % SEGMENT:020d}"
    if not path.exists():
        return b""
    with path.open("rb") as f:
        f.seek(offset % SEGMENT)
        return f.read(size)


def _offset_of(msg_id: str) -> int:
    return int(msg_id[-16:], 16)  # offset message id: ip, port, commit-log offset (hex)


async def _scenario(master: str, slave: Daemon, slave_store: Path) -> None:
    client = JavaLikeClient()
    acked: dict[int, bytes] = {}
    try:
        async with asyncio.timeout(20):
            while (await client.send(master, "Frozen", b"probe")).code != ResponseCode.SUCCESS:
                pass  # each failed send already waited slaveTimeout
        for i in range(10):
            body = b"before-%02d" % i
            resp = await client.send(master, "Frozen", body)
            assert resp.code == ResponseCode.SUCCESS, resp.remark
            acked[_offset_of(resp.ext("msgId") or "")] = body
        os.kill(slave.proc.pid, signal.SIGSTOP)
        try:
            for i in range(3):
                began = time.monotonic()
                resp = await client.send(master, "Frozen", b"frozen-%02d" % i)
                assert resp.code == ResponseCode.FLUSH_SLAVE_TIMEOUT, resp.remark
                assert time.monotonic() - began >= 0.9
                acked[_offset_of(resp.ext("msgId") or "")] = b"frozen-%02d" % i
        finally:
            os.kill(slave.proc.pid, signal.SIGCONT)
        resp = await client.send(master, "Frozen", b"after-thaw")
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        acked[_offset_of(resp.ext("msgId") or "")] = b"after-thaw"
        await wait_until(
            lambda: all(body in _on_disk(slave_store, off, 200) for off, body in acked.items()),
            10,
        )
    finally:
        await client.close()


def test_ha_classic_frozen_slave_times_out_then_catches_up(tmp_path: Path) -> None:
    """1. mqnamesrv, a SYNC_MASTER (inSyncReplicas=2, slaveTimeout=1 s) and its SLAVE.
    2. 10 sends are SEND_OK. 3. SIGSTOP the slave (connection stays open, no acks); send 3.
    4. SIGCONT; send once more.
    Expected: the 3 sends answer FLUSH_SLAVE_TIMEOUT (12) after >= slaveTimeout (stored on the
    master); after the thaw the send is SEND_OK at once and every message, SEND_OK or timed
    out, is in the slave's commit-log file at the master's offset."""
    namesrv, ns = start_namesrv(tmp_path)
    slave_store = tmp_path / "slave-store"
    daemons: list[Daemon] = []
    try:
        master_daemon, master = start_broker(tmp_path, ns, extra=MASTER, tag="master")
        daemons.append(master_daemon)
        slave, _ = start_broker(tmp_path, ns, extra=SLAVE, tag="slave", store=slave_store)
        daemons.append(slave)
        asyncio.run(_scenario(master, slave, slave_store))
    finally:
        for d in reversed(daemons):
            d.stop()
        assert namesrv.stop() == 0, namesrv.output()
