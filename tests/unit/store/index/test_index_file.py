"""IndexFile: chains under heavy slot collisions, time ranges, reopen, size checks."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketpy.common.errors import StoreError
from rocketpy.store.index import record as r
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


def test_index_file_put_hashes_past_the_end_keeps_the_last_written_in_the_header(
    tmp_path: Path,
) -> None:
    """1. A file with room for 4 entries (entry 0 is never used: 3 keys). 2. put_hashes with 5
    keys at offsets 100..500, a second apart. Expected: 3 added; the header's end offset and
    end time are the third key's (a batch crossing a file's end once left those of the first
    key *not* written there: a restart would take that record as indexed); reopened alike."""
    f = IndexFile.create(tmp_path / "f", 8, 4)
    entries = [(index_key_hash(f"T#k{i}"), 100 * (i + 1), T0 + 1000 * i) for i in range(5)]
    assert f.put_hashes(entries) == 3
    assert (f.header.index_count, f.header.end_phy_offset, f.header.end_timestamp) == (
        4,
        300,
        T0 + 2000,
    )
    f.close()
    again = IndexFile.open(tmp_path / "f", 8, 4)
    assert (again.header.end_phy_offset, again.header.end_timestamp) == (300, T0 + 2000)
    assert _query(again, "T#k2") == [300]
    again.close()


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


def _reference_put(
    buf: bytearray, header: r.IndexHeader, slots: int, entries: int, put: tuple[str, int, int]
) -> bool:
    """``putKey`` written plainly with the record helpers (the oracle for the inlined one)."""
    key, phy_offset, store_timestamp = put
    if header.index_count >= entries:
        return False
    key_hash = r.index_key_hash(key)
    slot_pos = r.slot_position(key_hash, slots)
    (slot_value,) = r.SLOT.unpack_from(buf, slot_pos)
    if slot_value <= r.INVALID_INDEX or slot_value > header.index_count:
        slot_value = r.INVALID_INDEX
    time_diff = r.time_diff_seconds(store_timestamp, header.begin_timestamp)
    index_no = header.index_count
    entry = r.IndexEntry(
        key_hash=key_hash, phy_offset=phy_offset, time_diff=time_diff, prev_index=slot_value
    )
    pos = r.entry_position(slots, index_no)
    buf[pos : pos + r.INDEX_SIZE] = r.encode_index_entry(entry)
    r.SLOT.pack_into(buf, slot_pos, index_no)
    if index_no <= 1:
        header.begin_timestamp = store_timestamp
        header.begin_phy_offset = phy_offset
    header.end_timestamp = store_timestamp
    header.end_phy_offset = phy_offset
    if slot_value == r.INVALID_INDEX:
        header.hash_slot_count += 1
    header.index_count = index_no + 1
    buf[: r.INDEX_HEADER_SIZE] = r.encode_index_header(header)
    return True


_PUTS = st.lists(
    st.tuples(
        st.sampled_from(["T#a", "T#b", "T#polygenelubricants", "主题#键", "T#\U0001f600"])
        | st.text(max_size=40),
        st.integers(0, 2**40),
        st.one_of(st.integers(-(2**40), 2**45), st.integers(T0 - 5000, T0 + 10**13)),
    ),
    max_size=40,
)


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    slots=st.integers(1, 7),
    entries=st.integers(2, 30),
    previous=st.tuples(st.integers(0, 2**40), st.integers(-5, 2**42)),
    puts=_PUTS,
)
def test_index_file_put_key_bytes_equal_the_reference(
    tmp_path: Path,
    slots: int,
    entries: int,
    previous: tuple[int, int],
    puts: list[tuple[str, int, int]],
) -> None:
    """1. A small file (1-7 slots, so chains collide) that continues a previous file's end.
    2. Any keys (MIN_VALUE hash, non-ASCII, emoji), offsets and timestamps (before, at and long
    after the begin, so time diffs are negative, zero and clamped), past the file's capacity.
    Expected: every put_key result and the file's bytes equal the reference putKey's."""
    path = tmp_path / f"f-{slots}-{entries}-{len(puts)}-{abs(hash((previous, tuple(puts))))}"
    f = IndexFile.create(path, slots, entries)
    f.start_after(*previous)
    buf = bytearray(path.read_bytes())
    header = r.decode_index_header(buf)
    for put in puts:
        assert f.put_key(*put) == _reference_put(buf, header, slots, entries, put)
    assert f.header == header
    f.close()
    assert path.read_bytes() == bytes(buf)
    path.unlink()
