"""Index file layout: header, hash slots, entries, the key hash and the file name. Pure.

Owns: the byte layout of ``index/<yyyyMMddHHmmssSSS>`` files and the arithmetic on it. Must not:
do I/O (``index_file.py`` maps the file). Mirrors ``store/index/IndexHeader``, ``IndexFile``
(``indexKeyHashMethod``, ``putKey``/``selectPhyOffset`` arithmetic) and
``UtilAll.timeMillisToHumanString`` (store.md section 9). All integers big-endian.

| region | offset | size | content |
| --- | --- | --- | --- |
| header | 0 | 40 | see below |
| slots | 40 | hashSlotNum x 4 | int32 number of the newest entry in the slot (0 = empty) |
| entries | 40 + hashSlotNum x 4 | indexNum x 20 | entry 0 unused (``indexCount`` starts at 1) |

Header (``IndexHeader``):

| offset | size | field | meaning |
| --- | --- | --- | --- |
| 0 | 8 | beginTimestamp | store timestamp of the first entry (or the previous file's end) |
| 8 | 8 | endTimestamp | store timestamp of the last entry |
| 16 | 8 | beginPhyOffset | commit-log offset of the first entry |
| 24 | 8 | endPhyOffset | commit-log offset of the last entry |
| 32 | 4 | hashSlotCount | number of slots in use |
| 36 | 4 | indexCount | next entry number (starts at 1) |

Entry (20 bytes):

| offset | size | field | meaning |
| --- | --- | --- | --- |
| 0 | 4 | keyHash | :func:`index_key_hash` of ``topic#key`` |
| 4 | 8 | phyOffset | commit-log offset of the message |
| 12 | 4 | timeDiff | seconds since beginTimestamp, clamped to [0, Integer.MAX_VALUE] |
| 16 | 4 | prevIndex | previous entry number in the same slot (0 = end of chain) |
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from datetime import datetime, tzinfo
from typing import Final

from rocketpy.common.javahash import java_string_hash, java_string_hashes

INDEX_HEADER_SIZE: Final = 40
HASH_SLOT_SIZE: Final = 4
INDEX_SIZE: Final = 20
INVALID_INDEX: Final = 0
INT_MAX: Final = 2**31 - 1
KEY_SEPARATOR: Final = " "  # MessageConst.KEY_SEPARATOR between KEYS entries
TOPIC_KEY_SEPARATOR: Final = "#"  # IndexService.buildKey

HEADER: Final = struct.Struct(">qqqqii")
SLOT: Final = struct.Struct(">i")
ENTRY: Final = struct.Struct(">iqii")


# Mutable: the owning IndexFile updates it in place on every put (a new frozen instance per key
# was most of the index's cost on the dispatch path).
@dataclass(slots=True, kw_only=True)
class IndexHeader:
    """The 40-byte header (``IndexHeader``)."""

    begin_timestamp: int = 0
    end_timestamp: int = 0
    begin_phy_offset: int = 0
    end_phy_offset: int = 0
    hash_slot_count: int = 0
    index_count: int = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class IndexEntry:
    """One 20-byte entry."""

    key_hash: int
    phy_offset: int
    time_diff: int
    prev_index: int


def encode_index_header(header: IndexHeader) -> bytes:
    """The 40 header bytes."""
    return HEADER.pack(
        header.begin_timestamp,
        header.end_timestamp,
        header.begin_phy_offset,
        header.end_phy_offset,
        header.hash_slot_count,
        header.index_count,
    )


def decode_index_header(buf: bytes | bytearray | memoryview) -> IndexHeader:
    """Read a header; an ``indexCount <= 0`` reads as 1 (``IndexHeader.load``)."""
    begin_ts, end_ts, begin_phy, end_phy, slots, count = HEADER.unpack_from(buf, 0)
    return IndexHeader(
        begin_timestamp=begin_ts,
        end_timestamp=end_ts,
        begin_phy_offset=begin_phy,
        end_phy_offset=end_phy,
        hash_slot_count=slots,
        index_count=max(count, 1),
    )


def encode_index_entry(entry: IndexEntry) -> bytes:
    """The 20 entry bytes."""
    return ENTRY.pack(entry.key_hash, entry.phy_offset, entry.time_diff, entry.prev_index)


def decode_index_entry(buf: bytes | bytearray | memoryview, offset: int = 0) -> IndexEntry:
    """Read one entry at ``offset``."""
    key_hash, phy_offset, time_diff, prev_index = ENTRY.unpack_from(buf, offset)
    return IndexEntry(
        key_hash=key_hash, phy_offset=phy_offset, time_diff=time_diff, prev_index=prev_index
    )


def index_file_size(hash_slot_num: int, index_num: int) -> int:
    """Total file size: header + slots + entries (default 420000040 bytes)."""
    return INDEX_HEADER_SIZE + hash_slot_num * HASH_SLOT_SIZE + index_num * INDEX_SIZE


def slot_position(key_hash: int, hash_slot_num: int) -> int:
    """Byte offset of the slot for ``key_hash`` (``keyHash % hashSlotNum``)."""
    return INDEX_HEADER_SIZE + (key_hash % hash_slot_num) * HASH_SLOT_SIZE


def entry_position(hash_slot_num: int, index_no: int) -> int:
    """Byte offset of entry number ``index_no``."""
    return INDEX_HEADER_SIZE + hash_slot_num * HASH_SLOT_SIZE + index_no * INDEX_SIZE


def index_key_hash(key: str) -> int:
    """``IndexFile.indexKeyHashMethod``: ``abs(hashCode)``, 0 when that overflows (MIN_VALUE)."""
    h = java_string_hash(key)
    return 0 if h == -(2**31) else abs(h)


def index_key_hashes(topic: str, keys: list[str]) -> list[int]:
    """:func:`index_key_hash` of each of ``topic``'s ``keys`` as :func:`build_key` joins them
    (one call per batch)."""
    return [
        0 if h == -(2**31) else abs(h)
        for h in java_string_hashes(f"{topic}{TOPIC_KEY_SEPARATOR}", keys)
    ]


def build_key(topic: str, key: str) -> str:
    """``IndexService.buildKey``: ``topic#key``."""
    return f"{topic}{TOPIC_KEY_SEPARATOR}{key}"


def time_diff_seconds(store_timestamp: int, begin_timestamp: int) -> int:
    """Seconds since the file's begin timestamp as ``putKey`` stores them: 0 when the file has
    no begin yet, clamped to [0, Integer.MAX_VALUE]."""
    if begin_timestamp <= 0:
        return 0
    diff = int((store_timestamp - begin_timestamp) / 1000)  # Java long division truncates
    return min(max(diff, 0), INT_MAX)


def is_time_matched(begin: int, end: int, header: IndexHeader) -> bool:
    """``IndexFile.isTimeMatched``: [begin, end] overlaps the file's time range."""
    first, last = header.begin_timestamp, header.end_timestamp
    return (begin < first and end > last) or first <= begin <= last or first <= end <= last


def index_file_name(millis: int, tz: tzinfo | None = None) -> str:
    """``UtilAll.timeMillisToHumanString``: ``yyyyMMddHHmmssSSS`` in ``tz`` (None: local time,
    as Java's default ``Calendar``)."""
    moment = datetime.fromtimestamp(millis // 1000, tz)
    return moment.strftime("%Y%m%d%H%M%S") + f"{millis % 1000:03d}"


def is_index_file_name(name: str) -> bool:
    """Seventeen ASCII digits."""
    return len(name) == 17 and name.isascii() and name.isdigit()
