"""DLedger-layer recovery of the data and index files (dledger-commitlog.md section 1.5).
Blocking: run at start-up, off the event loop.

Owns ``DLedgerMmapFileStore.recover``'s walk:

1. Start at the third-to-last data file, stepping back while its first entry disagrees with the
   index unit it names (or is no entry at all).
2. Walk entries in order requiring ``pos`` == their offset, ``bodyLen + 48 == size``, magic 1,
   ``index == previous + 1``, ``term >= previous term`` and the entry inside its file; the blank
   tail (``-1``) moves to the next file and a zero size ends the walk.
3. Compare each entry with its index unit; from the first that disagrees (or is missing) the
   index is cut there and every following unit is rewritten from the data.
4. At the first bad entry the walk stops: data is cut there and the index at
   ``(last + 1) * 32``. A stop more than a file before the last data file is refused (upstream
   exits for a manual check).

Beyond upstream (which leaves the bytes): a copy of the cut entry (its claimed size when that
fits the file, else up to 64 KiB, trailing zeros dropped) goes to ``<dledger-dir>/recovery/`` and
those bytes are zeroed, as :mod:`rocketpy.store.commit_log.recovery` does for a torn record. Must
not: look inside bodies (the RocketMQ layer's business) or read ``checkpoint`` (:mod:`.store`).
Walked pages are dropped from the mappings file by file (the page cache keeps them), so
resident memory stays flat however many GiB are walked.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import structlog

from rocketpy.common.errors import StoreError
from rocketpy.store.dledger_log.entry import (
    BLANK,
    BLANK_MAGIC_CODE,
    BODY_OFFSET,
    INDEX_UNIT_SIZE,
    EntryHeader,
    decode_header,
    decode_index_unit,
    encode_index_unit,
    index_unit_of,
    validate_header,
)
from rocketpy.store.dledger_log.file_list import MmapFileList
from rocketpy.store.mapped_file import MappedFile, offset_to_file_name

log = structlog.get_logger(__name__)

#: A cut entry whose size field is garbage: at most this much of it is copied and zeroed.
_GARBAGE_COPY: Final = 64 * 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class RecoveryResult:
    """Where the valid log ends.

    Attributes:
        end_index: the last valid entry's index (-1: none).
        end_term: its term (-1: none).
        process_offset: the data offset after it (where the next entry goes).
        walk_start: the data offset the walk started at.
        index_rewritten: index units written from the data.
        cut_reason: why the walk stopped early ("" when it reached the end cleanly).
        cut_copy: the copy of the cut bytes, if any.
        elapsed_ms: time the walk took.
    """

    end_index: int
    end_term: int
    process_offset: int
    walk_start: int
    index_rewritten: int
    cut_reason: str
    cut_copy: Path | None
    elapsed_ms: float


def _first_entry_matches(mf: MappedFile, index: MmapFileList) -> bool:
    """Step 1's check of a file's first entry against its index unit."""
    raw = mf.read(0, BODY_OFFSET)
    h = decode_header(raw)
    if h.magic == BLANK_MAGIC_CODE or validate_header(h, at=mf.file_from_offset) is not None:
        return False
    unit = index.read(h.index * INDEX_UNIT_SIZE, INDEX_UNIT_SIZE) if h.index >= 0 else None
    return unit is not None and decode_index_unit(unit) == index_unit_of(h)


class _Walk:
    """Step 2-3 state: the last good entry and whether units are being rewritten."""

    def __init__(self, data: MmapFileList, index: MmapFileList) -> None:
        self.data = data
        self.index = index
        self.last_index = -1
        self.last_term = -1
        self.need_write_index = False
        self.rewritten = 0
        self.reason = ""

    def run(self, file_no: int) -> int:
        """Walk from the start of ``files[file_no]``; returns the process offset."""
        files = self.data.files
        mf = files[file_no]
        process = mf.file_from_offset
        while True:
            rel = process - mf.file_from_offset
            step = self._entry(mf, rel)
            if step > 0:
                process += step
                continue
            # Walked pages leave the mapping (page cache keeps them): RSS stays flat over GiBs.
            mf.drop_pages(0, rel)
            if step == 0 and file_no + 1 < len(files):  # the blank tail: next file
                file_no += 1
                mf = files[file_no]
                process = mf.file_from_offset
                log.info("Trying to recover data file", file=mf.path.name)
                continue
            if step == 0:
                process = mf.file_from_offset + mf.size
            return process

    def _entry(self, mf: MappedFile, rel: int) -> int:
        """The size of the good entry at ``rel`` (> 0), 0 at a blank tail, -1 at the end
        (a zero size) or a bad entry (``self.reason`` says which)."""
        if mf.size - rel < BLANK.size:
            self.reason = f"{mf.size - rel} bytes left at the end of {mf.path.name}"
            return -1
        magic, size = BLANK.unpack_from(mf.buffer, rel)
        if magic == BLANK_MAGIC_CODE:
            return 0
        if size == 0:
            return -1
        at = mf.file_from_offset + rel
        if mf.size - rel < BODY_OFFSET:
            self.reason = f"a header does not fit at {at}"
            return -1
        h = decode_header(mf.buffer, rel)
        why = validate_header(h, at=at) or self._sequence_problem(h, mf.size - rel)
        if why is not None:
            self.reason = f"pos={at} index={h.index} term={h.term}: {why}"
            return -1
        self._check_index(h)
        self.last_index, self.last_term = h.index, h.term
        return h.size

    def _sequence_problem(self, h: EntryHeader, room: int) -> str | None:
        if h.size > room:
            return f"size {h.size} exceeds the {room} bytes left in the file"
        if self.last_index != -1 and h.index != self.last_index + 1:
            return f"index {h.index} != lastEntryIndex {self.last_index} + 1"
        if h.index < 0:
            return f"index {h.index} < 0"
        if h.term < self.last_term:
            return f"term {h.term} < lastEntryTerm {self.last_term}"
        return None

    def _check_index(self, h: EntryHeader) -> None:
        """Step 3: compare with the unit, or rewrite it once a unit disagreed."""
        at = h.index * INDEX_UNIT_SIZE
        expected = index_unit_of(h)
        if not self.need_write_index:
            raw = self.index.read(at, INDEX_UNIT_SIZE)
            if raw is not None and decode_index_unit(raw) == expected:
                return
            log.warning(
                "Compare data to index failed, rewriting index",
                index=h.index,
                unit=None if raw is None else decode_index_unit(raw),
            )
            self.index.truncate_or_rebuild(at)
            self.need_write_index = True
        written = self.index.append(encode_index_unit(expected))
        if written != at:
            raise StoreError(f"Write index failed index={h.index} at {written} != {at}")
        self.rewritten += 1


def recover_log(data: MmapFileList, index: MmapFileList, *, cut_dir: Path) -> RecoveryResult:
    """Recover loaded data and index lists in place (module docstring, steps 1-4). Blocks.

    Raises:
        StoreError: the valid data ends more than a file before the last data file.
    """
    started = time.monotonic()
    files = data.files
    if not files:
        index.truncate(0)
        return RecoveryResult(
            end_index=-1,
            end_term=-1,
            process_offset=0,
            walk_start=0,
            index_rewritten=0,
            cut_reason="",
            cut_copy=None,
            elapsed_ms=0.0,
        )
    file_no = max(0, len(files) - 3)
    while file_no > 0 and not _first_entry_matches(files[file_no], index):
        log.warning("Pre check data and index failed", file=files[file_no].path.name)
        file_no -= 1
    walk_start = files[file_no].file_from_offset
    log.info("Begin to recover data", file_no=file_no, files=len(files), walk_start=walk_start)
    walk = _Walk(data, index)
    process = walk.run(file_no)
    last = files[-1]
    if last.file_from_offset - process > data.file_size:
        raise StoreError(
            f"[MONITOR]The processOffset {process} is too small, check it manually "
            f"before truncating the data (last file {last.path.name})"
        )
    cut_copy = _keep_cut(data, process, cut_dir) if walk.reason else None
    data.truncate(process)
    index.truncate_or_rebuild((walk.last_index + 1) * INDEX_UNIT_SIZE)
    data.check_self()
    index.check_self()
    elapsed_ms = (time.monotonic() - started) * 1000
    log.info(
        "Recover data to the end",
        end_index=walk.last_index,
        process_offset=process,
        walk_start=walk_start,
        index_rewritten=walk.rewritten,
        cut_reason=walk.reason,
        elapsed_ms=round(elapsed_ms, 1),
    )
    return RecoveryResult(
        end_index=walk.last_index,
        end_term=walk.last_term,
        process_offset=process,
        walk_start=walk_start,
        index_rewritten=walk.rewritten,
        cut_reason=walk.reason,
        cut_copy=cut_copy,
        elapsed_ms=elapsed_ms,
    )


def _keep_cut(data: MmapFileList, offset: int, cut_dir: Path) -> Path | None:
    """Copy the bad entry at ``offset`` to ``cut_dir`` and zero it in its file."""
    mf = data.find(offset)
    if mf is None:
        return None
    rel = offset - mf.file_from_offset
    room = mf.size - rel
    claimed = BLANK.unpack_from(mf.buffer, rel)[1] if room >= BLANK.size else 0
    length = claimed if BLANK.size <= claimed <= room else min(_GARBAGE_COPY, room)
    raw = mf.read(rel, length).rstrip(b"\0")
    if not raw:
        return None
    cut_dir.mkdir(parents=True, exist_ok=True)
    path = cut_dir / f"{offset_to_file_name(offset)}.torn"
    path.write_bytes(raw)
    mf.zero(rel, rel + len(raw))
    log.warning("dledger torn tail cut", offset=offset, bytes=len(raw), copy=str(path))
    return path
