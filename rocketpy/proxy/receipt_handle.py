"""The gRPC ``receipt_handle``: a broker's POP ExtraInfo plus the proxy's commit-log offset.

Owns (proxy.md section 3.2): :func:`create_handle` (``ConsumerProcessor.createHandle``: the
POP_CK text a pop answered with, a space and the message's commit-log offset), :func:`decode_handle`
(``ReceiptHandle.decode``: at least 8 fields, the 9th optional; anything else is
INVALID_RECEIPT_HANDLE), :func:`check_receipt_handle` (``ConsumerProcessor.checkReceiptHandle``:
expired when ``popTime + invisibleTime <= now``) and :func:`changed_handle` (the handle a
CHANGE_MESSAGE_INVISIBLETIME answer gives in Cluster mode,
``MQClientAPIExt.changeInvisibleTimeAsync``: ck start = the message's own offset, the new pop
and invisible times, the commit-log offset kept).
Must not: do I/O. Pure.
"""

from __future__ import annotations

from rocketpy.common.errors import CodecError
from rocketpy.proxy.pb import definition_pb2 as pb
from rocketpy.proxy.status import ProxyError
from rocketpy.remoting.protocol.pop import ExtraInfo, decode_extra_info, real_topic


def create_handle(pop_ck: str, commit_log_offset: int) -> str:
    """``createHandle``: the broker's ExtraInfo with the commit-log offset as a 9th field."""
    return f"{pop_ck} {commit_log_offset}"


def decode_handle(text: str) -> ExtraInfo:
    """``ReceiptHandle.decode`` of a client's handle.

    Raises:
        ProxyError: INVALID_RECEIPT_HANDLE when blank, short or not numeric where it must be.
    """
    if not text.strip():
        raise ProxyError(pb.Code.INVALID_RECEIPT_HANDLE, "receipt handle cannot be empty")
    try:
        return decode_extra_info(text)
    except CodecError as e:
        raise ProxyError(pb.Code.INVALID_RECEIPT_HANDLE, "receipt handle is not valid") from e


def check_receipt_handle(handle: ExtraInfo, now_ms: int) -> None:
    """``checkReceiptHandle``: refuse an expired handle before any broker call.

    Raises:
        ProxyError: INVALID_RECEIPT_HANDLE "receipt handle is expired".
    """
    if handle.expired(now_ms):
        raise ProxyError(pb.Code.INVALID_RECEIPT_HANDLE, "receipt handle is expired")


def handle_topic(handle: ExtraInfo, topic: str, group: str) -> str:
    """``ReceiptHandle.getRealTopic``: the pop retry topic for a handle of type 1/2."""
    return real_topic(handle.topic_type, topic, group)


def changed_handle(old: ExtraInfo, pop_time: int, invisible_time: int, revive_qid: int) -> str:
    """The handle after CHANGE_MESSAGE_INVISIBLETIME answered ``pop_time``/``invisible_time``/
    ``revive_qid``: one checkpoint for this message, so ck start = its own queue offset."""
    return ExtraInfo(
        ck_queue_offset=old.queue_offset,
        pop_time=pop_time,
        invisible_time=invisible_time,
        revive_qid=revive_qid,
        topic_type=old.topic_type,
        broker_name=old.broker_name,
        queue_id=old.queue_id,
        queue_offset=old.queue_offset,
        commit_log_offset=old.commit_log_offset,
    ).encode()
