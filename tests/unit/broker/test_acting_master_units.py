"""Pure pieces of slave acting master: reverse-sync merges and escape target choice."""

from __future__ import annotations

from pathlib import Path

from rocketpy.broker.escape_bridge import escape_targets
from rocketpy.broker.offsets import ConsumerOffsetManager
from rocketpy.client.admin import BrokerInfo, QueueInfo, TopicRoute
from rocketpy.common.clock import ManualClock
from rocketpy.remoting.protocol.body.config_shapes import ConsumerOffsetTable, DataVersion


def test_offsets_merge_newer_never_goes_backwards(tmp_path: Path) -> None:
    """1. The master has offsets q0=7, q1=3 at DataVersion counter 0.
    2. Merge the slave's table q0=5, q1=9, q2=4 with counter 2.
    Expected: q0 stays 7, q1 becomes 9, q2 becomes 4 (2 queues raised) and the master adopts
    the slave's newer DataVersion."""
    offsets = ConsumerOffsetManager(tmp_path, clock=ManualClock())
    offsets.commit_offset("c", "g", "T", 0, 7)
    offsets.commit_offset("c", "g", "T", 1, 3)
    newer = DataVersion(timestamp=5, counter=2)
    raised = offsets.merge_newer(
        ConsumerOffsetTable(offset_table={"T@g": {0: 5, 1: 9, 2: 4}}, data_version=newer)
    )
    assert raised == 2
    assert offsets.query_offsets("g", "T") == {0: 7, 1: 9, 2: 4}
    assert offsets.data_version == newer


def test_offsets_version_moves_every_step_commits(tmp_path: Path) -> None:
    """1. consumerOffsetUpdateVersionStep=3; commit five times. 2. Bump once by hand.
    Expected: the counter is 1 after the third commit (not before), 2 after the bump."""
    offsets = ConsumerOffsetManager(tmp_path, clock=ManualClock(), version_step=3)
    counters = []
    for i in range(5):
        offsets.commit_offset("c", "g", "T", 0, i)
        counters.append(offsets.data_version.counter)
    offsets.bump_data_version()
    assert counters == [0, 0, 1, 1, 1]
    assert offsets.data_version.counter == 2


def test_escape_targets_skip_own_set_and_read_only_queues() -> None:
    """1. A route with broker-a (own set, acting: id 1 shown as 0, perm 4), broker-b (master,
    perm 6) and broker-c (slave only, perm 6).
    Expected: only broker-b's master is a target, with its write queue count."""
    route = TopicRoute(
        queues=[
            QueueInfo("broker-a", 4, 4, 4),
            QueueInfo("broker-b", 2, 2, 6),
            QueueInfo("broker-c", 4, 4, 6),
        ],
        brokers=[
            BrokerInfo("c", "broker-a", {0: "a:1"}),
            BrokerInfo("c", "broker-b", {0: "b:1", 1: "b:2"}),
            BrokerInfo("c", "broker-c", {1: "c:2"}),
        ],
    )
    assert escape_targets(route, "broker-a") == [("broker-b", "b:1", 2)]
    assert escape_targets(route, "broker-b") == []
