"""DLedgerLogStore on real files: layout, appends, reads, truncation, commit, properties files
(dledger-commitlog.md sections 1.1-1.3). Files are read back with tests/helpers/dledger_files.py,
not with the store's codec."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocketpy.common.message.decoder import decode_record
from rocketpy.common.message.record import MessageRecord, encode_record
from rocketpy.store.dledger_log.entry import DLedgerEntry
from rocketpy.store.dledger_log.meta import (
    DLedgerCheckpoint,
    TermState,
    load_checkpoint,
    load_term_state,
    persist_term_state,
)
from rocketpy.store.dledger_log.store import (
    DEFAULT_DATA_FILE_SIZE,
    DEFAULT_INDEX_FILE_SIZE,
    DLedgerLogStore,
    DLedgerStoreConfig,
    DLedgerStoreError,
    dledger_base_dir,
)
from tests.helpers.dledger_files import all_entries, read_units, walk_data_dir

SMALL = {"data_file_size": 4096, "index_file_size": 32 * 16}


def record(i: int, size: int | None = None) -> bytes:
    """A real message record whose body says which entry it is."""
    body = f"m{i}-".encode() * (1 + (i % 9) if size is None else size)
    return encode_record(MessageRecord(topic="TopicTest", queue_id=i % 4, body=body))


@pytest.fixture
def small(tmp_path: Path) -> Iterator[DLedgerLogStore]:
    """A loaded store with 4 KiB data files and 16-unit index files."""
    store = DLedgerLogStore(DLedgerStoreConfig(base_dir=tmp_path / "dledger-n0", **SMALL))
    store.load()
    yield store
    store.close()


def test_default_sizes_layout(tmp_path: Path) -> None:
    """1. Open a store at upstream's default sizes under dledger-n0. 2. Append 3 records at term 2.
    3. Close. Expected: data/00000000000000000000 is 1 GiB, index/00000000000000000000 is
    167,772,160 bytes; entry 0 at 0 (record at 48), entry 1 at 48+S0, entry 2 at 96+S0+S1; each
    record's PHYSICALOFFSET is pos + 48; index units name pos, size, index, term."""
    base = dledger_base_dir(tmp_path, "n0")
    assert base == tmp_path / "dledger-n0"
    store = DLedgerLogStore(DLedgerStoreConfig(base_dir=base))
    store.load()
    recs = [record(i) for i in range(3)]
    headers = [store.append_as_leader(r, 2, queue_offset=i) for i, r in enumerate(recs)]
    store.close()
    data = base / "data" / "00000000000000000000"
    index = base / "index" / "00000000000000000000"
    assert data.stat().st_size == DEFAULT_DATA_FILE_SIZE == 1 << 30
    assert index.stat().st_size == DEFAULT_INDEX_FILE_SIZE == 167_772_160
    entries = all_entries(base / "data")
    s0, s1 = len(recs[0]), len(recs[1])
    assert [e.pos for e in entries] == [0, 48 + s0, 96 + s0 + s1]
    assert [h.record_offset for h in headers] == [48, 96 + s0, 144 + s0 + s1]
    for i, e in enumerate(entries):
        assert (e.index, e.term, e.size) == (i, 2, 48 + len(recs[i]))
        rec = decode_record(e.body)
        assert (rec.physical_offset, rec.queue_offset) == (e.pos + 48, i)
        assert struct.unpack_from(">q", e.body, 28)[0] == e.pos + 48
    assert read_units(base / "index", 3) == [(1, e.pos, e.size, e.index, 2) for e in entries]


def test_entries_never_span_files_blank_tail(small: DLedgerLogStore) -> None:
    """1. Append 60 records of varying size into 4 KiB files.
    Expected: every data file but the last ends in a blank (-1, bytes left) of >= 8 bytes
    right after its last entry; entry positions and indexes are contiguous across files; index
    units (across 16-unit index files) match the entries."""
    for i in range(60):
        small.append_as_leader(record(i), 1)
    files = walk_data_dir(small.data.directory)
    assert len(files) >= 3
    for f in files[:-1]:
        last = f.entries[-1]
        end = last.pos + last.size - int(f.name)
        assert f.blank_at == end
        assert f.blank_left == 4096 - end
        assert f.blank_left is not None
        assert f.blank_left >= 8
    entries = [e for f in files for e in f.entries]
    assert [e.index for e in entries] == list(range(60))
    units = read_units(small.index.directory, 60)
    assert units == [(1, e.pos, e.size, e.index, 1) for e in entries]
    assert len(list(small.index.directory.iterdir())) == 4  # 60 units / 16 per file
    assert decode_record(small.get(37).body).body == decode_record(record(37)).body


def test_get_reads_through_the_index(small: DLedgerLogStore) -> None:
    """Expected: get(i) returns the entry; out-of-range indexes raise INDEX_OUT_OF_RANGE."""
    for i in range(5):
        small.append_as_leader(record(i), 3)
    got = small.get(4)
    assert (got.index, got.term) == (4, 3)
    assert decode_record(got.body).body == decode_record(record(4)).body
    for bad in (-1, 5):
        with pytest.raises(DLedgerStoreError) as err:
            small.get(bad)
        assert err.value.code == "INDEX_OUT_OF_RANGE"
    with pytest.raises(DLedgerStoreError):
        small.append_as_leader(record(9), 2)  # a term below the ledger end term


def test_follower_copy_is_byte_identical(tmp_path: Path) -> None:
    """1. A leader appends 50 entries over two terms. 2. A follower appends each verbatim.
    Expected: data identical up to the end position, index up to (end + 1) * 32; an entry at
    the wrong index or position is refused."""
    leader = DLedgerLogStore(DLedgerStoreConfig(base_dir=tmp_path / "dledger-n0", **SMALL))
    follower = DLedgerLogStore(DLedgerStoreConfig(base_dir=tmp_path / "dledger-n1", **SMALL))
    leader.load()
    follower.load()
    for i in range(50):
        leader.append_as_leader(record(i), 1 if i < 20 else 2)
    for i in range(50):
        follower.append_as_follower(leader.get(i))
    assert (follower.ledger_end_index, follower.ledger_end_term) == (49, 2)
    assert follower.write_pos == leader.write_pos
    wrong = leader.get(10)
    with pytest.raises(DLedgerStoreError) as err:
        follower.append_as_follower(wrong)
    assert err.value.code == "INCONSISTENT_INDEX"
    leader.close()
    follower.close()
    end = leader.write_pos
    lblob = _concat(tmp_path / "dledger-n0" / "data")
    fblob = _concat(tmp_path / "dledger-n1" / "data")
    assert lblob[:end] == fblob[:end]
    ind = 50 * 32
    assert (
        _concat(tmp_path / "dledger-n0/index")[:ind] == _concat(tmp_path / "dledger-n1/index")[:ind]
    )


def test_follower_batch_append_is_byte_identical(tmp_path: Path) -> None:
    """1. A leader appends 60 entries over two terms, across data and index file rolls.
    2. One follower appends them one by one, another in batches of 7 (a batch that crosses a
    file roll goes entry by entry). Expected: both followers' data and index files equal the
    leader's, with the same ledger end; a batch with a gap appends up to the gap and raises
    INCONSISTENT_INDEX."""
    stores = [
        DLedgerLogStore(DLedgerStoreConfig(base_dir=tmp_path / f"dledger-n{i}", **SMALL))
        for i in range(3)
    ]
    leader, single, batched = stores
    for store in stores:
        store.load()
    for i in range(60):
        leader.append_as_leader(record(i), 1 if i < 25 else 2)
    entries = [leader.get(i) for i in range(60)]
    for entry in entries:
        single.append_as_follower(entry)
    for first in range(0, 60, 7):
        batched.append_batch_as_follower(entries[first : first + 7])
    assert (batched.ledger_begin_index, batched.ledger_end_index) == (0, 59)
    assert batched.ledger_end_term == 2
    with pytest.raises(DLedgerStoreError) as err:
        batched.append_batch_as_follower([entries[59], entries[58]])
    assert err.value.code == "INCONSISTENT_INDEX"
    for store in stores:
        store.close()
    for sub in ("data", "index"):
        blobs = [_concat(tmp_path / f"dledger-n{i}" / sub) for i in range(3)]
        assert blobs[0] == blobs[1] == blobs[2]


def test_follower_batch_append_stops_at_gap(small: DLedgerLogStore, tmp_path: Path) -> None:
    """1. A leader appends 5 entries. 2. A follower gets a batch of entries 0, 1, 3.
    Expected: entries 0 and 1 are appended, then INCONSISTENT_INDEX; the end is 1."""
    leader = DLedgerLogStore(DLedgerStoreConfig(base_dir=tmp_path / "dledger-n9", **SMALL))
    leader.load()
    for i in range(5):
        leader.append_as_leader(record(i), 1)
    with pytest.raises(DLedgerStoreError) as err:
        small.append_batch_as_follower([leader.get(0), leader.get(1), leader.get(3)])
    assert err.value.code == "INCONSISTENT_INDEX"
    assert small.ledger_end_index == 1
    assert small.get(1) == leader.get(1)
    leader.close()


def test_follower_refuses_wrong_position(small: DLedgerLogStore) -> None:
    """An entry whose pos is not where it would land is DISK_ERROR (``appendAsFollower``)."""
    with pytest.raises(DLedgerStoreError) as err:
        small.append_as_follower(DLedgerEntry(index=0, term=1, pos=48, body=record(0)))
    assert err.value.code == "DISK_ERROR"


def _concat(directory: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(directory.iterdir()) if p.name.isdigit())


def test_truncate_divergent_follower(small: DLedgerLogStore) -> None:
    """1. Append 30 entries at term 1. 2. TRUNCATE with the leader's entry 12 (equal): the log
    ends at 12. 3. TRUNCATE with another entry 8 (term 2, other body, same pos): it replaces 8.
    Expected: ledger end 12 then 8 (term 2); data ends after the new entry; index units match;
    the committed index drops to the new end."""
    for i in range(30):
        small.append_as_leader(record(i), 1)
    small.update_committed_index(25)
    equal = small.get(12)
    assert small.truncate(equal) == 12
    assert (small.ledger_end_index, small.write_pos) == (12, equal.pos + equal.size)
    assert small.committed_index == 12
    old8 = small.get(8)
    new8 = DLedgerEntry(index=8, term=2, pos=old8.pos, body=record(800, size=2))
    small.truncate(new8)
    assert (small.ledger_end_index, small.ledger_end_term) == (8, 2)
    assert small.get(8) == new8
    assert small.write_pos == new8.pos + new8.size
    assert small.committed_index == 8
    small.append_as_leader(record(9), 2)
    entries = all_entries(small.data.directory, small.write_pos)
    assert entries[-1].index == 9
    assert entries[8].body == new8.body


def test_truncate_after_keeps_a_prefix(small: DLedgerLogStore) -> None:
    """truncate_after(k) keeps 0..k; truncate_after(-1) empties the log; appends continue."""
    for i in range(40):
        small.append_as_leader(record(i), 1)
    e20 = small.get(20)
    small.truncate_after(20)
    assert (small.ledger_end_index, small.write_pos) == (20, e20.pos + e20.size)
    assert small.index.max_wrote_position == 21 * 32
    small.truncate_after(-1)
    assert (small.ledger_end_index, small.ledger_begin_index, small.write_pos) == (-1, -1, 0)
    h = small.append_as_leader(record(0), 4)
    assert (h.index, h.pos) == (0, 0)


def test_committed_index_moves_forward_capped(small: DLedgerLogStore) -> None:
    """Expected: committed index capped at the ledger end, never moves back; committed_pos is
    the end of that entry."""
    assert (small.committed_index, small.committed_pos) == (-1, -1)
    for i in range(10):
        small.append_as_leader(record(i), 1)
    small.update_committed_index(4)
    e4 = small.get(4)
    assert (small.committed_index, small.committed_pos) == (4, e4.pos + e4.size)
    small.update_committed_index(2)
    assert small.committed_index == 4
    small.update_committed_index(100)
    e9 = small.get(9)
    assert (small.committed_index, small.committed_pos) == (9, e9.pos + e9.size)


def test_checkpoint_and_currterm_files(tmp_path: Path) -> None:
    """1. Close a store with end 6, committed 3. 2. Write currterm twice.
    Expected: ``checkpoint`` holds endIndex=6 and committedIndex=3; ``currterm`` holds currTerm
    and voteLeader (empty for no vote); the previous content is kept as ``.bak``; both load."""
    base = tmp_path / "dledger-n2"
    store = DLedgerLogStore(DLedgerStoreConfig(base_dir=base, **SMALL))
    store.load()
    for i in range(7):
        store.append_as_leader(record(i), 1)
    store.update_committed_index(3)
    store.close()
    lines = (base / "checkpoint").read_text().splitlines()
    assert sorted(lines) == ["committedIndex=3", "endIndex=6"]
    assert load_checkpoint(base) == DLedgerCheckpoint(end_index=6, committed_index=3)

    assert load_term_state(base) == TermState(curr_term=0, vote_leader=None)
    persist_term_state(base, TermState(curr_term=5, vote_leader=None))
    persist_term_state(base, TermState(curr_term=6, vote_leader="n1"))
    assert sorted((base / "currterm").read_text().splitlines()) == ["currTerm=6", "voteLeader=n1"]
    bak = (base / "currterm.bak").read_text().splitlines()
    assert sorted(bak) == ["currTerm=5", "voteLeader="]
    assert not (base / "currterm.tmp").exists()
    assert load_term_state(base) == TermState(curr_term=6, vote_leader="n1")
    (base / "currterm").unlink()
    assert load_term_state(base) == TermState(curr_term=5, vote_leader=None)


def test_java_written_currterm_parses(tmp_path: Path) -> None:
    """A ``currterm`` as Java's ``properties2String`` writes it (any key order) loads."""
    (tmp_path / "currterm").write_text("voteLeader=\ncurrTerm=12\n")
    assert load_term_state(tmp_path) == TermState(curr_term=12, vote_leader=None)


def test_files_made_ahead_are_used_or_dropped(small: DLedgerLogStore) -> None:
    """1. Make the next data and index files ahead. 2. Append until both roll.
    Expected: the rolls take the files made ahead (same paths, no extra files); a truncation
    deletes a file made ahead that is no longer next; flush reports the written ends."""
    small.append_as_leader(record(0), 1)
    small.prepare_next_files()
    ahead_data = small.data.directory / f"{4096:020d}"
    ahead_index = small.index.directory / f"{512:020d}"
    assert ahead_data.exists()
    assert ahead_index.exists()
    assert len(small.data.files) == 1
    i = 1
    while len(small.data.files) < 2 or len(small.index.files) < 2:
        small.append_as_leader(record(i), 1)
        i += 1
    assert [mf.path for mf in small.data.files][1] == ahead_data
    assert [mf.path for mf in small.index.files][1] == ahead_index
    assert small.flush() == (small.write_pos, (small.ledger_end_index + 1) * 32)
    small.prepare_next_files()
    assert (small.data.directory / f"{8192:020d}").exists()
    small.truncate_after(0)
    assert sorted(p.name for p in small.data.directory.iterdir()) == [f"{0:020d}"]
    assert sorted(p.name for p in small.index.directory.iterdir()) == [f"{0:020d}"]


def test_short_body_with_patching_is_refused(small: DLedgerLogStore) -> None:
    """1. Append a 20-byte body with patching on into an empty data file (room for far more).
    2. Append the same body with ``patch=False``. 3. Append a real record.
    Expected: step 1 raises BODY_TOO_SHORT and writes nothing (no entry, no index unit, data
    end still 0: the PHYSICALOFFSET patch would have written 8 bytes past the body); step 2
    stores the body verbatim at index 0; the record of step 3 follows it untouched."""
    short = b"\x07" * 20
    with pytest.raises(DLedgerStoreError, match="BODY_TOO_SHORT"):
        small.append_as_leader(short, 1)
    assert (small.ledger_end_index, small.data.max_wrote_position) == (-1, 0)
    h = small.append_as_leader(short, 1, patch=False)
    assert (h.index, h.pos, small.get(0).body) == (0, 0, short)
    h2 = small.append_as_leader(record(1), 1)
    assert h2.pos == 48 + 20
    assert small.data.read(h.pos + 48, 20 + 48) == short + small.data.read(h2.pos, 48)
    assert decode_record(small.get(1).body).physical_offset == h2.pos + 48
