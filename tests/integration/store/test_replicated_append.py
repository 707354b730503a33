"""MessageStore.append_replicated / read_raw: the HA slave's and master's store access."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocketpy.common.errors import StoreError
from rocketpy.store.config import MessageStoreConfig
from rocketpy.store.message_store import MessageStore

pytestmark = pytest.mark.integration


def _store(root: Path) -> MessageStore:
    return MessageStore(MessageStoreConfig.build({
        "storePathRootDir": str(root), "mappedFileSizeCommitLog": 4096,
    }))  # fmt: skip


async def test_append_replicated_offsets_and_segments(tmp_path: Path) -> None:
    """1. An empty store receives 4000 bytes at 8192 (its first segment starts there).
    2. 96 more bytes fill the segment; 10 bytes at 12288 open the next one.
    3. Bytes at a wrong offset, and bytes crossing a segment end, are refused.
    Expected: min 8192, max 12298, read_raw never crosses a segment, refusals raise StoreError
    and change nothing."""
    store = _store(tmp_path)
    await store.start()
    try:
        await store.append_replicated(8192, b"a" * 4000)
        assert (store.commit_log.min_offset, store.commit_log.max_offset) == (8192, 12192)
        with pytest.raises(StoreError):
            await store.append_replicated(12000, b"x")
        with pytest.raises(StoreError):
            await store.append_replicated(12192, b"b" * 200)
        await store.append_replicated(12192, b"b" * 96)
        await store.append_replicated(12288, b"c" * 10)
        assert store.commit_log.max_offset == 12298
        assert store.read_raw(12100, 1000) == b"a" * 92 + b"b" * 96
        assert store.read_raw(12288, 1000) == b"c" * 10
        assert store.read_raw(12298, 10) is None
        assert store.read_raw(0, 10) is None
    finally:
        await store.stop()
