"""``msgCheck``: what a send must pass before it is stored.

Owns: the broker's send checks of ``AbstractSendMessageProcessor.msgCheck`` -- role and
permission (an order topic on a broker that is not writable), the topic name, topics no client
may send to, the topic's config (auto-created through TBW102, or a retry topic created on
send-back), and the queue id -- and the cache of names that passed the name-only checks. Must
not: store anything (``send.py`` does).
"""

from __future__ import annotations

from typing import Final

import structlog

from rocketpy.broker import topic_validator as tv
from rocketpy.broker.runtime import BrokerRuntime
from rocketpy.common.codes import ResponseCode
from rocketpy.common.errors import RemoteError
from rocketpy.remoting.protocol.body.config_shapes import PERM_READ, PERM_WRITE, TopicConfig
from rocketpy.remoting.protocol.headers.broker import SendMessageRequestHeader
from rocketpy.remoting.transport.dispatch import RequestContext

log = structlog.get_logger(__name__)

#: Topic names remembered as having passed the name-only checks (cleared when full).
_SENDABLE_CACHE: Final = 4096


class MessageCheck:
    """The send checks, for one broker."""

    def __init__(self, rt: BrokerRuntime) -> None:
        """Args: ``rt`` the shared broker state."""
        self._rt = rt
        #: Names that passed the (pure, name-only) topic checks: skipped on later sends.
        self._sendable_topics: set[str] = set()

    def check(self, ctx: RequestContext, h: SendMessageRequestHeader) -> TopicConfig:
        """``msgCheck``: the topic's config (auto-created if allowed), or RemoteError."""
        rt = self._rt
        if not rt.broker_writable and rt.topics.is_order_topic(h.topic):
            raise RemoteError(
                ResponseCode.NO_PERMISSION,
                f"the broker[{rt.config.broker_ip1}] sending message is forbidden",
            )
        if h.topic not in self._sendable_topics:
            remark = tv.validate_topic(h.topic)
            if remark is not None:
                raise RemoteError(ResponseCode.INVALID_PARAMETER, remark)
            if tv.is_not_allowed_send_topic(h.topic):
                raise RemoteError(
                    ResponseCode.NO_PERMISSION, f"Sending message to topic[{h.topic}] is forbidden."
                )
            if len(self._sendable_topics) >= _SENDABLE_CACHE:
                self._sendable_topics.clear()
            self._sendable_topics.add(h.topic)
        topic_config = rt.topics.select(h.topic)
        if topic_config is None:
            log.warning("the topic not exist", topic=h.topic, producer=ctx.channel.peer)
            topic_config = rt.topics.create_in_send(
                h.topic, h.default_topic, h.default_topic_queue_nums, 0, ctx.channel.peer
            )
            if topic_config is None and tv.is_retry_topic(h.topic):
                topic_config = rt.topics.create_in_send_back(h.topic, 1, PERM_READ | PERM_WRITE)
            if topic_config is None:
                raise RemoteError(
                    ResponseCode.TOPIC_NOT_EXIST,
                    f"topic[{h.topic}] not exist, apply first please!",
                )
        if h.queue_id >= queue_count(topic_config):
            raise RemoteError(
                ResponseCode.INVALID_PARAMETER,
                f"request queueId[{h.queue_id}] is illegal, {topic_config} Producer: "
                f"{ctx.channel.peer}",
            )
        return topic_config


def queue_count(topic_config: TopicConfig) -> int:
    """A send to the topic may name the queue ids below this."""
    return max(topic_config.write_queue_nums, topic_config.read_queue_nums)
