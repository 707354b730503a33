"""A batch's CommitLog records, written into a segment with what they share encoded once.

Owns: :func:`write_batch`, the per-message loop of ``CommitLog``'s batch append (upstream's
``MessageExtEncoder.encodeBatch`` writing straight into the mapped file): each record's header,
body, topic and properties in one ``pack_into``, its offset message id, and the consume-queue
unit (offset, size, tags code) its :class:`~rocketpy.store.dispatch.BatchHint` carries. Pure:
writes only the given buffer; room, offsets and the hint queue are the caller's.
"""

from __future__ import annotations

import mmap
import struct
from typing import NamedTuple
from zlib import crc32

from rocketpy.common.message.properties import tags_code_of

#: One message of a batch, encoded: flag, body, properties text, its bytes, its record struct
#: (:func:`~rocketpy.common.message.record.record_struct`).
Encoded = tuple[int, bytes, str, bytes, struct.Struct]


class Shared(NamedTuple):
    """What every record of one batch holds alike (the record's field order)."""

    magic: int
    queue_id: int
    sys_flag: int
    born_timestamp: int
    born: bytes
    store_timestamp: int
    store_host: bytes
    reconsume_times: int
    topic: bytes


class Written(NamedTuple):
    """What :func:`write_batch` wrote: message ids, consume-queue units (offset, size, tags
    code of each record in turn), properties texts, and the position after the last record."""

    ids: list[str]
    units: list[int]
    texts: list[str]
    end: int


def write_batch(  # noqa: PLR0917 -- positional: called per batch
    buffer: mmap.mmap,
    start: int,
    base: int,
    id_prefix: str,
    shared: Shared,
    queue_offset: int,
    encoded: list[Encoded],
) -> Written:
    """Write ``encoded``'s records from ``start`` of a segment beginning at commit-log offset
    ``base`` (the room is checked by the caller), at consecutive queue offsets from
    ``queue_offset``."""
    magic, queue_id, sys_flag, born_ts, born, now, store_host, reconsume, topic = shared
    topic_len = len(topic)
    ids: list[str] = []
    units: list[int] = []
    texts: list[str] = []
    pos = start
    for flag, body, text, props, st in encoded:
        wrote, size = base + pos, st.size
        st.pack_into(
            buffer, pos, size, magic, crc32(body) & 0x7FFFFFFF, queue_id, flag, queue_offset,
            wrote, sys_flag, born_ts, born, now, store_host, reconsume, 0, len(body), body,
            topic_len, topic, len(props), props,
        )  # fmt: skip
        ids.append(f"{id_prefix}{wrote:016X}")
        units += (wrote, size, tags_code_of(text))
        texts.append(text)
        pos += size
        queue_offset += 1
    return Written(ids, units, texts, pos)
