"""The client side of ``MessageDecoder``: properties, batch bodies, pulled records, message ids.

Owns: the byte formats a client writes (properties string, SEND_BATCH_MESSAGE body) and reads (the
stored records of a PULL_MESSAGE body), plus the client unique id (``MessageClientIDSetter``) and
Java's ``String.hashCode`` for tag codes. Pure: no I/O, no logging. The broker's copy of the record
codec lives in ``rocketpy.store.commit_log.record``; the client may not import the store (STYLE.md
section 4), so it keeps its own reader of message-format.md sections 1, 3, 4 and 5.

Pulled record layout (message-format.md section 1, IPv4 hosts; IPv6 hosts take 16+4 bytes):

=====  ====  ==========================  =====================================
off    size  field                       notes
=====  ====  ==========================  =====================================
0      4     TOTALSIZE                   whole record
4      4     MAGICCODE                   v1 0xDAA320A7, v2 0xDAA320AB
8      4     BODYCRC
12     4     QUEUEID
16     4     FLAG
20     8     QUEUEOFFSET
28     8     PHYSICALOFFSET
36     4     SYSFLAG                     0x1 compressed, 0x10/0x20 IPv6 hosts
40     8     BORNTIMESTAMP
48     8/20  BORNHOST
..     8     STORETIMESTAMP
..     8/20  STOREHOST
..     4     RECONSUMETIMES
..     8     PREPARED_TRANSACTION_OFFSET
..     4     BODYLEN, then BODY
..     1/2   TOPICLEN (v1 byte, v2 int16), then TOPIC
..     2     PROPLEN, then PROPERTIES
=====  ====  ==========================  =====================================

Batch item (section 5): TOTALSIZE, MAGIC 0, BODYCRC 0, FLAG, BODYLEN, BODY, PROPLEN, PROPERTIES.
"""

from __future__ import annotations

import ipaddress
import struct
import zlib
from typing import Final

from rocketpy.common.errors import MessageCodecError

MAGIC_V1: Final = -626843481
MAGIC_V2: Final = -626843477
COMPRESSED_FLAG: Final = 0x1
BORNHOST_V6_FLAG: Final = 0x10
STOREHOST_V6_FLAG: Final = 0x20
COMPRESSION_TYPE_MASK: Final = 0x700
COMPRESSION_ZLIB: Final = 0x300
COMPRESSION_LZ4: Final = 0x100
COMPRESSION_ZSTD: Final = 0x200

_HEAD: Final = struct.Struct(">iiiiiqqiq")  # TOTALSIZE .. BORNTIMESTAMP
_MIDDLE: Final = struct.Struct(">iqi")  # RECONSUMETIMES, PREPARED_TRANSACTION_OFFSET, BODYLEN
_INT8: Final = struct.Struct(">b")
_INT16: Final = struct.Struct(">h")
_INT32: Final = struct.Struct(">i")
_INT64: Final = struct.Struct(">q")

Address = tuple[str, int]


def _address(view: memoryview, pos: int, v6: bool) -> tuple[Address, int]:
    n = 16 if v6 else 4
    host = str(ipaddress.ip_address(bytes(view[pos : pos + n])))
    (port,) = _INT32.unpack_from(view, pos + n)
    return (host, port), pos + n + 4


def encode_offset_msg_id(store_host: Address, physical_offset: int) -> str:
    """message-format.md 4.1: uppercase hex of address + int32 port + int64 commit-log offset."""
    packed = ipaddress.ip_address(store_host[0]).packed
    return (packed + _INT32.pack(store_host[1]) + _INT64.pack(physical_offset)).hex().upper()


def decode_offset_msg_id(msg_id: str) -> tuple[Address, int]:
    """Inverse of :func:`encode_offset_msg_id` (32 hex chars for IPv4, 56 for IPv6).

    Raises:
        MessageCodecError: wrong length or not hex.
    """
    if len(msg_id) not in (32, 56):
        raise MessageCodecError(f"msg id of {len(msg_id)} characters", field="msgId")
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError as e:
        raise MessageCodecError("msg id is not hex", field="msgId") from e
    n = len(raw) - 12
    host = str(ipaddress.ip_address(raw[:n]))
    (port,) = _INT32.unpack_from(raw, n)
    (offset,) = _INT64.unpack_from(raw, n + 4)
    return (host, port), offset


def uncompress_body(body: bytes, sys_flag: int) -> bytes:
    """The body as the producer wrote it: zlib (type 0 or 3) is undone; other compressors are not
    supported and raise.

    Raises:
        MessageCodecError: LZ4/ZSTD body, or a zlib body that does not inflate.
    """
    if not sys_flag & COMPRESSED_FLAG:
        return body
    kind = sys_flag & COMPRESSION_TYPE_MASK
    if kind not in (0, COMPRESSION_ZLIB):
        raise MessageCodecError(f"unsupported compression type {kind >> 8}", field="SYSFLAG")
    try:
        return zlib.decompress(body)
    except zlib.error as e:
        raise MessageCodecError(f"body does not inflate: {e}", field="BODY") from e


class RawRecord:
    """The decoded fields of one stored record (``MessageExt`` minus derived values)."""

    __slots__ = (
        "body",
        "born_host",
        "born_timestamp",
        "flag",
        "physical_offset",
        "prepared_transaction_offset",
        "properties",
        "queue_id",
        "queue_offset",
        "reconsume_times",
        "store_host",
        "store_size",
        "store_timestamp",
        "sys_flag",
        "topic",
    )

    def __init__(self, view: memoryview, pos: int) -> None:
        """Decode the record at ``pos`` of ``view``.

        Raises:
            MessageCodecError: a length points past the end, bad magic, or bad UTF-8.
        """
        try:
            self._decode(view, pos)
        except (struct.error, ValueError, UnicodeDecodeError) as e:
            raise MessageCodecError(f"bad record: {e}", field="record", offset=pos) from e

    def _decode(self, view: memoryview, pos: int) -> None:
        (size, magic, _crc, qid, flag, qoff, phys, sys_flag, born_ts) = _HEAD.unpack_from(view, pos)
        if magic not in (MAGIC_V1, MAGIC_V2) or size <= 0 or pos + size > len(view):
            raise ValueError(f"magic {magic & 0xFFFFFFFF:#x} size {size}")
        self.store_size, self.queue_id, self.flag = size, qid, flag
        self.queue_offset, self.physical_offset, self.sys_flag = qoff, phys, sys_flag
        self.born_timestamp = born_ts
        at = pos + _HEAD.size
        self.born_host, at = _address(view, at, bool(sys_flag & BORNHOST_V6_FLAG))
        (self.store_timestamp,) = _INT64.unpack_from(view, at)
        self.store_host, at = _address(view, at + 8, bool(sys_flag & STOREHOST_V6_FLAG))
        self.reconsume_times, self.prepared_transaction_offset, body_len = _MIDDLE.unpack_from(
            view, at
        )
        at += _MIDDLE.size
        self.body = bytes(view[at : at + body_len])
        at += body_len
        width = _INT16 if magic == MAGIC_V2 else _INT8
        (topic_len,) = width.unpack_from(view, at)
        at += width.size
        self.topic = str(view[at : at + topic_len], "utf-8")
        at += topic_len
        (props_len,) = _INT16.unpack_from(view, at)
        self.properties = str(view[at + 2 : at + 2 + props_len], "utf-8")
        if at + 2 + props_len != pos + size:
            raise ValueError(f"record size {size} disagrees with its fields")


def decode_records(body: bytes) -> list[RawRecord]:
    """Records back to back, as in a PULL_MESSAGE body (``MessageDecoder.decodes``).

    Raises:
        MessageCodecError: a record does not decode.
    """
    view = memoryview(body)
    out: list[RawRecord] = []
    pos = 0
    while pos < len(view):
        rec = RawRecord(view, pos)
        out.append(rec)
        pos += rec.store_size
    return out
