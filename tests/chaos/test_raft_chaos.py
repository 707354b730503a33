"""Long randomized Raft run (``-m chaos``): ROCKETPY_RAFT_SCHEDULES schedules (default 10,000),
starting at ROCKETPY_RAFT_SEED (default 1,000,000, disjoint from the fast suite's seeds)."""

from __future__ import annotations

import os

import pytest

from tests.helpers.raft_sim import Schedule

pytestmark = pytest.mark.chaos


def test_raft_chaos_schedules() -> None:
    """1. Run the configured number of seeded schedules. Expected: every one is safe at every
    step and live after healing; a failure names its seed (re-run it with
    ``Schedule(seed).run()``)."""
    count = int(os.environ.get("ROCKETPY_RAFT_SCHEDULES", "10000"))
    start = int(os.environ.get("ROCKETPY_RAFT_SEED", "1000000"))
    committed = 0
    for seed in range(start, start + count):
        try:
            committed += Schedule(seed).run().committed
        except AssertionError as e:
            raise AssertionError(f"schedule seed {seed} failed: {e}") from e
    assert committed > count
