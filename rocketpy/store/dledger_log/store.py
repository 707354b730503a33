"""One DLedger member's log on disk: ``dledger-<selfId>/data`` and ``index`` (dledger-commitlog.md
sections 1.1-1.3 and 1.5).

Owns: appending entries as the leader (index, term and pos assigned here, the record's
PHYSICALOFFSET patched to pos + 48) or verbatim as a follower, reading an entry by index,
truncating for divergence, the ledger begin/end index and end term, the committed index and
position, the ``checkpoint`` file and flushing. Mirrors ``DLedgerMmapFileStore`` (0.3.1.2).

Must not: know roles, leaders or the current term of office (the caller passes the term and
checks role, leader and term as ``MemberState`` does), replicate, or dispatch to consume queues
(:mod:`.reader` serves committed records to the RocketMQ layer). Blocking: :meth:`load`,
:meth:`flush`, :meth:`persist_checkpoint`, :meth:`truncate`, :meth:`truncate_after`,
:meth:`close`, and an append that opens a new file unless :meth:`prepare_next_files` made it
first; the driver runs these off the event loop. Appends and reads are copies into and out of
mapped files, so a single writer (the loop) needs no lock.

Write order of one entry: the body (record patched), then header bytes 4..48, then the magic,
then its index unit. A process killed in the middle leaves a zero magic or no index unit, both of
which recovery handles (:mod:`.recovery`).
"""

from __future__ import annotations

import mmap
import struct
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import structlog

from rocketpy.common.errors import StoreError
from rocketpy.common.message.record import PHYSICAL_OFFSET_POS, QUEUE_OFFSET_POS
from rocketpy.store.dledger_log.entry import (
    BODY_OFFSET,
    CURRENT_MAGIC,
    ENTRY_HEADER,
    INDEX_UNIT,
    INDEX_UNIT_SIZE,
    DLedgerEntry,
    EntryCodecError,
    EntryHeader,
    IndexUnit,
    decode_entry,
    decode_header,
    decode_index_unit,
)
from rocketpy.store.dledger_log.file_list import MmapFileList
from rocketpy.store.dledger_log.meta import DLedgerCheckpoint, load_checkpoint, persist_checkpoint
from rocketpy.store.dledger_log.recovery import RecoveryResult, recover_log

log = structlog.get_logger(__name__)

_INT32: Final = struct.Struct(">i")
_INT64: Final = struct.Struct(">q")

#: ``mappedFileSizeCommitLog``'s default, DLedger's ``mappedFileSizeForEntryData`` in a broker.
DEFAULT_DATA_FILE_SIZE: Final = 1024 * 1024 * 1024
#: ``mappedFileSizeForEntryIndex``: 32 bytes x 5 Mi units.
DEFAULT_INDEX_FILE_SIZE: Final = INDEX_UNIT_SIZE * 5 * 1024 * 1024
#: The shortest body the leader can patch: up to PHYSICALOFFSET's end (record +36).
MIN_RECORD_BODY: Final = 36


def dledger_base_dir(store_root: Path, self_id: str) -> Path:
    """``storeBaseDir/dledger-<selfId>`` (``DLedgerConfig.getDefaultPath``)."""
    return store_root / f"dledger-{self_id}"


def _finish_entry(  # noqa: PLR0917 - the header's fields, positional: per entry
    buf: mmap.mmap, rel: int, magic: int, size: int, index: int, term: int, pos: int,
    channel: int, chain_crc: int, body_crc: int,
) -> None:  # fmt: skip
    """Header bytes 4..48 first (magic 0), the magic last (see the module docstring)."""
    ENTRY_HEADER.pack_into(
        buf, rel, 0, size, index, term, pos, channel, chain_crc, body_crc, size - BODY_OFFSET
    )
    _INT32.pack_into(buf, rel, magic)


class DLedgerStoreError(StoreError):
    """An append, read or truncation the log refuses; ``code`` is the DLedgerResponseCode name
    upstream answers with (INDEX_OUT_OF_RANGE, INCONSISTENT_INDEX, DISK_ERROR, ...)."""

    def __init__(self, code: str, message: str) -> None:
        self.code = code
        super().__init__(f"{code}: {message}")


@dataclass(frozen=True, slots=True, kw_only=True)
class DLedgerStoreConfig:
    """Where and how big: ``base_dir`` is ``dledger-<selfId>``; ``data_dir`` overrides
    ``base_dir/data`` (RocketMQ 5.x ``storePathDLedgerCommitLog``, one path)."""

    base_dir: Path
    data_file_size: int = DEFAULT_DATA_FILE_SIZE
    index_file_size: int = DEFAULT_INDEX_FILE_SIZE
    data_dir: Path | None = None

    def __post_init__(self) -> None:
        if self.index_file_size <= 0 or self.index_file_size % INDEX_UNIT_SIZE:
            raise ValueError(f"index file size {self.index_file_size} is not a multiple of 32")
        if self.data_file_size < 4096:
            raise ValueError(f"data file size {self.data_file_size} < 4096")


class DLedgerLogStore:
    """The data and index files of one member and its ledger counters (all -1 when empty)."""

    def __init__(self, config: DLedgerStoreConfig) -> None:
        self.config = config
        self.base_dir = config.base_dir
        data_dir = config.data_dir or config.base_dir / "data"
        self.data = MmapFileList(data_dir, config.data_file_size, use_blank=True)
        self.index = MmapFileList(
            config.base_dir / "index", config.index_file_size, use_blank=False
        )
        self.ledger_begin_index = -1
        self.ledger_end_index = -1
        self.ledger_end_term = -1
        self.committed_index = -1
        self.committed_pos = -1
        #: Held while the file lists are cut or rebuilt (truncations, on the member's thread);
        #: retention only tries it, from the loop, and skips a pass rather than wait.
        self.files_lock = threading.Lock()
        #: ``isDiskFull``: set by the member's clean-space pass; appends refuse DISK_FULL.
        self.disk_full = False
        self._loaded = False

    # -- start-up -------------------------------------------------------------------------

    def load(self) -> RecoveryResult:
        """Map the files, recover (section 1.5) and take the committed index from
        ``checkpoint``, capped at the ledger end. Blocks.

        Raises:
            StoreError: the files are damaged beyond a torn tail.
        """
        if self._loaded:
            raise StoreError("dledger store already loaded")
        self._loaded = True
        self.data.load()
        self.index.load()
        result = recover_log(self.data, self.index, cut_dir=self.base_dir / "recovery")
        self.ledger_end_index = result.end_index
        self.ledger_end_term = result.end_term
        if result.end_index != -1:
            last = self.get(result.end_index)
            if last.index != result.end_index:
                raise DLedgerStoreError("DISK_ERROR", f"recheck index {last.index}")
            self.revise_begin_index()
        cp = load_checkpoint(self.base_dir)
        if cp is not None and cp.committed_index != -1:
            log.info("Recover to get committed index from checkpoint", committed=cp.committed_index)
            self.update_committed_index(cp.committed_index)
        return result

    def revise_begin_index(self) -> None:
        """``reviseLedgerBeginIndex``: the index of the first data file's first entry (after
        recovery, a truncation, or retention took head files away)."""
        first = self.data.files[0] if self.data.files else None
        if first is None or first.wrote_position < BODY_OFFSET:
            self.ledger_begin_index = -1
            return
        self.ledger_begin_index = decode_header(first.read(0, BODY_OFFSET)).index

    def prepare_next_files(self) -> None:
        """Create the next data and index files ahead of need. Blocks."""
        self.data.prepare_next()
        self.index.prepare_next()

    # -- appends --------------------------------------------------------------------------

    def append_as_leader(
        self,
        body: bytes | bytearray | memoryview,
        term: int,
        *,
        queue_offset: int | None = None,
        patch: bool = True,
    ) -> EntryHeader:
        """``appendAsLeader``: the next index at ``term``, at the end of the data.

        Args:
            body: one encoded message record.
            term: the leader's current term (the caller checked it leads and no transfer runs).
            queue_offset: written into the record's QUEUEOFFSET when given.
            patch: write PHYSICALOFFSET = pos + 48 into the record (``DLedgerCommitLog``'s
                append hook); False for a body that is not a record. A ``bytearray`` body is
                patched in place before it is copied, so it then holds the entry's body as
                written (the leader encodes its pushes from it, not from a read back).

        Returns:
            The header as written (``record_offset`` is the message's physical offset).
        """
        if self.disk_full:
            raise DLedgerStoreError("DISK_FULL", "the disk is over diskFullRatio")
        if term < self.ledger_end_term:
            raise DLedgerStoreError("INCONSISTENT_TERM", f"term {term} < {self.ledger_end_term}")
        if patch and len(body) < MIN_RECORD_BODY:
            # Checked before anything is written: the patch would land past the body.
            raise DLedgerStoreError("BODY_TOO_SHORT", f"{len(body)} bytes is no message record")
        size = BODY_OFFSET + len(body)
        mf, rel = self.data.last_for_write(size)
        pos = mf.file_from_offset + rel
        index = self.ledger_end_index + 1
        buf = mf.buffer
        if patch and type(body) is bytearray:  # length checked above: the patches fit
            _INT64.pack_into(body, PHYSICAL_OFFSET_POS, pos + BODY_OFFSET)
            if queue_offset is not None:
                _INT64.pack_into(body, QUEUE_OFFSET_POS, queue_offset)
            buf[rel + BODY_OFFSET : rel + size] = body
        else:
            buf[rel + BODY_OFFSET : rel + size] = body
            if patch:
                _INT64.pack_into(buf, rel + BODY_OFFSET + PHYSICAL_OFFSET_POS, pos + BODY_OFFSET)
                if queue_offset is not None:
                    _INT64.pack_into(buf, rel + BODY_OFFSET + QUEUE_OFFSET_POS, queue_offset)
        _finish_entry(buf, rel, CURRENT_MAGIC, size, index, term, pos, 0, 0, 0)
        mf.wrote_position = rel + size
        self._append_index(CURRENT_MAGIC, pos, size, index, term)
        return EntryHeader(CURRENT_MAGIC, size, index, term, pos, len(body))

    def append_as_follower(self, entry: DLedgerEntry) -> None:
        """``appendAsFollower``: store a pushed entry verbatim at its index and pos.

        Raises:
            DLedgerStoreError: INCONSISTENT_INDEX (not ``end + 1``) or DISK_ERROR (it would land
                at another position than ``entry.pos``).
        """
        if self.disk_full:
            raise DLedgerStoreError("DISK_FULL", "the disk is over diskFullRatio")
        if entry.index != self.ledger_end_index + 1:
            raise DLedgerStoreError(
                "INCONSISTENT_INDEX", f"{entry.index} != {self.ledger_end_index + 1}"
            )
        self._write_verbatim(entry)

    def append_batch_as_follower(self, entries: Sequence[DLedgerEntry]) -> None:
        """:meth:`append_as_follower` of a batch push's entries, in order. A run that follows
        on (indexes ``end + 1`` on, each entry at the end of the one before) and fits the
        current data and index files is written with one copy of its data and one of its
        index units; anything else goes entry by entry.

        Raises:
            DLedgerStoreError: as :meth:`append_as_follower`, for the first entry refused
                (the entries before it stay appended).
        """
        if len(entries) < 2 or not self._write_run(entries):
            for entry in entries:
                self.append_as_follower(entry)

    def _write_run(self, entries: Sequence[DLedgerEntry]) -> bool:
        """Write ``entries`` in one piece if they follow on and fit; False, having written
        nothing, otherwise. The write order of each entry stays that of :meth:`_write_verbatim`
        (body and header 4..48, then the magic, then the index unit)."""
        first, index = entries[0], self.ledger_end_index + 1
        end_pos = first.pos
        for k, entry in enumerate(entries):
            if entry.index != index + k or entry.pos != end_pos:
                return False
            end_pos += BODY_OFFSET + len(entry.body)
        total, n = end_pos - first.pos, len(entries)
        data = self.data.last_with_room(total)
        units = self.index.last_with_room(n * INDEX_UNIT_SIZE)
        if self.disk_full or data is None or units is None:
            return False
        mf, rel = data
        imf, irel = units
        if mf.file_from_offset + rel != first.pos or imf.file_from_offset + irel != (
            index * INDEX_UNIT_SIZE
        ):
            return False
        chunk, unit_bytes = bytearray(total), bytearray(n * INDEX_UNIT_SIZE)
        pack_header, pack_unit = ENTRY_HEADER.pack_into, INDEX_UNIT.pack_into
        off = 0
        for k, e in enumerate(entries):
            body = e.body
            size = BODY_OFFSET + len(body)
            pack_header(chunk, off, 0, size, e.index, e.term, e.pos, e.channel, e.chain_crc,
                        e.body_crc, size - BODY_OFFSET)  # fmt: skip
            chunk[off + BODY_OFFSET : off + size] = body
            pack_unit(unit_bytes, k * INDEX_UNIT_SIZE, e.magic, e.pos, size, e.index, e.term)
            off += size
        buf = mf.buffer
        buf[rel : rel + total] = chunk  # every magic 0 until the loop below
        pack_magic, start = _INT32.pack_into, rel - first.pos
        for e in entries:
            pack_magic(buf, start + e.pos, e.magic)
        mf.wrote_position = rel + total
        imf.buffer[irel : irel + len(unit_bytes)] = unit_bytes
        imf.wrote_position = irel + len(unit_bytes)
        last = entries[-1]
        self.ledger_end_index, self.ledger_end_term = last.index, last.term
        if self.ledger_begin_index == -1:
            self.ledger_begin_index = first.index
        return True

    def _write_verbatim(self, entry: DLedgerEntry) -> None:
        body, pos, magic, index, term = entry.body, entry.pos, entry.magic, entry.index, entry.term
        size = BODY_OFFSET + len(body)  # entry.size, once per pushed entry
        mf, rel = self.data.last_for_write(size)
        if mf.file_from_offset + rel != pos:
            raise DLedgerStoreError("DISK_ERROR", f"{mf.file_from_offset + rel} != {pos}")
        buf = mf.buffer
        buf[rel + BODY_OFFSET : rel + size] = body
        _finish_entry(
            buf, rel, magic, size, index, term, pos, entry.channel, entry.chain_crc,
            entry.body_crc,
        )  # fmt: skip
        mf.wrote_position = rel + size
        self._append_index(magic, pos, size, index, term)

    def _append_index(self, magic: int, pos: int, size: int, index: int, term: int) -> None:
        mf, rel = self.index.last_for_write(INDEX_UNIT_SIZE)  # packed in place: no bytes
        INDEX_UNIT.pack_into(mf.buffer, rel, magic, pos, size, index, term)
        mf.wrote_position = rel + INDEX_UNIT_SIZE
        at = mf.file_from_offset + rel
        if at != index * INDEX_UNIT_SIZE:
            raise DLedgerStoreError("DISK_ERROR", f"index unit of {index} written at {at}")
        self.ledger_end_index = index
        self.ledger_end_term = term
        if self.ledger_begin_index == -1:
            self.ledger_begin_index = index

    # -- reads ----------------------------------------------------------------------------

    def _index_check(self, index: int) -> None:
        if index < 0 or index > self.ledger_end_index:
            raise DLedgerStoreError(
                "INDEX_OUT_OF_RANGE",
                f"{index} should between {self.ledger_begin_index}-{self.ledger_end_index}",
            )
        if index < self.ledger_begin_index:
            raise DLedgerStoreError(
                "INDEX_LESS_THAN_LOCAL_BEGIN", f"{index} < {self.ledger_begin_index}"
            )

    def index_unit(self, index: int) -> IndexUnit:
        """The index unit of entry ``index`` (``getEntryPosAndSize``)."""
        self._index_check(index)
        raw = self.index.read(index * INDEX_UNIT_SIZE, INDEX_UNIT_SIZE)
        if raw is None:
            raise DLedgerStoreError("DISK_ERROR", f"Get null index for {index}")
        return decode_index_unit(raw)

    def get(self, index: int) -> DLedgerEntry:
        """``get``: the entry at ``index``, through its index unit.

        Raises:
            DLedgerStoreError: out of range, or the unit and the data disagree.
        """
        unit = self.index_unit(index)
        raw = self.data.read(unit.pos, unit.size)
        if raw is None:
            raise DLedgerStoreError("DISK_ERROR", f"Get null data for {index}")
        try:
            entry = decode_entry(raw)
        except EntryCodecError as exc:
            raise DLedgerStoreError("DISK_ERROR", f"entry {index}: {exc}") from exc
        if entry.pos != unit.pos or entry.index != index:
            raise DLedgerStoreError("DISK_ERROR", f"entry {index} at {unit.pos} reads {entry.pos}")
        return entry

    @property
    def write_pos(self) -> int:
        """``getWritePos``: the end of the data."""
        return self.data.max_wrote_position

    # -- truncation -----------------------------------------------------------------------

    def truncate(self, entry: DLedgerEntry) -> int:
        """``truncate`` (a leader's TRUNCATE push): keep what precedes ``entry``, make ``entry``
        the last one (written unless an equal one is already there). Blocks.

        Returns:
            The new ledger end index (``entry.index``).
        """
        with self.files_lock:
            return self._truncate(entry)

    def _truncate(self, entry: DLedgerEntry) -> int:
        try:
            existed = self.get(entry.index) == entry
        except DLedgerStoreError:
            existed = False
        cut = entry.pos + entry.size if existed else entry.pos
        if cut != self.data.max_wrote_position:
            log.warning(
                "[TRUNCATE] truncatePos != maxPos",
                index=entry.index,
                truncate=cut,
                max_pos=self.data.max_wrote_position,
            )
        self.data.truncate_or_rebuild(cut)
        self.index.truncate_or_rebuild(entry.index * INDEX_UNIT_SIZE)
        self.ledger_end_index = entry.index - 1
        if existed:
            self._append_index(entry.magic, entry.pos, entry.size, entry.index, entry.term)
        else:
            self._write_verbatim(entry)
        self.revise_begin_index()
        self._cap_committed()
        return entry.index

    def truncate_after(self, index: int) -> None:
        """Keep entries up to ``index`` (inclusive), drop the rest; ``index`` may be
        ``ledger_begin_index - 1`` to empty the log. Blocks.

        Raises:
            DLedgerStoreError: ``index`` is out of range.
        """
        with self.files_lock:
            self._truncate_after(index)

    def _truncate_after(self, index: int) -> None:
        if index == self.ledger_end_index:
            return
        if index >= self.ledger_begin_index:
            unit = self.index_unit(index)
            cut, term = unit.pos + unit.size, unit.term
        elif index == self.ledger_begin_index - 1 and self.ledger_begin_index != -1:
            cut, term = self.index_unit(self.ledger_begin_index).pos, -1
        else:
            raise DLedgerStoreError("INDEX_OUT_OF_RANGE", f"cannot truncate after {index}")
        log.warning("truncate ledger", after=index, data_pos=cut, old_end=self.ledger_end_index)
        self.data.truncate(cut)
        self.index.truncate_or_rebuild((index + 1) * INDEX_UNIT_SIZE)
        self.ledger_end_index, self.ledger_end_term = index, term
        if index < self.ledger_begin_index:
            self.ledger_begin_index = -1
        self._cap_committed()

    def _cap_committed(self) -> None:
        if self.committed_index > self.ledger_end_index:
            self.committed_index = self.ledger_end_index
            if self.committed_index < 0 or self.committed_index < self.ledger_begin_index:
                self.committed_index, self.committed_pos = -1, -1
            else:
                unit = self.index_unit(self.committed_index)
                self.committed_pos = unit.pos + unit.size

    # -- commit, checkpoint, flush --------------------------------------------------------

    def update_committed_index(self, new_committed: int) -> None:
        """``updateCommittedIndex``: move the committed index forward (never back), capped at
        the ledger end; ``committed_pos`` becomes the end of that entry. The caller drops
        updates from an older term."""
        if new_committed == -1 or self.ledger_end_index == -1:
            return
        if new_committed <= self.committed_index or new_committed < self.ledger_begin_index:
            return
        new_committed = min(new_committed, self.ledger_end_index)
        unit = self.index_unit(new_committed)
        self.committed_index = new_committed
        self.committed_pos = unit.pos + unit.size

    def checkpoint_values(self) -> DLedgerCheckpoint:
        """What :meth:`persist_checkpoint` writes, taken on the loop."""
        return DLedgerCheckpoint(
            end_index=self.ledger_end_index, committed_index=self.committed_index
        )

    def persist_checkpoint(self, values: DLedgerCheckpoint | None = None) -> None:
        """Write ``checkpoint`` (``persistCheckPoint``). Blocks."""
        persist_checkpoint(self.base_dir, values or self.checkpoint_values())

    def flush(self) -> tuple[int, int]:
        """Make the data and index written so far durable (``FlushDataService``); returns the
        flushed data and index offsets. Blocks."""
        return self.data.flush(), self.index.flush()

    def close(self) -> None:
        """Flush, write the checkpoint and unmap (``shutdown``). Blocks."""
        if self._loaded:
            self.flush()
            self.persist_checkpoint()
        self.data.close()
        self.index.close()
