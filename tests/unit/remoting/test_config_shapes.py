"""DataVersion semantics and decoding errors of the config shapes."""

from __future__ import annotations

import pytest

from rocketpy.common.errors import CodecError
from rocketpy.remoting.protocol.body.config_shapes import (
    ConsumerOffsetTable,
    DataVersion,
    TopicConfig,
    decode_consumer_offsets,
    decode_data_version,
    decode_topics,
)


def test_data_version_next_version() -> None:
    """nextVersion: counter + 1, timestamp = now, stateVersion replaced (0 unless given)."""
    v0 = DataVersion(timestamp=100, counter=7, state_version=3)
    assert v0.next_version(200) == DataVersion(timestamp=200, counter=8, state_version=0)
    assert v0.next_version(300, state_version=5) == DataVersion(
        timestamp=300, counter=8, state_version=5
    )


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ((1, 0, 0), (0, 99, 99), 1),  # stateVersion first
        ((0, 2, 0), (0, 1, 99), 1),  # then counter
        ((0, 1, 5), (0, 1, 9), -1),  # then timestamp
        ((0, 1, 5), (0, 1, 5), 0),
    ],
)
def test_data_version_compare(
    a: tuple[int, int, int], b: tuple[int, int, int], expected: int
) -> None:
    """DataVersion.compare orders by (stateVersion, counter, timestamp)."""
    left = DataVersion(state_version=a[0], counter=a[1], timestamp=a[2])
    right = DataVersion(state_version=b[0], counter=b[1], timestamp=b[2])
    assert left.compare(right) == expected
    assert right.compare(left) == -expected


def test_data_version_equality_uses_all_fields() -> None:
    """Equality compares timestamp, counter and stateVersion (5.x DataVersion.equals)."""
    assert DataVersion(timestamp=1, counter=2) != DataVersion(
        timestamp=1, counter=2, state_version=1
    )


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ('{"counter":"x","timestamp":1}', "counter"),
        ('{"counter":true,"timestamp":1}', "counter"),
        ("[1,2]", "dataVersion"),
    ],
)
def test_data_version_decode_errors(text: str, field: str) -> None:
    """Wrong types raise CodecError naming the field."""
    with pytest.raises(CodecError, match=f"field={field}"):
        decode_data_version(text)


def test_data_version_accepts_numeric_string() -> None:
    """fastjson reads "12" into a long field; so do we."""
    assert decode_data_version('{"counter":"12","timestamp":"5"}') == DataVersion(
        timestamp=5, counter=12
    )


def test_topics_decode_errors() -> None:
    """An unknown topicFilterType, a non-object table entry and a bad queue-id key are
    CodecErrors naming the field."""
    with pytest.raises(CodecError, match="field=topicFilterType"):
        decode_topics('{"topicConfigTable":{"T":{"topicFilterType":"NOPE"}}}')
    with pytest.raises(CodecError, match="field=topicConfig"):
        decode_topics('{"topicConfigTable":{"T":5}}')
    with pytest.raises(CodecError, match="field=offsetTable"):
        decode_consumer_offsets('{"offsetTable":{"T@g":{"x":1}}}')


def test_topics_decode_uses_table_key_when_name_missing() -> None:
    """A topic object without topicName takes the table key (fields default as upstream)."""
    wrapper = decode_topics('{"topicConfigTable":{"T":{}}}')
    assert wrapper.topic_config_table["T"] == TopicConfig(topic_name="T")
    assert wrapper.data_version == DataVersion(timestamp=0)


def test_consumer_offsets_group_topic_map() -> None:
    """getGroupTopicMap: group -> topics from 'topic@group' keys; keys without exactly one
    '@' are left out."""
    table = ConsumerOffsetTable(
        offset_table={"A@g1": {}, "B@g1": {}, "A@g2": {}, "weird": {}, "x@y@z": {}}
    )
    assert table.group_topic_map() == {"g1": ["A", "B"], "g2": ["A"]}


def test_topic_config_decode_text_errors() -> None:
    """Fewer than five fields or a bad number in the text form are CodecErrors."""
    with pytest.raises(CodecError, match="5 fields"):
        TopicConfig.decode_text("T 4 4 6")
    with pytest.raises(CodecError, match="bad topic config"):
        TopicConfig.decode_text("T x 4 6 SINGLE_TAG")
