"""TopicConfigManager: built-in topics, TBW102 auto-creation, retry/DLQ creation, persistence."""

from __future__ import annotations

import asyncio
from pathlib import Path

from rocketpy.broker.config import BrokerConfig
from rocketpy.broker.config_files import topics_path
from rocketpy.broker.topic_config import TopicConfigManager
from rocketpy.common.clock import ManualClock
from rocketpy.remoting.protocol.body.config_shapes import TopicConfig


def _cfg(**extra: object) -> BrokerConfig:
    values: dict[str, object] = {
        "brokerName": "broker-a",
        "brokerClusterName": "c1",
        "brokerIP1": "127.0.0.1",
    }
    values.update(extra)
    return BrokerConfig.build(values)


def _get(mgr: TopicConfigManager, topic: str) -> TopicConfig:
    found = mgr.select(topic)
    assert found is not None, topic
    return found


def test_topic_config_builtin_topics(tmp_path: Path) -> None:
    """Expected: TBW102 with 8 queues and perm 7, SCHEDULE_TOPIC_XXXX with 18, the cluster and
    broker-name topics inheritable and R/W, SELF_TEST_TOPIC 1 queue; no TBW102 when auto-create
    is off."""
    mgr = TopicConfigManager(_cfg(), tmp_path)
    tbw = _get(mgr, "TBW102")
    assert (tbw.read_queue_nums, tbw.write_queue_nums, tbw.perm) == (8, 8, 7)
    assert _get(mgr, "SCHEDULE_TOPIC_XXXX").read_queue_nums == 18
    assert _get(mgr, "c1").perm == 7
    assert _get(mgr, "broker-a").write_queue_nums == 1
    assert mgr.is_system_topic("SELF_TEST_TOPIC")
    assert not mgr.is_system_topic("TopicTest")
    assert TopicConfigManager(_cfg(autoCreateTopicEnable=False), tmp_path).select("TBW102") is None


def test_topic_config_create_in_send_inherits_from_tbw102(tmp_path: Path) -> None:
    """1. Send to unknown T with defaultTopic TBW102 and client queue nums 4.
    Expected: T created with min(4, 8) = 4 queues, perm 6 (INHERIT cleared), one change
    notification, DataVersion counter advanced; a second call returns the same config."""
    changes: list[int] = []
    mgr = TopicConfigManager(
        _cfg(), tmp_path, clock=ManualClock(), on_change=lambda: changes.append(1)
    )
    before = mgr.data_version.counter
    created = mgr.create_in_send("T", "TBW102", 4, 0, "127.0.0.1:1")
    assert created == TopicConfig(topic_name="T", read_queue_nums=4, write_queue_nums=4, perm=6)
    assert mgr.create_in_send("T", "TBW102", 4, 0, "127.0.0.1:1") is created
    assert changes == [1]
    assert mgr.data_version.counter == before + 1


def test_topic_config_create_in_send_refused_without_inherit(tmp_path: Path) -> None:
    """1. Auto-create off, but a TBW102 with perm 7 loaded from an older topics.json.
    Expected: TBW102 is treated as R/W only (perm 6) and T is not created; an unknown default
    topic creates nothing either."""
    mgr = TopicConfigManager(_cfg(autoCreateTopicEnable=False), tmp_path)
    mgr.update(TopicConfig(topic_name="TBW102", read_queue_nums=8, write_queue_nums=8, perm=7))
    assert mgr.create_in_send("T", "TBW102", 4, 0, "peer") is None
    assert _get(mgr, "TBW102").perm == 6
    assert mgr.create_in_send("T", "NoSuchDefault", 4, 0, "peer") is None
    assert mgr.select("T") is None


def test_topic_config_send_back_creates_retry_topic_once(tmp_path: Path) -> None:
    """%RETRY%g is created with the given queue count and perm; a second call is a no-op."""
    changes: list[int] = []
    mgr = TopicConfigManager(_cfg(), tmp_path, on_change=lambda: changes.append(1))
    retry = mgr.create_in_send_back("%RETRY%g", 1, 6)
    assert (retry.read_queue_nums, retry.perm, retry.order) == (1, 6, False)
    assert mgr.create_in_send_back("%RETRY%g", 3, 6) is retry
    assert changes == [1]


async def test_topic_config_persist_and_reload(tmp_path: Path) -> None:
    """1. Create T and delete nothing; persist. 2. A new manager loads topics.json.
    Expected: T and the DataVersion survive; a deleted topic stays deleted after reload."""
    mgr = TopicConfigManager(_cfg(), tmp_path)
    mgr.create_in_send("T", "TBW102", 4, 0, "peer")
    mgr.update(TopicConfig(topic_name="Gone"))
    assert mgr.delete("Gone")
    assert not mgr.delete("Gone")
    async with asyncio.timeout(5):
        await mgr.persist()
        again = TopicConfigManager(_cfg(), tmp_path)
        await again.load()
    assert topics_path(tmp_path).exists()
    assert again.select("T") == mgr.select("T")
    assert again.select("Gone") is None
    assert again.data_version == mgr.data_version
