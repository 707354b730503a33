"""IndexFile: chains under heavy slot collisions, time ranges, reopen, size checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocketpy.common.errors import StoreError
from rocketpy.store.index.index_file import IndexFile
from rocketpy.store.index.record import index_file_size, index_key_hash

T0 = 1_700_000_000_000


def _query(
    f: IndexFile, key: str, max_num: int = 64, begin: int = 0, end: int = 2**62
) -> list[int]:
    out: list[int] = []
    f.select_phy_offsets(out, key, max_num, begin, end)
    return out


def test_index_file_collisions_in_two_slots(tmp_path: Path) -> None:
    """1. A file with only 2 hash slots and room for 40 entries. 2. Put 13 keys, each 3 times,
    interleaved (39 entries: every slot chain mixes many keys).
    Expected: each key finds exactly its own 3 offsets, newest first; 2 slots in use."""
    f = IndexFile.create(tmp_path / "f", 2, 40)
    keys = [f"T#key-{i}" for i in range(13)]
    for round_ in range(3):
        for i, key in enumerate(keys):
            assert f.put_key(key, 1000 * round_ + i, T0 + round_ * 1000)
    assert f.header.hash_slot_count == 2
    assert f.header.index_count == 40
    for i, key in enumerate(keys):
        assert _query(f, key) == [2000 + i, 1000 + i, i]
    f.close()


def test_index_file_same_hash_keys_both_match(tmp_path: Path) -> None:
    """Keys with the same Java hash (suffixes "Aa"/"BB") both match: only the hash is stored,
    as upstream; QUERY_MESSAGE filters by the real keys."""
    assert index_key_hash("T#Aa") == index_key_hash("T#BB")
    f = IndexFile.create(tmp_path / "f", 8, 8)
    f.put_key("T#Aa", 10, T0)
    f.put_key("T#BB", 20, T0)
    f.put_key("T#Ab", 30, T0)
    assert _query(f, "T#Aa") == [20, 10]
    assert _query(f, "T#Ab") == [30]
    f.close()


def test_index_file_time_range_and_max(tmp_path: Path) -> None:
    """1. Put one key at t0, t0+10 s, t0+20 s, t0+30 s. 2. Query [t0+10 s, t0+20 s], then
    with max 1. Expected: the two in range, newest first; max 1 gives only the newest."""
    f = IndexFile.create(tmp_path / "f", 4, 8)
    for i in range(4):
        f.put_key("T#k", 100 + i, T0 + i * 10_000)
    assert _query(f, "T#k", begin=T0 + 10_000, end=T0 + 20_000) == [102, 101]
    assert _query(f, "T#k", max_num=1) == [103]
    assert f.is_time_matched(T0 + 5_000, T0 + 6_000)
    assert not f.is_time_matched(T0 + 31_000, T0 + 40_000)
    f.close()


def test_index_file_reopen(tmp_path: Path) -> None:
    """1. Put keys, close. 2. Open the file again. Expected: same header, same answers."""
    path = tmp_path / "f"
    f = IndexFile.create(path, 4, 8)
    f.put_key("T#a", 1, T0)
    f.put_key("T#b", 2, T0 + 1000)
    header = f.header
    f.close()
    again = IndexFile.open(path, 4, 8)
    assert again.header == header
    assert _query(again, "T#a") == [1]
    assert _query(again, "T#b") == [2]
    again.close()


def test_index_file_start_after_previous(tmp_path: Path) -> None:
    """A file started after a full one begins at the previous end; its first entry's time diff
    is taken against that begin, then begin moves to the entry's own time (upstream)."""
    f = IndexFile.create(tmp_path / "f", 4, 8)
    f.start_after(500, T0)
    assert (f.header.begin_phy_offset, f.header.begin_timestamp) == (500, T0)
    f.put_key("T#a", 600, T0 + 3000)
    assert (f.header.begin_phy_offset, f.header.begin_timestamp) == (600, T0 + 3000)
    f.close()


def test_index_file_size_mismatch(tmp_path: Path) -> None:
    """Opening a file with other sizes than configured is a StoreError naming both."""
    path = tmp_path / "f"
    path.write_bytes(b"\0" * index_file_size(4, 4))
    with pytest.raises(StoreError, match="maxHashSlotNum=8"):
        IndexFile.open(path, 8, 4)


def test_index_file_closed_and_destroyed(tmp_path: Path) -> None:
    """After close, puts fail with StoreError and flush is a no-op; destroy deletes the file;
    creating over an existing file is refused."""
    path = tmp_path / "f"
    f = IndexFile.create(path, 4, 4)
    with pytest.raises(StoreError, match="already exists"):
        IndexFile.create(path, 4, 4)
    f.close()
    f.flush()
    with pytest.raises(StoreError, match="closed"):
        f.put_key("T#a", 1, T0)
    f.destroy()
    assert not path.exists()
