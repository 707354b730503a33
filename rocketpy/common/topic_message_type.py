"""Topic message types: what a topic accepts (its ``message.type`` attribute) and what kind a
message is, judged from its properties.

Owns: :class:`TopicMessageType`, :func:`parse_from_message_property`, :func:`topic_message_type`
(``TopicConfig.getTopicMessageType``) and :func:`validate` (``DefaultTopicMessageTypeValidator``
with its remark). Mirrors ``common/attribute/TopicMessageType``,
``common/TopicConfig.getTopicMessageType`` and
``proxy/processor/validator/DefaultTopicMessageTypeValidator`` (5.3.x). Must not: look up
topics or answer requests (``broker/message_type_check.py`` does, and a proxy will). Pure.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Final

from rocketpy.common.message.const import MessageConst

MESSAGE_TYPE_KEY: Final = "message.type"  # TopicAttributes.TOPIC_MESSAGE_TYPE_ATTRIBUTE
TIMER_DELIVER_MS: Final = "TIMER_DELIVER_MS"  # MessageConst.PROPERTY_TIMER_DELIVER_MS
TIMER_DELAY_SEC: Final = "TIMER_DELAY_SEC"
TIMER_DELAY_MS: Final = "TIMER_DELAY_MS"
SHARDING_KEY: Final = "__SHARDINGKEY"
TRANSFER_FLAG: Final = "TRANSFER_FLAG"


class TopicMessageType(enum.StrEnum):
    """``TopicMessageType``; the value is what ``message.type`` holds."""

    UNSPECIFIED = "UNSPECIFIED"
    NORMAL = "NORMAL"
    FIFO = "FIFO"
    DELAY = "DELAY"
    TRANSACTION = "TRANSACTION"
    MIXED = "MIXED"


def parse_from_message_property(props: Mapping[str, str]) -> TopicMessageType:
    """``TopicMessageType.parseFromMessageProperty``: TRAN_MSG=true -> TRANSACTION; DELAY or a
    timer property -> DELAY; a sharding key -> FIFO; else NORMAL."""
    if props.get(MessageConst.TRAN_MSG) == "true":
        return TopicMessageType.TRANSACTION
    if (
        MessageConst.DELAY in props
        or TIMER_DELIVER_MS in props
        or TIMER_DELAY_SEC in props
        or TIMER_DELAY_MS in props
    ):
        return TopicMessageType.DELAY
    if SHARDING_KEY in props:
        return TopicMessageType.FIFO
    return TopicMessageType.NORMAL


def topic_message_type(attributes: Mapping[str, str]) -> TopicMessageType:
    """``TopicConfig.getTopicMessageType``: the attribute, NORMAL when absent. A value outside
    the enum (a hand-edited ``topics.json``) reads as UNSPECIFIED, which no message matches;
    upstream throws from ``valueOf`` there."""
    value = attributes.get(MESSAGE_TYPE_KEY)
    if value is None:
        return TopicMessageType.NORMAL
    try:
        return TopicMessageType(value)
    except ValueError:
        return TopicMessageType.UNSPECIFIED


def validate(expected: TopicMessageType, actual: TopicMessageType) -> str | None:
    """``DefaultTopicMessageTypeValidator.validate``: None when a message of type ``actual``
    may go to a topic of type ``expected``, else upstream's remark. MIXED accepts every type;
    an UNSPECIFIED message (or topic, other than MIXED) never matches."""
    if actual is TopicMessageType.UNSPECIFIED or (
        actual is not expected and expected is not TopicMessageType.MIXED
    ):
        return (
            f"TopicMessageType validate failed, the expected type is {expected.value}, "
            f"but actual type is {actual.value}"
        )
    return None
