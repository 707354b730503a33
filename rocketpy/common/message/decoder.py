"""Reading stored records (message-format.md section 1) and the offset message id (section 4.1).

Owns: :func:`read_record`, the one reader of the record layout: the client's pull decoder, the
store's reput, recovery walk and ``checkMessageAndReturnSize``, and :func:`decode_record` all go
through it. Also the host and offset-id caches, the body's decompression and the offset msg id
codec. Mirrors ``MessageDecoder.decode``/``decodes``, ``createMessageId``, ``decodeMessageId``.
Pure: no I/O. The layout table is :mod:`.record`'s.
"""

from __future__ import annotations

import functools
import ipaddress
import struct
import zlib
from collections.abc import Callable
from typing import Final

from rocketpy.common.errors import MessageCodecError
from rocketpy.common.message.record import (
    BORNHOST_V6_FLAG,
    COMPRESSED_FLAG,
    COMPRESSION_TYPE_MASK,
    COMPRESSION_ZLIB,
    HEAD,
    INT8,
    INT16,
    INT32,
    INT64,
    MAGIC_V1,
    MAGIC_V2,
    MIDDLE,
    STORE_TIMESTAMP_POS_V4,
    STOREHOST_V6_FLAG,
    SYSFLAG_POS,
    Address,
    MessageRecord,
    pack_address,
)

#: A BORNHOST/STOREHOST as read: an IPv4 host as one uint64 (address << 32 | port), an IPv6 host
#: as its 20 bytes. Hashable, so the hosts and offset-id prefixes of a body are cached by it.
HostKey = int | bytes

#: What :func:`read_record` gives, in layout order: TOTALSIZE, MAGICCODE, BODYCRC, QUEUEID, FLAG,
#: QUEUEOFFSET, PHYSICALOFFSET, SYSFLAG, BORNTIMESTAMP, born host key, STORETIMESTAMP, store host
#: key, RECONSUMETIMES, PREPARED_TRANSACTION_OFFSET, offset of BODY in the buffer, BODYLEN, TOPIC,
#: PROPERTIES. A tuple: one is made per record read.
RecordFields = tuple[
    int, int, int, int, int, int, int, int, int, HostKey, int, HostKey, int, int, int, int, str, str
]

#: TOTALSIZE .. BODYLEN of a record whose hosts are both IPv4 (the usual one): one unpack.
_V4_HEAD: Final = struct.Struct(">iiiiiqqiqQqQiqi")
_V4_HEAD_SIZE: Final = _V4_HEAD.size
_UINT64: Final = struct.Struct(">Q")
_V6_HOSTS: Final = BORNHOST_V6_FLAG | STOREHOST_V6_FLAG
_UINT64_MASK: Final = 0xFFFFFFFFFFFFFFFF

Buf = bytes | bytearray | memoryview


def _host_key(buf: Buf, at: int, v6: bool) -> tuple[HostKey, int]:
    if v6:
        if at + 20 > len(buf):
            raise MessageCodecError("host past the end", field="HOST", offset=at)
        return bytes(buf[at : at + 20]), at + 20
    return _UINT64.unpack_from(buf, at)[0], at + 8


def _v6_middle(
    buf: Buf, pos: int, sys_flag: int
) -> tuple[HostKey, int, HostKey, int, int, int, int]:
    """BORNHOST .. BODYLEN of a record with an IPv6 host, and where its body starts."""
    born, at = _host_key(buf, pos + HEAD.size, bool(sys_flag & BORNHOST_V6_FLAG))
    (store_ts,) = INT64.unpack_from(buf, at)
    store, at = _host_key(buf, at + 8, bool(sys_flag & STOREHOST_V6_FLAG))
    reconsume, prepared, body_len = MIDDLE.unpack_from(buf, at)
    return born, store_ts, store, reconsume, prepared, body_len, at + MIDDLE.size


def read_record(buf: Buf, pos: int, *, check_crc: bool = False) -> RecordFields:
    """Validate and read the record at ``pos`` of ``buf`` without copying its body.

    Valid means: a known magic; TOTALSIZE within ``buf``; BODYLEN, TOPICLEN and PROPLEN not
    negative and adding up to TOTALSIZE exactly; topic and properties UTF-8; and the body CRC
    when ``check_crc`` (upstream's ``checkCRCOnRecover``; clients do not check it).

    Raises:
        MessageCodecError: the bytes at ``pos`` are not such a record (a torn tail, zeros,
            garbage, the CommitLog's end-of-file marker).
    """
    # bytes (a pull body) decode faster with their own method than through str().
    text: Callable[..., str] = bytes.decode if buf.__class__ is bytes else str
    try:
        (
            total, magic, crc, queue_id, flag, queue_offset, phys, sys_flag, born_ts, born,
            store_ts, store, reconsume, prepared, body_len,
        ) = _V4_HEAD.unpack_from(buf, pos)  # fmt: skip
        at = pos + _V4_HEAD_SIZE
        if sys_flag & _V6_HOSTS:
            born, store_ts, store, reconsume, prepared, body_len, at = _v6_middle(
                buf, pos, sys_flag
            )
        end = pos + total
        if magic != MAGIC_V1 and magic != MAGIC_V2:  # noqa: PLR1714 -- per record: no set
            raise MessageCodecError(
                f"bad magic {magic & 0xFFFFFFFF:#x}", field="MAGICCODE", offset=pos
            )
        if total <= 0 or end > len(buf):
            raise MessageCodecError(
                f"total size {total} with {len(buf) - pos} bytes left",
                field="TOTALSIZE",
                offset=pos,
            )
        body_at = at
        at += body_len
        if body_len < 0 or at > end:
            raise MessageCodecError(f"body length {body_len}", field="BODYLEN", offset=pos)
        if check_crc and zlib.crc32(buf[body_at:at]) & 0x7FFFFFFF != crc:
            raise MessageCodecError("body CRC mismatch", field="BODYCRC", offset=pos)
        if magic == MAGIC_V1:
            (topic_len,) = INT8.unpack_from(buf, at)
            at += 1
        else:
            (topic_len,) = INT16.unpack_from(buf, at)
            at += 2
        topic = text(buf[at : at + topic_len], "utf-8")
        at += topic_len
        (props_len,) = INT16.unpack_from(buf, at)
        at += 2
        if topic_len < 0 or props_len < 0 or at + props_len != end:
            raise MessageCodecError(
                f"read total count {at + props_len - pos} not equals msg total size {total}",
                field="TOTALSIZE",
                offset=pos,
            )
        properties = text(buf[at:end], "utf-8")
    except (struct.error, UnicodeDecodeError) as exc:
        raise MessageCodecError(f"undecodable: {exc}", field="record", offset=pos) from exc
    return (
        total, magic, crc, queue_id, flag, queue_offset, phys, sys_flag, born_ts, born, store_ts,
        store, reconsume, prepared, body_at, body_len, topic, properties,
    )  # fmt: skip


@functools.lru_cache(maxsize=4096)
def host_address(key: HostKey) -> Address:
    """The ``(ip, port)`` of a host key (cached: a body's records share few hosts)."""
    if isinstance(key, int):
        host = str(ipaddress.IPv4Address(key >> 32))
        port = key & 0xFFFFFFFF
    else:
        host = str(ipaddress.IPv6Address(key[:16]))
        port = int.from_bytes(key[16:], "big")
    return host, port - (1 << 32) if port >= 1 << 31 else port  # an int32, as written


def offset_id_prefix(store_key: HostKey) -> str:
    """The characters of an offset msg id before its offset: the store host, in hex."""
    return f"{store_key:016X}" if isinstance(store_key, int) else store_key.hex().upper()


def offset_msg_id(prefix: str, physical_offset: int) -> str:
    """:func:`encode_offset_msg_id` of a record read by :func:`read_record` (``prefix`` is
    :func:`offset_id_prefix` of its store host key)."""
    return f"{prefix}{physical_offset & _UINT64_MASK:016X}"


def offset_msg_ids(prefix: str, physical_offsets: list[int]) -> str:
    """:func:`offset_msg_id` of each of ``physical_offsets`` (non-negative), joined by commas (a
    batch's answer): the offsets in hex at once, not one format per record."""
    if not physical_offsets:
        return ""
    packed = struct.pack(f">{len(physical_offsets)}Q", *physical_offsets)
    return prefix + packed.hex(",", 8).upper().replace(",", "," + prefix)


def record_store_timestamp(buf: Buf, pos: int = 0) -> int:
    """STORETIMESTAMP of the record at ``pos`` without reading the rest (its offset depends only
    on the born host's width)."""
    (sys_flag,) = INT32.unpack_from(buf, pos + SYSFLAG_POS)
    at = pos + STORE_TIMESTAMP_POS_V4 + (12 if sys_flag & BORNHOST_V6_FLAG else 0)
    (timestamp,) = INT64.unpack_from(buf, at)
    return int(timestamp)


def encode_offset_msg_id(store_host: Address, physical_offset: int) -> str:
    """Section 4.1 (``createMessageId``): uppercase hex of address + int32 port + int64 offset.

    Raises:
        MessageCodecError: not an IP address.
    """
    return (pack_address(store_host) + INT64.pack(physical_offset)).hex().upper()


def decode_offset_msg_id(msg_id: str) -> tuple[Address, int]:
    """Inverse of :func:`encode_offset_msg_id` (32 hex chars for IPv4, 56 for IPv6).

    Raises:
        MessageCodecError: wrong length or not hex.
    """
    if len(msg_id) not in (32, 56):
        raise MessageCodecError(f"msg id of {len(msg_id)} characters", field="msgId")
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError as exc:
        raise MessageCodecError("msg id is not hex", field="msgId") from exc
    n = len(raw) - 12
    host = str(ipaddress.ip_address(raw[:n]))
    (port,) = INT32.unpack_from(raw, n)
    (offset,) = INT64.unpack_from(raw, n + 4)
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


def decode_record(buf: Buf, pos: int = 0, *, check_crc: bool = True) -> MessageRecord:
    """The record at ``pos`` as a :class:`MessageRecord` (body as stored, not uncompressed).

    Raises:
        MessageCodecError: not a valid record (:func:`read_record`).
    """
    (
        _, magic, _, queue_id, flag, queue_offset, phys, sys_flag, born_ts, born, store_ts, store,
        reconsume, prepared, body_at, body_len, topic, properties,
    ) = read_record(buf, pos, check_crc=check_crc)  # fmt: skip
    return MessageRecord(
        topic=topic,
        queue_id=queue_id,
        body=bytes(buf[body_at : body_at + body_len]),
        flag=flag,
        queue_offset=queue_offset,
        physical_offset=phys,
        sys_flag=sys_flag,
        born_timestamp=born_ts,
        born_host=host_address(born),
        store_timestamp=store_ts,
        store_host=host_address(store),
        reconsume_times=reconsume,
        prepared_transaction_offset=prepared,
        properties=properties,
        magic=magic,
    )


def decode_records(buf: Buf, *, check_crc: bool = True) -> list[MessageRecord]:
    """Records back to back, as in a pull or query body (``MessageDecoder.decodes``).

    Raises:
        MessageCodecError: a record does not decode.
    """
    out: list[MessageRecord] = []
    pos = 0
    while pos < len(buf):
        out.append(decode_record(buf, pos, check_crc=check_crc))
        (size,) = INT32.unpack_from(buf, pos)
        pos += size
    return out
