"""The send path's topic message-type check (``enableTopicMessageTypeCheck``).

Owns: :func:`check_topic_message_type`, called by ``processors/send.py`` before ``msgCheck``
for SEND_MESSAGE, SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE when the switch is on. Must not:
create topics, decode bodies or run when the switch is off (the caller tests the flag, so an
unchecked send pays one attribute read).

Mirrors the remoting proxy's ``SendMessageActivity.sendMessage`` with
``DefaultTopicMessageTypeValidator`` and ``LocalMetadataService.getTopicMessageType`` (5.3.x):
upstream makes this check in the proxy (``ProxyConfig.enableTopicMessageTypeCheck``, default
true), in front of a broker that does not check. rocketpy's broker makes the same check itself
when its own ``enableTopicMessageTypeCheck`` is on (default off, so a plain broker behaves as
upstream's), answering as the remoting proxy does: MESSAGE_ILLEGAL (13) with the validator's
remark. As there: retry and DLQ topics and messages carrying ``TRANSFER_FLAG`` are not checked;
the type comes from the request header's properties (for a batch, the batch's own); a topic the
broker does not have is UNSPECIFIED and refuses every message (no auto-creation for typed
sends); a topic without ``message.type`` is NORMAL.
"""

from __future__ import annotations

from rocketpy.broker import topic_validator as tv
from rocketpy.broker.topic_config import TopicConfigManager
from rocketpy.common.codes import ResponseCode
from rocketpy.common.errors import RemoteError
from rocketpy.common.message.properties import decode_properties
from rocketpy.common.topic_message_type import (
    TRANSFER_FLAG,
    TopicMessageType,
    parse_from_message_property,
    topic_message_type,
    validate,
)
from rocketpy.remoting.protocol.headers.broker import SendMessageRequestHeader


def check_topic_message_type(topics: TopicConfigManager, header: SendMessageRequestHeader) -> None:
    """Refuse a send whose message type the topic does not accept.

    Raises:
        RemoteError: MESSAGE_ILLEGAL with ``TopicMessageType validate failed, the expected type
            is X, but actual type is Y``.
    """
    topic = header.topic
    if topic.startswith((tv.RETRY_GROUP_TOPIC_PREFIX, tv.DLQ_GROUP_TOPIC_PREFIX)):
        return
    props = decode_properties(header.properties or "")
    if TRANSFER_FLAG in props:
        return
    topic_config = topics.select(topic)
    expected = (
        TopicMessageType.UNSPECIFIED
        if topic_config is None
        else topic_message_type(topic_config.attributes)
    )
    remark = validate(expected, parse_from_message_property(props))
    if remark is not None:
        raise RemoteError(ResponseCode.MESSAGE_ILLEGAL, remark)
