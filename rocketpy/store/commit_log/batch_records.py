"""One queue's CommitLog records, written into a segment with what they share encoded once.

Owns: :func:`write_batch`, the per-message loop of ``CommitLog``'s batch append (upstream's
``MessageExtEncoder.encodeBatch`` writing straight into the mapped file), also used for each
queue's share of a run of single sends: each record's header, body, topic and properties in
one ``pack_into``, and the consume-queue unit (offset, size, tags code) its
:class:`~rocketpy.store.dispatch.BatchHint` carries (the offsets make the message ids:
:func:`~rocketpy.common.message.decoder.offset_msg_ids`). Pure: writes only the given buffer;
room, offsets and the hint queue are the caller's.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Callable
from typing import NamedTuple
from zlib import crc32

from rocketpy.common.message.properties import MAX_PROPERTIES_BYTES, tags_code_of
from rocketpy.common.message.record import (
    TRANSACTION_TYPE_MASK,
    Address,
    pack_address,
    record_struct,
)
from rocketpy.store.commit_log.put_types import (
    MessageBatch,
    MessageToStore,
    PutMessageStatus,
    fields_fit,
)

#: One message, encoded: flag, born timestamp, reconsume times, body, properties text, its
#: bytes, its record struct (:func:`~rocketpy.common.message.record.record_struct`).
Encoded = tuple[int, int, int, bytes, str, bytes, struct.Struct]


class Shared(NamedTuple):
    """What every record written together holds alike (the record's field order)."""

    magic: int
    queue_id: int
    sys_flag: int
    born: bytes
    store_timestamp: int
    store_host: bytes
    topic: bytes


class Written(NamedTuple):
    """What :func:`write_batch` wrote: consume-queue units (offset, size, tags code of each
    record in turn), properties texts, and the position after the last record."""

    units: list[int]
    texts: list[str]
    end: int


def write_batch(  # noqa: PLR0917 -- positional: called per batch
    buffer: mmap.mmap,
    start: int,
    base: int,
    shared: Shared,
    queue_offset: int,
    encoded: list[Encoded],
) -> Written:
    """Write ``encoded``'s records from ``start`` of a segment beginning at commit-log offset
    ``base`` (the room is checked by the caller), at consecutive queue offsets from
    ``queue_offset``."""
    magic, queue_id, sys_flag, born, now, store_host, topic = shared
    topic_len = len(topic)
    units: list[int] = []
    texts: list[str] = []
    pos = start
    for flag, born_ts, reconsume, body, text, props, st in encoded:
        wrote, size = base + pos, st.size
        st.pack_into(
            buffer, pos, size, magic, crc32(body) & 0x7FFFFFFF, queue_id, flag, queue_offset,
            wrote, sys_flag, born_ts, born, now, store_host, reconsume, 0, len(body), body,
            topic_len, topic, len(props), props,
        )  # fmt: skip
        units += (wrote, size, tags_code_of(text))
        texts.append(text)
        pos += size
        queue_offset += 1
    return Written(units, texts, pos)


#: A run's messages by the queue they go to (topic, queue id): the sys flag and born host
#: they share, and their indexes in the run, in its order.
Queues = dict[tuple[str, int], tuple[int, Address, list[int]]]


def encode_batch(
    batch: MessageBatch, topic_len: int, born_len: int, store_len: int, max_body: int
) -> tuple[list[Encoded], int] | PutMessageStatus:
    """Each message of ``batch`` encoded, and their total size; the refusal of one whose body
    passes ``max_body`` or whose properties pass their limit."""
    born_ts, reconsume, v2 = batch.born_timestamp, batch.reconsume_times, topic_len > 127
    encoded: list[Encoded] = []
    total = 0
    for flag, body, text in batch.items:
        if len(body) > max_body:
            return PutMessageStatus.MESSAGE_ILLEGAL
        props = text.encode()
        if len(props) > MAX_PROPERTIES_BYTES:
            return PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
        st = record_struct(born_len, store_len, len(body), topic_len, len(props), v2)
        encoded.append((flag, born_ts, reconsume, body, text, props, st))
        total += st.size
    return encoded, total


def encode_run(
    run: list[MessageToStore], topic: Callable[[str], bytes], store_len: int, max_body: int
) -> tuple[Queues, list[Encoded], int] | None:
    """Each message of a send lane's ``run`` encoded (``topic``: a topic's bytes), the queues
    they go to, and their total size; None when one is not a plain record (too large, a
    transaction's, a field out of range) or its sys flag or born host is not its queue's
    first message's (a queue's records share them in its hint)."""
    queues: Queues = {}
    encoded: list[Encoded] = []
    total = 0
    shapes: dict[tuple[str, int], tuple[int, int]] = {}  # a queue's born and topic lengths
    for i, m in enumerate(run):
        body, text = m.body, m.properties
        props = text.encode()
        if (
            len(body) > max_body
            or len(props) > MAX_PROPERTIES_BYTES
            or m.sys_flag & TRANSACTION_TYPE_MASK
            or not fields_fit(m)
        ):
            return None
        key = (m.topic, m.queue_id)
        queue = queues.get(key)
        if queue is None:
            queues[key] = (m.sys_flag, m.born_host, [i])
            shapes[key] = (len(pack_address(m.born_host)), len(topic(m.topic)))
        elif queue[0] == m.sys_flag and queue[1] == m.born_host:
            queue[2].append(i)
        else:
            return None
        born_len, topic_len = shapes[key]
        st = record_struct(born_len, store_len, len(body), topic_len, len(props), topic_len > 127)
        encoded.append((m.flag, m.born_timestamp, m.reconsume_times, body, text, props, st))
        total += st.size
    return queues, encoded, total
