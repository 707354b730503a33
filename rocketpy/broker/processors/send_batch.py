"""SEND_BATCH_MESSAGE's messages as the store takes them (``sendBatchMessage`` before the put).

Owns: :func:`batch_to_store`: the checks a batch adds to ``msgCheck`` (topic length, no retry
topic, a body within the size limit), the body split into its messages (message-format.md
section 5), each message's properties as stored (``send_properties.py``: the sender's plus the
broker's, a UNIQ_KEY each) and the :class:`MessageBatch`, or the MESSAGE_ILLEGAL remark. Must
not: store or answer (``send.py`` does).
"""

from __future__ import annotations

from rocketpy.broker import topic_validator as tv
from rocketpy.broker.processors.send_properties import SendProperties
from rocketpy.broker.runtime import BrokerRuntime
from rocketpy.common.errors import CodecError
from rocketpy.common.message.batch_body import decode_batch_body
from rocketpy.common.message.const import MessageConst
from rocketpy.common.message.properties import property_value, waits_for_store
from rocketpy.common.message.record import Address
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.protocol.headers.broker import SendMessageRequestHeader
from rocketpy.store.commit_log.put_types import MessageBatch


def batch_to_store(  # noqa: PLR0917 -- the checked send's parts, positional per batch
    rt: BrokerRuntime,
    props: SendProperties,
    request: RemotingCommand,
    h: SendMessageRequestHeader,
    queue_id: int,
    sys_flag: int,
    born_host: Address,
    illegal_remark: str,
) -> MessageBatch | str:
    """The batch a checked SEND_BATCH_MESSAGE stores in queue ``queue_id`` with ``sys_flag``
    (MULTI_TAGS added for its topic), or the remark of its MESSAGE_ILLEGAL (``illegal_remark``
    where upstream gives its size-limit text)."""
    if len(h.topic) > tv.TOPIC_MAX_LENGTH:
        return f"message topic length too long {len(h.topic)}"
    if tv.is_retry_topic(h.topic):
        return f"batch request does not support retry group {h.topic}"
    body = request.body or b""
    if not body or len(body) > rt.max_message_size:
        return illegal_remark
    try:
        entries = decode_batch_body(body)
    except CodecError as e:
        return f"batch body is malformed: {e}"
    if not entries:
        return illegal_remark
    stored = props.batch_items(entries)
    if stored is None:
        return illegal_remark
    items, uniqs = stored
    return MessageBatch(
        topic=h.topic,
        queue_id=queue_id,
        items=items,
        sys_flag=sys_flag,
        born_timestamp=h.born_timestamp,
        born_host=born_host,
        reconsume_times=h.reconsume_times or 0,
        # a batch waits as its first message says
        wait_store=waits_for_store(property_value(items[0][2], MessageConst.WAIT)),
        uniqs=uniqs,
    )
