"""CommitLog recovery after a clean or an unclean stop (store.md section 8). Blocking: executor.

Normal (no ``abort`` file): walk forward from the third-to-last segment. Abnormal: walk segments
backwards from the last one to the first whose first record is valid and whose store timestamp is
<= the checkpoint's min timestamp, then walk forward from there; the caller re-dispatches from that
start (the consume queue skips duplicates). Both stop at the first invalid record; everything past
it is a torn tail: a copy of the cut bytes (up to the last non-zero byte) is kept under
``<root>/recovery/`` before the segments are truncated, and the offsets are logged.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import structlog

from rocketpy.store.commit_log.record import CheckStatus, check_record
from rocketpy.store.mapped_file import MappedFile, offset_to_file_name
from rocketpy.store.mapped_file_queue import MappedFileQueue

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class RecoveryResult:
    """Where the valid log ends and where a re-dispatch has to start."""

    process_offset: int
    walk_start: int
    cut_bytes: int
    cut_copy: Path | None


def _walk_segment(mf: MappedFile, check_crc: bool) -> tuple[int, bool]:
    """(end position of the last valid record, reached the blank marker/segment end)."""
    pos = 0
    buf = mf.read(0, mf.size)
    while pos < mf.size:
        check = check_record(buf, pos, check_crc=check_crc)
        if check.status is CheckStatus.END_OF_FILE:
            return pos, True
        if check.status is CheckStatus.INVALID:
            return pos, False
        pos += check.size
    return pos, True


def _first_record_ok(mf: MappedFile, min_timestamp: int) -> bool:
    check = check_record(mf.read(0, mf.size), 0, check_crc=True)
    rec = check.record
    if check.status is not CheckStatus.VALID or rec is None:
        return False
    return rec.store_timestamp != 0 and rec.store_timestamp <= min_timestamp


def recover_commit_log(
    mfq: MappedFileQueue,
    *,
    abnormal: bool,
    min_timestamp: int,
    check_crc: bool,
    cut_dir: Path,
) -> RecoveryResult:
    """Find the end of the valid log, keep a copy of the torn tail and truncate it."""
    files = mfq.files
    if not files:
        return RecoveryResult(process_offset=0, walk_start=0, cut_bytes=0, cut_copy=None)
    if abnormal:
        idx = 0
        for i in range(len(files) - 1, -1, -1):
            if _first_record_ok(files[i], min_timestamp):
                idx = i
                break
    else:
        idx = max(0, len(files) - 3)
    walk_start = files[idx].file_from_offset
    process = walk_start
    for mf in files[idx:]:
        end, complete = _walk_segment(mf, check_crc)
        process = mf.file_from_offset + end
        if not complete:
            break
        process = mf.file_from_offset + mf.size
    cut_copy, cut = _keep_tail(mfq, process, cut_dir)
    mfq.truncate_dirty_files(process)
    log.info("commit log recovered", abnormal=abnormal, walk_start=walk_start,
             process_offset=process, cut_bytes=cut)  # fmt: skip
    return RecoveryResult(
        process_offset=process, walk_start=walk_start, cut_bytes=cut, cut_copy=cut_copy
    )


def _keep_tail(mfq: MappedFileQueue, offset: int, cut_dir: Path) -> tuple[Path | None, int]:
    """Copy the non-zero bytes past ``offset`` (the torn tail) to ``cut_dir``."""
    chunks: list[bytes] = []
    for mf in mfq.files:
        end = mf.file_from_offset + mf.size
        if end <= offset:
            continue
        start = max(0, offset - mf.file_from_offset)
        chunks.append(mf.read(start, mf.size - start))
    data = b"".join(chunks).rstrip(b"\0")
    if not data:
        return None, 0
    cut_dir.mkdir(parents=True, exist_ok=True)
    path = cut_dir / f"{offset_to_file_name(offset)}.torn"
    path.write_bytes(data)
    log.warning("commit log torn tail cut", offset=offset, bytes=len(data), copy=str(path))
    return path, len(data)
