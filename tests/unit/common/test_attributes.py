"""Topic attribute parsing and alteration (``AttributeParser``, ``AttributeUtil``,
``TopicAttributes``) and topic message types (``TopicMessageType``,
``DefaultTopicMessageTypeValidator``)."""

from __future__ import annotations

import pytest

from rocketpy.common.attributes import (
    TOPIC_ATTRIBUTES,
    InvalidAttributeError,
    alter_current_attributes,
    parse_to_map,
    parse_to_string,
)
from rocketpy.common.topic_message_type import (
    TopicMessageType,
    parse_from_message_property,
    topic_message_type,
    validate,
)


def test_parse_to_map_keeps_signs_and_round_trips() -> None:
    """'+a=1,-b,+c=2' -> signed keys, '-b' with an empty value; parse_to_string inverts it."""
    parsed = parse_to_map("+message.type=FIFO,-reserve.time,+cleanup.policy=DELETE")
    assert parsed == {"+message.type": "FIFO", "-reserve.time": "", "+cleanup.policy": "DELETE"}
    assert parse_to_map(parse_to_string(parsed)) == parsed
    assert parse_to_map("") == {}
    assert parse_to_map(None) == {}
    assert parse_to_map("+a=1,") == {"+a": "1"}  # Java's split drops a trailing empty item


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("message.type=FIFO", "add/alter attribute format is wrong: message.type"),
        ("message.type", "delete attribute format is wrong: message.type"),
        ("+a=1,+a=2", "key duplication: +a"),
        ("+message.type=", "add/alter attribute value is missing: +message.type="),
        (",+a=1", "delete attribute format is wrong: "),
    ],
)
def test_parse_to_map_refuses_bad_items(text: str, message: str) -> None:
    """Each malformed item is refused with upstream's message."""
    with pytest.raises(InvalidAttributeError) as info:
        parse_to_map(text)
    assert str(info.value) == message


def test_alter_creates_updates_and_deletes() -> None:
    """1. Create with +message.type=FIFO and +queue.type=SimpleCQ (unchangeable, allowed at
    creation). 2. Update message.type to NORMAL and add reserve.time. 3. Delete message.type.
    Expected: each step's attributes as written; the input maps are not changed."""
    created = alter_current_attributes(
        True, TOPIC_ATTRIBUTES, {}, {"+message.type": "FIFO", "+queue.type": "SimpleCQ"}
    )
    assert created == {"message.type": "FIFO", "queue.type": "SimpleCQ"}
    updated = alter_current_attributes(
        False, TOPIC_ATTRIBUTES, created, {"+message.type": "NORMAL", "+reserve.time": "10"}
    )
    assert updated == {"message.type": "NORMAL", "queue.type": "SimpleCQ", "reserve.time": "10"}
    assert created == {"message.type": "FIFO", "queue.type": "SimpleCQ"}
    deleted = alter_current_attributes(False, TOPIC_ATTRIBUTES, updated, {"-message.type": ""})
    assert deleted == {"queue.type": "SimpleCQ", "reserve.time": "10"}
    assert alter_current_attributes(False, TOPIC_ATTRIBUTES, deleted, {}) == deleted


@pytest.mark.parametrize(
    ("create", "current", "modification", "message"),
    [
        (True, {}, {"-message.type": ""}, "only add attribute is supported while creating topic. "
         "key: message.type"),
        (False, {}, {"+color": "red"}, "unsupported key: color"),
        (False, {}, {"+message.type": "FAST"}, "value is not in set: [DELAY, FIFO, MIXED, "
         "NORMAL, TRANSACTION, UNSPECIFIED]"),
        (False, {}, {"-message.type": ""}, "attempt to delete a nonexistent key: message.type"),
        (False, {"queue.type": "SimpleCQ"}, {"+queue.type": "BatchCQ"},
         "attempt to update an unchangeable attribute. key: queue.type"),
        (False, {}, {"+reserve.time": "-2"}, "value is not in range(-1, 9223372036854775807)"),
        (False, {}, {"+reserve.time": " 5"}, 'For input string: " 5"'),
        (False, {}, {"+message.type": "FIFO", "-message.type": ""},
         "alter duplication key. key: message.type"),
        (False, {}, {"+": "x"}, "kv string format wrong."),
        (False, {}, {"*message.type": "FIFO"}, "wrong format key: message.type"),
    ],
)  # fmt: skip
def test_alter_refusals(
    create: bool, current: dict[str, str], modification: dict[str, str], message: str
) -> None:
    """Each refusal of ``alterCurrentAttributes`` with upstream's message."""
    with pytest.raises(InvalidAttributeError) as info:
        alter_current_attributes(create, TOPIC_ATTRIBUTES, current, modification)
    assert str(info.value) == message


@pytest.mark.parametrize(
    ("props", "expected"),
    [
        ({"TRAN_MSG": "true", "DELAY": "3"}, TopicMessageType.TRANSACTION),
        ({"TRAN_MSG": "false"}, TopicMessageType.NORMAL),
        ({"DELAY": "3", "__SHARDINGKEY": "g"}, TopicMessageType.DELAY),
        ({"TIMER_DELIVER_MS": "1"}, TopicMessageType.DELAY),
        ({"TIMER_DELAY_SEC": "1"}, TopicMessageType.DELAY),
        ({"TIMER_DELAY_MS": "1"}, TopicMessageType.DELAY),
        ({"__SHARDINGKEY": "g"}, TopicMessageType.FIFO),
        ({"TAGS": "a"}, TopicMessageType.NORMAL),
    ],
)
def test_parse_from_message_property(props: dict[str, str], expected: TopicMessageType) -> None:
    """``parseFromMessageProperty``'s precedence: transaction, delay, FIFO, normal."""
    assert parse_from_message_property(props) is expected


def test_topic_message_type_and_validate() -> None:
    """No attribute -> NORMAL; a bad value -> UNSPECIFIED. MIXED takes every type but
    UNSPECIFIED; any other topic type takes only itself."""
    assert topic_message_type({}) is TopicMessageType.NORMAL
    assert topic_message_type({"message.type": "FIFO"}) is TopicMessageType.FIFO
    assert topic_message_type({"message.type": "fifo"}) is TopicMessageType.UNSPECIFIED
    fifo, normal = TopicMessageType.FIFO, TopicMessageType.NORMAL
    assert validate(fifo, fifo) is None
    assert validate(TopicMessageType.MIXED, TopicMessageType.DELAY) is None
    assert validate(fifo, normal) == (
        "TopicMessageType validate failed, the expected type is FIFO, but actual type is NORMAL"
    )
    assert validate(TopicMessageType.UNSPECIFIED, normal) is not None
    assert validate(TopicMessageType.MIXED, TopicMessageType.UNSPECIFIED) is not None
