"""RebalanceLockManager: grant, renew, conflict, expiry, unlock (client-flows.md section 4.5)."""

from __future__ import annotations

from rocketpy.broker.rebalance_lock import RebalanceLockManager
from rocketpy.common.clock import ManualClock
from rocketpy.remoting.protocol.body.broker import MessageQueue

Q0 = MessageQueue(topic="T", broker_name="b", queue_id=0)
Q1 = MessageQueue(topic="T", broker_name="b", queue_id=1)


def test_rebalance_lock_grant_conflict_expiry() -> None:
    """1. c1 locks {Q0, Q1}. 2. c2 asks for {Q1}. 3. 61 s pass without renewal. 4. c2 asks again.
    Expected: c1 gets both; c2 gets nothing while the lease lives and the group is not
    'all expired'; after the lease c2 takes Q1 and c1's re-lock only keeps Q0."""
    clock = ManualClock()
    mgr = RebalanceLockManager(max_live_time_ms=60_000, clock=clock)
    assert mgr.is_lock_all_expired("g")
    assert mgr.try_lock_batch("g", [Q0, Q1], "c1") == [Q0, Q1]
    assert mgr.try_lock_batch("g", [Q1], "c2") == []
    assert not mgr.is_lock_all_expired("g")
    clock.advance(30_000)
    assert mgr.try_lock_batch("g", [Q0], "c1") == [Q0]  # renews Q0 only
    clock.advance(31_000)
    assert mgr.try_lock_batch("g", [Q1], "c2") == [Q1]
    assert mgr.try_lock_batch("g", [Q0, Q1], "c1") == [Q0]
    assert mgr.is_locked("g", Q1, "c2")


def test_rebalance_lock_unlock_only_own_locks() -> None:
    """Unlocking a queue held by another client leaves it locked; own locks are released."""
    mgr = RebalanceLockManager(clock=ManualClock())
    mgr.try_lock_batch("g", [Q0], "c1")
    mgr.unlock_batch("g", [Q0], "c2")
    assert mgr.is_locked("g", Q0, "c1")
    mgr.unlock_batch("g", [Q0, Q1], "c1")
    assert not mgr.is_locked("g", Q0, "c1")
    assert mgr.is_lock_all_expired("g")
