"""RebalanceLockManager: per-group queue locks for orderly consumers (LOCK/UNLOCK_BATCH_MQ).

Owns: ``group -> MessageQueue -> (clientId, last renewal)``. A lock is held while renewed within
the lease (``rocketmq.broker.rebalance.lockMaxLiveTime``, 60 s); an expired lock may be taken by
any client. Mirrors ``broker/client/rebalance/RebalanceLockManager`` (client-flows.md section
4.5). Time comes from a monotonic :class:`~rocketpy.common.clock.Clock`. No I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import structlog

from rocketpy.common.clock import SYSTEM_CLOCK, Clock
from rocketpy.remoting.protocol.body.broker import MessageQueue

log = structlog.get_logger(__name__)


@dataclass(slots=True)
class _LockEntry:
    client_id: str
    last_update_ms: int


class RebalanceLockManager:
    """Queue locks of orderly consumer groups."""

    def __init__(self, *, max_live_time_ms: int = 60_000, clock: Clock = SYSTEM_CLOCK) -> None:
        """Args: ``max_live_time_ms`` the lease; ``clock`` the monotonic time source."""
        self._max_live_ms = max_live_time_ms
        self._clock = clock
        self._table: dict[str, dict[MessageQueue, _LockEntry]] = {}

    def _expired(self, entry: _LockEntry) -> bool:
        return self._clock.monotonic_ms() - entry.last_update_ms > self._max_live_ms

    def is_lock_all_expired(self, group: str) -> bool:
        """``isLockAllExpired``: no unexpired lock in ``group`` (retry sends may then go on)."""
        entries = self._table.get(group)
        return not entries or all(self._expired(e) for e in entries.values())

    def is_locked(self, group: str, mq: MessageQueue, client_id: str) -> bool:
        """True (and the lease renewed) when ``client_id`` holds an unexpired lock on ``mq``."""
        entry = self._table.get(group, {}).get(mq)
        if entry is None or entry.client_id != client_id or self._expired(entry):
            return False
        entry.last_update_ms = self._clock.monotonic_ms()
        return True

    def try_lock_batch(
        self, group: str, mqs: Iterable[MessageQueue], client_id: str
    ) -> list[MessageQueue]:
        """``tryLockBatch``: lock or renew every queue not held by another live client.

        Returns:
            The queues ``client_id`` holds after the call, sorted.
        """
        now = self._clock.monotonic_ms()
        locked: set[MessageQueue] = set()
        entries = self._table.setdefault(group, {})
        for mq in set(mqs):
            entry = entries.get(mq)
            if entry is None:
                entries[mq] = _LockEntry(client_id, now)
                log.info(
                    "lock a message queue which has not been locked yet",
                    group=group,
                    client_id=client_id,
                    mq=mq,
                )
                locked.add(mq)
            elif entry.client_id == client_id and not self._expired(entry):
                entry.last_update_ms = now
                locked.add(mq)
            elif self._expired(entry):
                log.warning(
                    "try to lock a expired message queue",
                    group=group,
                    mq=mq,
                    old_client_id=entry.client_id,
                    new_client_id=client_id,
                )
                entry.client_id = client_id
                entry.last_update_ms = now
                locked.add(mq)
            else:
                log.warning(
                    "message queue has been locked by other client",
                    group=group,
                    mq=mq,
                    locked_client_id=entry.client_id,
                    client_id=client_id,
                )
        if not entries:
            del self._table[group]
        return sorted(locked)

    def unlock_batch(self, group: str, mqs: Iterable[MessageQueue], client_id: str) -> None:
        """``unlockBatch``: release the queues ``client_id`` holds; others are left alone."""
        entries = self._table.get(group)
        if entries is None:
            log.warning("unlock failed, group not exist", group=group, client_id=client_id)
            return
        for mq in mqs:
            entry = entries.get(mq)
            if entry is None:
                log.warning("unlock failed, mq not exist", group=group, mq=mq)
            elif entry.client_id == client_id:
                del entries[mq]
                log.info("unlock mq", group=group, client_id=client_id, mq=mq)
            else:
                log.warning(
                    "unlock failed, mq locked by other client",
                    group=group,
                    mq=mq,
                    locked_client_id=entry.client_id,
                    client_id=client_id,
                )
        if not entries:
            del self._table[group]
