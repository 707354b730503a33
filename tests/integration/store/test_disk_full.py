"""A segment roll on a full disk (issue 25, item 4): refused with the disk-full code, no partial
file left, nothing acknowledged lost, writes back once there is room.

The store runs on a 1 MiB tmpfs mounted by the test (skipped where mounting is not allowed),
so ENOSPC is real: ``posix_fallocate`` of the next segment fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from rocketpy.common.aio import wait_until
from rocketpy.common.message.decoder import decode_record
from rocketpy.store.commit_log.put_types import MessageToStore, PutMessageStatus
from rocketpy.store.config import MessageStoreConfig
from rocketpy.store.consume_queue.consume_queue import ConsumeQueue
from rocketpy.store.consume_queue.unit import UNIT_SIZE, CqUnit
from rocketpy.store.mapped_file import RESERVE_CHUNK
from rocketpy.store.message_store import MessageStore

pytestmark = pytest.mark.integration


@contextlib.contextmanager
def _tmpfs(where: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``where`` (the test is skipped where mounting is not
    allowed)."""
    where.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs under ``tmp_path``."""
    with _tmpfs(tmp_path / "small", "1m") as mount:
        yield mount


@pytest.fixture
def two_mib_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs under ``tmp_path``."""
    with _tmpfs(tmp_path / "small2", "2m") as mount:
        yield mount


def _small_store(disk: Path, *, cq_file_size: int) -> tuple[MessageStoreConfig, MessageStore]:
    """A store under ``disk`` with 256 KiB commit-log segments and no index, that takes the
    disk for 10 % used (only the file system says it is full)."""
    cfg = MessageStoreConfig.build({
        "storePathRootDir": str(disk / "store"),
        "mappedFileSizeCommitLog": 256 * 1024,
        "mappedFileSizeConsumeQueue": cq_file_size,
        "messageIndexEnable": "false",
    })  # fmt: skip
    return cfg, MessageStore(cfg, disk_usage=lambda _: 0.10)


async def test_disk_full_on_segment_roll_refuses_cleanly(small_disk: Path) -> None:
    """1. 256 KiB segments on a 1 MiB disk with a 400 KiB filler file; put until refused.
    2. Delete the filler; run a clean pass; put again.
    Expected: the refusal is SERVICE_NOT_AVAILABLE (the disk-full code, not an OSError text);
    no ``.tmp`` segment is left; every acknowledged message reads back; after room is made
    puts succeed again."""
    filler = small_disk / "filler"
    filler.write_bytes(bytes(400 * 1024))
    cfg, store = _small_store(small_disk, cq_file_size=2000)
    async with asyncio.timeout(30):
        await store.start()
        try:
            acked: list[tuple[int, bytes]] = []
            status = PutMessageStatus.PUT_OK
            for i in range(2000):
                body = f"m{i}-".encode() * 100
                r = await store.put_message(MessageToStore(topic="Full", queue_id=0, body=body))
                status = r.status
                if status is not PutMessageStatus.PUT_OK:
                    break
                acked.append((r.wrote_offset, body))
            assert status is PutMessageStatus.SERVICE_NOT_AVAILABLE
            assert len(acked) > 100
            assert not list(cfg.commit_log_dir.glob("*.tmp"))
            for offset, body in acked:
                raw = store.look_message_by_offset(offset)
                assert raw is not None
                assert decode_record(raw).body == body
            filler.unlink()
            await store.clean.run_once()
            r = await store.put_message(MessageToStore(topic="Full", queue_id=0, body=b"after"))
            assert r.status is PutMessageStatus.PUT_OK
        finally:
            await store.stop()


def _fill(path: Path) -> None:
    """Write ``path`` until the file system is full."""
    with path.open("wb", buffering=0) as f:
        try:
            while True:
                f.write(bytes(4096))
        except OSError:
            pass


async def test_consume_queue_on_a_full_disk_waits_for_room(small_disk: Path) -> None:
    """1. A store on a 1 MiB tmpfs (256 KiB commit-log segments, 200 KB consume-queue
    segments); put one message to queue 0. 2. Fill the disk to the last block; put a message
    to queue 1, whose consume queue has no segment yet. 3. Delete the filler.
    Expected: step 2 is PUT_OK (its segment has room), the process lives (the unit's segment
    is never written where the file system has no block for it: a store into a hole of a
    full tmpfs is SIGBUS, which ends a Python process), queue 1 shows nothing while the disk
    is full; after step 3 the message reads back at queue 1 offset 0 within 5 s."""
    _, store = _small_store(small_disk, cq_file_size=10000 * 20)
    async with asyncio.timeout(30):
        await store.start()
        try:
            r = await store.put_message(MessageToStore(topic="Full", queue_id=0, body=b"first"))
            assert r.status is PutMessageStatus.PUT_OK
            await wait_until(lambda: store.max_offset_in_queue("Full", 0) == 1, 5)
            filler = small_disk / "filler"
            _fill(filler)
            r = await store.put_message(MessageToStore(topic="Full", queue_id=1, body=b"late"))
            assert r.status is PutMessageStatus.PUT_OK
            await asyncio.sleep(1.5)  # the reput found no block for the unit, at least once
            assert store.max_offset_in_queue("Full", 1) == 0
            filler.unlink()
            await wait_until(lambda: store.max_offset_in_queue("Full", 1) == 1, 5)
            got = store.get_message("g", "Full", 1, offset=0, max_count=1)
            assert [decode_record(raw).body for raw in got.records] == [b"late"]
        finally:
            await store.stop()


async def test_consume_queue_reserving_ahead_on_a_full_disk_warns_once(
    two_mib_disk: Path,
) -> None:
    """1. A consume queue of 3 MiB segments on a 2 MiB tmpfs, with an allocation thread; its
    first unit through ``put`` (the segment gets its first MiB of blocks). 2. Fill the disk.
    3. ``put_nowait`` every unit the first MiB holds, letting the loop turn as the reput does.
    Expected: every unit lands (its blocks were reserved), and the failed reservation ahead
    (ENOSPC) is warned about once, not at every unit written in the last half MiB."""
    with ThreadPoolExecutor(1) as alloc, capture_logs() as logs:
        q = ConsumeQueue(two_mib_disk / "cq", "Full", 0, 3 * RESERVE_CHUNK, alloc)
        assert await q.put(CqUnit(commit_log_offset=0, size=100, tags_code=0), 0, alloc)
        first = q.mfq.last
        assert first is not None
        assert first.allocated == RESERVE_CHUNK
        _fill(two_mib_disk / "filler")
        for offset in range(1, RESERVE_CHUNK // UNIT_SIZE):
            assert q.put_nowait(offset * 100, 100, 0, offset)
            if offset % 500 == 0:
                await asyncio.sleep(0.001)  # the allocation thread's answer arrives
        q.close()
    warned = [e for e in logs if e["event"] == "consume queue blocks not reserved ahead"]
    assert len(warned) == 1, warned
