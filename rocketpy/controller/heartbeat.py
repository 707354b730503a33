"""The controller node's broker heartbeat table (not replicated) and its expiry scan.

Owns: :class:`BrokerHeartbeatManager`: one :class:`BrokerLiveInfo` per (cluster, broker name,
broker id) with its own timeout, the "values never go backwards" update rule, expiry, and the
channel each broker last used. It is the :class:`BrokerLiveness` the state machine and the
election policy consult. Must not: sleep, schedule or close sockets: the service runs
:meth:`scan_not_active` every ``scanNotActiveBrokerInterval`` and closes the channels it returns.
Mirrors ``controller/.../impl/heartbeat/DefaultBrokerHeartbeatManager.java`` (controller.md
section 7). Pure: time comes from a :class:`~rocketpy.common.clock.Clock`, read on its monotonic
side (stricter than upstream's wall clock, scenario F-11).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, replace
from typing import Final

from rocketpy.common.clock import Clock
from rocketpy.controller.state.elect_policy import DEFAULT_ELECTION_PRIORITY, BrokerLiveInfo
from rocketpy.remoting.protocol.headers.controller import BrokerHeartbeatRequestHeader

#: ``DEFAULT_BROKER_CHANNEL_EXPIRED_TIME``: timeout of a heartbeat that names none.
DEFAULT_HEARTBEAT_TIMEOUT_MS: Final = 10_000

BrokerKey = tuple[str, str, int]  # (clusterName, brokerName, brokerId)


@dataclass(frozen=True, slots=True, kw_only=True)
class HeartbeatRecord:
    """One row of the table: the facts plus bookkeeping."""

    cluster_name: str
    broker_name: str
    info: BrokerLiveInfo
    last_update_ms: int
    timeout_ms: int
    channel: Hashable | None

    @property
    def key(self) -> BrokerKey:
        """(cluster, broker name, broker id)."""
        return (self.cluster_name, self.broker_name, self.info.broker_id)


class BrokerHeartbeatManager:
    """Heartbeat table of one controller node.

    Args:
        clock: time source (``ManualClock`` in tests).
        startup_grace_ms: after creation, :meth:`is_warmed_up` stays False this long so the
            leader does not declare masters dead before they had a chance to heart-beat
            (scenario C-14: no spurious elections after a controller restart).
    """

    def __init__(self, clock: Clock, *, startup_grace_ms: int = 0) -> None:
        self._clock = clock
        self._table: dict[BrokerKey, HeartbeatRecord] = {}
        # Until this monotonic time :meth:`is_warmed_up` is False: the start-up grace, moved
        # on by :meth:`hold_off`.
        self._hold_until_ms = clock.monotonic_ms() + startup_grace_ms
        # The longest heartbeat timeout any broker has named (0 until one has).
        self._max_timeout_ms = 0

    def on_broker_heartbeat(
        self, header: BrokerHeartbeatRequestHeader, channel: Hashable | None = None
    ) -> HeartbeatRecord:
        """Record one BROKER_HEARTBEAT (``onBrokerHeartbeat``); returns the new row.

        First heartbeat: everything as sent (absent epoch/offsets = -1, priority = MAX,
        timeout = 10 s). Later ones refresh time, timeout, priority and channel, and take the
        epoch/maxOffset/confirmOffset only if the epoch is larger, or equal with a larger
        maxOffset: the facts the election ranks by never go backwards. Stricter than upstream:
        the address and channel follow the latest heartbeat (upstream keeps the first channel,
        so a reconnected broker was dropped when its old connection closed).
        """
        broker_id = -1 if header.broker_id is None else header.broker_id
        key = (header.cluster_name, header.broker_name, broker_id)
        now = self._clock.monotonic_ms()
        timeout = header.heartbeat_timeout_mills
        timeout_ms = DEFAULT_HEARTBEAT_TIMEOUT_MS if timeout is None else timeout
        priority = header.election_priority
        fresh = BrokerLiveInfo(
            broker_id=broker_id,
            broker_addr=header.broker_addr,
            epoch=-1 if header.epoch is None else header.epoch,
            max_offset=-1 if header.max_offset is None else header.max_offset,
            confirm_offset=-1 if header.confirm_offset is None else header.confirm_offset,
            election_priority=DEFAULT_ELECTION_PRIORITY if priority is None else priority,
        )
        prev = self._table.get(key)
        if prev is None:
            info = fresh
        else:
            old = prev.info
            newer = fresh.epoch > old.epoch or (
                fresh.epoch == old.epoch and fresh.max_offset > old.max_offset
            )
            info = replace(
                old,
                broker_addr=fresh.broker_addr,
                election_priority=fresh.election_priority,
                epoch=fresh.epoch if newer else old.epoch,
                max_offset=fresh.max_offset if newer else old.max_offset,
                confirm_offset=fresh.confirm_offset if newer else old.confirm_offset,
            )
        record = HeartbeatRecord(
            cluster_name=header.cluster_name,
            broker_name=header.broker_name,
            info=info,
            last_update_ms=now,
            timeout_ms=timeout_ms,
            channel=channel if channel is not None else (prev.channel if prev else None),
        )
        self._table[key] = record
        self._max_timeout_ms = max(self._max_timeout_ms, timeout_ms)
        return record

    def on_channel_closed(self, channel: Hashable) -> HeartbeatRecord | None:
        """``onBrokerChannelClose``: drop the row bound to ``channel``; the caller raises
        "broker inactive" for the returned row."""
        for key, record in self._table.items():
            if record.channel == channel:
                del self._table[key]
                return record
        return None

    def scan_not_active(self) -> list[HeartbeatRecord]:
        """``scanNotActiveBroker``: remove and return rows whose timeout has passed."""
        now = self._clock.monotonic_ms()
        expired = [r for r in self._table.values() if now - r.last_update_ms > r.timeout_ms]
        for record in expired:
            del self._table[record.key]
        return expired

    def is_warmed_up(self) -> bool:
        """Has the start-up grace period passed, and the hold-off of the last
        :meth:`hold_off`?"""
        return self._clock.monotonic_ms() >= self._hold_until_ms

    def hold_off(self) -> None:
        """This node now leads: until every broker has had one heartbeat timeout (the longest
        any broker named) to reach it, :meth:`is_warmed_up` is False.

        A node's table is only as fresh as the heartbeats that reached it. One that was cut off
        from the brokers and then elected (a rejoining controller can win: its log may be as
        long as anyone's) holds rows that expired or channels that its brokers are about to
        close; judged at once, a live master is "inactive" and replaced (found by the
        partition suite's controller-follower cut, scenario C-15). A master that really died
        meanwhile is found by the first inactive-master scan after the hold-off. A node no
        broker has reached yet holds nothing stale: only the start-up grace applies to it."""
        now = self._clock.monotonic_ms()
        self._hold_until_ms = max(self._hold_until_ms, now + self._max_timeout_ms)

    # -- BrokerLiveness ------------------------------------------------------------------------

    def is_alive(self, cluster_name: str, broker_name: str, broker_id: int) -> bool:
        """``isBrokerActive``: last heartbeat + its timeout >= now."""
        record = self._table.get((cluster_name, broker_name, broker_id))
        return record is not None and (
            record.last_update_ms + record.timeout_ms >= self._clock.monotonic_ms()
        )

    def live_info(
        self, cluster_name: str, broker_name: str, broker_id: int
    ) -> BrokerLiveInfo | None:
        """``getBrokerLiveInfo``."""
        record = self._table.get((cluster_name, broker_name, broker_id))
        return None if record is None else record.info

    def records(self) -> list[HeartbeatRecord]:
        """Every row (for ``statistics()`` and admin views)."""
        return list(self._table.values())
