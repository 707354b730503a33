"""Choosing a new master, and the liveness facts the controller state consults.

Owns: :class:`BrokerLiveInfo`, the :class:`BrokerLiveness` protocol (alive? heartbeat facts?)
with :class:`LiveBrokers`, a plain table implementation, and :class:`DefaultElectPolicy`.
Must not: look anything up by I/O: liveness is an argument (the heartbeat table of the node
builds it). Mirrors ``controller/.../elect/impl/DefaultElectPolicy.java``,
``impl/heartbeat/BrokerLiveInfo.java`` and ``helper/BrokerValidPredicate``. Pure.

Decided deviations from upstream (acceptance scenario C-06): candidates that rank equal are not
collapsed (upstream's ``TreeSet`` drops all but one, by comparator equality), the lowest broker
id wins such a tie; and max offsets are compared as numbers, not as an ``int`` cast of their
difference (which inverts the order for gaps >= 2^31 bytes).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final, Protocol

#: ``Integer.MAX_VALUE``: the election priority of a broker that set none (least preferred).
DEFAULT_ELECTION_PRIORITY: Final = 2**31 - 1


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerLiveInfo:
    """What the last heartbeats of one broker said (``BrokerLiveInfo``)."""

    broker_id: int
    broker_addr: str = ""
    epoch: int = -1
    max_offset: int = -1
    confirm_offset: int = -1
    election_priority: int = DEFAULT_ELECTION_PRIORITY


class BrokerLiveness(Protocol):
    """Liveness as seen by this controller node (``BrokerValidPredicate`` + live-info getter)."""

    def is_alive(self, cluster_name: str, broker_name: str, broker_id: int) -> bool:
        """Has the broker heart-beaten within its timeout?"""
        ...

    def live_info(
        self, cluster_name: str, broker_name: str, broker_id: int
    ) -> BrokerLiveInfo | None:
        """Its heartbeat facts, None when unknown."""
        ...


@dataclass(frozen=True, slots=True)
class LiveBrokers:
    """A :class:`BrokerLiveness` from a table: every listed broker is alive."""

    table: Mapping[tuple[str, str, int], BrokerLiveInfo] = field(default_factory=dict)

    @classmethod
    def of(
        cls, cluster_name: str, broker_name: str, infos: Iterable[BrokerLiveInfo]
    ) -> LiveBrokers:
        """Alive brokers of one broker-set."""
        return cls({(cluster_name, broker_name, i.broker_id): i for i in infos})

    def is_alive(self, cluster_name: str, broker_name: str, broker_id: int) -> bool:
        """Listed?"""
        return (cluster_name, broker_name, broker_id) in self.table

    def live_info(
        self, cluster_name: str, broker_name: str, broker_id: int
    ) -> BrokerLiveInfo | None:
        """The listed facts."""
        return self.table.get((cluster_name, broker_name, broker_id))


NOBODY_ALIVE: Final = LiveBrokers()


def _rank(info: BrokerLiveInfo | None, broker_id: int) -> tuple[int, int, int, int]:
    # Mirrors DefaultElectPolicy's comparator: epoch desc, maxOffset desc, priority asc;
    # then broker id asc so equal candidates are ordered, not merged.
    if info is None:
        info = BrokerLiveInfo(broker_id=broker_id)
    return (-info.epoch, -info.max_offset, info.election_priority, broker_id)


class DefaultElectPolicy:
    """``DefaultElectPolicy.elect`` (controller.md section 6)."""

    def elect(
        self,
        cluster_name: str,
        broker_name: str,
        *,
        sync_state_brokers: Iterable[int] | None,
        all_replica_brokers: Iterable[int] | None,
        old_master: int | None,
        prefer_broker_id: int | None,
        liveness: BrokerLiveness,
    ) -> int | None:
        """The new master, or None.

        Args:
            cluster_name / broker_name: the broker-set.
            sync_state_brokers: the SyncStateSet, tried first.
            all_replica_brokers: every replica, tried next; None unless unclean election is on.
            old_master: the current master, kept if still alive (and not overridden).
            prefer_broker_id: an administrator's choice: that broker or nobody.
            liveness: who is alive and their heartbeat facts.
        """
        for candidates in (sync_state_brokers, all_replica_brokers):
            if candidates is None:
                continue
            chosen = self._try_elect(
                cluster_name,
                broker_name,
                candidates=candidates,
                old_master=old_master,
                prefer_broker_id=prefer_broker_id,
                liveness=liveness,
            )
            if chosen is not None:
                return chosen
        return None

    @staticmethod
    def _try_elect(
        cluster_name: str,
        broker_name: str,
        *,
        candidates: Iterable[int],
        old_master: int | None,
        prefer_broker_id: int | None,
        liveness: BrokerLiveness,
    ) -> int | None:
        alive = sorted(b for b in candidates if liveness.is_alive(cluster_name, broker_name, b))
        if not alive:
            return None
        if old_master in alive and (prefer_broker_id is None or prefer_broker_id == old_master):
            return old_master
        if prefer_broker_id is not None:
            return prefer_broker_id if prefer_broker_id in alive else None
        return min(alive, key=lambda b: _rank(liveness.live_info(cluster_name, broker_name, b), b))
