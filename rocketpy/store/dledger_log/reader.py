"""The RocketMQ layer's view of a DLedger log: committed message records by physical offset
(dledger-commitlog.md sections 1.3 and 1.4).

Owns: walking committed entries from an entry position, yielding each record's own offset
(entry pos + 48), size and bytes, so a reput builds consume queues only from committed entries
(``DLedgerCommitLog.getData`` bounded by ``committedPos``, ``checkMessageAndReturnSize`` stepping
over whole entries and rolling at a blank tail), reading committed bytes (``getData``), and
mapping a message's physical offset back to its entry. Mirrors those parts of
``DLedgerCommitLog``. Must not: write, or serve anything past ``committed_pos`` (uncommitted
entries are never dispatched; ``readUnCommitted`` is not supported). Reads are small copies out
of mapped files: fine on the loop.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from rocketpy.store.dledger_log.entry import (
    BODY_OFFSET,
    EntryHeader,
    check_entry_size,
    decode_header,
    entry_pos_of,
    validate_header,
)
from rocketpy.store.dledger_log.store import DLedgerLogStore


@dataclass(frozen=True, slots=True, kw_only=True)
class CommittedRecord:
    """One committed message: what a DispatchRequest needs from the log.

    Attributes:
        index: the entry's DLedger index.
        record_offset: the message's physical offset (entry pos + 48).
        record_size: the record's TOTALSIZE (entry size - 48).
        record: the record's bytes.
    """

    index: int
    record_offset: int
    record_size: int
    record: bytes

    @property
    def next_entry_pos(self) -> int:
        """Where the following entry starts (the consume queues' max physical end)."""
        return self.record_offset + self.record_size


class CommittedReader:
    """Reads ``store``'s committed entries; the store may advance meanwhile."""

    def __init__(self, store: DLedgerLogStore) -> None:
        self.store = store

    @property
    def max_offset(self) -> int:
        """``getMaxOffset`` / ``getConfirmOffset``: the committed position (0 when nothing is
        committed yet, so an empty reput starts at the first entry)."""
        return max(self.store.committed_pos, 0)

    @property
    def min_offset(self) -> int:
        """The first data file's start."""
        return self.store.data.min_offset

    def get_data(self, offset: int, max_size: int | None = None) -> bytes | None:
        """``getData``: bytes from ``offset`` to the end of its file, but never past the
        committed position; None when ``offset`` is at or past it or in no file."""
        end = self.store.committed_pos
        mf = self.store.data.find(offset)
        if mf is None or offset >= end:
            return None
        rel = offset - mf.file_from_offset
        stop = min(end - mf.file_from_offset, mf.wrote_position)
        if max_size is not None:
            stop = min(stop, rel + max_size)
        return mf.read(rel, stop - rel) if stop > rel else None

    def iter_committed(self, from_pos: int) -> Iterator[CommittedRecord]:
        """Committed records from the entry at ``from_pos`` (an entry position: 0, or a
        previous record's ``next_entry_pos``), rolling to the next file at a blank tail,
        stopping at the committed position or at bytes that are not an entry.

        Yields:
            Each committed record in log order.
        """
        pos = max(from_pos, self.min_offset)
        while pos < self.store.committed_pos:
            mf = self.store.data.find(pos)
            if mf is None:
                return
            rel = pos - mf.file_from_offset
            size = check_entry_size(mf.buffer, rel)
            if size == 0:
                pos = mf.file_from_offset + mf.size
                continue
            if size < 0 or pos + size > self.store.committed_pos:
                return
            h = decode_header(mf.buffer, rel)
            if h.pos != pos:
                return
            yield CommittedRecord(
                index=h.index,
                record_offset=pos + BODY_OFFSET,
                record_size=h.body_length,
                record=mf.read(rel + BODY_OFFSET, h.body_length),
            )
            pos += size

    def entry_for_offset(self, physical_offset: int) -> EntryHeader | None:
        """The header of the entry whose record starts at ``physical_offset``, or None when
        no well-formed entry sits 48 bytes before it."""
        pos = entry_pos_of(physical_offset)
        mf = self.store.data.find(pos)
        if mf is None:
            return None
        rel = pos - mf.file_from_offset
        if rel + BODY_OFFSET > mf.wrote_position:
            return None
        h = decode_header(mf.buffer, rel)
        return h if validate_header(h, at=pos) is None else None

    def read_record(self, physical_offset: int) -> bytes | None:
        """The committed record at ``physical_offset`` (the message's bytes), or None."""
        h = self.entry_for_offset(physical_offset)
        if h is None or h.end > self.store.committed_pos:
            return None
        return self.store.data.read(physical_offset, h.body_length)
