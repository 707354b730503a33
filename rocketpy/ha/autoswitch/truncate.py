"""Slave-side truncation: the invalid tail before connecting, the divergent suffix after the
handshake (ha.md section 3.6).

Owns: the ``truncateInvalidMsg`` and ``doTruncate`` steps around
:meth:`EpochFileCache.find_consistent_point`; the record walk and the cut itself are the
store's (:class:`~rocketpy.store.replication.ReplicationLog`). Must not: decide anything about
connections (the client drops the connection when :func:`truncate_to_master` returns False), or
reach the store other than through its replication interface. Mirrors
``AutoSwitchHAClient.truncateInvalidMsg``/``doTruncate`` (apache/rocketmq 5.1.1+).
"""

from __future__ import annotations

import structlog

from rocketpy.ha.protocol import HandshakeResponse
from rocketpy.store.epoch_cache import EpochFileCache
from rocketpy.store.replication import ReplicationLog

log = structlog.get_logger(__name__)


async def truncate_invalid_tail(store: ReplicationLog, epochs: EpochFileCache) -> int:
    """``truncateInvalidMsg``: cut a partial or invalid tail and the epochs that start in it.

    Returns:
        The commit log's max offset afterwards.
    """
    end = store.valid_end()
    if end < store.max_phy_offset:
        log.warning("truncate invalid msg", from_offset=end, max=store.max_phy_offset)
        await store.truncate_files(end)
    if any(e.start_offset >= end for e in epochs.entries()):
        await epochs.truncate_suffix_by_offset(end)
    return store.max_phy_offset


async def truncate_to_master(
    store: ReplicationLog, epochs: EpochFileCache, master: HandshakeResponse
) -> bool:
    """``doTruncate``: cut the local log and epochs back to the point both histories share.

    Returns:
        True when the slave may request from its (new) max offset; False when no
        (epoch, start offset) pair is shared (the connection must be dropped, H-04).
    """
    if len(epochs) == 0:
        return True  # a new replica, or one upgraded from classic mode: nothing to compare
    local_max = store.max_phy_offset
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
        await store.truncate_files(point)
    await epochs.truncate_suffix_by_offset(point)
    return True
