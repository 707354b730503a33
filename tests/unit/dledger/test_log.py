"""The durable DLedger log: reopen, segments, torn tails (truncated or flipped bytes, exact
recovery index), CRC mismatch, snapshot + compaction + reopen, and a Raft group on disk
(model: etcd-io/etcd server/storage/wal/wal_test.go, repair_test.go)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocketpy.common.errors import StoreError
from rocketpy.common.types import LogIndex, Term
from rocketpy.dledger.log import (
    HARD_STATE_FILE,
    SNAPSHOT_FILE,
    WAL_DIR,
    DLedgerLog,
    encode_record,
    encode_snapshot,
    segment_name,
)
from rocketpy.dledger.messages import Entry, HardState, Snapshot, SnapshotMeta
from rocketpy.dledger.storage import LogCompacted
from tests.helpers.raft_net import Cluster
from tests.helpers.raft_steps import entries


def _segments(d: Path) -> list[Path]:
    return sorted((d / WAL_DIR).glob("*.log"))


def _terms(log: DLedgerLog) -> list[int]:
    return [log.term(LogIndex(i)) for i in range(log.first_index(), log.last_index() + 1)]


def test_log_reopen_returns_what_was_written(tmp_path: Path) -> None:
    """1. append 5 entries, set hard state (3, n1, 4); 2. reopen. Expected: same entries,
    same hard state; an empty directory opens as an empty log."""
    log = DLedgerLog.open(tmp_path)
    assert (log.first_index(), log.last_index(), log.hard_state()) == (1, 0, HardState())
    log.append(entries(1, 1, 2, 3, 3))
    log.set_hard_state(HardState(term=Term(3), vote="n1", commit=LogIndex(4)))
    again = DLedgerLog.open(tmp_path)
    assert again.entries(LogIndex(1), LogIndex(6), 1 << 20) == entries(1, 1, 2, 3, 3)
    assert again.hard_state() == HardState(term=Term(3), vote="n1", commit=LogIndex(4))
    assert again.recovery.torn_segment is None


def test_log_overwrites_a_suffix(tmp_path: Path) -> None:
    """1. append terms 1,1,1,1; 2. append terms 2,2 at index 3 (a follower replacing an
    uncommitted tail); 3. reopen. Expected: 1,1,2,2."""
    log = DLedgerLog.open(tmp_path)
    log.append(entries(1, 1, 1, 1))
    log.append(entries(2, 2, start=3))
    assert _terms(log) == [1, 1, 2, 2]
    assert _terms(DLedgerLog.open(tmp_path)) == [1, 1, 2, 2]


def test_log_rejects_gaps_and_compacted_indices(tmp_path: Path) -> None:
    """Appending after a gap raises ValueError; so does non-contiguous input."""
    log = DLedgerLog.open(tmp_path)
    log.append(entries(1))
    with pytest.raises(ValueError, match="gap"):
        log.append(entries(1, start=3))
    with pytest.raises(ValueError, match="contiguous"):
        log.append([*entries(1, start=2), *entries(1, start=4)])


def test_log_rolls_segments_and_truncates_across_them(tmp_path: Path) -> None:
    """1. 128-byte segments, 20 entries -> several files named by first index; 2. overwrite
    from index 6; 3. reopen. Expected: files after the one holding 5 are gone, content is
    1..5 of term 1 then the new term-2 entries."""
    log = DLedgerLog.open(tmp_path, segment_bytes=128)
    log.append(entries(*[1] * 20))
    names = [p.name for p in _segments(tmp_path)]
    assert len(names) > 2
    assert names[0] == segment_name(1)
    log.append(entries(2, 2, start=6))
    again = DLedgerLog.open(tmp_path, segment_bytes=128)
    assert _terms(again) == [1] * 5 + [2, 2]
    assert again.recovery.segments == len(_segments(tmp_path))


def _record_sizes(n: int) -> list[int]:
    return [len(encode_record(e)) for e in entries(*[1] * n)]


@pytest.mark.parametrize("cut", [1, 4, 8, 9, 12])
def test_log_torn_tail_is_cut_at_the_last_whole_record(tmp_path: Path, cut: int) -> None:
    """Torn write: 1. append 6 entries in one segment; 2. truncate ``cut`` bytes off the file
    (inside the last record's header or payload); 3. reopen. Expected: last index 5, the file
    ends at the 5th record, the cut bytes are kept under torn/, and appends continue at 6."""
    log = DLedgerLog.open(tmp_path)
    log.append(entries(*[1] * 6))
    seg = _segments(tmp_path)[0]
    data = seg.read_bytes()
    seg.write_bytes(data[:-cut])
    good = sum(_record_sizes(5))
    again = DLedgerLog.open(tmp_path)
    rep = again.recovery
    assert again.last_index() == 5
    assert (rep.torn_segment, rep.torn_offset, rep.torn_bytes) == (
        seg.name,
        good,
        len(data) - cut - good,
    )
    assert seg.stat().st_size == good
    assert rep.torn_copy is not None
    assert rep.torn_copy.read_bytes() == data[good:-cut]
    again.append(entries(2, start=6))
    assert _terms(DLedgerLog.open(tmp_path)) == [1] * 5 + [2]


@pytest.mark.parametrize("record", [0, 2, 5])
def test_log_crc_mismatch_in_last_segment_cuts_from_that_record(
    tmp_path: Path, record: int
) -> None:
    """CRC mismatch: 1. append 6 entries; 2. flip one payload byte of record ``record``;
    3. reopen. Expected: last index == ``record`` (everything from the bad record is cut and
    copied aside)."""
    log = DLedgerLog.open(tmp_path)
    log.append(entries(*[1] * 6))
    seg = _segments(tmp_path)[0]
    data = bytearray(seg.read_bytes())
    offset = sum(_record_sizes(record))
    data[offset + 9] ^= 0x40
    seg.write_bytes(bytes(data))
    again = DLedgerLog.open(tmp_path)
    assert again.last_index() == record
    assert again.recovery.torn_offset == offset
    assert seg.stat().st_size == offset


def test_log_zero_filled_tail_is_cut(tmp_path: Path) -> None:
    """A tail of zero bytes (a file extended but never written) is cut: last index stays 3."""
    log = DLedgerLog.open(tmp_path)
    log.append(entries(1, 1, 1))
    seg = _segments(tmp_path)[0]
    seg.write_bytes(seg.read_bytes() + bytes(100))
    assert DLedgerLog.open(tmp_path).last_index() == 3


def test_log_damage_before_the_last_segment_fails_the_open(tmp_path: Path) -> None:
    """Not a torn tail: 1. several segments; 2. flip a byte in the first one. Expected:
    StoreError naming the file and offset; nothing is cut."""
    log = DLedgerLog.open(tmp_path, segment_bytes=128)
    log.append(entries(*[1] * 20))
    first = _segments(tmp_path)[0]
    data = bytearray(first.read_bytes())
    data[10] ^= 0xFF
    first.write_bytes(bytes(data))
    with pytest.raises(StoreError, match="not at the tail"):
        DLedgerLog.open(tmp_path, segment_bytes=128)
    assert first.read_bytes() == bytes(data)


def test_log_corrupt_hard_state_fails_the_open(tmp_path: Path) -> None:
    """A hard state file with a bad CRC is an error (a vote must never be guessed)."""
    log = DLedgerLog.open(tmp_path)
    log.set_hard_state(HardState(term=Term(2), vote="n0"))
    path = tmp_path / HARD_STATE_FILE
    data = bytearray(path.read_bytes())
    data[-1] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(StoreError, match="hardstate is corrupt"):
        DLedgerLog.open(tmp_path)


def test_log_snapshot_compaction_and_reopen(tmp_path: Path) -> None:
    """1. 20 entries over several segments; 2. snapshot at 12 (term 1) and compact to 12;
    3. reopen. Expected: segments holding only entries <= 12 are deleted; first index 13,
    term(12) is the snapshot term, reads below raise LogCompacted; the snapshot data is back."""
    log = DLedgerLog.open(tmp_path, segment_bytes=128)
    log.append(entries(*[1] * 20))
    before = len(_segments(tmp_path))
    snap = log.create_snapshot(LogIndex(12), b"sm@12")
    log.compact(LogIndex(12))
    assert len(_segments(tmp_path)) < before
    assert (log.first_index(), log.term(LogIndex(12))) == (13, 1)
    again = DLedgerLog.open(tmp_path, segment_bytes=128)
    assert again.snapshot() == snap
    assert (again.first_index(), again.last_index(), again.term(LogIndex(12))) == (13, 20, 1)
    with pytest.raises(LogCompacted):
        again.entries(LogIndex(5), LogIndex(14), 1 << 20)
    again.append(entries(2, start=21))
    assert DLedgerLog.open(tmp_path, segment_bytes=128).last_index() == 21


def test_log_compaction_limits(tmp_path: Path) -> None:
    """compact beyond the snapshot raises; a snapshot older than the current one raises."""
    log = DLedgerLog.open(tmp_path)
    log.append(entries(1, 1, 1))
    log.create_snapshot(LogIndex(2), b"x")
    with pytest.raises(ValueError, match="beyond snapshot"):
        log.compact(LogIndex(3))
    with pytest.raises(ValueError, match="older"):
        log.create_snapshot(LogIndex(1), b"y")


def test_log_install_snapshot_replaces_everything(tmp_path: Path) -> None:
    """1. follower log 1,1,1; 2. install snapshot 9@3; 3. append 10@3; 4. reopen.
    Expected: first index 10, last 10, old segments gone."""
    log = DLedgerLog.open(tmp_path)
    log.append(entries(1, 1, 1))
    log.install_snapshot(Snapshot(meta=SnapshotMeta(index=LogIndex(9), term=Term(3)), data=b"s"))
    assert (log.first_index(), log.last_index()) == (10, 9)
    log.append(entries(3, start=10))
    again = DLedgerLog.open(tmp_path)
    assert (again.first_index(), again.last_index(), again.term(LogIndex(9))) == (10, 10, 3)
    assert [p.name for p in _segments(tmp_path)] == [segment_name(10)]


def test_log_interrupted_snapshot_install_is_repaired(tmp_path: Path) -> None:
    """Crash between writing the snapshot and deleting the old segments: 1. log of terms
    1,1,1,1,1; 2. a snapshot file 3@2 appears (entry 3 on disk has term 1). Expected on reopen:
    the old entries after 3 are dropped (they followed a different entry 3), segments deleted,
    log = snapshot only."""
    log = DLedgerLog.open(tmp_path)
    log.append(entries(1, 1, 1, 1, 1))
    snap = Snapshot(meta=SnapshotMeta(index=LogIndex(3), term=Term(2)), data=b"s")
    (tmp_path / SNAPSHOT_FILE).write_bytes(encode_snapshot(snap))
    again = DLedgerLog.open(tmp_path)
    assert (again.first_index(), again.last_index()) == (4, 3)
    assert again.recovery.dropped_after_snapshot == 2
    assert _segments(tmp_path) == []


def test_log_snapshot_beyond_the_log_drops_stale_segments(tmp_path: Path) -> None:
    """1. log 1,1; 2. snapshot file 9@3 (the install crashed before deleting segments);
    3. reopen and append 10. Expected: no gap inside a segment; reopen again gives 10."""
    log = DLedgerLog.open(tmp_path)
    log.append(entries(1, 1))
    snap = Snapshot(meta=SnapshotMeta(index=LogIndex(9), term=Term(3)), data=b"s")
    (tmp_path / SNAPSHOT_FILE).write_bytes(encode_snapshot(snap))
    again = DLedgerLog.open(tmp_path)
    again.append(entries(3, start=10))
    final = DLedgerLog.open(tmp_path)
    assert (final.first_index(), final.last_index()) == (10, 10)
    assert final.recovery.torn_segment is None


def test_log_entries_respect_max_bytes(tmp_path: Path) -> None:
    """entries() returns at least one entry, then stops at the byte budget."""
    log = DLedgerLog.open(tmp_path)
    log.append([Entry(term=Term(1), index=LogIndex(i), data=b"x" * 100) for i in range(1, 6)])
    assert len(log.entries(LogIndex(1), LogIndex(6), 1)) == 1
    assert len(log.entries(LogIndex(1), LogIndex(6), 250)) == 2


def test_log_raft_group_restarts_from_disk(tmp_path: Path) -> None:
    """A three-member group whose storages are DLedgerLogs: 1. commit 10 entries; 2. crash
    every member and reopen each log from its directory; 3. elect and commit one more.
    Expected: every member re-applies the same 11 payloads; votes and terms survived."""

    def open_log(node_id: str) -> DLedgerLog:
        return DLedgerLog.open(tmp_path / node_id, segment_bytes=256)

    c = Cluster(seed=9, open_storage=open_log)
    c.elect()
    for i in range(10):
        c.propose(b"d%d" % i)
    c.run(5)
    terms = {n: c.core(n).term for n in c.ids}
    for n in c.ids:
        c.crash(n)
    for n in c.ids:
        c.restart(n)
        assert c.core(n).term == terms[n]
    c.elect()
    c.propose(b"d10")
    c.run(5)
    for n in c.ids:
        assert c.applied(n) == [b"d%d" % k for k in range(11)]
