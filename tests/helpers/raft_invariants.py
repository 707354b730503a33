"""Raft safety properties (Raft paper figure 3), checked incrementally after every processed Ready.

* Election Safety: at most one leader per term.
* Log Matching: two logs holding an entry with the same index and term hold the same entry and
  agree on the term of the entry before it (so, by induction, on the whole prefix).
* Leader Completeness: a committed entry is in the log of every leader of a later term.
* State Machine Safety: no two nodes apply different entries at one index (applied sequences
  are prefixes of one another), and a committed entry never changes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rocketpy.common.types import LogIndex
from rocketpy.dledger.core import RaftCore, Role
from tests.helpers.raft_net import Cluster


class SafetyViolation(AssertionError):
    """A Raft safety property failed."""


@dataclass
class Checker:
    """Attach with ``cluster.observers.append(checker)``."""

    leader_of_term: dict[int, str] = field(default_factory=dict)
    seen: dict[tuple[int, int], tuple[bytes, int, int]] = field(default_factory=dict)
    committed: dict[int, tuple[int, bytes]] = field(default_factory=dict)
    commit_seen: dict[str, int] = field(default_factory=dict)
    applied_at: dict[int, bytes] = field(default_factory=dict)
    applied_seen: dict[str, int] = field(default_factory=dict)
    leaders_checked: set[tuple[str, int]] = field(default_factory=set)
    checks: int = 0

    def __call__(self, cluster: Cluster, node_id: str) -> None:
        core = cluster.nodes[node_id].core
        if core is None:
            return
        self.checks += 1
        self._election_safety(core)
        self._log_matching(core)
        self._commits(cluster, core)
        self._leader_completeness(core)
        self._applied(cluster, node_id)

    def _election_safety(self, core: RaftCore) -> None:
        if core.role is not Role.LEADER:
            return
        other = self.leader_of_term.setdefault(core.term, core.id)
        if other != core.id:
            raise SafetyViolation(f"two leaders in term {core.term}: {other} and {core.id}")

    def _log_matching(self, core: RaftCore) -> None:
        log = core.log
        lo = max(log.first_index(), log.committed - 2, 1)
        for e in log.slice(LogIndex(lo), LogIndex(log.last_index() + 1), 1 << 40):
            prev_term = log.term(LogIndex(e.index - 1))
            record = (e.data, int(e.kind), prev_term)
            known = self.seen.setdefault((e.index, e.term), record)
            if known != record:
                raise SafetyViolation(
                    f"log matching: {core.id} has {record} at ({e.index}, {e.term}), "
                    f"another log has {known}"
                )

    def _commits(self, cluster: Cluster, core: RaftCore) -> None:
        log = core.log
        start = max(self.commit_seen.get(core.id, 0) + 1, log.first_index())
        for e in log.slice(LogIndex(start), LogIndex(log.committed + 1), 1 << 40):
            record = (int(e.term), e.data)
            known = self.committed.setdefault(e.index, record)
            if known != record:
                raise SafetyViolation(
                    f"committed entry {e.index} changed: {known} then {record} on {core.id}"
                )
            for other in cluster.live():
                leader = cluster.core(other)
                if leader.role is Role.LEADER and leader.term > e.term:
                    self._has_entry(leader, e.index, record)
        self.commit_seen[core.id] = max(self.commit_seen.get(core.id, 0), log.committed)

    def _leader_completeness(self, core: RaftCore) -> None:
        if core.role is not Role.LEADER or (core.id, core.term) in self.leaders_checked:
            return
        self.leaders_checked.add((core.id, core.term))
        for index, record in self.committed.items():
            self._has_entry(core, index, record)

    @staticmethod
    def _has_entry(core: RaftCore, index: int, record: tuple[int, bytes]) -> None:
        log = core.log
        if index < log.first_index():
            return  # inside its snapshot, which only holds committed entries
        if index > log.last_index() or log.term(LogIndex(index)) != record[0]:
            raise SafetyViolation(
                f"leader completeness: leader {core.id} (term {core.term}) lacks committed "
                f"entry {index} {record}"
            )

    def _applied(self, cluster: Cluster, node_id: str) -> None:
        node = cluster.nodes[node_id]
        seen = self.applied_seen.get(node_id, -1)
        for index, data in node.applied:
            if index <= seen:
                continue
            known = self.applied_at.setdefault(index, data)
            if known != data:
                raise SafetyViolation(
                    f"state machine safety: {node_id} applied {data!r} at {index}, "
                    f"another node applied {known!r}"
                )
        if node.applied:
            self.applied_seen[node_id] = node.applied[-1][0]
