"""CONSUMER_SEND_MSG_BACK (36): a consumer hands back a message it failed to consume.

Owns: :func:`consumer_send_msg_back` (``SendMessageProcessor.consumerSendMsgBack``), served
through :class:`~rocketpy.broker.processors.send.SendMessageProcessor` (the send family's gate).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from rocketpy.broker import topic_validator as tv
from rocketpy.broker.runtime import BrokerRuntime
from rocketpy.common.codes import ResponseCode
from rocketpy.common.message.const import MessageConst
from rocketpy.common.message.decoder import encode_offset_msg_id
from rocketpy.remoting.protocol.body.config_shapes import PERM_READ, PERM_WRITE
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.protocol.headers.base import from_ext
from rocketpy.remoting.protocol.headers.broker import ConsumerSendMsgBackRequestHeader
from rocketpy.store.commit_log.put_types import PutMessageStatus

V3_4_9: Final = 121  # MQVersion ordinal from which the header's maxReconsumeTimes is honoured
#: The send path's delay routing: (topic, queue id, sys flag, properties to update in place) ->
#: where the message is stored (``SCHEDULE_TOPIC_XXXX`` for a delayed one).
DelayRoute = Callable[[str, int, int, dict[str, str]], tuple[str, int]]


async def consumer_send_msg_back(
    rt: BrokerRuntime, apply_delay: DelayRoute, request: RemotingCommand
) -> RemotingCommand:
    """``consumerSendMsgBack`` (client-flows.md section 6.1): the message at the header's
    commit-log offset goes again to ``%RETRY%<group>`` with the next delay level, or to
    ``%DLQ%<group>`` past its reconsume budget. ``apply_delay`` is the send path's."""
    h = from_ext(ConsumerSendMsgBackRequestHeader, request.ext_fields)
    group_config = rt.groups.find(h.group)
    if group_config is None:
        return request.make_response(
            ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
            f"subscription group not exist, {h.group}",
        )
    if not rt.broker_writable:
        return request.make_response(
            ResponseCode.NO_PERMISSION,
            f"the broker[{rt.config.broker_ip1}] sending message is forbidden",
        )
    if group_config.retry_queue_nums <= 0:
        return request.make_response(ResponseCode.SUCCESS)
    new_topic = tv.retry_topic(h.group)
    queue_id = rt.rng.randrange(group_config.retry_queue_nums)
    topic_config = rt.topics.create_in_send_back(
        new_topic, group_config.retry_queue_nums, PERM_READ | PERM_WRITE
    )
    if not topic_config.perm & PERM_WRITE:
        return request.make_response(
            ResponseCode.NO_PERMISSION, f"the topic[{new_topic}] sending message is forbidden"
        )
    original = rt.store.look_message_by_offset(h.offset)
    if original is None:
        return request.make_response(
            ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {h.offset}"
        )
    props = dict(original.properties)
    props.setdefault(MessageConst.RETRY_TOPIC, original.topic)
    props[MessageConst.WAIT] = "false"
    max_times = group_config.retry_max_times
    if request.version >= V3_4_9 and h.max_reconsume_times is not None:
        max_times = h.max_reconsume_times
    if original.reconsume_times >= max_times or h.delay_level < 0:
        new_topic = tv.dlq_topic(h.group)
        queue_id = rt.rng.randrange(tv.DLQ_NUMS_PER_GROUP)
        rt.topics.create_in_send_back(new_topic, tv.DLQ_NUMS_PER_GROUP, PERM_READ | PERM_WRITE)
        props[MessageConst.DELAY] = "0"
    else:
        level = h.delay_level or 3 + original.reconsume_times
        props[MessageConst.DELAY] = str(level)
    if not props.get(MessageConst.ORIGIN_MESSAGE_ID):
        props[MessageConst.ORIGIN_MESSAGE_ID] = encode_offset_msg_id(
            original.store_host, original.commit_log_offset
        )
    escape = rt.escape if rt.is_slave else None
    if escape is None:
        new_topic, queue_id = apply_delay(new_topic, queue_id, original.sys_flag, props)
    # An acting slave's retry goes to another set's master, which applies the delay.
    put = rt.store.put_message if escape is None else escape
    msg = original.restored(
        topic=new_topic,
        queue_id=queue_id,
        properties=props,
        reconsume_times=original.reconsume_times + 1,
    )
    result = await put(msg)
    if result.stored:
        rt.stats.inc_put()
        rt.metrics.record_put(msg.topic, msg.queue_id, len(msg.body))
    if result.status == PutMessageStatus.PUT_OK:
        return request.make_response(ResponseCode.SUCCESS)
    return request.make_response(ResponseCode.SYSTEM_ERROR, result.status.value)
