"""CommitLog recovery after a clean or an unclean stop (store.md section 8). Blocking: executor.

The walk starts at a record boundary below which everything is known to be whole and
dispatched, so its cost is what was written since, not the size of the log:

* ``dispatched`` (the end of the last consume-queue unit, which the caller passes when the
  record it points at checks out): after a clean stop, and after an unclean stop of the
  process while the machine kept running (the page cache held every byte the process had
  written into its mappings, so the consume queues are exactly what was dispatched). The
  5.3 develop branch's accelerated recovery starts at the dispatched offset the same way.
* otherwise, a clean stop: the third-to-last segment (``recoverNormally``, 4.9-5.3.0);
* otherwise (the machine itself went down, or no queue tells): walk segments backwards from
  the last to the first whose first record is valid with a store timestamp <= the
  checkpoint's min timestamp, and start there (``recoverAbnormally``).

The walk reads the mapped segments through zero-copy views (``valid_record_size``: sizes, lengths,
and the body CRC when ``checkCRCOnRecover``), drops walked pages from the mapping as it goes so
resident memory stays flat, logs progress every few seconds, and stops at the first invalid
record. Past it is a torn tail: a copy of that one record's bytes is kept under
``<root>/recovery/``, the bytes are zeroed (so no older record behind them can come back after
the next crash) and the segments are truncated; the offsets are logged. The segment created
ahead of need (all zeros) is never read. A classic slave's log is the master's bytes as they
arrived, so its last walked record is cut as well (``trust_last``): a tear past the body
passes every check, and the master sends the record again.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import structlog

from rocketpy.common.message.decoder import record_store_timestamp
from rocketpy.common.message.record import INT32
from rocketpy.store.commit_log.record import valid_record_size
from rocketpy.store.mapped_file import PAGE_SIZE, MappedFile, offset_to_file_name
from rocketpy.store.mapped_file_queue import MappedFileQueue

log = structlog.get_logger(__name__)

#: Walked pages are dropped from the mapping in steps of this many bytes.
_RELEASE_STEP: Final = 64 * 1024 * 1024
#: Seconds between two "commit log recovering" progress lines.
PROGRESS_INTERVAL_S: Final = 3.0
#: A torn record whose size field is garbage: at most this much of it is copied and zeroed.
_GARBAGE_COPY: Final = 64 * 1024
#: Past the torn record, zeros are written up to the first all-zero block of this size.
_ZERO_PROBE: Final = 64 * 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class RecoveryResult:
    """Where the valid log ends and where a re-dispatch has to start."""

    process_offset: int
    walk_start: int
    start_from: str
    elapsed_ms: float
    cut_bytes: int
    cut_copy: Path | None
    #: Where the last record the walk passed (and kept) starts; None when it passed none.
    last_start: int | None = None

    @property
    def scanned_bytes(self) -> int:
        """Bytes the walk covered."""
        return self.process_offset - self.walk_start


def first_record_timestamp(mf: MappedFile) -> int | None:
    """The store timestamp of the segment's first record when that record is valid (CRC
    included), else None (``isMappedFileMatchedRecover``'s first check)."""
    view = mf.view(0, mf.size)
    try:
        if valid_record_size(view, 0, check_crc=True) <= 0:
            return None
        return record_store_timestamp(view)
    finally:
        view.release()


def _checkpoint_segment(files: list[MappedFile], min_timestamp: int) -> int:
    """Index of the last segment whose first record is valid and stored at or before
    ``min_timestamp`` (non-zero), else 0."""
    for i in range(len(files) - 1, -1, -1):
        ts = first_record_timestamp(files[i])
        if ts is not None and ts != 0 and ts <= min_timestamp:
            return i
    return 0


class _Walk:
    """Walks records from a start offset to the first invalid one, with progress lines."""

    def __init__(self, mfq: MappedFileQueue, start: int, check_crc: bool) -> None:
        self.mfq = mfq
        self.start = start
        self.check_crc = check_crc
        self.started = time.monotonic()
        self._last_progress = self.started
        self._last_offset = start
        #: Where the last valid record the walk passed starts (None: it passed none).
        self.last_start: int | None = None

    def run(self) -> int:
        """Returns the end of the last valid record (``processOffset``)."""
        offset = self.start
        while True:
            mf = self.mfq.find(offset)
            if mf is None:
                return offset
            end, complete = self._segment(mf, offset - mf.file_from_offset)
            offset = mf.file_from_offset + end
            if not complete:
                return offset
            offset = mf.file_from_offset + mf.size

    def _segment(self, mf: MappedFile, pos: int) -> tuple[int, bool]:
        """(end of the last valid record in ``mf``, reached the blank marker or the end)."""
        view = mf.view(0, mf.size)
        released = pos - pos % PAGE_SIZE
        check_crc = self.check_crc
        try:
            while pos < mf.size:
                size = valid_record_size(view, pos, check_crc=check_crc)
                if size == 0:
                    return pos, True
                if size < 0:
                    return pos, False
                self.last_start = mf.file_from_offset + pos
                pos += size
                if pos - released >= _RELEASE_STEP:
                    released = self._progress(mf, pos, released)
            return pos, True
        finally:
            view.release()
            mf.drop_pages(released, min(pos, mf.size))

    def _progress(self, mf: MappedFile, pos: int, released: int) -> int:
        """Drop the walked pages; log a progress line every few seconds."""
        upto = pos - pos % PAGE_SIZE
        mf.drop_pages(released, upto)
        now = time.monotonic()
        if now - self._last_progress >= PROGRESS_INTERVAL_S:
            offset = mf.file_from_offset + pos
            rate = (offset - self._last_offset) / (now - self._last_progress) / 1e6
            log.info("commit log recovering", file=mf.path.name, offset=offset,
                     mb_per_s=round(rate, 1), scanned=offset - self.start)  # fmt: skip
            self._last_progress, self._last_offset = now, offset
        return upto


def drop_read_pages(mfq: MappedFileQueue, start: int, end: int) -> None:
    """Release the pages of global ``[start, end)`` from the segments' mappings: read once at
    start-up (the re-dispatch after a walk), they would otherwise stay resident."""
    for mf in mfq.files:
        lo = max(start, mf.file_from_offset) - mf.file_from_offset
        hi = min(end, mf.file_from_offset + mf.size) - mf.file_from_offset
        if hi > lo:
            mf.drop_pages(lo, hi)


def recover_commit_log(
    mfq: MappedFileQueue,
    *,
    abnormal: bool,
    dispatched: int | None,
    min_timestamp: int,
    check_crc: bool,
    cut_dir: Path,
    trust_last: bool = True,
) -> RecoveryResult:
    """Find the end of the valid log, keep a copy of the torn tail and truncate it.

    Args:
        mfq: the loaded segments (all marked fully written).
        abnormal: the ``abort`` file was found.
        dispatched: a record boundary below which everything is whole and dispatched (see
            the module docstring for when the caller may pass one), or None.
        min_timestamp: the checkpoint's ``getMinTimestamp``.
        check_crc: ``checkCRCOnRecover``.
        cut_dir: where the copy of a torn tail goes.
        trust_last: False for a replica's log (a classic slave), written as the master's
            bytes arrive in frames cut anywhere: a kill between two frames leaves the last
            record torn, and where the tear falls after the body (properties, whose bytes no
            CRC covers) it passes every check. The last record the walk passed is then cut
            too (the master sends it again); one the reput dispatched (before the walk's
            start) was whole.
    """
    files = mfq.files
    if not files:
        return RecoveryResult(process_offset=0, walk_start=0, start_from="empty",
                              elapsed_ms=0.0, cut_bytes=0, cut_copy=None)  # fmt: skip
    if dispatched is not None and mfq.find(dispatched) is not None:
        walk_start, start_from = dispatched, "dispatched"
    elif not abnormal:
        walk_start, start_from = files[max(0, len(files) - 3)].file_from_offset, "segments"
    else:
        idx = _checkpoint_segment(files, min_timestamp)
        walk_start, start_from = files[idx].file_from_offset, "checkpoint"
    walk = _Walk(mfq, walk_start, check_crc)
    process = walk.run()
    if not trust_last and walk.last_start is not None:
        log.info("replica recovery: the last record walked is fetched from the master again",
                 offset=walk.last_start, size=process - walk.last_start)  # fmt: skip
        process = walk.last_start
    elapsed_ms = (time.monotonic() - walk.started) * 1000
    cut_copy, cut = _keep_tail(mfq, process, cut_dir)
    mfq.truncate_dirty_files(process)
    log.info("commit log recovered", abnormal=abnormal, start_from=start_from,
             walk_start=walk_start, process_offset=process, scanned_bytes=process - walk_start,
             elapsed_ms=round(elapsed_ms, 1), cut_bytes=cut)  # fmt: skip
    kept_last = (
        walk.last_start if walk.last_start is not None and walk.last_start < process else None
    )
    return RecoveryResult(process_offset=process, walk_start=walk_start, start_from=start_from,
                          elapsed_ms=elapsed_ms, cut_bytes=cut, cut_copy=cut_copy,
                          last_start=kept_last)  # fmt: skip


def _keep_tail(mfq: MappedFileQueue, offset: int, cut_dir: Path) -> tuple[Path | None, int]:
    """Copy the torn record at ``offset`` to ``cut_dir`` and zero it in its segment.

    Only that record's bytes are copied (its size field, when it fits the segment; else up
    to 64 KiB): a torn tail is one partly written record. Zeros are then written past it up
    to the first all-zero 64 KiB block, so nothing older behind it can look valid later.
    """
    mf = mfq.find(offset)
    if mf is None:
        return None, 0
    pos = offset - mf.file_from_offset
    remaining = mf.size - pos
    if remaining < 4:
        return None, 0
    (claimed,) = INT32.unpack_from(mf.buffer, pos)
    length = claimed if 8 <= claimed <= remaining else min(_GARBAGE_COPY, remaining)
    data = mf.read(pos, length).rstrip(b"\0")
    if not data:
        return None, 0
    cut_dir.mkdir(parents=True, exist_ok=True)
    path = cut_dir / f"{offset_to_file_name(offset)}.torn"
    path.write_bytes(data)
    zero_end = _zero_torn(mf, pos, pos + length)
    log.warning("commit log torn tail cut", offset=offset, bytes=len(data), copy=str(path),
                zeroed=zero_end - pos)  # fmt: skip
    return path, len(data)


def _zero_torn(mf: MappedFile, start: int, end: int) -> int:
    """Zero ``[start, end)`` and every following block up to the first all-zero one."""
    zeros = bytes(_ZERO_PROBE)
    while end < mf.size:
        probe = min(_ZERO_PROBE, mf.size - end)
        if mf.read(end, probe) == zeros[:probe]:
            break
        end += probe
    mf.zero(start, end)
    return end
