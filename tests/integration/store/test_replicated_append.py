"""MessageStore as the HA layer's ReplicationLog: append_replicated, read_raw, valid_end,
truncate_files."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocketpy.common.aio import wait_until
from rocketpy.common.errors import StoreError
from rocketpy.store.commit_log.put_types import MessageToStore, PutMessageStatus
from rocketpy.store.config import MessageStoreConfig
from rocketpy.store.message_store import MessageStore
from rocketpy.store.replication import ReplicationLog

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


async def _put_three(store: MessageStore) -> list[int]:
    ends = []
    for i in range(3):
        r = await store.put_message(MessageToStore(topic="T", queue_id=0, body=b"%d" % i * 100))
        assert r.status is PutMessageStatus.PUT_OK
        ends.append(r.wrote_offset + r.wrote_bytes)
    return ends


async def test_replication_log_valid_end_stops_at_a_torn_record(tmp_path: Path) -> None:
    """1. A master store puts 3 messages. 2. A slave store receives the first two and half of
    the third through append_replicated. Expected: the slave dispatches the two whole records
    and its valid_end is the end of the second (the truncateInvalidMsg walk); the master's is
    its max offset."""
    master, slave = _store(tmp_path / "m"), _store(tmp_path / "s")
    await master.start()
    await slave.start()
    try:
        ends = await _put_three(master)
        cut = ends[1] + (ends[2] - ends[1]) // 2
        data = master.read_raw(0, cut)
        assert data is not None
        log: ReplicationLog = slave
        await log.append_replicated(0, data)
        await wait_until(lambda: log.dispatched_offset == ends[1], 5)
        assert (log.max_phy_offset, log.valid_end()) == (cut, ends[1])
        assert master.valid_end() == master.max_phy_offset == ends[2]
    finally:
        await slave.stop()
        await master.stop()


async def test_replication_log_truncate_files_is_not_undone_by_recovery(tmp_path: Path) -> None:
    """1. Put 3 messages; truncate_files to the end of the first. 2. Stop and reopen.
    Expected: the reopened log ends at the first message: the cut bytes were zeroed, so the
    recovery walk does not find the two cut records valid and bring them back."""
    store = _store(tmp_path)
    await store.start()
    ends = await _put_three(store)
    await store.truncate_files(ends[0])
    assert store.max_phy_offset == ends[0]
    await store.stop()
    reopened = _store(tmp_path)
    await reopened.start()
    try:
        assert reopened.max_phy_offset == ends[0]
        assert reopened.read_raw(ends[0], 10) is None
    finally:
        await reopened.stop()
