"""DLedger CommitLog mode on a full disk: the store's clean pass marks the DLedger commit log
(the one sends go through) full, sends are refused with the disk-full status, and the store's
own pass deletes no DLedger data file (they are the member's to delete, and only once expired or
with ``cleanFileForciblyEnable``: see test_dledger_retention.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocketpy.broker.config import BrokerConfig
from rocketpy.broker.dledger_store import DLedgerMessageStore, member_config
from rocketpy.common.aio import wait_until
from rocketpy.dledger.commitlog_member.member import DLedgerMember
from rocketpy.store.commit_log.put_types import MessageToStore, PutMessageStatus
from tests.helpers.dledger_brokers import free_ports
from tests.helpers.dledger_store import leading, one_member_config

pytestmark = pytest.mark.integration


async def test_full_disk_refuses_dledger_sends_and_keeps_its_files(tmp_path: Path) -> None:
    """1. A one-member DLedger store (64 KiB data files) whose disk reads 50 % used; it leads;
    put 40 messages of 4 KiB (several data files). Expected: PUT_OK each, all dispatched.
    2. The disk reads 99 % used; one clean pass of the store; put again. Expected:
    SERVICE_NOT_AVAILABLE (the disk-full refusal), every data file still there (young files,
    forced cleaning off), every acknowledged message readable.
    3. The disk reads 50 % again; one clean pass; put. Expected: PUT_OK."""
    (port,) = free_ports(1)
    cfg = one_member_config(tmp_path / "store", port, fileReservedTime=0, messageIndexEnable=False)
    usage = [0.5]
    member = DLedgerMember(member_config(cfg, BrokerConfig(brokerName="broker-a")))
    store = DLedgerMessageStore(cfg, member, disk_usage=lambda _: usage[0])
    data_dir = tmp_path / "store" / "dledger-n0" / "data"
    async with leading(store):
        acked = []
        for i in range(40):
            body = bytes([i]) * 4096
            r = await store.put_message(MessageToStore(topic="T", queue_id=0, body=body))
            assert r.status is PutMessageStatus.PUT_OK, r.status
            acked.append((r.wrote_offset, body))
        await wait_until(lambda: store.max_offset_in_queue("T", 0) == 40, 10)
        files = sorted(data_dir.iterdir())
        assert len(files) >= 3

        usage[0] = 0.99
        assert await store.clean.run_once() == 0
        r = await store.put_message(MessageToStore(topic="T", queue_id=0, body=b"refused"))
        assert r.status is PutMessageStatus.SERVICE_NOT_AVAILABLE
        assert sorted(data_dir.iterdir()) == files
        for offset, body in acked:
            raw = store.look_message_by_offset(offset)
            assert raw is not None
            assert body in raw

        usage[0] = 0.5
        await store.clean.run_once()
        r = await store.put_message(MessageToStore(topic="T", queue_id=0, body=b"after"))
        assert r.status is PutMessageStatus.PUT_OK
