"""DLedger-layer recovery on real files (dledger-commitlog.md section 1.5): torn tails, bad index
units, a term going backwards, where the walk starts, and default-size sparse files."""

from __future__ import annotations

import os
import struct
import time
from pathlib import Path

import pytest

from rocketpy.common.errors import StoreError
from rocketpy.common.message.decoder import decode_record
from rocketpy.common.message.record import MessageRecord, encode_record
from rocketpy.store.dledger_log.recovery import RecoveryResult
from rocketpy.store.dledger_log.store import DLedgerLogStore, DLedgerStoreConfig
from tests.helpers.dledger_files import all_entries, read_units, walk_data_dir

SMALL = {"data_file_size": 4096, "index_file_size": 32 * 16}


def record(i: int) -> bytes:
    """A message record whose body names entry ``i``."""
    return encode_record(MessageRecord(topic="TopicTest", queue_id=0, body=f"e{i}".encode() * 5))


def make(base: Path, n: int, *, term: int = 1, **sizes: int) -> DLedgerLogStore:
    """A closed store under ``base`` holding entries 0..n-1 at ``term``; returns the closed
    store (its counters are what it held at close)."""
    store = DLedgerLogStore(DLedgerStoreConfig(base_dir=base, **(sizes or SMALL)))
    store.load()
    for i in range(n):
        store.append_as_leader(record(i), term)
    store.close()
    return store


def reopen(base: Path, **sizes: int) -> tuple[DLedgerLogStore, RecoveryResult]:
    """Load the store again; returns it and its RecoveryResult."""
    store = DLedgerLogStore(DLedgerStoreConfig(base_dir=base, **(sizes or SMALL)))
    return store, store.load()


def write_at(directory: Path, file_size: int, offset: int, data: bytes) -> None:
    """Overwrite ``data`` at global ``offset`` in the file holding it."""
    start = offset - offset % file_size
    with (directory / f"{start:020d}").open("r+b") as f:
        f.seek(offset - start)
        f.write(data)


def read_at(directory: Path, file_size: int, offset: int, size: int) -> bytes:
    """``size`` bytes at global ``offset``."""
    start = offset - offset % file_size
    with (directory / f"{start:020d}").open("rb") as f:
        f.seek(offset - start)
        return f.read(size)


def test_torn_header_at_tail_is_cut(tmp_path: Path) -> None:
    """1. Write 10 entries, close. 2. Put the first 20 bytes of an entry-10 header at the end.
    3. Reopen. Expected: end index 9, write position unchanged, a copy of the 20 bytes under
    recovery/, the bytes zeroed; the next append is entry 10 at that position."""
    base = tmp_path / "dledger-n0"
    old = make(base, 10)
    end = old.write_pos
    torn = struct.pack(">iiqq", 1, 48 + 100, 10, 1)[:20]
    write_at(base / "data", 4096, end, torn)
    store, result = reopen(base)
    assert (store.ledger_end_index, store.write_pos) == (9, end)
    assert result.cut_copy is not None
    assert result.cut_copy.read_bytes() == torn.rstrip(b"\0")  # trailing zeros are not kept
    assert read_at(base / "data", 4096, end, 20) == bytes(20)
    h = store.append_as_leader(record(10), 1)
    assert (h.index, h.pos) == (10, end)
    store.close()
    assert [e.index for e in all_entries(base / "data")] == list(range(11))


def test_entry_overrunning_its_file_is_cut(tmp_path: Path) -> None:
    """A whole header whose size runs past the end of its file (a torn tail) is cut."""
    base = tmp_path / "dledger-n0"
    old = make(base, 5)
    end = old.write_pos
    header = struct.pack(">iiqqqiiii", 1, 48 + 5000, 5, 1, end, 0, 0, 0, 5000)
    write_at(base / "data", 4096, end, header)
    store, result = reopen(base)
    assert (store.ledger_end_index, store.write_pos) == (4, end)
    assert "exceeds" in result.cut_reason
    store.close()


def test_header_without_magic_is_cut(tmp_path: Path) -> None:
    """An entry killed before its magic was written (the store writes it last) is cut."""
    base = tmp_path / "dledger-n0"
    old = make(base, 5)
    end = old.write_pos
    rec = record(5)
    entry = struct.pack(">iiqqqiiii", 0, 48 + len(rec), 5, 1, end, 0, 0, 0, len(rec)) + rec
    write_at(base / "data", 4096, end, entry)
    store, result = reopen(base)
    assert store.ledger_end_index == 4
    assert "magic 0" in result.cut_reason
    store.close()


def test_bad_index_unit_is_rewritten(tmp_path: Path) -> None:
    """1. Write 10 entries. 2. Corrupt index unit 5's term. 3. Reopen.
    Expected: nothing cut (end 9); units 5..9 rewritten from the data and equal to it."""
    base = tmp_path / "dledger-n0"
    make(base, 10)
    write_at(base / "index", 32 * 16, 5 * 32 + 24, struct.pack(">q", 77))
    store, result = reopen(base)
    assert store.ledger_end_index == 9
    assert result.index_rewritten == 5
    assert result.cut_reason == ""
    store.close()
    entries = all_entries(base / "data")
    assert read_units(base / "index", 10) == [(1, e.pos, e.size, e.index, 1) for e in entries]


def test_missing_index_files_are_rebuilt(tmp_path: Path) -> None:
    """Index files deleted: every unit is rewritten from the data."""
    base = tmp_path / "dledger-n0"
    make(base, 40)
    for p in (base / "index").iterdir():
        p.unlink()
    store, result = reopen(base)
    assert (store.ledger_end_index, result.index_rewritten) == (39, 40)
    assert store.get(33).index == 33
    store.close()
    entries = all_entries(base / "data")
    assert read_units(base / "index", 40) == [(1, e.pos, e.size, e.index, 1) for e in entries]


def test_term_going_backwards_is_cut(tmp_path: Path) -> None:
    """1. Entries 0..9 at term 3. 2. Entry 6's term (data and unit) set to 2. 3. Reopen.
    Expected: the walk stops at 6: end 5, data ends where 6 began, index at 6 * 32."""
    base = tmp_path / "dledger-n0"
    make(base, 10, term=3)
    e6 = all_entries(base / "data")[6]
    write_at(base / "data", 4096, e6.pos + 16, struct.pack(">q", 2))
    write_at(base / "index", 32 * 16, 6 * 32 + 24, struct.pack(">q", 2))
    store, result = reopen(base)
    assert (store.ledger_end_index, store.ledger_end_term, store.write_pos) == (5, 3, e6.pos)
    assert store.index.max_wrote_position == 6 * 32
    assert "term 2 < lastEntryTerm 3" in result.cut_reason
    store.close()


def test_index_gap_is_cut(tmp_path: Path) -> None:
    """An entry whose index is not previous + 1 ends the log before it."""
    base = tmp_path / "dledger-n0"
    make(base, 10)
    e4 = all_entries(base / "data")[4]
    write_at(base / "data", 4096, e4.pos + 8, struct.pack(">q", 40))
    store, _ = reopen(base)
    assert (store.ledger_end_index, store.write_pos) == (3, e4.pos)
    store.close()


def test_walk_starts_at_third_last_file_and_steps_back(tmp_path: Path) -> None:
    """1. Write enough entries for >= 6 data files. 2. Reopen: the walk starts at the
    third-to-last file. 3. Corrupt the index unit of that file's first entry; reopen.
    Expected: the walk steps back one file, the unit is rewritten, nothing is cut."""
    base = tmp_path / "dledger-n0"
    make(base, 150)
    files = walk_data_dir(base / "data")
    assert len(files) >= 6
    store, result = reopen(base)
    assert result.walk_start == int(files[-3].name)
    assert store.ledger_end_index == 149
    store.close()
    first = files[-3].entries[0]
    write_at(base / "index", 32 * 16, first.index * 32 + 4, struct.pack(">q", 1))
    store, result = reopen(base)
    assert result.walk_start == int(files[-4].name)
    assert store.ledger_end_index == 149
    assert result.index_rewritten == 150 - first.index
    store.close()


def test_committed_index_from_checkpoint_capped_at_end(tmp_path: Path) -> None:
    """``checkpoint`` says committedIndex=50 but the log ends at 9: committed index is 9."""
    base = tmp_path / "dledger-n0"
    make(base, 10)
    (base / "checkpoint").write_text("endIndex=50\ncommittedIndex=50\n")
    store, _ = reopen(base)
    assert (store.committed_index, store.ledger_end_index) == (9, 9)
    last = store.get(9)
    assert store.committed_pos == last.pos + last.size
    store.close()


def test_cut_far_before_the_last_file_is_refused(tmp_path: Path) -> None:
    """Bad bytes early in the third-to-last of >= 5 files: the valid end lies more than a file
    before the last file, and recovery refuses (upstream exits for a manual check)."""
    base = tmp_path / "dledger-n0"
    make(base, 120)
    files = walk_data_dir(base / "data")
    bad = files[-3].entries[1]
    write_at(base / "data", 4096, bad.pos, struct.pack(">i", 9))
    store = DLedgerLogStore(DLedgerStoreConfig(base_dir=base, **SMALL))
    with pytest.raises(StoreError, match="processOffset"):
        store.load()


def test_empty_data_drops_index(tmp_path: Path) -> None:
    """No data files: the index is cut to 0 (``truncateOffset(0)``: files past the first go,
    the first is rewound) and the log is empty; the next entry is 0 with unit 0."""
    base = tmp_path / "dledger-n0"
    make(base, 20)
    for p in (base / "data").iterdir():
        p.unlink()
    store, _ = reopen(base)
    assert (store.ledger_end_index, store.write_pos) == (-1, 0)
    assert [p.name for p in (base / "index").iterdir()] == [f"{0:020d}"]
    assert store.index.max_wrote_position == 0
    h = store.append_as_leader(record(0), 2)
    assert (h.index, h.pos) == (0, 0)
    store.close()
    assert read_units(base / "index", 1) == [(1, 0, h.size, 0, 2)]


def test_crash_mid_file_default_sizes(tmp_path: Path) -> None:
    """1. Default sizes (1 GiB data, 160 MiB index, their blocks allocated up front).
    2. Append 3000 entries, flush, "crash": unmap without checkpoint, the last index unit never
    written, and half of entry 3000's body written but not its header (the store writes the
    header last). 3. Reopen, timed.
    Expected: 3000 entries, unit 2999 rewritten, the walk ends at the zero header, committed
    index -1 (no checkpoint), recovery well under two seconds; entry bodies intact; the next
    append is entry 3000 at the old end."""
    base = tmp_path / "dledger-n0"
    store = DLedgerLogStore(DLedgerStoreConfig(base_dir=base))
    store.load()
    for i in range(3000):
        store.append_as_leader(record(i), 2)
    end = store.write_pos
    store.flush()
    store.data.close()
    store.index.close()
    write_at(base / "index", 167_772_160, 2999 * 32, bytes(32))
    rec = record(3000)
    write_at(base / "data", 1 << 30, end + 48, rec[: len(rec) // 2])
    # every block allocated at creation (a hole written on a full disk would be SIGBUS)
    assert os.stat(base / "data" / f"{0:020d}").st_blocks * 512 >= 1 << 30
    started = time.monotonic()
    again, result = reopen(base, data_file_size=1 << 30, index_file_size=167_772_160)
    elapsed = time.monotonic() - started
    assert elapsed < 2.0
    assert (again.ledger_end_index, again.write_pos, again.committed_index) == (2999, end, -1)
    assert (result.index_rewritten, result.cut_reason) == (1, "")
    assert decode_record(again.get(1234).body).body == b"e1234" * 5
    h = again.append_as_leader(record(3000), 2)
    assert (h.index, h.pos) == (3000, end)
    again.close()
    assert len(all_entries(base / "data")) == 3001
