"""The read path of a consume queue: ``getMessage``'s walk from a queue offset (store.md 10).

Owns: turning a queue offset and limits into a :class:`GetResult` -- the status for offsets
outside the queue, the walk over consume-queue units (blank units skipped, a tags filter, the
byte limit past the first record, a scan limit), and copies of the records' bytes from the
commit log's mapped segments. Mirrors the queue part of ``DefaultMessageStore.getMessage``.
Runs on the loop; reads are copies of already written, mapped bytes. Must not: write.
"""

from __future__ import annotations

from typing import Final

from rocketpy.store.consume_queue.consume_queue import ConsumeQueue
from rocketpy.store.consume_queue.unit import BLANK_UNIT_SIZE
from rocketpy.store.get_types import GetMessageStatus, GetResult
from rocketpy.store.mapped_file_queue import MappedFileQueue

#: A pull returns at most this many record bytes (past its first record).
MAX_PULL_BYTES: Final = 128 * 1024 * 1024


def read_queue(
    q: ConsumeQueue | None,
    mfq: MappedFileQueue,
    *,
    offset: int,
    max_count: int,
    max_size: int = MAX_PULL_BYTES,
    tags_codes: set[int] | None = None,
) -> GetResult:
    """Up to ``max_count`` records of queue ``q`` (None: no such queue) from ``offset``."""
    if q is None:
        return GetResult(status=GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, next_begin_offset=0,
                         min_offset=0, max_offset=0, records=[])  # fmt: skip
    lo, hi = q.min_offset, q.max_offset

    def result(status: GetMessageStatus, nxt: int, records: list[bytes] | None = None) -> GetResult:
        return GetResult(status=status, next_begin_offset=nxt, min_offset=lo,
                         max_offset=hi, records=records or [])  # fmt: skip

    if hi == 0:
        return result(GetMessageStatus.NO_MESSAGE_IN_QUEUE, 0)
    if offset < lo:
        return result(GetMessageStatus.OFFSET_TOO_SMALL, lo)
    if offset == hi:
        return result(GetMessageStatus.OFFSET_OVERFLOW_ONE, offset)
    if offset > hi:
        return result(GetMessageStatus.OFFSET_OVERFLOW_BADLY, hi)
    status, cursor, records = _read_units(
        q, mfq, offset, hi, max_count=max_count, max_size=max_size, tags_codes=tags_codes
    )
    return result(status, cursor, records)


def _read_units(
    q: ConsumeQueue,
    mfq: MappedFileQueue,
    offset: int,
    hi: int,
    *,
    max_count: int,
    max_size: int,
    tags_codes: set[int] | None,
) -> tuple[GetMessageStatus, int, list[bytes]]:
    """The walk from ``offset`` (below ``hi``): (status, next offset, the records' bytes)."""
    records: list[bytes] = []
    total = 0
    removed = False
    scan_limit = max(16000 // 20, max_count)
    cursor = offset
    while cursor < hi and cursor - offset < scan_limit and len(records) < max_count:
        unit = q.get_unit(cursor)
        if unit is None:
            if not records:
                return GetMessageStatus.OFFSET_FOUND_NULL, cursor + 1, []
            break
        skip = unit.size == BLANK_UNIT_SIZE or bool(tags_codes and unit.tags_code not in tags_codes)
        if not skip and records and total + unit.size > max_size:
            break
        raw = None if skip else mfq.read(unit.commit_log_offset, unit.size)
        if raw is not None:
            records.append(raw)
            total += unit.size
        elif not skip:
            removed = True
        cursor += 1
    if records:
        return GetMessageStatus.FOUND, cursor, records
    status = (
        GetMessageStatus.MESSAGE_WAS_REMOVING if removed else GetMessageStatus.NO_MATCHED_MESSAGE
    )
    return status, cursor, records
