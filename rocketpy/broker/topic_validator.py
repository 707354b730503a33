"""Topic and group names: system topics, retry/DLQ naming, validation. Pure.

Owns: the reserved names and the checks the send, pull and admin paths apply. Mirrors
``common/topic/TopicValidator`` and the naming helpers of ``common/MixAll`` (``getRetryTopic``,
``getDLQTopic``, ``isSysConsumerGroup``). Decided (spec client-flows.md section 2.3, 5.x): an
invalid topic name answers INVALID_PARAMETER, and ``%RETRY%``/``%DLQ%`` topics may be up to 255
characters because group names may be (``Validators.CHARACTER_MAX_LENGTH``).
"""

from __future__ import annotations

import re
from typing import Final

AUTO_CREATE_TOPIC_KEY_TOPIC: Final = "TBW102"
RMQ_SYS_SCHEDULE_TOPIC: Final = "SCHEDULE_TOPIC_XXXX"
RMQ_SYS_BENCHMARK_TOPIC: Final = "BenchmarkTest"
RMQ_SYS_TRANS_HALF_TOPIC: Final = "RMQ_SYS_TRANS_HALF_TOPIC"
RMQ_SYS_TRANS_OP_HALF_TOPIC: Final = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC: Final = "TRANS_CHECK_MAX_TIME_TOPIC"
RMQ_SYS_SELF_TEST_TOPIC: Final = "SELF_TEST_TOPIC"
RMQ_SYS_OFFSET_MOVED_EVENT: Final = "OFFSET_MOVED_EVENT"
RMQ_SYS_TRACE_TOPIC: Final = "RMQ_SYS_TRACE_TOPIC"
SYSTEM_TOPIC_PREFIX: Final = "rmq_sys_"
REPLY_TOPIC_POSTFIX: Final = "REPLY_TOPIC"

RETRY_GROUP_TOPIC_PREFIX: Final = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX: Final = "%DLQ%"
SYS_CONSUMER_GROUP_PREFIX: Final = "CID_RMQ_SYS_"
TOPIC_MAX_LENGTH: Final = 127
CHARACTER_MAX_LENGTH: Final = 255
DLQ_NUMS_PER_GROUP: Final = 1  # MixAll.DLQ_NUMS_PER_GROUP

#: Topics a client may never send to (``NOT_ALLOWED_SEND_TOPIC_SET``).
NOT_ALLOWED_SEND_TOPICS: Final = frozenset(
    {
        RMQ_SYS_SCHEDULE_TOPIC,
        RMQ_SYS_TRANS_HALF_TOPIC,
        RMQ_SYS_TRANS_OP_HALF_TOPIC,
        RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
        RMQ_SYS_SELF_TEST_TOPIC,
        RMQ_SYS_OFFSET_MOVED_EVENT,
    }
)

#: Built-in consumer groups (``SubscriptionGroupManager.init``); value: consumeBroadcastEnable.
SYSTEM_GROUPS: Final = (
    "TOOLS_CONSUMER",
    "FILTERSRV_CONSUMER",
    "SELF_TEST_C_GROUP",
    "CID_ONS-HTTP-PROXY",
    "CID_ONSAPI_PULL",
    "CID_ONSAPI_PERMISSION",
    "CID_ONSAPI_OWNER",
    "CID_RMQ_SYS_TRANS",
)

_VALID: Final = re.compile(r"[%|a-zA-Z0-9_-]+")


def retry_topic(group: str) -> str:
    """``MixAll.getRetryTopic``: ``%RETRY%<group>``."""
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    """``MixAll.getDLQTopic``: ``%DLQ%<group>``."""
    return DLQ_GROUP_TOPIC_PREFIX + group


def is_retry_topic(topic: str) -> bool:
    """True for ``%RETRY%...``."""
    return topic.startswith(RETRY_GROUP_TOPIC_PREFIX)


def is_topic_or_group_illegal(name: str) -> bool:
    """``isTopicOrGroupIllegal``: any character outside ``[%|a-zA-Z0-9_-]``."""
    return _VALID.fullmatch(name) is None


def validate_topic(topic: str) -> str | None:
    """``TopicValidator.validateTopic``: None when valid, else upstream's remark."""
    if not topic.strip():
        return "The specified topic is blank."
    if is_topic_or_group_illegal(topic):
        return "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    limit = (
        CHARACTER_MAX_LENGTH
        if topic.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX))
        else TOPIC_MAX_LENGTH
    )
    if len(topic) > limit:
        return "The specified topic is longer than topic max length."
    return None


def is_not_allowed_send_topic(topic: str) -> bool:
    """``isNotAllowedSendTopic``."""
    return topic in NOT_ALLOWED_SEND_TOPICS


def is_sys_consumer_group(group: str) -> bool:
    """``MixAll.isSysConsumerGroup``."""
    return group.startswith(SYS_CONSUMER_GROUP_PREFIX)


def is_group_name_valid(group: str) -> bool:
    """Auto-creatable group name: at most 255 characters from the topic alphabet."""
    return 0 < len(group) <= CHARACTER_MAX_LENGTH and not is_topic_or_group_illegal(group)
