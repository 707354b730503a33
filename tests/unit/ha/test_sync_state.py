"""SyncStateTracker: expand, shrink, union while synchronizing, confirm offset (ha.md 3.7)."""

from __future__ import annotations

from rocketpy.ha.autoswitch.sync_state import ExpandCheck, SyncStateTracker


def _check(slave: int, off: int, *, learner: bool = False, last_max: int = 100) -> ExpandCheck:
    return ExpandCheck(slave_id=slave, slave_max_offset=off, is_async_learner=learner,
                       last_master_max_offset=last_max, confirm_offset=50,
                       current_epoch_start=80)  # fmt: skip


def test_sync_state_expand_conditions() -> None:
    """1. Reports from slave 2 below the last sent max, from an async learner, then caught up.
    Expected: only the caught-up, non-learner report proposes {1, 2}; the effective set is the
    union while synchronizing; the controller's answer clears the proposal."""
    t = SyncStateTracker(1, 15000)
    assert t.maybe_expand(_check(2, 99)) is None
    assert t.maybe_expand(_check(3, 100, learner=True)) is None
    assert t.maybe_expand(_check(2, 100)) == frozenset({1, 2})
    assert t.is_synchronizing
    assert t.sync_state_set == frozenset({1})
    assert t.effective() == frozenset({1, 2})
    assert t.maybe_expand(_check(2, 120)) is None  # already in the effective set
    t.set_sync_state_set(frozenset({1, 2}))
    assert not t.is_synchronizing
    assert t.effective() == frozenset({1, 2})


def test_sync_state_expand_needs_current_epoch() -> None:
    """1. A slave report at 79 when the last epoch starts at 80 (last sent max 0).
    Expected: not added."""
    t = SyncStateTracker(1, 15000)
    assert t.maybe_expand(_check(2, 79, last_max=0)) is None


def test_sync_state_shrink_lagging_and_disconnected() -> None:
    """1. Set {1, 2, 3}; slave 2 caught up at t=10000, slave 3 at t=1000.
    2. Shrink at t=17000 with both connected, then with 2 disconnected.
    Expected: 3 is removed first (older than 15 s); then 2 (no connection); the master stays."""
    t = SyncStateTracker(1, 15000)
    t.set_sync_state_set(frozenset({1, 2, 3}))
    t.update_caught_up(2, 10000)
    t.update_caught_up(3, 1000)
    assert t.maybe_shrink(17000, frozenset({2, 3})) == frozenset({1, 2})
    t.set_sync_state_set(frozenset({1, 2}))
    assert t.maybe_shrink(17000, frozenset({2})) is None
    assert t.maybe_shrink(17000, frozenset()) == frozenset({1})


def test_sync_state_refused_expansion_is_proposed_again() -> None:
    """1. Set {1}; slave 2 catches up: {1, 2} is proposed; the controller refuses it (the
    answer never comes, so the proposal stays pending).
    2. A later report of slave 2. Expected: nothing (2 is in the effective set).
    3. The periodic check with 2 connected and caught up. Expected: {1, 2} is proposed again;
    once committed, the check proposes nothing."""
    t = SyncStateTracker(1, 15000)
    assert t.maybe_expand(_check(2, 100)) == frozenset({1, 2})
    assert t.maybe_expand(_check(2, 120)) is None
    t.update_caught_up(2, 10000)
    assert t.maybe_shrink(11000, frozenset({2})) == frozenset({1, 2})
    assert t.effective() == frozenset({1, 2})
    t.set_sync_state_set(frozenset({1, 2}))
    assert t.maybe_shrink(11500, frozenset({2})) is None


def test_sync_state_confirm_offset() -> None:
    """1. Set {1, 2, 3}; acks 2 -> 500, 3 -> 300; then 3 disconnected; then 3 acked 0.
    Expected: min ack 300; unchanged previous (300) while 3 has no connection (#6662);
    a zero ack is ignored (min over acks > 0: 500)."""
    t = SyncStateTracker(1, 15000)
    t.set_sync_state_set(frozenset({1, 2, 3}))
    assert t.compute_confirm_offset(1000, {2: 500, 3: 300}, 0) == 300
    assert t.compute_confirm_offset(1000, {2: 500}, 300) == 300
    assert t.compute_confirm_offset(1000, {2: 500, 3: 0}, 300) == 500
    t.set_sync_state_set(frozenset({1}))
    assert t.compute_confirm_offset(1000, {}, 300) == 1000
