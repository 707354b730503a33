"""A one-member DLedger CommitLog group in process (dledger-commitlog.md sections 1.4, 1.5,
3.4): the member elects itself, the broker becomes master, and a clean restart resumes the
queues where the DLedger log ends."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest

from rocketpy.broker.dledger_store import DLedgerStoreAdapter
from rocketpy.broker.service import BrokerService
from rocketpy.common.aio import wait_until
from rocketpy.common.codes import ResponseCode
from rocketpy.dledger.commitlog_member.state import Role
from tests.helpers.broker_client import JavaLikeClient, decode_records
from tests.helpers.dledger_brokers import free_ports
from tests.integration.broker.conftest import BrokerFactory

pytestmark = pytest.mark.integration

TOPIC = "DLedgerSingle"


def _dledger_keys(port: int) -> dict[str, object]:
    return {
        "enableDLegerCommitLog": True,
        "dLegerGroup": "broker-a",
        "dLegerPeers": f"n0-127.0.0.1:{port}",
        "dLegerSelfId": "n0",
    }


async def _master(broker: BrokerService) -> DLedgerStoreAdapter:
    roles = broker.dledger
    assert roles is not None
    await wait_until(lambda: roles.is_master and not broker.runtime.is_slave, 15)
    assert broker.identity().broker_id == 0
    store = broker.store
    assert isinstance(store, DLedgerStoreAdapter)
    return store


async def test_single_member_group_masters_and_restart_resumes_queues(
    broker_factory: BrokerFactory, client: JavaLikeClient, tmp_path: Path
) -> None:
    """1. Start a broker whose DLedger group is itself. Expected: its slave id is 1 (n0 + 1);
    once its member leads with the log committed it is master, brokerId 0, writable.
    2. Send 5 messages to queue 0. Expected: SEND_OK with queue offsets 0-4; the records lie in
    dledger-n0/data at entry pos + 48 (the offsetMsgId's offset); the consume queue's max
    offset is 5.
    3. Stop it cleanly and start it again on the same store. Expected: master again; 3 more
    sends get queue offsets 5-7 (the queue table is rebuilt from the consume queues); a pull
    from offset 0 returns the 8 bodies in order; no abort file was left by the clean stop."""
    (port,) = free_ports(1)
    root = tmp_path / "dl"
    broker = await broker_factory(store_root=root, store=_dledger_keys(port))
    assert broker.dledger is not None
    assert broker.dledger.slave_id == 1
    store = await _master(broker)
    assert store.member.role is Role.LEADER
    for i in range(5):
        resp = await client.send(broker.address, TOPIC, f"first-{i}".encode())
        assert (resp.code, resp.ext("queueOffset")) == (ResponseCode.SUCCESS, str(i))
        offset = int((resp.ext("msgId") or "")[-16:], 16)
        header = store.store.commit_log.mfq.read(offset - 48, 48)
        assert header is not None
        assert int.from_bytes(header[24:32], "big") == offset - 48  # entry pos
    await wait_until(lambda: broker.store.max_offset_in_queue(TOPIC, 0) == 5, 5)
    assert (root / "dledger-n0" / "data").is_dir()
    async with asyncio.timeout(10):
        await broker.stop()
    assert not (root / "abort").exists()

    again = await broker_factory(store_root=root, store=_dledger_keys(port))
    await _master(again)
    for i in range(3):
        resp = await client.send(again.address, TOPIC, f"second-{i}".encode())
        assert (resp.code, resp.ext("queueOffset")) == (ResponseCode.SUCCESS, str(5 + i))
    await wait_until(lambda: again.store.max_offset_in_queue(TOPIC, 0) == 8, 5)
    resp = await client.pull(again.address, "g", TOPIC, 0, expression="*")
    assert resp.code == ResponseCode.SUCCESS
    bodies = [m.body for m in decode_records(resp.body or b"")]
    assert bodies == [f"first-{i}".encode() for i in range(5)] + [
        f"second-{i}".encode() for i in range(3)
    ]


async def test_peer_port_in_use_fails_start_and_releases_the_store(
    broker_factory: BrokerFactory, tmp_path: Path
) -> None:
    """1. Hold the member's peer port, start the broker. Expected: start raises (nothing
    serves). 2. Free the port, start again on the same store. Expected: it starts and masters
    (the failed start gave the store lock and the files back)."""
    (port,) = free_ports(1)
    root = tmp_path / "busy"
    holder = socket.socket()
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    holder.bind(("127.0.0.1", port))
    holder.listen()
    try:
        with pytest.raises(OSError):  # noqa: PT011 -- the bind error, whatever its errno
            await broker_factory(store_root=root, store=_dledger_keys(port))
    finally:
        holder.close()
    broker = await broker_factory(store_root=root, store=_dledger_keys(port))
    await _master(broker)
