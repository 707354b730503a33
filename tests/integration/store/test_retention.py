"""Retention on tiny files with a ManualClock: expired commit-log segments go (never the current
one), consume-queue files and min offsets follow, disk thresholds force or refuse."""

from __future__ import annotations

import asyncio
import datetime
import os
from pathlib import Path

import pytest

from rocketpy.common.aio import wait_until
from rocketpy.common.clock import ManualClock
from rocketpy.store.commit_log.put_types import MessageToStore, PutMessageStatus
from rocketpy.store.config import MessageStoreConfig
from rocketpy.store.get_types import GetMessageStatus
from rocketpy.store.message_store import MessageStore

pytestmark = pytest.mark.integration

_HOUR_MS = 3_600_000


def _clock_at(hour: int) -> ManualClock:
    """A manual clock reading today ``hour``:30 local time (deleteWhen is a local hour)."""
    day = datetime.datetime.now().replace(hour=hour, minute=30, second=0, microsecond=0)
    return ManualClock(int(day.timestamp() * 1000))


class _Disk:
    """A settable disk-usage ratio (the statvfs reading the clean service asks for)."""

    def __init__(self) -> None:
        self.ratio = 0.10

    def __call__(self, path: Path) -> float:
        return self.ratio


def _config(root: Path, **extra: str) -> MessageStoreConfig:
    return MessageStoreConfig.build({
        "storePathRootDir": str(root),
        "mappedFileSizeCommitLog": 4096,
        "mappedFileSizeConsumeQueue": 200,
        "fileReservedTime": 1,
        "deleteWhen": "04",
        "cleanResourceInterval": 600000,
        **extra,
    })  # fmt: skip


async def _fill(store: MessageStore, count: int) -> list[int]:
    offsets = []
    for i in range(count):
        r = await store.put_message(
            MessageToStore(topic="Ret", queue_id=0, body=f"m{i}".encode() * 40)
        )
        assert r.status is PutMessageStatus.PUT_OK
        offsets.append(r.wrote_offset)
    cl = store.commit_log
    await wait_until(lambda: store.reput.reput_from >= cl.max_offset, 5)
    return offsets


def _age(store: MessageStore, clock: ManualClock, old: int) -> None:
    """Set the first ``old`` segments' mtime 2 h back, the rest to the clock's now."""
    for i, mf in enumerate(store.commit_log.mfq.files):
        ms = clock.wall_ms() - (2 * _HOUR_MS if i < old else 0)
        os.utime(mf.path, ns=(ms * 1_000_000, ms * 1_000_000))


async def test_retention_deletes_expired_head_and_moves_min_offsets(tmp_path: Path) -> None:
    """1. 4 KiB segments, 10-unit consume-queue files; put 60 messages (several segments).
    2. Age the first 2 segments past fileReservedTime (1 h); clock at 04:30; run a pass.
    3. Age every segment; run a pass. 4. Restart the store.
    Expected: 2 deletes exactly the 2 old segments (a fresh one stops the walk); the queue's
    min offset moves to the first unit at or above the new commit-log min offset, reading
    below it answers OFFSET_TOO_SMALL, consume-queue files wholly below it are gone. 3 deletes
    all but the current segment. 4 keeps the same min offsets."""
    clock = _clock_at(4)
    cfg = _config(tmp_path)
    store = MessageStore(cfg, clock=clock, disk_usage=_Disk())
    async with asyncio.timeout(20):
        await store.start()
        offsets = await _fill(store, 60)
        files = list(store.commit_log.mfq.files)
        assert len(files) >= 4
        cq_files_before = len(store.queues[("Ret", 0)].mfq.files)
        _age(store, clock, old=2)
        assert await store.clean.run_once() == 2
        new_min = files[2].file_from_offset
        assert store.commit_log.min_offset == new_min
        assert not files[0].path.exists()
        assert not files[1].path.exists()
        first_kept = next(i for i, off in enumerate(offsets) if off >= new_min)
        assert store.min_offset_in_queue("Ret", 0) == first_kept
        assert len(store.queues[("Ret", 0)].mfq.files) == cq_files_before - first_kept // 10
        low = store.get_message("g", "Ret", 0, offset=first_kept - 1, max_count=1)
        assert low.status is GetMessageStatus.OFFSET_TOO_SMALL
        ok = store.get_message("g", "Ret", 0, offset=first_kept, max_count=1)
        assert ok.status is GetMessageStatus.FOUND

        _age(store, clock, old=len(files))
        await store.clean.run_once()
        assert store.commit_log.mfq.files == [files[-1]]
        last_min = store.min_offset_in_queue("Ret", 0)
        assert offsets[last_min] >= files[-1].file_from_offset
        await store.stop()

        again = MessageStore(cfg, clock=clock, disk_usage=_Disk())
        await again.start()
        assert again.commit_log.min_offset == files[-1].file_from_offset
        assert again.min_offset_in_queue("Ret", 0) == last_min
        assert again.max_offset_in_queue("Ret", 0) == 60
        await again.stop()


async def test_retention_waits_for_delete_hour_unless_disk_forces(tmp_path: Path) -> None:
    """1. cleanFileForciblyEnable=true (upstream's default, off here). Clock at 05:30
    (deleteWhen 04), every segment but the current expired, disk at 10 %.
    2. Run a pass. 3. Disk at 86 % (over diskSpaceCleanForciblyRatio 85), segments made fresh;
    run a pass.
    Expected: 2 deletes nothing (not the hour, disk fine); 3 deletes every segment but the
    current one although none has expired (clean at once)."""
    clock = _clock_at(5)
    disk = _Disk()
    cfg = _config(tmp_path, cleanFileForciblyEnable="true")
    store = MessageStore(cfg, clock=clock, disk_usage=disk)
    async with asyncio.timeout(20):
        await store.start()
        await _fill(store, 40)
        files = list(store.commit_log.mfq.files)
        _age(store, clock, old=len(files))
        assert await store.clean.run_once() == 0
        _age(store, clock, old=0)
        disk.ratio = 0.86
        assert await store.clean.run_once() == len(files) - 1
        assert store.commit_log.mfq.files == [files[-1]]
        await store.stop()


async def test_retention_never_forces_unexpired_deletion_by_default(tmp_path: Path) -> None:
    """1. Default config (cleanFileForciblyEnable off). Fresh segments; disk at 86 % (over
    diskSpaceCleanForciblyRatio 85), then 95 % (over diskSpaceWarningLevelRatio 90); a pass
    each, and a put.
    Expected: nothing is deleted (no segment expired: acknowledged messages stay readable);
    at 86 % the put succeeds, at 95 % it is refused (SERVICE_NOT_AVAILABLE) and every message
    still reads back."""
    clock = _clock_at(5)
    disk = _Disk()
    store = MessageStore(_config(tmp_path), clock=clock, disk_usage=disk)
    async with asyncio.timeout(20):
        await store.start()
        await _fill(store, 40)
        files = list(store.commit_log.mfq.files)
        _age(store, clock, old=0)
        msg = MessageToStore(topic="Ret", queue_id=0, body=b"x")
        disk.ratio = 0.86
        assert await store.clean.run_once() == 0
        assert (await store.put_message(msg)).status is PutMessageStatus.PUT_OK
        disk.ratio = 0.95
        assert await store.clean.run_once() == 0
        assert (await store.put_message(msg)).status is PutMessageStatus.SERVICE_NOT_AVAILABLE
        assert store.commit_log.mfq.files[: len(files)] == files
        await store.stop()


async def test_retention_disk_full_refuses_appends(tmp_path: Path) -> None:
    """1. Disk at 95 % (over diskSpaceWarningLevelRatio 90); run a pass; put.
    2. Disk back to 10 %; run a pass; put.
    Expected: 1 answers SERVICE_NOT_AVAILABLE; 2 answers PUT_OK."""
    disk = _Disk()
    store = MessageStore(_config(tmp_path), clock=_clock_at(5), disk_usage=disk)
    async with asyncio.timeout(20):
        await store.start()
        disk.ratio = 0.95
        await store.clean.run_once()
        msg = MessageToStore(topic="Ret", queue_id=0, body=b"x")
        assert (await store.put_message(msg)).status is PutMessageStatus.SERVICE_NOT_AVAILABLE
        disk.ratio = 0.10
        await store.clean.run_once()
        assert (await store.put_message(msg)).status is PutMessageStatus.PUT_OK
        await store.stop()
