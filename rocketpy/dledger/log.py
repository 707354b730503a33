"""The durable Raft log of one DLedger member, in a directory (``controllerStorePath``).

Owns: segment files of CRC-checked msgpack entries, the hard state (term, vote, commit) and
the snapshot file; torn-tail repair on open; compaction. Implements
:class:`rocketpy.dledger.storage.StorageView` for the core. Must not: be written from the
event loop: every writer blocks on ``fsync`` and runs on the driver's single writer thread
(``loop.run_in_executor``). Readers (the core, on the loop) never touch the disk: the entries
since the snapshot are kept in memory and published as one immutable view that a writer swaps
in a single assignment, so a reader sees the state before or after a write, never a mix.

Mirrors DLedger's ``DLedgerMmapFileStore`` (data files + ``currterm`` file + snapshots) with the
record framing and repair of etcd-io/etcd ``server/storage/wal`` (``doc.go``, ``repair.go``).

Directory layout::

    <dir>/hardstate                  [crc32 u32][msgpack [1, term, vote|nil, commit]]
    <dir>/snapshot                   [crc32 u32][msgpack [1, index, term, data]]
    <dir>/wal/<first index:020d>.log segment files, records back to back
    <dir>/torn/<segment>.<offset>    bytes cut from a torn tail (kept for the operator)

Record (big-endian):

| offset | size | field |
| --- | --- | --- |
| 0 | 4 | payload length |
| 4 | 4 | CRC32 of the payload |
| 8 | length | :func:`rocketpy.dledger.messages.encode_entry` (msgpack, leading version 1) |

Recovery on open: records are read in order; in the *last* segment the first record that is
short, has a bad length or CRC, does not decode, or breaks index continuity starts a torn tail:
the bytes from there on are copied to ``torn/`` and cut. The same damage in an earlier segment
is not a torn tail and fails the open (:class:`StoreError`). Entries at or below the snapshot
index are dropped; entries above it are kept only if they continue the snapshot (the entry at
the snapshot index has the snapshot's term, or the log restarts right after it), otherwise they
are the leftovers of an interrupted snapshot install and are deleted.
"""

from __future__ import annotations

import contextlib
import os
import re
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import msgpack
import structlog

from rocketpy.common.atomic_file import fsync_dir, write_atomic
from rocketpy.common.errors import CodecError, StoreError
from rocketpy.common.types import LogIndex, Term
from rocketpy.dledger.messages import (
    FORMAT_VERSION,
    Entry,
    HardState,
    Snapshot,
    SnapshotMeta,
    check_version,
    decode_entry,
    encode_entry,
    unpack,
)
from rocketpy.dledger.storage import LogCompacted, LogUnavailable, check_contiguous, limit_size

log = structlog.get_logger(__name__)

RECORD_HEADER: Final = struct.Struct(">II")  # payload length, crc32(payload)
CRC: Final = struct.Struct(">I")
MAX_RECORD_BYTES: Final = 64 << 20
SEGMENT_NAME: Final = re.compile(r"^(\d{20})\.log$")
HARD_STATE_FILE: Final = "hardstate"
SNAPSHOT_FILE: Final = "snapshot"
WAL_DIR: Final = "wal"
TORN_DIR: Final = "torn"


# ---------------------------------------------------------------------------------------------
# pure codecs


def encode_record(entry: Entry) -> bytes:
    """One framed record (see the module docstring)."""
    payload = encode_entry(entry)
    return RECORD_HEADER.pack(len(payload), zlib.crc32(payload)) + payload


def _with_crc(value: list[Any]) -> bytes:
    payload: bytes = msgpack.packb(value, use_bin_type=True)
    return CRC.pack(zlib.crc32(payload)) + payload


def _checked(data: bytes, what: str) -> list[Any]:
    if len(data) < CRC.size:
        raise CodecError("file too short", field=what, offset=0)
    (crc,) = CRC.unpack_from(data)
    payload = data[CRC.size :]
    if zlib.crc32(payload) != crc:
        raise CodecError("CRC mismatch", field=what, offset=0)
    items = unpack(payload, what)
    if not isinstance(items, list):
        raise CodecError("expected an array", field=what)
    check_version(items, what)
    return items


def encode_hard_state(hs: HardState) -> bytes:
    """The ``hardstate`` file."""
    return _with_crc([FORMAT_VERSION, hs.term, hs.vote, hs.commit])


def decode_hard_state(data: bytes) -> HardState:
    """Inverse of :func:`encode_hard_state`; raises CodecError."""
    items = _checked(data, "hardstate")
    if len(items) != 4:
        raise CodecError("expected 4 items", field="hardstate")
    term, vote, commit = items[1:]
    if not isinstance(term, int) or not isinstance(commit, int):
        raise CodecError("term and commit must be integers", field="hardstate")
    if vote is not None and not isinstance(vote, str):
        raise CodecError("vote must be a string or nil", field="hardstate.vote")
    return HardState(term=Term(term), vote=vote, commit=LogIndex(commit))


def encode_snapshot(snapshot: Snapshot) -> bytes:
    """The ``snapshot`` file."""
    meta = snapshot.meta
    return _with_crc([FORMAT_VERSION, meta.index, meta.term, snapshot.data])


def decode_snapshot(data: bytes) -> Snapshot:
    """Inverse of :func:`encode_snapshot`; raises CodecError."""
    items = _checked(data, "snapshot")
    if len(items) != 4:
        raise CodecError("expected 4 items", field="snapshot")
    index, term, payload = items[1:]
    if not isinstance(index, int) or not isinstance(term, int) or not isinstance(payload, bytes):
        raise CodecError("bad snapshot fields", field="snapshot")
    return Snapshot(meta=SnapshotMeta(index=LogIndex(index), term=Term(term)), data=payload)


def segment_name(first_index: int) -> str:
    """``<first index, 20 digits>.log``."""
    return f"{first_index:020d}.log"


# ---------------------------------------------------------------------------------------------
# the store


@dataclass(frozen=True, slots=True)
class _View:
    """What readers see; replaced as a whole by writers."""

    hard: HardState
    snapshot: Snapshot
    base: SnapshotMeta  # the entry just before entries[0]
    entries: tuple[Entry, ...]


@dataclass(slots=True)
class _Segment:
    first_index: int
    path: Path
    offsets: list[int] = field(default_factory=list)  # file offset of each record
    size: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class RecoveryReport:
    """What :meth:`DLedgerLog.open` found and repaired."""

    segments: int
    first_index: LogIndex
    last_index: LogIndex
    torn_segment: str | None = None
    torn_offset: int = -1
    torn_bytes: int = 0
    torn_copy: Path | None = None
    dropped_after_snapshot: int = 0


class DLedgerLog:
    """Durable :class:`StorageView` with blocking writers (see the module docstring).

    Use :meth:`open`; the constructor is internal.
    """

    def __init__(self, directory: Path, segment_bytes: int) -> None:
        self.directory = directory
        self.segment_bytes = segment_bytes
        self._wal = directory / WAL_DIR
        self._segments: list[_Segment] = []
        self._view = _View(HardState(), Snapshot(), SnapshotMeta(), ())
        self.recovery = RecoveryReport(segments=0, first_index=LogIndex(1), last_index=LogIndex(0))

    @classmethod
    def open(cls, directory: Path, *, segment_bytes: int = 64 << 20) -> DLedgerLog:
        """Open (creating if needed) and recover the log in ``directory``. Blocks.

        Raises:
            StoreError: damage that is not a torn tail (a bad record before the last segment,
                a corrupt hard state or snapshot file, a gap between segments).
        """
        if segment_bytes < 64:
            raise ValueError("segment_bytes must be >= 64")
        store = cls(directory, segment_bytes)
        store._recover()
        return store

    # -- StorageView ---------------------------------------------------------------------------

    def hard_state(self) -> HardState:
        """The persisted term, vote and commit."""
        return self._view.hard

    def snapshot(self) -> Snapshot:
        """The persisted snapshot (index 0 when none)."""
        return self._view.snapshot

    def first_index(self) -> LogIndex:
        """Index of the first entry kept (compaction point + 1)."""
        return LogIndex(self._view.base.index + 1)

    def last_index(self) -> LogIndex:
        """Index of the last entry."""
        view = self._view
        return LogIndex(view.base.index + len(view.entries))

    def term(self, index: LogIndex) -> Term:
        """Term at ``index`` (see :class:`StorageView`)."""
        view = self._view
        base = view.base.index
        if index < base:
            raise LogCompacted(index, base + 1)
        last = base + len(view.entries)
        if index > last:
            raise LogUnavailable(index, last)
        return view.base.term if index == base else view.entries[index - base - 1].term

    def entries(self, lo: LogIndex, hi: LogIndex, max_bytes: int) -> list[Entry]:
        """Entries ``[lo, hi)`` (see :class:`StorageView`)."""
        view = self._view
        base = view.base.index
        if lo <= base:
            raise LogCompacted(lo, base + 1)
        last = base + len(view.entries)
        if hi > last + 1:
            raise LogUnavailable(hi - 1, last)
        return limit_size(view.entries[lo - base - 1 : hi - base - 1], max_bytes)

    # -- writers (blocking; one writer thread) -------------------------------------------------

    def set_hard_state(self, hard_state: HardState) -> None:
        """Persist term, vote and commit atomically and durably."""
        write_atomic(
            self.directory / HARD_STATE_FILE, encode_hard_state(hard_state), keep_backup=False
        )
        view = self._view
        self._view = _View(hard_state, view.snapshot, view.base, view.entries)

    def append(self, entries: Sequence[Entry]) -> None:
        """Append and fsync ``entries``, replacing the suffix from ``entries[0].index`` on.

        Raises:
            ValueError: a gap after the last index, entries not contiguous, or an index at or
                below the compaction point.
        """
        if not entries:
            return
        check_contiguous(entries)
        first = entries[0].index
        view = self._view
        if first <= view.base.index:
            raise ValueError(f"append at {first} at or below compaction point {view.base.index}")
        if first > self.last_index() + 1:
            raise ValueError(f"gap: appending {first} after last index {self.last_index()}")
        if first <= self.last_index():
            self._truncate_from(first)
        self._write(entries)
        kept = view.entries[: first - view.base.index - 1]
        self._view = _View(view.hard, view.snapshot, view.base, kept + tuple(entries))

    def install_snapshot(self, snapshot: Snapshot) -> None:
        """Replace the whole log by ``snapshot`` (a follower catching up). Snapshot file first,
        then the segments go: a crash in between is repaired on open (module docstring)."""
        write_atomic(self.directory / SNAPSHOT_FILE, encode_snapshot(snapshot), keep_backup=False)
        self._delete_segments(self._segments)
        view = self._view
        self._view = _View(view.hard, snapshot, snapshot.meta, ())

    def create_snapshot(self, index: LogIndex, data: bytes) -> Snapshot:
        """Persist the state machine's ``data`` as of ``index`` (applied, in the log).

        Raises:
            ValueError: ``index`` is older than the current snapshot.
        """
        view = self._view
        if index < view.snapshot.meta.index:
            raise ValueError(f"snapshot {index} older than {view.snapshot.meta.index}")
        snapshot = Snapshot(meta=SnapshotMeta(index=index, term=self.term(index)), data=data)
        write_atomic(self.directory / SNAPSHOT_FILE, encode_snapshot(snapshot), keep_backup=False)
        self._view = _View(view.hard, snapshot, view.base, view.entries)
        return snapshot

    def compact(self, index: LogIndex) -> None:
        """Drop entries up to ``index`` (<= the snapshot index) and delete every segment that
        holds only such entries.

        Raises:
            ValueError: ``index`` is beyond the snapshot.
        """
        view = self._view
        if index > view.snapshot.meta.index:
            raise ValueError(f"compact {index} beyond snapshot {view.snapshot.meta.index}")
        if index <= view.base.index:
            return
        base = SnapshotMeta(index=index, term=self.term(index))
        doomed = [
            seg
            for seg, nxt in zip(self._segments, self._segments[1:], strict=False)
            if nxt.first_index - 1 <= index
        ]
        self._delete_segments(doomed)
        self._view = _View(view.hard, view.snapshot, base, view.entries[index - view.base.index :])

    def persist(
        self, snapshot: Snapshot | None, entries: Sequence[Entry], hard: HardState | None
    ) -> None:
        """The driver's step 1 for one Ready: snapshot, entries, hard state, in that order."""
        if snapshot is not None:
            self.install_snapshot(snapshot)
        self.append(entries)
        if hard is not None:
            self.set_hard_state(hard)

    # -- disk ----------------------------------------------------------------------------------

    def _write(self, entries: Sequence[Entry]) -> None:
        pending = list(entries)
        while pending:
            seg = self._segments[-1] if self._segments else None
            if seg is None or seg.size >= self.segment_bytes:
                seg = self._new_segment(pending[0].index)
            buf = bytearray()
            offset = seg.size
            while pending and (not buf or seg.size + len(buf) < self.segment_bytes):
                seg.offsets.append(offset + len(buf))
                buf += encode_record(pending.pop(0))
            with seg.path.open("ab") as f:
                f.write(buf)
                f.flush()
                os.fsync(f.fileno())
            seg.size += len(buf)

    def _new_segment(self, first_index: int) -> _Segment:
        self._wal.mkdir(parents=True, exist_ok=True)
        seg = _Segment(first_index, self._wal / segment_name(first_index))
        seg.path.touch()
        fsync_dir(self._wal)
        self._segments.append(seg)
        return seg

    def _truncate_from(self, index: int) -> None:
        while self._segments and self._segments[-1].first_index >= index:
            self._delete_segments([self._segments[-1]])
        if not self._segments:
            return
        seg = self._segments[-1]
        cut = index - seg.first_index
        if cut < len(seg.offsets):
            offset = seg.offsets[cut]
            with seg.path.open("r+b") as f:
                f.truncate(offset)
                os.fsync(f.fileno())
            del seg.offsets[cut:]
            seg.size = offset

    def _delete_segments(self, doomed: list[_Segment]) -> None:
        if not doomed:
            return
        for seg in doomed:
            with contextlib.suppress(FileNotFoundError):
                seg.path.unlink()
        ids = {id(s) for s in doomed}
        self._segments = [s for s in self._segments if id(s) not in ids]
        fsync_dir(self._wal)

    # -- recovery ------------------------------------------------------------------------------

    def _recover(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self._wal.mkdir(exist_ok=True)
        hard = self._load(HARD_STATE_FILE, decode_hard_state) or HardState()
        snapshot = self._load(SNAPSHOT_FILE, decode_snapshot) or Snapshot()
        entries, torn = self._scan_segments()
        entries, dropped = self._after_snapshot(entries, snapshot.meta)
        self._view = _View(hard, snapshot, snapshot.meta, tuple(entries))
        self.recovery = RecoveryReport(
            segments=len(self._segments),
            first_index=self.first_index(),
            last_index=self.last_index(),
            dropped_after_snapshot=dropped,
            **torn,
        )
        log.info(
            "dledger log recovered",
            directory=str(self.directory),
            first_index=self.first_index(),
            last_index=self.last_index(),
            term=hard.term,
            commit=hard.commit,
            snapshot_index=snapshot.meta.index,
        )

    def _load(self, name: str, decode: Any) -> Any:
        path = self.directory / name
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        try:
            return decode(data)
        except CodecError as e:
            raise StoreError(f"{path} is corrupt: {e}") from e

    def _segment_files(self) -> list[tuple[int, Path]]:
        found = []
        for p in self._wal.iterdir():
            m = SEGMENT_NAME.match(p.name)
            if m:
                found.append((int(m.group(1)), p))
        return sorted(found)

    def _scan_segments(self) -> tuple[list[Entry], dict[str, Any]]:
        entries: list[Entry] = []
        files = self._segment_files()
        torn: dict[str, Any] = {}
        for n, (first, path) in enumerate(files):
            last_file = n == len(files) - 1
            if entries and first != entries[-1].index + 1:
                raise StoreError(f"gap before segment {path}: last index {entries[-1].index}")
            data = path.read_bytes()
            seg = _Segment(first, path)
            bad = _scan_records(data, first, seg, entries)
            if bad is not None:
                offset, reason = bad
                if not last_file:
                    raise StoreError(
                        f"{path} damaged at offset {offset} ({reason}), not at the tail"
                    )
                torn = self._cut_tail(path, data, offset, reason)
                seg.size = offset
            else:
                seg.size = len(data)
            self._segments.append(seg)
        return entries, torn

    def _cut_tail(self, path: Path, data: bytes, offset: int, reason: str) -> dict[str, Any]:
        torn_dir = self.directory / TORN_DIR
        torn_dir.mkdir(exist_ok=True)
        copy = torn_dir / f"{path.name}.{offset}"
        copy.write_bytes(data[offset:])
        with path.open("r+b") as f:
            f.truncate(offset)
            os.fsync(f.fileno())
        fsync_dir(torn_dir)
        log.warning(
            "dledger log torn tail cut",
            segment=str(path),
            offset=offset,
            cut_bytes=len(data) - offset,
            reason=reason,
            copy=str(copy),
        )
        return {
            "torn_segment": path.name,
            "torn_offset": offset,
            "torn_bytes": len(data) - offset,
            "torn_copy": copy,
        }

    def _after_snapshot(self, entries: list[Entry], meta: SnapshotMeta) -> tuple[list[Entry], int]:
        """Keep only entries that continue the snapshot; delete segments that hold nothing else."""
        if meta.index == 0:
            return entries, 0
        above = [e for e in entries if e.index > meta.index]
        at_snapshot = [e.term for e in entries if e.index == meta.index]
        continues = at_snapshot == [meta.term] or (
            bool(entries) and entries[0].index == meta.index + 1
        )
        kept = above if continues else []
        if not kept and self._segments:
            # Everything on disk is covered by the snapshot, or is the tail of a log the
            # snapshot replaced (install interrupted before the segments went).
            if above:
                log.warning(
                    "dledger log dropped entries of an interrupted snapshot install",
                    snapshot_index=meta.index,
                    dropped=len(above),
                )
            self._delete_segments(list(self._segments))
        return kept, len(above) - len(kept)

    def close(self) -> None:
        """Nothing is held open between writes; kept for symmetry with other stores."""


def _scan_records(
    data: bytes, first: int, seg: _Segment, out: list[Entry]
) -> tuple[int, str] | None:
    """Append the valid records of one segment to ``out``; return (offset, reason) of the first
    bad one, or None."""
    offset = 0
    expected = first
    while offset < len(data):
        if len(data) - offset < RECORD_HEADER.size:
            return offset, "short header"
        length, crc = RECORD_HEADER.unpack_from(data, offset)
        start = offset + RECORD_HEADER.size
        if length == 0 or length > MAX_RECORD_BYTES or start + length > len(data):
            return offset, f"bad length {length}"
        payload = data[start : start + length]
        if zlib.crc32(payload) != crc:
            return offset, "CRC mismatch"
        try:
            entry = decode_entry(payload)
        except CodecError as e:
            return offset, f"undecodable: {e}"
        if entry.index != expected:
            return offset, f"index {entry.index}, expected {expected}"
        seg.offsets.append(offset)
        out.append(entry)
        expected += 1
        offset = start + length
    return None
