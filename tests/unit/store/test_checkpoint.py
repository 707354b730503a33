"""StoreCheckpoint driver: open, flush off the loop, reopen, short files, min timestamps."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from rocketpy.common.errors import CodecError
from rocketpy.store.checkpoint import (
    CHECKPOINT_FILE_SIZE,
    CheckpointValues,
    StoreCheckpoint,
    decode_checkpoint,
)


async def test_checkpoint_flush_async_then_reopen(tmp_path: Path) -> None:
    """1. Open a missing checkpoint (all zero, file created at 4096 bytes). 2. Set values and
    flush on an executor. 3. Close and reopen.
    Expected: the reopened checkpoint reports existed=True and the flushed values."""
    path = tmp_path / "store" / "checkpoint"
    async with asyncio.timeout(5):
        cp = await StoreCheckpoint.open_async(path, None)
    assert not cp.existed
    assert cp.values() == CheckpointValues()
    assert path.stat().st_size == CHECKPOINT_FILE_SIZE
    cp.physic_msg_timestamp = 10_000
    cp.logics_msg_timestamp = 9_000
    cp.confirm_phy_offset = 4242
    with ThreadPoolExecutor(max_workers=1) as executor:
        async with asyncio.timeout(5):
            await cp.flush_async(executor)
    cp.close()
    reopened = StoreCheckpoint.open(path)
    try:
        assert reopened.existed
        assert reopened.values() == CheckpointValues(
            physic_msg_timestamp=10_000, logics_msg_timestamp=9_000, confirm_phy_offset=4242
        )
    finally:
        reopened.close()


def test_checkpoint_close_persists_and_is_idempotent(tmp_path: Path) -> None:
    """1. Set a value without flushing. 2. Close twice.
    Expected: close wrote the value (StoreCheckpoint.shutdown flushes); a second close is a
    no-op and a write after close raises."""
    path = tmp_path / "checkpoint"
    cp = StoreCheckpoint.open(path)
    cp.master_flushed_offset = 777
    cp.close()
    cp.close()
    with pytest.raises(ValueError, match="closed"):
        cp.flush()
    assert decode_checkpoint(path.read_bytes()).master_flushed_offset == 777


def test_checkpoint_short_file_is_extended(tmp_path: Path) -> None:
    """1. A 4.9-era checkpoint with only its first 24 bytes (three timestamps). 2. Open it.
    Expected: the file grows to 4096 bytes; the three timestamps are read, the rest is zero."""
    path = tmp_path / "checkpoint"
    path.write_bytes((1).to_bytes(8, "big") + (2).to_bytes(8, "big") + (3).to_bytes(8, "big"))
    cp = StoreCheckpoint.open(path)
    try:
        assert path.stat().st_size == CHECKPOINT_FILE_SIZE
        assert cp.values() == CheckpointValues(
            physic_msg_timestamp=1, logics_msg_timestamp=2, index_msg_timestamp=3
        )
    finally:
        cp.close()


@pytest.mark.parametrize(
    ("physic", "logics", "index", "expected_min", "expected_min_index"),
    [
        (10_000, 8_000, 1_000, 5_000, 1_000),
        (10_000, 8_000, 9_000, 5_000, 5_000),
        (2_000, 8_000, 9_000, 0, 0),  # clamped at zero
        (0, 0, 0, 0, 0),
    ],
)
def test_checkpoint_min_timestamp(
    physic: int, logics: int, index: int, expected_min: int, expected_min_index: int
) -> None:
    """getMinTimestamp = max(0, min(physic, logics) - 3000); the index variant also takes the
    index timestamp."""
    values = CheckpointValues(
        physic_msg_timestamp=physic, logics_msg_timestamp=logics, index_msg_timestamp=index
    )
    assert values.min_timestamp() == expected_min
    assert values.min_timestamp_index() == expected_min_index


def test_checkpoint_decode_too_short() -> None:
    """A buffer shorter than the five fields is a CodecError naming the field."""
    with pytest.raises(CodecError, match="field=checkpoint"):
        decode_checkpoint(b"\x00" * 39)
