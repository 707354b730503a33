"""EpochFileCache driver: persistence with .bak, reload, corruption handling, truncation."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from rocketpy.common.atomic_file import backup_path
from rocketpy.common.errors import StoreError
from rocketpy.store.epoch_cache import EPOCH_FILE_NAME, EpochFileCache
from rocketpy.store.epoch_entries import LONG_MAX, EpochEntry, encode_epoch_file


def _e(epoch: int, start: int) -> EpochEntry:
    return EpochEntry(epoch=epoch, start_offset=start)


def _pairs(cache: EpochFileCache) -> list[tuple[int, int]]:
    return [(e.epoch, e.start_offset) for e in cache.entries()]


async def test_epoch_cache_append_persists_and_reloads(tmp_path: Path) -> None:
    """1. Open a missing epoch file (empty cache, last epoch -1). 2. Append 1@0, 2@1000 on a
    single-thread executor. 3. Reload from disk.
    Expected: the file holds both entries in the upstream text format, the .bak holds the
    one-entry version, and the reloaded cache equals the original."""
    path = tmp_path / EPOCH_FILE_NAME
    with ThreadPoolExecutor(max_workers=1) as executor:
        async with asyncio.timeout(5):
            cache = await EpochFileCache.open(path, executor=executor)
            assert cache.last_epoch() == -1
            assert await cache.append_entry(_e(1, 0))
            assert await cache.append_entry(_e(2, 1000))
    assert path.read_bytes() == encode_epoch_file([_e(1, 0), _e(2, 1000)])
    assert backup_path(path).read_bytes() == encode_epoch_file([_e(1, 0)])
    reloaded = EpochFileCache.load(path)
    assert reloaded.entries() == cache.entries()
    assert reloaded.last_epoch() == 2
    assert reloaded.entries()[0].end_offset == 1000


async def test_epoch_cache_refused_append_leaves_file(tmp_path: Path) -> None:
    """An append with a lower epoch returns False and changes neither memory nor the file."""
    path = tmp_path / EPOCH_FILE_NAME
    cache = EpochFileCache(path)
    async with asyncio.timeout(5):
        assert await cache.append_entry(_e(3, 500))
        before = path.read_bytes()
        assert not await cache.append_entry(_e(2, 600))
        assert not await cache.append_entry(_e(4, 400))
    assert _pairs(cache) == [(3, 500)]
    assert path.read_bytes() == before


async def test_h03_truncate_suffix_then_restart(tmp_path: Path) -> None:
    """H-03: 1. Entries 1@100, 2@300, 3@500. 2. truncateSuffixByOffset(150). 3. Restart.
    Expected: only epoch 1 remains, open-ended; the reloaded cache is identical."""
    path = tmp_path / EPOCH_FILE_NAME
    cache = EpochFileCache(path)
    async with asyncio.timeout(5):
        await cache.init_from_entries([_e(1, 100), _e(2, 300), _e(3, 500)])
        await cache.truncate_suffix_by_offset(150)
    assert cache.entries() == (EpochEntry(epoch=1, start_offset=100, end_offset=LONG_MAX),)
    assert EpochFileCache.load(path).entries() == cache.entries()


async def test_epoch_cache_truncate_by_epoch_and_prefix(tmp_path: Path) -> None:
    """1. 1@0, 2@300, 3@500, 4@900. 2. truncateSuffixByEpoch(4). 3. truncatePrefixByOffset(500).
    Expected: epochs 1 and 2 (ending at 300 and 500) go; [3@500 open] on disk and in memory."""
    path = tmp_path / EPOCH_FILE_NAME
    cache = EpochFileCache(path, [_e(1, 0), _e(2, 300), _e(3, 500), _e(4, 900)])
    async with asyncio.timeout(5):
        await cache.truncate_suffix_by_epoch(4)
        await cache.truncate_prefix_by_offset(500)
    assert _pairs(cache) == [(3, 500)]
    assert _pairs(EpochFileCache.load(path)) == [(3, 500)]


async def test_epoch_cache_truncate_to_empty_removes_files(tmp_path: Path) -> None:
    """Truncating every entry removes the file and its .bak, so a restart sees no epochs
    instead of falling back to a stale .bak (ha.md 4.2)."""
    path = tmp_path / EPOCH_FILE_NAME
    cache = EpochFileCache(path)
    async with asyncio.timeout(5):
        await cache.append_entry(_e(1, 0))
        await cache.append_entry(_e(2, 10))
        await cache.truncate_suffix_by_offset(0)
    assert len(cache) == 0
    assert not path.exists()
    assert not backup_path(path).exists()
    assert len(EpochFileCache.load(path)) == 0


def test_epoch_cache_damaged_main_uses_bak(tmp_path: Path) -> None:
    """1. Main file with a bad CRC, .bak valid. 2. Load.
    Expected: the .bak entries (CheckpointFile.read falls back on IOException)."""
    path = tmp_path / EPOCH_FILE_NAME
    path.write_bytes(b"2\n1\n1-0\n2-5\n")
    backup_path(path).write_bytes(encode_epoch_file([_e(1, 0)]))
    assert _pairs(EpochFileCache.load(path)) == [(1, 0)]


def test_epoch_cache_zero_entry_main_uses_bak(tmp_path: Path) -> None:
    """A valid main file with zero entries also falls back to the .bak (ha.md 4.2)."""
    path = tmp_path / EPOCH_FILE_NAME
    path.write_bytes(b"0\n0\n")
    backup_path(path).write_bytes(encode_epoch_file([_e(7, 7000)]))
    assert _pairs(EpochFileCache.load(path)) == [(7, 7000)]


def test_epoch_cache_both_damaged_is_clear_error(tmp_path: Path) -> None:
    """Main and .bak both damaged -> StoreError naming both paths."""
    path = tmp_path / EPOCH_FILE_NAME
    path.write_bytes(b"2\nxx\n")
    backup_path(path).write_bytes(b"1\n0\n1-zz\n")
    with pytest.raises(StoreError) as info:
        EpochFileCache.load(path)
    message = str(info.value)
    assert str(path) in message
    assert str(backup_path(path)) in message


def test_epoch_cache_consistent_point_sets_both_ends() -> None:
    """find_consistent_point bounds the local last epoch by the local max offset and the
    master's by the master max offset (doTruncate), without changing the cache."""
    slave = EpochFileCache(None, [_e(1, 0), _e(2, 1000), _e(3, 3000)])
    master = [_e(4, 5000), _e(1, 0), _e(2, 1000)]  # order does not matter
    assert (
        slave.find_consistent_point(master, master_max_offset=8000, local_max_offset=4000) == 3000
    )
    assert slave.entries()[-1].end_offset == LONG_MAX
    same = EpochFileCache(None, [_e(1, 0)])
    assert same.find_consistent_point([_e(1, 0)], master_max_offset=50, local_max_offset=80) == 50
    assert same.find_consistent_point([_e(2, 0)], master_max_offset=50, local_max_offset=80) is None


def test_epoch_cache_lookups() -> None:
    """next_entry and find_epoch_entry_by_offset (the last entry is open-ended)."""
    cache = EpochFileCache(None, [_e(1, 0), _e(3, 100)])
    assert cache.next_entry(1) == cache.last_entry()
    assert cache.find_epoch_entry_by_offset(99) == EpochEntry(
        epoch=1, start_offset=0, end_offset=100
    )
    assert cache.find_epoch_entry_by_offset(10**9) == cache.last_entry()


async def test_epoch_cache_memory_only_never_writes(tmp_path: Path) -> None:
    """A cache without a path (the master's entries during truncation) writes nothing."""
    cache = EpochFileCache(None)
    async with asyncio.timeout(5):
        assert await cache.append_entry(_e(1, 0))
    assert list(tmp_path.iterdir()) == []


async def test_epoch_cache_write_failure_is_store_error(tmp_path: Path) -> None:
    """A file that cannot be written raises StoreError naming it."""
    path = tmp_path / EPOCH_FILE_NAME
    (tmp_path / (EPOCH_FILE_NAME + ".tmp")).mkdir()
    cache = EpochFileCache(path)
    async with asyncio.timeout(5):
        with pytest.raises(StoreError, match=EPOCH_FILE_NAME):
            await cache.append_entry(_e(1, 0))
