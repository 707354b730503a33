"""Seeded random schedules for the Raft core: faults, then heal and check liveness.

One schedule = a cluster of 3 or 5 cores driven for ``steps`` random actions (ticks,
in-order or reordered delivery, drops, duplicates, partitions, crashes, crashes in the middle of
persisting a Ready, restarts, proposals, log compaction, leadership transfers) with the
:class:`Checker` run after every processed Ready; then everything heals and the schedule must
reach a leader that commits a final entry on every node within a bounded number of ticks.
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass

from rocketpy.dledger.core import NotLeader, RaftConfig
from tests.helpers.raft_invariants import Checker
from tests.helpers.raft_net import FAST, Cluster

SIM = RaftConfig(
    heartbeat_interval_ticks=2,
    max_heartbeat_leak=3,
    min_vote_interval_ticks=1,
    max_vote_interval_ticks=8,
    vote_wait_ticks=4,
    max_inflight_appends=3,
    max_entries_per_append=2,
    transfer_timeout_ticks=12,
    snapshot_timeout_heartbeats=2,
)


@dataclass
class Outcome:
    """What one schedule did (for assertions that the faults really happened)."""

    seed: int
    proposals: int
    committed: int
    leaders: int
    crashes: int
    checks: int


class Schedule:
    """Runs one seeded schedule."""

    def __init__(self, seed: int, steps: int = 500) -> None:
        self.seed = seed
        self.steps = steps
        self.rng = random.Random(seed)
        size = self.rng.choice((3, 3, 5))
        base = SIM if self.rng.random() < 0.7 else FAST
        config = dataclasses.replace(
            base,
            max_entries_per_append=self.rng.choice((1, 1, 2, 3)),
            max_inflight_appends=self.rng.choice((1, 3, 8)),
        )
        self.cluster = Cluster(
            [f"n{i}" for i in range(size)],
            seed=seed,
            config=config,
            wire=self.rng.random() < 0.2,
        )
        self.checker = Checker()
        self.cluster.observers.append(self.checker)
        self.cluster.drop_rate = self.rng.choice((0.0, 0.05, 0.2))
        self.cluster.dup_rate = self.rng.choice((0.0, 0.05))
        self.proposals = 0
        self.crashes = 0

    def run(self) -> Outcome:
        """Fault phase, then heal and require progress."""
        actions = (
            (30, self._tick_all),
            (10, self._tick_one),
            (60, self._deliver),
            (12, self._propose),
            (2, self._partition),
            (3, self._heal),
            (1, self._crash),
            (1, self._crash_mid_ready),
            (3, self._restart),
            (2, self._compact),
            (1, self._transfer),
        )
        weights = [w for w, _ in actions]
        funcs = [f for _, f in actions]
        for _ in range(self.steps):
            self.rng.choices(funcs, weights)[0]()
        self._converge()
        return Outcome(
            seed=self.seed,
            proposals=self.proposals,
            committed=len(self.checker.committed),
            leaders=len(self.checker.leader_of_term),
            crashes=self.crashes,
            checks=self.checker.checks,
        )

    # -- actions -------------------------------------------------------------------------------

    def _tick_all(self) -> None:
        self.cluster.tick()

    def _tick_one(self) -> None:
        live = self.cluster.live()
        if live:
            self.cluster.tick(self.rng.choice(live))

    def _deliver(self) -> None:
        for _ in range(self.rng.randrange(1, 6)):
            if self.rng.random() < 0.5:
                self.cluster.deliver_one()
            else:
                self.cluster.deliver_random()

    def _propose(self) -> None:
        live = self.cluster.live()
        if not live:
            return
        leader = self.cluster.leader()
        node = leader if leader is not None and self.rng.random() < 0.8 else self.rng.choice(live)
        try:
            self.cluster.core(node).propose(b"s%d-p%d" % (self.seed, self.proposals))
        except NotLeader:
            return
        self.proposals += 1
        self.cluster.flush(node)

    def _partition(self) -> None:
        ids = list(self.cluster.ids)
        self.rng.shuffle(ids)
        cut = self.rng.randrange(1, len(ids))
        self.cluster.partition(ids[:cut], ids[cut:])

    def _heal(self) -> None:
        self.cluster.heal()

    def _crash(self) -> None:
        live = self.cluster.live()
        if live:
            self.cluster.crash(self.rng.choice(live))
            self.crashes += 1

    def _crash_mid_ready(self) -> None:
        """Step a node, persist only a prefix of its Ready (snapshot, entries, hard state),
        then crash before sending or applying anything."""
        live = self.cluster.live()
        if not live:
            return
        node_id = self.rng.choice(live)
        node = self.cluster.nodes[node_id]
        core = self.cluster.core(node_id)
        mine = [i for i, m in enumerate(self.cluster.in_flight) if m.to_id == node_id]
        if mine:
            core.step(self.cluster.in_flight.pop(self.rng.choice(mine)))
        else:
            core.tick()
        if core.has_ready():
            rd = core.ready()
            upto = self.rng.randrange(4)
            if upto > 0 and rd.snapshot is not None:
                node.storage.install_snapshot(rd.snapshot)
            if upto > 1:
                node.storage.append(rd.entries)
            if upto > 2 and rd.hard_state is not None:
                node.storage.set_hard_state(rd.hard_state)
        self.cluster.crash(node_id)
        self.crashes += 1

    def _restart(self) -> None:
        down = [i for i in self.cluster.ids if self.cluster.nodes[i].core is None]
        if down:
            node = self.rng.choice(down)
            self.cluster.restart(node)
            self.cluster.flush(node)

    def _compact(self) -> None:
        live = self.cluster.live()
        if live:
            self.cluster.compact(self.rng.choice(live), keep=self.rng.randrange(3))

    def _transfer(self) -> None:
        leader = self.cluster.leader()
        if leader is None:
            return
        target = self.rng.choice(self.cluster.ids)
        self.cluster.core(leader).transfer_leadership(target)
        self.cluster.flush(leader)

    # -- liveness ------------------------------------------------------------------------------

    def _converge(self, max_ticks: int = 600) -> None:
        c = self.cluster
        c.heal()
        c.drop_rate = 0.0
        c.dup_rate = 0.0
        for node_id in c.ids:
            if c.nodes[node_id].core is None:
                c.restart(node_id)
                c.flush(node_id)
        final = b"s%d-final" % self.seed
        proposed_by: tuple[str, int] | None = None
        for _ in range(max_ticks):
            c.run(1)
            if all(final in c.applied(i) for i in c.ids):
                return
            leader = c.leader()
            if leader is None:
                continue
            core = c.core(leader)
            if proposed_by != (leader, core.term):
                try:
                    core.propose(final)
                except NotLeader:
                    continue
                proposed_by = (leader, core.term)
                c.flush(leader)
        status = {i: c.core(i).status() for i in c.ids}
        raise AssertionError(f"seed {self.seed}: no progress after healing: {status}")
