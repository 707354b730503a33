"""The orderly-POP table (ConsumerOrderInfoManager) and the revive's retry message, without a
broker: blocking, re-pop counts, in-order commits, the JSON file, and reviveRetry's fields."""

from __future__ import annotations

from pathlib import Path

from rocketpy.broker.config import BrokerConfig
from rocketpy.broker.order_info import ConsumerOrderInfoManager, decode_table, encode_table
from rocketpy.broker.pop_revive import FIRST_POP_TIME, ORIGIN_GROUP, revive_message
from rocketpy.broker.store_api import StoredMessage
from rocketpy.broker.topic_config import TopicConfigManager
from rocketpy.common.message.properties import decode_properties
from rocketpy.remoting.protocol import pop as codec


def test_order_info_blocks_until_acked_or_expired(tmp_path: Path) -> None:
    """1. Pop offsets 0,1 at t=1000 invisible 500 (attempt a1).
    Expected: another attempt is blocked before 1500, a1 is not; after 1500 nobody is; a re-pop
    of the same offsets by a new attempt counts 1, by the same attempt keeps the count; only
    non-zero counts are kept (upstream's offsetConsumedCount)."""
    m = ConsumerOrderInfoManager(tmp_path)
    assert m.update("a1", "T", "G", 0, 1000, 500, [0, 1]) == {}
    assert m.check_block("a2", "T", "G", 0, 500, 1200)
    assert not m.check_block("a1", "T", "G", 0, 500, 1200)
    assert not m.check_block("a2", "T", "G", 0, 500, 1500)
    assert m.update("a2", "T", "G", 0, 1600, 500, [0, 1]) == {0: 1, 1: 1}
    assert m.update("a2", "T", "G", 0, 1700, 500, [0, 1]) == {0: 1, 1: 1}
    assert m.update("a3", "T", "G", 0, 1800, 500, [1, 2]) == {1: 2}


def test_order_info_commits_only_up_to_the_first_unacked_offset(tmp_path: Path) -> None:
    """1. Pop offsets 4,5,6 at t=10. 2. Ack 5, then 4, then 6; an ack with another popTime.
    Expected: next offsets 4, 6, 7; the stale ack -2; an offset outside the batch -1; once all
    are acked the queue no longer blocks."""
    m = ConsumerOrderInfoManager(tmp_path)
    m.update(None, "T", "G", 1, 10, 60_000, [4, 5, 6])
    assert m.commit_and_next("T", "G", 1, 5, 10) == 4
    assert m.check_block(None, "T", "G", 1, 60_000, 20)
    assert m.commit_and_next("T", "G", 1, 4, 10) == 6
    assert m.commit_and_next("T", "G", 1, 6, 99) == -2
    assert m.commit_and_next("T", "G", 1, 9, 10) == -1
    assert m.commit_and_next("T", "G", 1, 6, 10) == 7
    assert not m.check_block(None, "T", "G", 1, 60_000, 20)
    assert m.commit_and_next("T", "G", 3, 8, 10) == 9  # no batch known: the next offset


def test_order_info_next_visible_time_and_file_round_trip(tmp_path: Path) -> None:
    """Expected: a changed invisible time moves the block's end; the table survives
    encode/decode with upstream's short names (offsets as first + differences)."""
    m = ConsumerOrderInfoManager(tmp_path)
    m.update("a", "T", "G", 0, 100, 50, [7, 9])
    m.update_next_visible_time("T", "G", 0, 7, 100, 1000)
    m.update_next_visible_time("T", "G", 0, 9, 100, 1000)
    assert m.check_block(None, "T", "G", 0, 50, 500)
    info = m.get("T", "G", 0)
    assert info is not None
    text = encode_table({"T@G": {0: info}})
    assert '"o":[7,2]' in text
    assert '"a":"a"' in text
    assert '"popTime":100' in text
    assert decode_table(text.encode()) == {"T@G": {0: info}}


async def test_order_info_persists_and_loads(tmp_path: Path) -> None:
    m = ConsumerOrderInfoManager(tmp_path)
    m.update("a", "T", "G", 2, 100, 50, [3])
    await m.persist()
    assert (tmp_path / "config" / "consumerOrderInfo.json").exists()
    again = ConsumerOrderInfoManager(tmp_path)
    await again.load()
    assert again.get("T", "G", 2) == m.get("T", "G", 2)


def _stored(topic: str, reconsume: int, props: dict[str, str]) -> StoredMessage:
    return StoredMessage(
        topic=topic, queue_id=3, queue_offset=8, commit_log_offset=800, size=100, flag=7,
        sys_flag=0, born_timestamp=55, born_host=("10.0.0.1", 1), store_timestamp=66,
        store_host=("10.0.0.2", 2), reconsume_times=reconsume, body=b"payload",
        properties=props,
    )  # fmt: skip


def test_revive_message_goes_to_the_pop_retry_topic_with_one_more_reconsume() -> None:
    """Expected: a normal-topic message goes to %RETRY%G_T queue 0 with RETRY_TOPIC, the first
    pop time and the origin group; one already in the retry topic stays there."""
    ck = codec.PopCheckPoint(
        start_offset=8, pop_time=1234, invisible_time=1, num=1, queue_id=3, topic="T", cid="G"
    )
    msg = revive_message(ck, _stored("T", 0, {"TAGS": "a"}), ("10.0.0.9", 9), v2=False)
    assert (msg.topic, msg.queue_id, msg.reconsume_times) == ("%RETRY%G_T", 0, 1)
    assert (msg.body, msg.flag, msg.born_timestamp) == (b"payload", 7, 55)
    props = decode_properties(msg.properties)
    assert props["RETRY_TOPIC"] == "T"
    assert props[FIRST_POP_TIME] == "1234"
    assert props[ORIGIN_GROUP] == "G"
    assert props["TAGS"] == "a"
    retry_ck = codec.PopCheckPoint(
        start_offset=0, pop_time=5, invisible_time=1, num=1, queue_id=0, topic="%RETRY%G_T",
        cid="G",
    )  # fmt: skip
    stored = _stored("%RETRY%G_T", 1, {"RETRY_TOPIC": "T", FIRST_POP_TIME: "1234"})
    again = revive_message(retry_ck, stored, ("h", 1), v2=False)
    assert (again.topic, again.reconsume_times) == ("%RETRY%G_T", 2)
    assert decode_properties(again.properties)[FIRST_POP_TIME] == "1234"
    assert revive_message(ck, _stored("T", 0, {}), ("h", 1), v2=True).topic == "%RETRY%G+T"


def test_revive_topic_is_a_builtin_system_topic(tmp_path: Path) -> None:
    """Expected: rmq_sys_REVIVE_LOG_<cluster> exists from the start with reviveQueueNum read
    and write queues (upstream's TopicConfigManager), as a system topic."""
    cfg = BrokerConfig.model_validate(
        {"brokerName": "broker-a", "brokerClusterName": "c1", "reviveQueueNum": 3}
    )
    mgr = TopicConfigManager(cfg, tmp_path)
    revive = mgr.select("rmq_sys_REVIVE_LOG_c1")
    assert revive is not None
    assert (revive.read_queue_nums, revive.write_queue_nums, revive.perm) == (3, 3, 6)
    assert mgr.is_system_topic("rmq_sys_REVIVE_LOG_c1")
