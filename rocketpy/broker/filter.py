"""Tag filtering for pulls and long polling. Pure.

Owns: building a subscription from a ``subscription`` expression (``FilterAPI.build``: tags
separated by ``||``, ``*`` or empty for all) and matching a consume-queue tags code against a
subscription (``ExpressionMessageFilter.isMatchedByConsumeQueue``: the code must be in
``codeSet``; consumers re-check the tag string, so hash collisions are harmless).
message-format.md section 6.
"""

from __future__ import annotations

from rocketpy.common.javahash import java_string_hash
from rocketpy.common.message.properties import tags_code as tags_hash_code
from rocketpy.remoting.protocol.body.heartbeat import (
    EXPRESSION_TAG,
    SUB_ALL,
    SubscriptionData,
)

__all__ = ["build_subscription", "matches_tags_code", "tags_hash_code"]


def build_subscription(
    topic: str, sub_string: str | None, expression_type: str | None = None, sub_version: int = 0
) -> SubscriptionData:
    """``FilterAPI.build``.

    Raises:
        ValueError: an expression type other than TAG (SQL92 needs ``enablePropertyFilter``,
            which this broker does not implement).
    """
    kind = expression_type or EXPRESSION_TAG
    if kind != EXPRESSION_TAG:
        raise ValueError(f"The broker does not support consumer to filter message by {kind}")
    text = (sub_string or "").strip()
    if not text or text == SUB_ALL:
        return SubscriptionData(topic=topic, sub_string=SUB_ALL, sub_version=sub_version)
    tags: list[str] = []
    for part in text.split("||"):
        tag = part.strip()
        if tag and tag not in tags:
            tags.append(tag)
    return SubscriptionData(
        topic=topic,
        sub_string=text,
        tags_set=tuple(tags),
        code_set=tuple(java_string_hash(t) for t in tags),
        sub_version=sub_version,
    )


def matches_tags_code(subscription: SubscriptionData | None, tags_code: int | None) -> bool:
    """``isMatchedByConsumeQueue`` for TAG subscriptions (anything else matches)."""
    if subscription is None or subscription.class_filter_mode or tags_code is None:
        return True
    if subscription.expression_type != EXPRESSION_TAG or subscription.sub_string == SUB_ALL:
        return True
    # upstream compares (int) tagsCode: delay-topic codes are timestamps, never filtered here
    code = ((tags_code + (1 << 31)) % (1 << 32)) - (1 << 31)
    return code in subscription.code_set
