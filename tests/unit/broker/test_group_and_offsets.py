"""SubscriptionGroupManager and ConsumerOffsetManager: auto-creation, commits, resets, files."""

from __future__ import annotations

import asyncio
from pathlib import Path

from rocketpy.broker.config import BrokerConfig
from rocketpy.broker.config_files import consumer_offset_path
from rocketpy.broker.offsets import ConsumerOffsetManager
from rocketpy.broker.subscription_group import SubscriptionGroupManager
from rocketpy.remoting.protocol.body.config_shapes import SubscriptionGroupConfig


def _cfg(**extra: object) -> BrokerConfig:
    return BrokerConfig.build({"brokerName": "b", "brokerIP1": "127.0.0.1", **extra})


def test_subscription_group_auto_create_rules(tmp_path: Path) -> None:
    """1. find() an unknown legal group with auto-create on -> created with upstream defaults.
    2. Auto-create off: unknown groups are not created, except CID_RMQ_SYS_ groups.
    3. Illegal names are never created."""
    changes: list[int] = []
    mgr = SubscriptionGroupManager(_cfg(), tmp_path, on_change=lambda: changes.append(1))
    g = mgr.find("g1")
    assert g == SubscriptionGroupConfig(group_name="g1")
    assert (g.retry_max_times, g.retry_queue_nums) == (16, 1)
    assert changes == [1]
    assert mgr.find("bad group!") is None
    off = SubscriptionGroupManager(_cfg(autoCreateSubscriptionGroup=False), tmp_path)
    assert off.find("g1") is None
    assert off.find("CID_RMQ_SYS_X") is not None
    assert off.contains("TOOLS_CONSUMER")


async def test_subscription_group_update_delete_persist(tmp_path: Path) -> None:
    """Update sets retryMaxTimes; delete removes; the file reloads to the same table."""
    mgr = SubscriptionGroupManager(_cfg(), tmp_path)
    mgr.update(SubscriptionGroupConfig(group_name="g", retry_max_times=2))
    mgr.update(SubscriptionGroupConfig(group_name="gone"))
    assert mgr.delete("gone")
    async with asyncio.timeout(5):
        await mgr.persist()
        again = SubscriptionGroupManager(_cfg(), tmp_path)
        await again.load()
    found = again.get("g")
    assert found is not None
    assert found.retry_max_times == 2
    assert again.get("gone") is None


async def test_consumer_offsets_commit_query_persist(tmp_path: Path) -> None:
    """1. Commit offsets for two queues (the second one twice, going backwards).
    2. Persist and reload.
    Expected: last commit wins (no monotonic check); -1 for unknown queues; the file uses
    Java's `topic@group` keys; derived topic/group lookups work."""
    mgr = ConsumerOffsetManager(tmp_path)
    mgr.commit_offset("peer", "g", "T", 0, 10)
    mgr.commit_offset("peer", "g", "T", 1, 7)
    mgr.commit_offset("peer", "g", "T", 1, 5)
    assert mgr.query_offset("g", "T", 1) == 5
    assert mgr.query_offset("g", "T", 2) == -1
    async with asyncio.timeout(5):
        await mgr.persist_if_dirty()
        again = ConsumerOffsetManager(tmp_path)
        await again.load()
    assert '"T@g":{0:10,1:5' in consumer_offset_path(tmp_path).read_text()
    assert again.query_offsets("g", "T") == {0: 10, 1: 5}
    assert again.which_topic_by_consumer("g") == {"T"}
    again.remove_group("g")
    assert again.query_offset("g", "T", 0) == -1


def test_consumer_offsets_server_side_reset_blocks_commits() -> None:
    """1. Reset queue 0 to 3. 2. A client commits 9 (stale). 3. The next pull takes the reset.
    Expected: the commit is ignored while the reset is pending; the reset is handed out once;
    afterwards commits apply again."""
    mgr = ConsumerOffsetManager(Path("/nonexistent"))
    mgr.commit_offset("p", "g", "T", 0, 8)
    mgr.assign_reset_offset("T", "g", 0, 3)
    assert mgr.query_offset("g", "T", 0) == 3
    mgr.commit_offset("p", "g", "T", 0, 9)
    assert mgr.query_offset("g", "T", 0) == 3
    assert mgr.has_offset_reset("T", "g", 0)
    assert mgr.query_then_erase_reset_offset("T", "g", 0) == 3
    assert mgr.query_then_erase_reset_offset("T", "g", 0) is None
    mgr.commit_offset("p", "g", "T", 0, 4)
    assert mgr.query_offset("g", "T", 0) == 4
