"""Retention of a DLedger log on real files (dledger-commitlog.md section 1.6): the member's
clean-space pass never deletes the last data file, a file with an entry above the committed
index, or one at or above the caller's ``keep_from``; it deletes at most ten files a pass,
oldest first; the ledger begin index and the index files follow; a reload recovers from the
first remaining data file. 4 KiB data files, 16-unit index files; file ages are real mtimes."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from rocketpy.common.clock import SystemClock
from rocketpy.common.message.record import MessageRecord, encode_record
from rocketpy.dledger.commitlog_member.clean_space import CleanSpaceService
from rocketpy.dledger.commitlog_member.config import DLedgerMemberConfig
from rocketpy.store.dledger_log.retention import detach_head
from rocketpy.store.dledger_log.store import DLedgerLogStore, DLedgerStoreConfig, DLedgerStoreError
from tests.helpers.dledger_files import walk_data_dir

SMALL = {"data_file_size": 4096, "index_file_size": 32 * 16}


def _record(i: int) -> bytes:
    return encode_record(MessageRecord(topic="T", queue_id=0, body=f"m{i}-".encode() * 40))


def _open(base: Path) -> DLedgerLogStore:
    store = DLedgerLogStore(DLedgerStoreConfig(base_dir=base, **SMALL))
    store.load()
    return store


@pytest.fixture
def base(tmp_path: Path) -> Path:
    return tmp_path / "dledger-n0"


@pytest.fixture
def store(base: Path) -> Iterator[DLedgerLogStore]:
    """80 entries of ~300 bytes at term 1 (about 6 data and 5 index files), all aged 2 h."""
    s = _open(base)
    for i in range(80):
        s.append_as_leader(_record(i), 1)
    old = time.time() - 7200
    for d in ("data", "index"):
        for p in (base / d).iterdir():
            os.utime(p, (old, old))
    yield s
    s.close()


def _data_files(base: Path) -> list[int]:
    return sorted(int(p.name) for p in (base / "data").iterdir())


async def _pass(
    store: DLedgerLogStore, base: Path, keep_from: int | None = None, usage: float = 0.99
) -> int:
    """One clean-space pass with the disk at ``usage`` (99 %: forced cleaning, on here)."""
    cfg = DLedgerMemberConfig(
        group="g", self_id="n0", peers="n0-127.0.0.1:1", store_base_dir=base.parent,
        enable_disk_force_clean=True, file_reserved_hours=1,
    )  # fmt: skip
    with ThreadPoolExecutor(1) as executor:
        clean = CleanSpaceService(
            cfg, store, executor=executor, clock=SystemClock(), disk_usage=lambda _: usage
        )
        if keep_from is not None:
            clean.keep_from = lambda: keep_from
        return await clean.run_once()


async def test_nothing_uncommitted_or_undispatched_is_deleted(
    store: DLedgerLogStore, base: Path
) -> None:
    """1. 80 entries, none committed, every file aged; a forced pass. Expected: nothing goes
    (disk-full flag set).
    2. Commit up to entry 30; a forced pass. Expected: only files wholly below entry 30's end
    go; every entry from the new begin index to 79 is still readable.
    3. Commit everything; a pass with ``keep_from`` = the start of the third-to-last file.
    Expected: files below it go, that file and the later ones stay; the last file never goes.
    """
    files = _data_files(base)
    assert len(files) >= 6
    assert await _pass(store, base) == 0
    assert store.disk_full
    assert _data_files(base) == files

    store.update_committed_index(30)
    committed_pos = store.committed_pos
    deleted = await _pass(store, base)
    kept = _data_files(base)
    assert deleted == sum(1 for f in files if f + 4096 <= committed_pos)
    assert deleted >= 1
    assert kept == [f for f in files if f + 4096 > committed_pos]
    assert store.ledger_begin_index <= 30
    for i in range(store.ledger_begin_index, 80):
        assert store.get(i).index == i

    store.update_committed_index(79)
    floor = kept[-3]
    await _pass(store, base, keep_from=floor)
    assert _data_files(base) == [f for f in kept if f >= floor]
    await _pass(store, base)
    assert _data_files(base) == [kept[-1]]


async def test_begin_index_and_index_files_follow_and_reload(
    store: DLedgerLogStore, base: Path
) -> None:
    """1. Commit all 80 entries; a forced pass. Expected: only the last data file is left; the
    begin index is its first entry's index (read back with the test's own decoder); index
    files wholly below that entry's unit are gone; entry begin-1 answers
    INDEX_LESS_THAN_LOCAL_BEGIN.
    2. Append. Expected: DISK_FULL (the disk still reads 99 %). A pass at 50 %, append again.
    Expected: appended.
    3. Close, load again. Expected: same begin index, end 80, every entry from begin to 80
    readable, the next append gets index 81."""
    store.update_committed_index(79)
    await _pass(store, base)
    (last,) = _data_files(base)
    first = walk_data_dir(base / "data")[0].entries[0]
    assert first.pos == last
    begin = first.index
    assert store.ledger_begin_index == begin
    index_files = sorted(int(p.name) for p in (base / "index").iterdir())
    assert index_files[0] == begin * 32 - begin * 32 % (32 * 16)
    with pytest.raises(DLedgerStoreError, match="INDEX_LESS_THAN_LOCAL_BEGIN"):
        store.get(begin - 1)

    with pytest.raises(DLedgerStoreError, match="DISK_FULL"):
        store.append_as_leader(_record(80), 1)
    assert await _pass(store, base, usage=0.5) == 0
    store.append_as_leader(_record(80), 1)
    store.close()
    again = _open(base)
    try:
        assert again.ledger_begin_index == begin
        assert again.ledger_end_index == 80
        for i in range(begin, 81):
            assert again.get(i).index == i
        assert again.append_as_leader(_record(81), 1).index == 81
    finally:
        again.close()


async def test_a_running_truncation_defers_the_deletion(store: DLedgerLogStore, base: Path) -> None:
    """1. Commit everything; hold the store's file lock (as a truncation on the member's thread
    does); detach the head file. Expected: nothing detached. 2. Release; detach it with a
    ``keep_from`` inside it (the reput fell behind since it was chosen). Expected: nothing
    detached. 3. A pass. Expected: the head files go."""
    store.update_committed_index(79)
    head = store.data.files[0]
    with store.files_lock:
        assert detach_head(store, [head], keep_from=1 << 62) == []
    assert store.data.files[0] is head
    assert detach_head(store, [head], keep_from=head.file_from_offset) == []
    assert store.data.files[0] is head
    assert await _pass(store, base) >= 1
    assert store.data.files[0] is not head
    await asyncio.sleep(0)
