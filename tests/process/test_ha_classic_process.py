"""Classic master/slave as real processes: SYNC_MASTER double write (ha.md 2.4, issue 8)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from rocketpy.common.aio import wait_until
from rocketpy.common.codes import ResponseCode
from tests.helpers.broker_client import JavaLikeClient
from tests.helpers.processes import Daemon, start_broker, start_namesrv

pytestmark = pytest.mark.process

HA_KEYS = (
    "haListenPort=0\nhaSendHeartbeatInterval=200\nhaHousekeepingInterval=3000\n"
    "haReconnectInterval=100\n"
)
MASTER = HA_KEYS + "brokerId=0\nbrokerRole=SYNC_MASTER\ninSyncReplicas=2\ntotalReplicas=2\n"
MASTER += "slaveTimeout=1500\n"
SLAVE = HA_KEYS + "brokerId=1\nbrokerRole=SLAVE\n"
SEGMENT = 65536  # start_broker's mappedFileSizeCommitLog


def _on_disk(store: Path, offset: int, size: int) -> bytes:
    """Read the commit log file itself (what survives a crash of the slave process)."""
    path = store / "commitlog" / f"{offset - offset % SEGMENT:020d}"
    if not path.exists():
        return b""
    with path.open("rb") as f:
        f.seek(offset % SEGMENT)
        return f.read(size)


def _offset_of(msg_id: str) -> int:
    return int(msg_id[-16:], 16)  # offset message id: ip, port, commit-log offset (hex)


async def _send_until_ok(client: JavaLikeClient, addr: str) -> None:
    async with asyncio.timeout(20):
        while (await client.send(addr, "HaSync", b"probe")).code != ResponseCode.SUCCESS:
            pass  # each failed send already waited slaveTimeout: no busy loop


async def _scenario(
    master: str, slave_store: Path, stop_slave: Callable[[], None], start_slave: Callable[[], None]
) -> None:
    client = JavaLikeClient()
    try:
        await _send_until_ok(client, master)
        for i in range(20):
            body = b"sync-%04d-" % i + b"x" * 100
            resp = await client.send(master, "HaSync", body)
            assert resp.code == ResponseCode.SUCCESS, resp.remark
            offset = _offset_of(resp.ext("msgId") or "")
            record = _on_disk(slave_store, offset, 400)
            assert body in record, f"message {i} at {offset} not on the slave's disk"
        stop_slave()
        began = time.monotonic()
        resp = await client.send(master, "HaSync", b"while-slave-down")
        assert resp.code == ResponseCode.FLUSH_SLAVE_TIMEOUT
        assert time.monotonic() - began >= 1.4
        kept = _offset_of(resp.ext("msgId") or "")
        start_slave()
        await wait_until(lambda: b"while-slave-down" in _on_disk(slave_store, kept, 300), 20)
        resp = await client.send(master, "HaSync", b"after-return")
        assert resp.code == ResponseCode.SUCCESS
    finally:
        await client.close()


def test_ha_classic_sync_master_double_write(tmp_path: Path) -> None:
    """1. Start mqnamesrv, a SYNC_MASTER (inSyncReplicas=2, slaveTimeout=1.5 s) and a SLAVE that
    learns the master's HA address from its NameServer registration.
    2. Send 20 messages; after each SEND_OK read the slave's commit-log file at the offset.
    3. SIGTERM the slave and send one message. 4. Restart the slave on the same store.
    Expected: every SEND_OK message is already in the slave's file; with the slave down the send
    answers FLUSH_SLAVE_TIMEOUT (12) after >= slaveTimeout (the message is kept: the returning
    slave receives it); afterwards sends are SEND_OK again."""
    namesrv, ns = start_namesrv(tmp_path)
    slave_store = tmp_path / "slave-store"
    daemons: dict[str, Daemon] = {}
    try:
        daemons["m"], master = start_broker(tmp_path, ns, extra=MASTER, tag="master")
        daemons["s"], _ = start_broker(tmp_path, ns, extra=SLAVE, tag="slave", store=slave_store)

        def stop_slave() -> None:
            assert daemons.pop("s").stop() == 0

        def start_slave() -> None:
            daemons["s"], _ = start_broker(
                tmp_path, ns, extra=SLAVE, tag="slave", store=slave_store
            )

        asyncio.run(_scenario(master, slave_store, stop_slave, start_slave))
    finally:
        for d in daemons.values():
            d.stop()
        assert namesrv.stop() == 0, namesrv.output()
