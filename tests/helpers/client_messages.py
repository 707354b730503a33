"""A client-side MessageExt at a queue offset, for tests of the consume machinery."""

from __future__ import annotations

from rocketpy.client.message import MessageExt


def message_at(
    offset: int, topic: str = "T", props: dict[str, str] | None = None, *, body: bytes | None = None
) -> MessageExt:
    """Queue 0 of broker ``b``; the offset names the message (ids, body by default)."""
    return MessageExt(
        topic=topic,
        body=str(offset).encode() if body is None else body,
        properties=props or {},
        msg_id=str(offset),
        offset_msg_id=str(offset),
        broker_name="b",
        queue_id=0,
        queue_offset=offset,
        commit_log_offset=offset * 100,
        store_size=100,
        flag=0,
        sys_flag=0,
        born_timestamp=0,
        born_host=("127.0.0.1", 1),
        store_timestamp=0,
        store_host=("127.0.0.1", 2),
        reconsume_times=0,
        prepared_transaction_offset=0,
    )
