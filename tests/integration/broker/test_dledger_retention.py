"""Retention of DLedger data files in one broker's store (dledger-commitlog.md section 1.6):
the member's clean-space pass deletes expired head data files, the ledger begin index, the
store's min offset and the consume queues follow, a full disk stops refusing sends once the
deletion made room, and a restart recovers from the first remaining data file.

One member on loopback, real files: data files are ``mappedFileSizeCommitLog`` long (upstream's
key for DLedger's ``mappedFileSizeForEntryData``), 64 KiB here. The disk's used ratio is the one
thing faked (a function standing in for ``statvfs``); file ages are real ``mtime``s set back
with ``os.utime``."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import os
import struct
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from rocketpy.broker.config import BrokerConfig
from rocketpy.broker.dledger_store import DLedgerMessageStore, member_config
from rocketpy.common.aio import wait_until
from rocketpy.dledger.commitlog_member.member import DLedgerMember
from rocketpy.dledger.commitlog_member.state import Role
from rocketpy.store.commit_log.put_types import MessageToStore, PutMessageStatus
from rocketpy.store.config import MessageStoreConfig
from rocketpy.store.get_types import GetMessageStatus
from tests.helpers.dledger_brokers import free_ports

pytestmark = pytest.mark.integration

_HEADER = struct.Struct(">iiqqq")  # magic, size, index, term, pos: the entry header's head
_TWO_HOURS_S = 2 * 3600


def _other_hour() -> str:
    """A ``deleteWhen`` that is not now: only the disk ratio can start a deletion."""
    return f"{(datetime.datetime.now().hour + 12) % 24:02d}"


def _config(root: Path, port: int, **extra: object) -> MessageStoreConfig:
    return MessageStoreConfig.build({
        "storePathRootDir": str(root), "mappedFileSizeCommitLog": 64 * 1024,
        "enableDLegerCommitLog": True, "dLegerGroup": "broker-a",
        "dLegerPeers": f"n0-127.0.0.1:{port}", "dLegerSelfId": "n0",
        "fileReservedTime": 0, "deleteWhen": _other_hour(), "messageIndexEnable": False,
        **extra,
    })  # fmt: skip


def _first_entry_index(path: Path) -> int:
    """The index field of the entry at the start of data file ``path`` (read independently)."""
    with path.open("rb") as f:
        magic, _size, index, _term, pos = _HEADER.unpack(f.read(_HEADER.size))
    assert magic == 1
    assert pos == int(path.name)
    return index


def _age(paths: list[Path]) -> None:
    old = time.time() - _TWO_HOURS_S
    for p in paths:
        os.utime(p, (old, old))


class _Node:
    """One member and its store over ``root``."""

    def __init__(
        self, cfg: MessageStoreConfig, usage: Callable[[Path], float], *, passes: bool = True
    ) -> None:
        """``passes=False``: no periodic clean-space pass, the test runs each one."""
        mcfg = member_config(cfg, BrokerConfig(brokerName="broker-a"))
        if not passes:
            mcfg = dataclasses.replace(mcfg, clean_space_interval_ms=3_600_000)
        self.member = DLedgerMember(mcfg, disk_usage=usage)
        self.store = DLedgerMessageStore(cfg, self.member, disk_usage=usage)

    async def start(self) -> None:
        await self.store.lock()
        await self.member.start()
        await self.store.start()
        await wait_until(lambda: self.member.role is Role.LEADER, 10)

    async def stop(self) -> None:
        await self.store.stop()
        await self.member.shutdown()

    async def put(self, body: bytes) -> PutMessageStatus:
        r = await self.store.put_message(MessageToStore(topic="T", queue_id=0, body=body))
        return r.status


async def test_expired_head_files_go_and_the_store_follows(tmp_path: Path) -> None:
    """1. One member, 64 KiB data files, ``fileReservedTime=0`` (kept 1 h), ``deleteWhen`` not
    this hour, disk 50 % used; put 60 messages of 4 KiB. Expected: several data files.
    2. Disk 80 % (over ``diskMaxUsedSpaceRatio`` 75, under the force ratio); one pass (the
    test runs every pass itself).
    Expected: nothing deleted (every file was written just now).
    3. Set the mtimes of all but the last two data files two hours back; one pass. Expected:
    exactly those go, oldest first; ``ledgerBeginIndex`` = the first entry index of the new
    first data file; the store's min offset = that file's start; the queue's min offset = the
    first message still stored; a pull below it is OFFSET_TOO_SMALL, from it FOUND; bytes in a
    deleted file are no longer readable.
    4. Put again, then restart on the same files. Expected: PUT_OK; after the restart the same
    begin index, min offsets and every message from the new minimum on."""
    (port,) = free_ports(1)
    usage = [0.5]
    cfg = _config(tmp_path / "store", port)
    data_dir = tmp_path / "store" / "dledger-n0" / "data"
    node = _Node(cfg, lambda _: usage[0], passes=False)
    async with asyncio.timeout(60):
        await node.start()
        try:
            offsets = []
            for i in range(60):
                status = await node.put(bytes([i]) * 4096)
                assert status is PutMessageStatus.PUT_OK
                offsets.append(node.store.commit_log.max_offset)
            await wait_until(lambda: node.store.max_offset_in_queue("T", 0) == 60, 10)
            files = sorted(data_dir.iterdir())
            assert len(files) >= 4

            usage[0] = 0.8
            assert await node.member.clean.run_once() == 0
            assert sorted(data_dir.iterdir()) == files

            _age(files[:-2])
            assert await node.member.clean.run_once() == len(files) - 2
            left = sorted(data_dir.iterdir())
            assert left == files[-2:]
            begin = _first_entry_index(left[0])
            assert node.member.store.ledger_begin_index == begin
            assert node.store.min_phy_offset == int(left[0].name)
            assert node.store.min_offset_in_queue("T", 0) == begin
            low = node.store.get_message("g", "T", 0, offset=begin - 1, max_count=1)
            assert low.status is GetMessageStatus.OFFSET_TOO_SMALL
            assert low.next_begin_offset == begin
            got = node.store.get_message("g", "T", 0, offset=begin, max_count=1)
            assert got.status is GetMessageStatus.FOUND
            assert bytes([begin]) * 4096 in got.records[0]
            assert node.store.look_message_by_offset(48) is None

            assert await node.put(b"after") is PutMessageStatus.PUT_OK
            await wait_until(lambda: node.store.max_offset_in_queue("T", 0) == 61, 10)
        finally:
            await node.stop()

        node = _Node(cfg, lambda _: usage[0], passes=False)
        await node.start()
        try:
            assert node.member.store.ledger_begin_index == begin
            assert node.store.min_phy_offset == int(left[0].name)
            assert node.store.min_offset_in_queue("T", 0) == begin
            got = node.store.get_message("g", "T", 0, offset=begin, max_count=100)
            assert got.status is GetMessageStatus.FOUND
            assert len(got.records) == 61 - begin
            assert b"after" in got.records[-1]
            assert await node.put(b"restarted") is PutMessageStatus.PUT_OK
        finally:
            await node.stop()


async def test_full_disk_refuses_sends_until_deletion_makes_room(tmp_path: Path) -> None:
    """1. One member, 64 KiB data files, disk 50 % used; put 80 messages of 4 KiB.
    2. The disk's used ratio becomes 70 % + 5 % per data file in the directory (a disk that
    the data files fill): over 90 % both the member (``diskFullRatio``) and the store
    (``diskSpaceWarningLevelRatio``) mark it full. Expected: sends refused; nothing deleted
    (``cleanFileForciblyEnable`` is off and every file is young).
    3. Age all but the last data file by two hours. Expected: within a few passes the member
    deletes them, measures again and both flags clear (the store's well before its next
    periodic pass, 10 s away): the next send is PUT_OK, and every message left in the queue is
    readable."""
    (port,) = free_ports(1)
    cfg = _config(tmp_path / "store", port)
    data_dir = tmp_path / "store" / "dledger-n0" / "data"
    fill = [False]

    def usage(_path: Path) -> float:
        if not fill[0]:
            return 0.5
        return 0.70 + 0.05 * sum(1 for p in data_dir.iterdir() if p.name.isdigit())

    node = _Node(cfg, usage)
    async with asyncio.timeout(60):
        await node.start()
        try:
            for i in range(80):
                assert await node.put(bytes([i]) * 4096) is PutMessageStatus.PUT_OK
            files = sorted(data_dir.iterdir())
            assert len(files) >= 5

            fill[0] = True
            await node.store.clean.run_once()  # its next periodic pass is 10 s away
            assert node.store.commit_log.disk_full
            await wait_until(lambda: node.member.store.disk_full, 10)
            status = await node.put(b"refused")
            assert status is not PutMessageStatus.PUT_OK
            assert sorted(data_dir.iterdir()) == files

            _age(files[:-1])
            await wait_until(lambda: len(list(data_dir.iterdir())) == 1, 10)
            await wait_until(
                lambda: not node.member.store.disk_full and not node.store.commit_log.disk_full, 5
            )
            assert await node.put(b"room again") is PutMessageStatus.PUT_OK
            lo = node.store.min_offset_in_queue("T", 0)
            await wait_until(lambda: node.store.max_offset_in_queue("T", 0) == 81, 10)
            got = node.store.get_message("g", "T", 0, offset=lo, max_count=100)
            assert got.status is GetMessageStatus.FOUND
            assert len(got.records) == 81 - lo
            assert b"room again" in got.records[-1]
        finally:
            await node.stop()
