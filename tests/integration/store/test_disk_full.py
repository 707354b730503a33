"""A segment roll on a full disk (issue 25, item 4): refused with the disk-full code, no partial
file left, nothing acknowledged lost, writes back once there is room.

The store runs on a 1 MiB tmpfs mounted by the test (skipped where mounting is not allowed),
so ENOSPC is real: ``posix_fallocate`` of the next segment fails.
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocketpy.common.message.decoder import decode_record
from rocketpy.store.commit_log.put_types import MessageToStore, PutMessageStatus
from rocketpy.store.config import MessageStoreConfig
from rocketpy.store.message_store import MessageStore

pytestmark = pytest.mark.integration


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs under ``tmp_path``."""
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


async def test_disk_full_on_segment_roll_refuses_cleanly(small_disk: Path) -> None:
    """1. 256 KiB segments on a 1 MiB disk with a 400 KiB filler file; put until refused.
    2. Delete the filler; run a clean pass; put again.
    Expected: the refusal is SERVICE_NOT_AVAILABLE (the disk-full code, not an OSError text);
    no ``.tmp`` segment is left; every acknowledged message reads back; after room is made
    puts succeed again."""
    filler = small_disk / "filler"
    filler.write_bytes(bytes(400 * 1024))
    cfg = MessageStoreConfig.build({
        "storePathRootDir": str(small_disk / "store"),
        "mappedFileSizeCommitLog": 256 * 1024,
        "mappedFileSizeConsumeQueue": 2000,
        "messageIndexEnable": "false",
    })  # fmt: skip
    store = MessageStore(cfg, disk_usage=lambda _: 0.10)
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
