"""CommittedReader: what the RocketMQ layer's reput may see (dledger-commitlog.md 1.3-1.4)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rocketpy.common.message.decoder import decode_record
from rocketpy.common.message.record import MessageRecord, encode_record
from rocketpy.store.dledger_log.reader import CommittedReader
from rocketpy.store.dledger_log.store import DLedgerLogStore, DLedgerStoreConfig


def record(i: int) -> bytes:
    """A record whose body names entry ``i``."""
    body = f"r{i}:".encode() * (2 + i % 11)
    return encode_record(MessageRecord(topic="TopicR", queue_id=i % 2, body=body))


@pytest.fixture
def store(tmp_path: Path) -> Iterator[DLedgerLogStore]:
    """A loaded store with 4 KiB data files."""
    cfg = DLedgerStoreConfig(
        base_dir=tmp_path / "dledger-n0", data_file_size=4096, index_file_size=32 * 64
    )
    s = DLedgerLogStore(cfg)
    s.load()
    yield s
    s.close()


def test_spec_example_offsets(store: DLedgerLogStore) -> None:
    """Section 1.3's example: entry 0 at 0 with its record at 48 (size S), entry 1 at 48+S with
    its record at 96+S: 48-byte gaps between consecutive messages."""
    r0, r1 = record(0), record(1)
    store.append_as_leader(r0, 1)
    store.append_as_leader(r1, 1)
    store.update_committed_index(1)
    got = list(CommittedReader(store).iter_committed(0))
    s = len(r0)
    assert [(g.record_offset, g.record_size) for g in got] == [(48, s), (96 + s, len(r1))]
    assert got[0].next_entry_pos == 48 + s


def test_iterates_only_committed_entries_across_files(store: DLedgerLogStore) -> None:
    """1. Append 60 entries (several 4 KiB files, blank tails). 2. Commit 41.
    Expected: records 0..41 in order, each decoding with PHYSICALOFFSET == its record offset;
    resuming at a record's next_entry_pos continues with the next one; nothing past the
    committed position is served."""
    for i in range(60):
        store.append_as_leader(record(i), 1)
    assert len(store.data.files) >= 3
    reader = CommittedReader(store)
    assert list(reader.iter_committed(0)) == []
    assert reader.max_offset == 0
    store.update_committed_index(41)
    got = list(reader.iter_committed(0))
    assert [g.index for g in got] == list(range(42))
    for g in got:
        rec = decode_record(g.record)
        assert rec.physical_offset == g.record_offset
        assert rec.body == decode_record(record(g.index)).body
        assert g.record_size == len(g.record)
    resumed = list(reader.iter_committed(got[29].next_entry_pos))
    assert [g.index for g in resumed] == list(range(30, 42))
    assert reader.max_offset == got[-1].next_entry_pos == store.committed_pos
    store.update_committed_index(59)
    assert [g.index for g in reader.iter_committed(got[-1].next_entry_pos)] == list(range(42, 60))


def test_get_data_is_bounded_by_committed_pos(store: DLedgerLogStore) -> None:
    """``getData`` returns bytes up to the committed position, never past it."""
    for i in range(5):
        store.append_as_leader(record(i), 1)
    reader = CommittedReader(store)
    assert reader.get_data(0) is None
    store.update_committed_index(2)
    data = reader.get_data(0)
    assert data is not None
    assert len(data) == store.committed_pos
    assert reader.get_data(store.committed_pos) is None
    assert reader.get_data(10, 20) == data[10:30]


def test_physical_offset_maps_back_to_its_entry(store: DLedgerLogStore) -> None:
    """entry_for_offset(pos + 48) is the entry; other offsets are not; read_record serves only
    committed records."""
    headers = [store.append_as_leader(record(i), 3) for i in range(6)]
    store.update_committed_index(3)
    reader = CommittedReader(store)
    for h in headers:
        found = reader.entry_for_offset(h.record_offset)
        assert found is not None
        assert (found.index, found.pos, found.term) == (h.index, h.pos, 3)
    assert reader.entry_for_offset(headers[2].pos) is None
    assert reader.entry_for_offset(headers[2].record_offset + 4) is None
    rec = reader.read_record(headers[3].record_offset)
    assert rec is not None
    assert decode_record(rec).physical_offset == headers[3].record_offset
    assert reader.read_record(headers[4].record_offset) is None
