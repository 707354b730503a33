"""Slave-side truncation: the invalid tail before connecting, the divergent suffix after the
handshake (ha.md section 3.6).

Owns: the record walk of ``truncateInvalidMsg`` and the ``doTruncate`` steps around
:meth:`EpochFileCache.find_consistent_point`. Must not: decide anything about connections (the
client drops the connection when :func:`truncate_to_master` returns False). Mirrors
``AutoSwitchHAClient.truncateInvalidMsg``/``doTruncate`` (apache/rocketmq 5.1.1+).
"""

from __future__ import annotations

import asyncio

import structlog

from rocketpy.ha.protocol import HandshakeResponse
from rocketpy.store.consume_queue.reput import read_request
from rocketpy.store.epoch_cache import EpochFileCache
from rocketpy.store.message_store import MessageStore

log = structlog.get_logger(__name__)


async def cut_commit_log(store: MessageStore, point: int) -> None:
    """Truncate the store to ``point`` and zero the cut bytes of the segment that keeps it.

    ``truncate_files`` only moves positions; without zeroing, a restart's recovery walk would
    find the cut (divergent) records still valid after the new tail and bring them back.
    """
    old_max = store.commit_log.max_offset
    mf = store.commit_log.mfq.find(point)
    await store.truncate_files(point)
    if mf is not None:
        start = point - mf.file_from_offset
        end = min(old_max - mf.file_from_offset, mf.size)
        if end > start:
            await asyncio.get_running_loop().run_in_executor(None, mf.zero, start, end)


def valid_end(store: MessageStore) -> int:
    """End of the last whole, valid record, walking from the dispatcher's position."""
    mfq = store.commit_log.mfq
    top = store.commit_log.max_offset
    offset = max(store.reput.reput_from, store.commit_log.min_offset)
    while offset < top:
        req, size = read_request(mfq, offset, check_crc=True)
        if size == 0:  # blank end-of-file record: the next segment starts the next record
            mf = mfq.find(offset)
            if mf is None:
                break
            offset = mf.file_from_offset + mf.size
            continue
        if req is None:
            break
        offset += size
    return min(offset, top)


async def truncate_invalid_tail(store: MessageStore, epochs: EpochFileCache) -> int:
    """``truncateInvalidMsg``: cut a partial or invalid tail and the epochs that start in it.

    Returns:
        The commit log's max offset afterwards.
    """
    end = valid_end(store)
    if end < store.commit_log.max_offset:
        log.warning("truncate invalid msg", from_offset=end, max=store.commit_log.max_offset)
        await cut_commit_log(store, end)
    if any(e.start_offset >= end for e in epochs.entries()):
        await epochs.truncate_suffix_by_offset(end)
    return store.commit_log.max_offset


async def truncate_to_master(
    store: MessageStore, epochs: EpochFileCache, master: HandshakeResponse
) -> bool:
    """``doTruncate``: cut the local log and epochs back to the point both histories share.

    Returns:
        True when the slave may request from its (new) max offset; False when no
        (epoch, start offset) pair is shared (the connection must be dropped, H-04).
    """
    if len(epochs) == 0:
        return True  # a new replica, or one upgraded from classic mode: nothing to compare
    local_max = store.commit_log.max_offset
    point = epochs.find_consistent_point(
        master.entries, master_max_offset=master.master_max_offset, local_max_offset=local_max
    )
    if point is None:
        log.error("Failed to find a consistent point with the master's epochs",
                  local=[str(e) for e in epochs.entries()],
                  master=[str(e) for e in master.entries])  # fmt: skip
        return False
    log.info("truncate to the consistent point", point=point, local_max=local_max)
    if point < local_max:
        await cut_commit_log(store, point)
    await epochs.truncate_suffix_by_offset(point)
    return True
