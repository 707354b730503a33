"""ControllerMetrics: what a controller node counts, and its metrics-dump record.

Owns: request counts per request code, election attempts per result, the events since the last
dump (elections, Raft role changes), and :func:`build_controller_dump_record`, the record
layout (version :data:`CONTROLLER_DUMP_VERSION`, ``node.type == "controller"``; see
analytics/README.md).
Must not: decide anything or do I/O (``rocketpy.common.metrics_dump`` writes). rocketpy's own
addition, the controller counterpart of the broker's ``metrics.build_dump_record``; upstream's
``ControllerMetricsManager`` exports the same ideas (request totals by code, elections by
result, role) through OpenTelemetry.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.controller.state.sync_state import BrokerReplicaInfo, SyncStateInfo

#: Layout version of the controller record; bump on any change (README, job, golden).
CONTROLLER_DUMP_VERSION = 1
LEADER = "leader"
FOLLOWER = "follower"


def code_name(code: int, names: type[RequestCode] | type[ResponseCode]) -> str:
    """The enum name of ``code``, or the number as text when it has none."""
    try:
        return names(code).name
    except ValueError:
        return str(code)


@dataclass(frozen=True, slots=True)
class ControllerIdentity:
    """Who a controller node is at dump time."""

    controller_id: str
    group: str
    addr: str
    role: str
    term: int
    leader_id: str | None


@dataclass(slots=True)
class ControllerSnapshot:
    """Counters at one instant, with the change since the previous snapshot."""

    interval_ms: int | None
    requests: list[dict[str, Any]]
    elections: dict[str, Any]
    events: list[dict[str, Any]]


@dataclass(slots=True)
class ControllerMetrics:
    """The controller's counters (event loop only; no locking)."""

    requests: Counter[int] = field(default_factory=Counter)
    elections: Counter[str] = field(default_factory=Counter)
    _events: list[dict[str, Any]] = field(default_factory=list)
    _last_requests: Counter[int] = field(default_factory=Counter)
    _last_elections: Counter[str] = field(default_factory=Counter)
    _last_ts: int | None = None

    def record_request(self, code: int) -> None:
        """One request with ``code`` arrived (counted before it is handled)."""
        self.requests[code] += 1

    def record_election(
        self,
        ts_ms: int,
        *,
        cluster: str | None,
        broker_name: str,
        trigger_broker_id: int | None,
        code: int,
        master_broker_id: int | None,
        master_epoch: int | None,
    ) -> None:
        """One election attempt decided with ``code`` (any trigger; SUCCESS names the master)."""
        result = code_name(code, ResponseCode)
        self.elections[result] += 1
        self._events.append(
            {
                "ts": ts_ms,
                "type": "ELECTION",
                "cluster": cluster,
                "brokerName": broker_name,
                "triggerBrokerId": trigger_broker_id,
                "result": result,
                "code": code,
                "masterBrokerId": master_broker_id,
                "masterEpoch": master_epoch,
            }
        )

    def record_role_change(
        self, ts_ms: int, from_role: str | None, to_role: str, term: int
    ) -> None:
        """This node's Raft role changed (``from_role`` None: the role it booted with)."""
        self._events.append(
            {"ts": ts_ms, "type": "ROLE_CHANGE", "fromRole": from_role, "toRole": to_role,
             "term": term}
        )  # fmt: skip

    def snapshot(self, now_ms: int) -> ControllerSnapshot:
        """Counters now, deltas since the previous call; drains the events."""
        requests = [
            {
                "code": code,
                "name": code_name(code, RequestCode),
                "count": n,
                "dCount": n - self._last_requests[code],
            }
            for code, n in sorted(self.requests.items())
        ]
        total = sum(self.elections.values())
        elections = {
            "count": total,
            "dCount": total - sum(self._last_elections.values()),
            "byResult": [
                {"result": r, "count": n, "dCount": n - self._last_elections[r]}
                for r, n in sorted(self.elections.items())
            ],
        }
        interval = None if self._last_ts is None else now_ms - self._last_ts
        events, self._events = self._events, []
        self._last_requests = Counter(self.requests)
        self._last_elections = Counter(self.elections)
        self._last_ts = now_ms
        return ControllerSnapshot(interval, requests, elections, events)


def broker_sets(
    sync_states: Iterable[SyncStateInfo], replicas: dict[str, BrokerReplicaInfo]
) -> list[dict[str, Any]]:
    """Per broker-set: master, epochs, SyncStateSet, as this node's state machine has them."""
    out = []
    for info in sorted(sync_states, key=lambda i: (i.cluster_name, i.broker_name)):
        rep = replicas.get(info.broker_name)
        out.append(
            {
                "cluster": info.cluster_name,
                "brokerName": info.broker_name,
                "masterBrokerId": info.master_broker_id,
                "masterAddr": rep.broker_address(info.master_broker_id) if rep else None,
                "masterEpoch": info.master_epoch,
                "syncStateSet": sorted(info.sync_state_set),
                "syncStateSetEpoch": info.sync_state_set_epoch,
                "brokerIds": sorted(rep.all_brokers()) if rep else [],
            }
        )
    return out


def build_controller_dump_record(
    *,
    ts_ms: int,
    boot_ts_ms: int,
    node: ControllerIdentity,
    snapshot: ControllerSnapshot,
    sets: list[dict[str, Any]],
) -> dict[str, Any]:
    """One controller dump record (analytics/README.md, "Controller records")."""
    return {
        "version": CONTROLLER_DUMP_VERSION,
        "ts": ts_ms,
        "bootTs": boot_ts_ms,
        "intervalMs": snapshot.interval_ms,
        "node": {
            "type": "controller",
            "controllerId": node.controller_id,
            "group": node.group,
            "addr": node.addr,
            "role": node.role,
            "term": node.term,
            "leaderId": node.leader_id,
        },
        "requests": snapshot.requests,
        "elections": snapshot.elections,
        "events": snapshot.events,
        "brokerSets": sets,
    }
