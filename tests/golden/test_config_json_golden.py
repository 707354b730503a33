"""Golden text of the broker's config JSON files (store.md section 7), compact forms, and
round-trips."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from rocketpy.remoting.protocol.body.config_shapes import (
    ConsumerOffsetTable,
    DataVersion,
    DelayOffsetTable,
    SubscriptionGroupConfig,
    SubscriptionGroupTable,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicFilterType,
    decode_consumer_offsets,
    decode_data_version,
    decode_delay_offsets,
    decode_subscription_groups,
    decode_topics,
    encode_consumer_offsets,
    encode_data_version,
    encode_delay_offsets,
    encode_subscription_groups,
    encode_topics,
)

HERE = Path(__file__).parent / "config_json"
TS = 1_700_000_000_000

TOPICS = TopicConfigSerializeWrapper(
    topic_config_table={
        "TopicTest": TopicConfig(topic_name="TopicTest", read_queue_nums=4, write_queue_nums=4),
        "TBW102": TopicConfig(
            topic_name="TBW102",
            read_queue_nums=8,
            write_queue_nums=8,
            perm=7,
            attributes={"+message.type": "NORMAL"},
        ),
    },
    data_version=DataVersion(timestamp=TS, counter=12),
)
OFFSETS = ConsumerOffsetTable(
    offset_table={"TopicTest@group1": {0: 250, 1: 251}},
    data_version=DataVersion(timestamp=TS, counter=3),
)
DELAY = DelayOffsetTable(
    offset_table={1: 0, 2: 15, 3: 7}, data_version=DataVersion(timestamp=TS, counter=5)
)
GROUPS = SubscriptionGroupTable(
    subscription_group_table={"group1": SubscriptionGroupConfig(group_name="group1")},
    data_version=DataVersion(timestamp=TS, counter=1),
)


def _golden(name: str) -> str:
    return (HERE / name).read_text(encoding="utf-8")


def test_config_json_topics_golden() -> None:
    """topics.json: encode == golden text; decode(golden) == value."""
    assert encode_topics(TOPICS) == _golden("topics.json")
    assert decode_topics(_golden("topics.json")) == TOPICS


def test_config_json_consumer_offsets_golden() -> None:
    """consumerOffset.json with unquoted queue ids and fastjson's line break before '}'."""
    assert encode_consumer_offsets(OFFSETS) == _golden("consumerOffset.json")
    assert decode_consumer_offsets(_golden("consumerOffset.json")) == OFFSETS


def test_config_json_delay_offsets_golden() -> None:
    """delayOffset.json: integer level keys."""
    assert encode_delay_offsets(DELAY) == _golden("delayOffset.json")
    assert decode_delay_offsets(_golden("delayOffset.json")) == DELAY


def test_config_json_subscription_groups_golden() -> None:
    """subscriptionGroup.json with upstream defaults (groupRetryPolicy CUSTOMIZED)."""
    assert encode_subscription_groups(GROUPS) == _golden("subscriptionGroup.json")
    assert decode_subscription_groups(_golden("subscriptionGroup.json")) == GROUPS


def test_config_json_compact_forms() -> None:
    """Compact output (RemotingSerializable.encode) matches the Java probes quoted in
    codes.md section 5 and the published SubscriptionGroupConfig probe."""
    version_json = b'{"counter":12,"stateVersion":0,"timestamp":1700000000000}'
    assert encode_data_version(DataVersion(timestamp=TS, counter=12)) == version_json
    assert decode_data_version(version_json) == DataVersion(timestamp=TS, counter=12)
    assert encode_topics(TOPICS, pretty=False).startswith(
        '{"dataVersion":{"counter":12,"stateVersion":0,"timestamp":1700000000000},'
        '"topicConfigTable":{"TopicTest":{"attributes":{},"order":false,"perm":6,'
        '"readQueueNums":4,"topicFilterType":"SINGLE_TAG","topicName":"TopicTest",'
        '"topicSysFlag":0,"writeQueueNums":4},'
    )
    assert encode_subscription_groups(GROUPS, pretty=False).endswith(
        '"subscriptionGroupTable":{"group1":{"attributes":{},"brokerId":0,'
        '"consumeBroadcastEnable":true,"consumeEnable":true,"consumeFromMinEnable":true,'
        '"consumeMessageOrderly":false,"consumeTimeoutMinute":15,"groupName":"group1",'
        '"groupRetryPolicy":{"type":"CUSTOMIZED"},"groupSysFlag":0,'
        '"notifyConsumerIdsChangedEnable":true,"retryMaxTimes":16,"retryQueueNums":1,'
        '"whichBrokerWhenConsumeSlowly":1}}}'
    )
    assert encode_consumer_offsets(OFFSETS, pretty=False).endswith(
        '"groupTopicMap":{"group1":["TopicTest"]},"offsetTable":{"TopicTest@group1":{0:250,1:251}}}'
    )


def test_config_json_reads_49_files() -> None:
    """4.9 files: DataVersion without stateVersion, TopicConfig without attributes,
    consumerOffset.json without dataVersion, quoted integer keys from other writers."""
    topics = decode_topics(
        '{"dataVersion":{"counter":2,"timestamp":1393729865073},"topicConfigTable":{"T":'
        '{"order":false,"perm":6,"readQueueNums":8,"topicFilterType":"SINGLE_TAG",'
        '"topicName":"T","topicSysFlag":0,"writeQueueNums":8}}}'
    )
    assert topics.data_version == DataVersion(timestamp=1393729865073, counter=2)
    assert topics.topic_config_table["T"].attributes == {}
    offsets = decode_consumer_offsets('{"offsetTable":{"T@g":{"0":5}}}')
    assert offsets == ConsumerOffsetTable(offset_table={"T@g": {0: 5}}, data_version=None)


def test_config_json_topic_config_text() -> None:
    """TopicConfig.encode()/decode() text form used in compressed REGISTER_BROKER bodies."""
    topic = TopicConfig(
        topic_name="T",
        read_queue_nums=4,
        write_queue_nums=2,
        perm=6,
        topic_filter_type=TopicFilterType.MULTI_TAG,
        attributes={"+message.type": "FIFO"},
    )
    text = topic.encode_text()
    assert text == 'T 4 2 6 MULTI_TAG {"+message.type":"FIFO"}'
    assert TopicConfig.decode_text(text) == topic
    assert TopicConfig.decode_text("T 4 2 6 SINGLE_TAG") == TopicConfig(
        topic_name="T", read_queue_nums=4, write_queue_nums=2
    )


_names = st.text(
    alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E, exclude_characters="@"),
    min_size=1,
    max_size=12,
)
_i64 = st.integers(0, 2**63 - 1)
_versions = st.builds(DataVersion, timestamp=_i64, counter=_i64, state_version=_i64)
_topics = st.builds(
    TopicConfig,
    topic_name=_names,
    read_queue_nums=st.integers(0, 1024),
    write_queue_nums=st.integers(0, 1024),
    perm=st.integers(0, 7),
    topic_filter_type=st.sampled_from(TopicFilterType),
    topic_sys_flag=st.integers(0, 255),
    order=st.booleans(),
    attributes=st.dictionaries(_names, _names, max_size=3),
)


@given(st.lists(_topics, max_size=4), _versions, st.booleans())
def test_config_json_topics_round_trip(
    topics: list[TopicConfig], version: DataVersion, pretty: bool
) -> None:
    """decode(encode(wrapper)) == wrapper, pretty or compact."""
    wrapper = TopicConfigSerializeWrapper(
        topic_config_table={t.topic_name: t for t in topics}, data_version=version
    )
    assert decode_topics(encode_topics(wrapper, pretty=pretty)) == wrapper


@given(
    st.dictionaries(
        st.tuples(_names, _names).map("@".join),
        st.dictionaries(st.integers(0, 1023), _i64, max_size=4),
        max_size=4,
    ),
    st.one_of(st.none(), _versions),
    st.booleans(),
)
def test_config_json_consumer_offsets_round_trip(
    table: dict[str, dict[int, int]], version: DataVersion | None, pretty: bool
) -> None:
    """decode(encode(offsets)) == offsets (integer queue ids survive unquoted)."""
    offsets = ConsumerOffsetTable(offset_table=table, data_version=version)
    assert decode_consumer_offsets(encode_consumer_offsets(offsets, pretty=pretty)) == offsets


@given(st.lists(_names, max_size=3, unique=True), _versions, st.booleans())
def test_config_json_subscription_groups_round_trip(
    names: list[str], version: DataVersion, pretty: bool
) -> None:
    """decode(encode(groups)) == groups, including subscriptionDataSet and forbiddenTable."""
    table = SubscriptionGroupTable(
        subscription_group_table={
            n: SubscriptionGroupConfig(
                group_name=n,
                retry_max_times=3,
                subscription_data_set=({"expression": "*", "topic": n},),
            )
            for n in names
        },
        data_version=version,
        forbidden_table={n: {"T": 2} for n in names},
    )
    assert decode_subscription_groups(encode_subscription_groups(table, pretty=pretty)) == table
