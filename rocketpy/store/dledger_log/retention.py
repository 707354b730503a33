"""Retention of one DLedger member's data and index files (dledger-commitlog.md section 1.6).

Owns: which head data files may go and taking them out of the log. Mirrors DLedger 0.3.1.2's
``MmapFileList.deleteExpiredFileByTime`` (oldest first, never the last file, at most
``DELETE_FILES_BATCH_MAX`` a pass, stop at the first file whose last-modified time is not yet
``fileReservedHours`` old unless cleaning at once) and ``DLedgerMmapFileStore.
reviseLedgerBeginIndex`` (the ledger begin index is re-read from the new first data file, and
``MmapFileList.resetOffset`` drops the index files wholly below its unit).

Stricter than upstream, which looks at the time only: a data file is a candidate only when all
of it lies below ``min(committed position, keep_from)``, ``keep_from`` being the caller's floor
(the broker passes its reput position: no entry that is uncommitted or not yet dispatched to the
consume queues is ever deleted).

Must not: decide when to delete or look at the disk (the member's clean-space driver does), or
destroy files on the event loop (the caller runs :mod:`rocketpy.store.cleanup`'s
``file_mtimes_ms`` and ``destroy_files``, shared with CommitLog retention, off the loop);
:func:`head_candidates`, :func:`select_expired` and :func:`detach_head` are list edits and
48-byte reads, run on the loop (the only appender), so readers on the loop never meet a file
being deleted.
"""

from __future__ import annotations

from typing import Final

import structlog

from rocketpy.store.dledger_log.entry import INDEX_UNIT_SIZE
from rocketpy.store.dledger_log.store import DLedgerLogStore
from rocketpy.store.mapped_file import MappedFile

log = structlog.get_logger(__name__)

#: ``MmapFileList.DELETE_FILES_BATCH_MAX``.
DELETE_FILES_BATCH_MAX: Final = 10


def head_candidates(store: DLedgerLogStore, keep_from: int) -> list[MappedFile]:
    """The oldest data files (never the last, at most :data:`DELETE_FILES_BATCH_MAX`) whose
    every byte lies below both the committed position and ``keep_from``."""
    bound = min(store.committed_pos, keep_from)
    out: list[MappedFile] = []
    for mf in store.data.files[:-1][:DELETE_FILES_BATCH_MAX]:
        if mf.file_from_offset + mf.size > bound:
            break
        out.append(mf)
    return out


def _still_deletable(store: DLedgerLogStore, victims: list[MappedFile], keep_from: int) -> bool:
    """``victims`` still head the data list, leave a file after them and lie below the
    bounds (a truncation may have moved the list or the committed position meanwhile)."""
    files = store.data.files
    if len(files) <= len(victims) or files[: len(victims)] != victims:
        return False
    last = victims[-1]
    return last.file_from_offset + last.size <= min(store.committed_pos, keep_from)


def select_expired(
    candidates: list[MappedFile],
    mtimes_ms: list[int],
    *,
    now_ms: int,
    reserved_ms: int,
    clean_immediately: bool,
) -> list[MappedFile]:
    """``deleteExpiredFileByTime``'s choice: the leading candidates last modified
    ``reserved_ms`` or more before ``now_ms`` (all of them when ``clean_immediately``)."""
    out: list[MappedFile] = []
    for mf, mtime in zip(candidates, mtimes_ms, strict=True):
        if not clean_immediately and now_ms < mtime + reserved_ms:
            break  # avoid deleting files in the middle
        out.append(mf)
    return out


def detach_head(
    store: DLedgerLogStore, victims: list[MappedFile], keep_from: int
) -> list[MappedFile]:
    """Take ``victims`` (head data files) out of the data list, re-read the ledger begin index
    from the new first data file and take out the index files wholly below its unit. Returns
    every file taken out, for :func:`destroy_files`; empty when nothing was (a truncation is
    running on the member's thread, or moved the list since the victims were chosen: the next
    pass chooses again).
    """
    if not victims or not store.files_lock.acquire(blocking=False):
        return []
    try:
        if not _still_deletable(store, victims, keep_from):
            return []
        del store.data.files[: len(victims)]
        store.revise_begin_index()
        out = list(victims)
        if store.ledger_begin_index >= 0:
            floor = store.ledger_begin_index * INDEX_UNIT_SIZE
            index_files = store.index.files
            drop = 0
            for mf in index_files[:-1]:
                if mf.file_from_offset + mf.size > floor:
                    break
                drop += 1
            out.extend(index_files[:drop])
            del index_files[:drop]
    finally:
        store.files_lock.release()
    log.info(
        "Clean space: head files detached",
        data=[mf.path.name for mf in victims],
        index_files=len(out) - len(victims),
        ledger_begin_index=store.ledger_begin_index,
        min_offset=store.data.min_offset,
    )
    return out
