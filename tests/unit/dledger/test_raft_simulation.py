"""Randomized Raft schedules (seeded): message loss, reordering, duplication, partitions,
crashes (also in the middle of persisting a Ready), restarts, compaction and leadership
transfers, with Election Safety, Log Matching, Leader Completeness and State Machine Safety
checked after every processed Ready, then liveness after healing.

The fast suite runs 300 schedules; ``tests/chaos/test_raft_chaos.py`` runs 10,000 or more.
"""

from __future__ import annotations

import pytest

from rocketpy.dledger.core import Role
from tests.helpers.raft_invariants import Checker, SafetyViolation
from tests.helpers.raft_net import Cluster
from tests.helpers.raft_sim import Schedule

CHUNK = 50


@pytest.mark.parametrize("chunk", range(6))
def test_raft_random_schedules_are_safe_and_live(chunk: int) -> None:
    """1. Run seeds [chunk*50, chunk*50+50) with faults; 2. heal; 3. commit a final entry.
    Expected: no safety violation at any step; every node applies the final entry; over the
    chunk faults really happened (crashes, several leaders) and entries were committed."""
    outcomes = [Schedule(seed).run() for seed in range(chunk * CHUNK, (chunk + 1) * CHUNK)]
    assert sum(o.crashes for o in outcomes) > CHUNK
    assert sum(o.leaders > 1 for o in outcomes) > CHUNK // 4
    assert sum(o.committed for o in outcomes) > 5 * CHUNK


def test_raft_checker_catches_two_leaders_in_one_term() -> None:
    """The checker itself: 1. elect a leader; 2. force a second node to believe it leads in
    the same term. Expected: SafetyViolation naming both."""
    c = Cluster(seed=1)
    checker = Checker()
    c.observers.append(checker)
    leader = c.elect()
    other = next(i for i in c.ids if i != leader)
    core = c.core(other)
    core.role = Role.LEADER
    core.term = c.core(leader).term
    with pytest.raises(SafetyViolation, match="two leaders"):
        checker(c, other)


def test_raft_checker_catches_divergent_applied_entries() -> None:
    """The checker itself: 1. commit and apply entries; 2. rewrite one applied payload on one
    node. Expected: SafetyViolation (state machine safety)."""
    c = Cluster(seed=2)
    checker = Checker()
    c.observers.append(checker)
    c.elect()
    c.propose(b"a")
    c.run(3)
    node = c.nodes["n2"]
    node.applied[-1] = (node.applied[-1][0], b"forged")
    checker.applied_seen.pop("n2")
    with pytest.raises(SafetyViolation, match="state machine safety"):
        checker(c, "n2")
