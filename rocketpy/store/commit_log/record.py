"""The stored message record (CommitLog entry) and the offset msg id.

Owns: the byte layout of message-format.md sections 1, 2, 4 and 6. Pure: no I/O. All integers
big-endian. The properties text is :mod:`rocketpy.common.message.properties`' and the batch
send body :mod:`rocketpy.common.message.batch_body`'s.

Record layout (v1, IPv4 born and store hosts; IPv6 hosts take 16+4 bytes instead of 4+4, v2 topic
length is an int16):

=====  ====  ==========================  =======================================================
off    size  field                       notes (upstream ``MessageExtEncoder``)
=====  ====  ==========================  =======================================================
0      4     TOTALSIZE                   whole record, this field included
4      4     MAGICCODE                   v1 0xDAA320A7, v2 0xDAA320AB
8      4     BODYCRC                     ``crc32(body) & 0x7FFFFFFF``
12     4     QUEUEID
16     4     FLAG                        producer's ``Message.flag``
20     8     QUEUEOFFSET                 consume-queue offset (0 for prepared/rollback)
28     8     PHYSICALOFFSET              commit-log offset of byte 0 of this record
36     4     SYSFLAG                     message-format.md section 2
40     8     BORNTIMESTAMP
48     8     BORNHOST                    address + int32 port (20 bytes when sysflag 0x10)
56     8     STORETIMESTAMP
64     8     STOREHOST                   address + int32 port (20 bytes when sysflag 0x20)
72     4     RECONSUMETIMES
76     8     PREPARED_TRANSACTION_OFFSET
84     4     BODYLEN
88     b     BODY
88+b   1/2   TOPICLEN                    v1 signed byte, v2 int16
..     t     TOPIC                       UTF-8
..     2     PROPLEN                     int16
..     p     PROPERTIES                  UTF-8, section 3
=====  ====  ==========================  =======================================================

End-of-file blank marker (section 1.1): ``{int32 remaining, int32 0xCBD43194}``.
"""

from __future__ import annotations

import enum
import functools
import ipaddress
import struct
import zlib
from dataclasses import dataclass
from typing import Final

from typing_extensions import Buffer

from rocketpy.common.errors import MessageCodecError
from rocketpy.common.message.properties import MAX_PROPERTIES_BYTES, decode_properties

MAGIC_V1: Final = -626843481  # 0xDAA320A7
MAGIC_V2: Final = -626843477  # 0xDAA320AB
BLANK_MAGIC: Final = -875286124  # 0xCBD43194
BLANK_SIZE: Final = 8

COMPRESSED_FLAG: Final = 0x1
MULTI_TAGS_FLAG: Final = 0x2
TRANSACTION_TYPE_MASK: Final = 0xC
TRANSACTION_NOT_TYPE: Final = 0x0
TRANSACTION_PREPARED_TYPE: Final = 0x4
TRANSACTION_COMMIT_TYPE: Final = 0x8
TRANSACTION_ROLLBACK_TYPE: Final = 0xC
BORNHOST_V6_FLAG: Final = 0x10
STOREHOST_V6_FLAG: Final = 0x20

# TOTALSIZE MAGIC BODYCRC QUEUEID FLAG QUEUEOFFSET PHYSICALOFFSET SYSFLAG BORNTIMESTAMP
HEAD: Final = struct.Struct(">iiiiiqqiq")
# RECONSUMETIMES PREPARED_TRANSACTION_OFFSET BODYLEN
MIDDLE: Final = struct.Struct(">iqi")
INT8: Final = struct.Struct(">b")
INT16: Final = struct.Struct(">h")
INT32: Final = struct.Struct(">i")
INT64: Final = struct.Struct(">q")
BLANK: Final = struct.Struct(">ii")

QUEUE_OFFSET_POS: Final = 20
PHYSICAL_OFFSET_POS: Final = 28
SYSFLAG_POS: Final = 36
STORE_TIMESTAMP_POS_V4: Final = 56

Address = tuple[str, int]
#: What a local append tells the reput about the record it wrote, so the reput need not parse it
#: back: (commit-log offset, size, topic, queue id, queue offset, store timestamp, properties,
#: sys flag, prepared transaction offset). A tuple: one is built per message.
DispatchHint = tuple[int, int, str, int, int, int, str, int, int]


def body_crc(body: bytes | memoryview) -> int:
    """``UtilAll.crc32``: CRC-32 masked to 31 bits."""
    return zlib.crc32(body) & 0x7FFFFFFF


def transaction_type(sys_flag: int) -> int:
    """The transaction bits of ``sys_flag`` (``MessageSysFlag.getTransactionValue``)."""
    return sys_flag & TRANSACTION_TYPE_MASK


_UNCONSUMABLE_TYPES: Final = frozenset({TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE})


def is_prepared_or_rollback(sys_flag: int) -> bool:
    """A prepared or rolled-back transaction record: queue offset 0, no consume-queue unit,
    never consumed."""
    return sys_flag & TRANSACTION_TYPE_MASK in _UNCONSUMABLE_TYPES


def pack_address(addr: Address) -> bytes:
    """BORNHOST/STOREHOST bytes (address + int32 port); cached, the append path calls it per
    message.

    Raises:
        MessageCodecError: not an IP address.
    """
    return _pack_address(addr, "HOST")


@functools.lru_cache(maxsize=4096)
def record_struct(  # noqa: PLR0917 -- positional: the per-append cache key
    born_len: int, store_len: int, body_len: int, topic_len: int, props_len: int, v2: bool, /
) -> struct.Struct:
    """One Struct for a whole record of this shape, so an append is a single ``pack_into``
    (positional: a keyword call makes the cache key several times dearer)."""
    return struct.Struct(
        f">iiiiiqqiq{born_len}sq{store_len}siqi{body_len}s"
        f"{'h' if v2 else 'b'}{topic_len}sh{props_len}s"
    )


def pack_record_into(  # noqa: PLR0917 -- positional: called per append
    buf: Buffer,
    pos: int,
    topic: bytes,
    queue_id: int,
    body: bytes,
    flag: int,
    queue_offset: int,
    sys_flag: int,
    born_timestamp: int,
    born_host: bytes,
    store_timestamp: int,
    store_host: bytes,
    reconsume_times: int,
    prepared_transaction_offset: int,
    properties: bytes,
    physical_offset: int,
) -> int:
    """Write one record at ``buf[pos:]`` (hosts pre-packed by :func:`pack_address`); the same
    bytes as :func:`encode_record`. Returns TOTALSIZE. The caller checks that it fits. The
    append path passes the arguments by position, per message.

    Raises:
        MessageCodecError: properties longer than 32767 bytes.
    """
    props_len = len(properties)
    if props_len > MAX_PROPERTIES_BYTES:
        raise MessageCodecError(f"properties of {props_len} bytes exceed 32767", field="PROPERTIES")
    born_len = len(born_host)
    store_len = len(store_host)
    topic_len = len(topic)
    body_len = len(body)
    v2 = topic_len > 127
    sys_flag &= ~(BORNHOST_V6_FLAG | STOREHOST_V6_FLAG)
    if born_len == 20:
        sys_flag |= BORNHOST_V6_FLAG
    if store_len == 20:
        sys_flag |= STOREHOST_V6_FLAG
    st = record_struct(born_len, store_len, body_len, topic_len, props_len, v2)
    total: int = st.size
    st.pack_into(
        buf, pos, total, MAGIC_V2 if v2 else MAGIC_V1, zlib.crc32(body) & 0x7FFFFFFF, queue_id,
        flag, queue_offset, physical_offset, sys_flag, born_timestamp, born_host,
        store_timestamp, store_host, reconsume_times, prepared_transaction_offset, body_len,
        body, topic_len, topic, props_len, properties,
    )  # fmt: skip
    return total


def record_length(topic: bytes, body: bytes, properties: bytes, born: bytes, store: bytes) -> int:
    """TOTALSIZE of the record :func:`pack_record_into` would write."""
    topic_len = (2 if len(topic) > 127 else 1) + len(topic)
    return 72 + len(born) + len(store) + len(body) + topic_len + 2 + len(properties)


def _pack_address(addr: Address, fld: str) -> bytes:
    try:
        packed = _packed_ip(addr[0])
    except ValueError as exc:
        raise MessageCodecError(f"bad address {addr[0]!r}", field=fld) from exc
    return packed + INT32.pack(addr[1])


@functools.lru_cache(maxsize=4096)
def _ip_text(packed: bytes) -> str:
    return str(ipaddress.ip_address(packed))


@functools.lru_cache(maxsize=4096)
def _packed_ip(host: str) -> bytes:
    # Parsed once per host: ipaddress parsing was 5% of a broker's send path.
    return ipaddress.ip_address(host).packed


def _is_v6(addr: Address) -> bool:
    return ":" in addr[0]


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageRecord:
    """One stored message. ``properties`` is the raw section-3 string, kept byte-for-byte."""

    topic: str
    queue_id: int
    body: bytes
    flag: int = 0
    queue_offset: int = 0
    physical_offset: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: Address = ("127.0.0.1", 0)
    store_timestamp: int = 0
    store_host: Address = ("127.0.0.1", 0)
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    properties: str = ""
    magic: int = MAGIC_V1

    def property_map(self) -> dict[str, str]:
        """The decoded properties."""
        return decode_properties(self.properties)


def record_size(
    *, body_len: int, topic_len: int, props_len: int, magic: int, born_v6: bool, store_v6: bool
) -> int:
    """``calMsgLength``: the TOTALSIZE of a record with these lengths."""
    return (
        4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8
        + (20 if born_v6 else 8)
        + 8
        + (20 if store_v6 else 8)
        + 4 + 8 + 4 + body_len
        + (2 if magic == MAGIC_V2 else 1) + topic_len
        + 2 + props_len
    )  # fmt: skip


def choose_magic(topic_bytes: bytes) -> int:
    """v2 when the topic is longer than a signed byte can say (``autoMessageVersionOnTopicLen``)."""
    return MAGIC_V2 if len(topic_bytes) > 127 else MAGIC_V1


def encode_record(rec: MessageRecord) -> bytes:
    """Encode ``rec``; the IPv6 sysflag bits are derived from the two addresses.

    Raises:
        MessageCodecError: topic or properties too long for their length field, or a bad address.
    """
    topic = rec.topic.encode()
    props = rec.properties.encode()
    if len(props) > MAX_PROPERTIES_BYTES:
        raise MessageCodecError(
            f"properties of {len(props)} bytes exceed 32767", field="PROPERTIES"
        )
    if rec.magic == MAGIC_V1 and len(topic) > 127:
        raise MessageCodecError(f"topic of {len(topic)} bytes needs v2", field="TOPICLEN")
    if rec.magic not in (MAGIC_V1, MAGIC_V2):
        raise MessageCodecError(f"unknown magic {rec.magic:#x}", field="MAGICCODE")
    born_v6 = _is_v6(rec.born_host)
    store_v6 = _is_v6(rec.store_host)
    sys_flag = rec.sys_flag & ~(BORNHOST_V6_FLAG | STOREHOST_V6_FLAG)
    sys_flag |= (BORNHOST_V6_FLAG if born_v6 else 0) | (STOREHOST_V6_FLAG if store_v6 else 0)
    total = record_size(
        body_len=len(rec.body),
        topic_len=len(topic),
        props_len=len(props),
        magic=rec.magic,
        born_v6=born_v6,
        store_v6=store_v6,
    )
    topic_len = (INT16 if rec.magic == MAGIC_V2 else INT8).pack(len(topic))
    return b"".join(
        (
            HEAD.pack(
                total,
                rec.magic,
                body_crc(rec.body),
                rec.queue_id,
                rec.flag,
                rec.queue_offset,
                rec.physical_offset,
                sys_flag,
                rec.born_timestamp,
            ),
            _pack_address(rec.born_host, "BORNHOST"),
            INT64.pack(rec.store_timestamp),
            _pack_address(rec.store_host, "STOREHOST"),
            MIDDLE.pack(rec.reconsume_times, rec.prepared_transaction_offset, len(rec.body)),
            rec.body,
            topic_len,
            topic,
            INT16.pack(len(props)),
            props,
        )
    )


def encode_blank(remaining: int) -> bytes:
    """The end-of-file marker for a file with ``remaining`` bytes left (section 1.1)."""
    return BLANK.pack(remaining, BLANK_MAGIC)


class CheckStatus(enum.Enum):
    """Outcome of :func:`check_record`."""

    VALID = "valid"
    END_OF_FILE = "end_of_file"
    INVALID = "invalid"


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordCheck:
    """``checkMessageAndReturnSize``: a valid record and its size, a blank marker, or invalid."""

    status: CheckStatus
    size: int = 0
    record: MessageRecord | None = None
    reason: str = ""


def _invalid(reason: str) -> RecordCheck:
    return RecordCheck(status=CheckStatus.INVALID, reason=reason)


def _unpack_address(buf: memoryview, pos: int, v6: bool) -> tuple[Address, int]:
    n = 16 if v6 else 4
    host = _ip_text(bytes(buf[pos : pos + n]))
    (port,) = INT32.unpack_from(buf, pos + n)
    return (host, port), pos + n + 4


def valid_record_size(buf: memoryview, pos: int, *, check_crc: bool) -> int:
    """``checkMessageAndReturnSize`` reduced to a recovery walk's question, without copying
    the body: the size of the valid record at ``pos`` (> 0), 0 for the end-of-file blank
    marker, -1 for anything else (a torn tail, zeros, garbage). Valid means: a known magic,
    TOTALSIZE within ``buf``, BODYLEN, TOPICLEN and PROPLEN adding up to TOTALSIZE exactly,
    topic and properties UTF-8, and the body CRC when ``check_crc`` (upstream's
    ``checkCRCOnRecover``): what :func:`check_record` accepts. Never raises."""
    try:
        total, magic = BLANK.unpack_from(buf, pos)
        if magic == BLANK_MAGIC:
            return 0
        end = pos + total
        if magic not in (MAGIC_V1, MAGIC_V2) or total < HEAD.size or end > len(buf):
            return -1
        (sys_flag,) = INT32.unpack_from(buf, pos + SYSFLAG_POS)
        p = pos + HEAD.size + (20 if sys_flag & BORNHOST_V6_FLAG else 8) + 8
        p += (20 if sys_flag & STOREHOST_V6_FLAG else 8) + MIDDLE.size
        (body_len,) = INT32.unpack_from(buf, p - 4)
        if body_len < 0 or p + body_len > end:
            return -1
        if check_crc:
            (crc,) = INT32.unpack_from(buf, pos + 8)
            if zlib.crc32(buf[p : p + body_len]) & 0x7FFFFFFF != crc:
                return -1
        p += body_len
        if magic == MAGIC_V2:
            (topic_len,) = INT16.unpack_from(buf, p)
            p += 2
        else:
            (topic_len,) = INT8.unpack_from(buf, p)
            p += 1
        topic_at = p
        p += topic_len
        (props_len,) = INT16.unpack_from(buf, p)
        p += 2
        if topic_len <= 0 or props_len < 0 or p + props_len != end:
            return -1
        # Texts must decode, as the dispatch decodes them (a record it cannot read would
        # stop the reput for good).
        str(buf[topic_at : topic_at + topic_len], "utf-8")
        str(buf[p:end], "utf-8")
    except (struct.error, UnicodeDecodeError):
        return -1
    return int(total)


def check_record(
    buf: bytes | bytearray | memoryview, pos: int = 0, *, check_crc: bool = True
) -> RecordCheck:
    """Validate and decode the record at ``pos`` (section 1.2); never raises on bad bytes."""
    view = memoryview(buf)
    avail = len(view) - pos
    if avail < 8:
        return _invalid("fewer than 8 bytes")
    total, magic = BLANK.unpack_from(view, pos)
    if magic == BLANK_MAGIC:
        return RecordCheck(status=CheckStatus.END_OF_FILE, size=0)
    if magic not in (MAGIC_V1, MAGIC_V2):
        return _invalid(f"bad magic {magic & 0xFFFFFFFF:#x}")
    if total < 8 or total > avail:
        return _invalid(f"total size {total} with {avail} bytes left")
    try:
        rec, end = _decode_fields(view[pos : pos + total], magic)
    except (struct.error, ValueError, UnicodeDecodeError) as exc:
        return _invalid(f"undecodable: {exc}")
    if end != total:
        return _invalid(f"read total count {end} not equals msg total size {total}")
    if check_crc:
        (stored,) = INT32.unpack_from(view, pos + 8)
        if body_crc(rec.body) != stored:
            return _invalid("body CRC mismatch")
    return RecordCheck(status=CheckStatus.VALID, size=total, record=rec)


def _decode_fields(view: memoryview, magic: int) -> tuple[MessageRecord, int]:
    (_, _, _, queue_id, flag, queue_offset, phys, sys_flag, born_ts) = HEAD.unpack_from(view, 0)
    pos = HEAD.size
    born, pos = _unpack_address(view, pos, bool(sys_flag & BORNHOST_V6_FLAG))
    (store_ts,) = INT64.unpack_from(view, pos)
    store, pos = _unpack_address(view, pos + 8, bool(sys_flag & STOREHOST_V6_FLAG))
    reconsume, prepared, body_len = MIDDLE.unpack_from(view, pos)
    pos += MIDDLE.size
    if body_len < 0 or pos + body_len > len(view):
        raise ValueError(f"body length {body_len}")
    body = bytes(view[pos : pos + body_len])
    pos += body_len
    width = INT16 if magic == MAGIC_V2 else INT8
    (topic_len,) = width.unpack_from(view, pos)
    pos += width.size
    if topic_len < 0 or pos + topic_len > len(view):
        raise ValueError(f"topic length {topic_len}")
    topic = bytes(view[pos : pos + topic_len]).decode()
    pos += topic_len
    (props_len,) = INT16.unpack_from(view, pos)
    pos += 2
    if props_len < 0 or pos + props_len > len(view):
        raise ValueError(f"properties length {props_len}")
    props = bytes(view[pos : pos + props_len]).decode()
    pos += props_len
    rec = MessageRecord(
        topic=topic,
        queue_id=queue_id,
        body=body,
        flag=flag,
        queue_offset=queue_offset,
        physical_offset=phys,
        sys_flag=sys_flag,
        born_timestamp=born_ts,
        born_host=born,
        store_timestamp=store_ts,
        store_host=store,
        reconsume_times=reconsume,
        prepared_transaction_offset=prepared,
        properties=props,
        magic=magic,
    )
    return rec, pos


def decode_record(buf: bytes | bytearray | memoryview, pos: int = 0) -> MessageRecord:
    """Decode one record at ``pos``, CRC checked.

    Raises:
        MessageCodecError: the bytes are not a valid record (a blank marker included).
    """
    check = check_record(buf, pos)
    if check.record is None:
        reason = check.reason or "end-of-file blank marker"
        raise MessageCodecError(f"no valid record: {reason}", field="record", offset=pos)
    return check.record


def decode_records(buf: bytes | bytearray | memoryview) -> list[MessageRecord]:
    """Records concatenated back to back (a pull response body)."""
    out: list[MessageRecord] = []
    pos = 0
    while pos < len(buf):
        rec = decode_record(buf, pos)
        (size,) = INT32.unpack_from(buf, pos)
        out.append(rec)
        pos += size
    return out


def encode_offset_msg_id(store_host: Address, physical_offset: int) -> str:
    """Section 4.1: uppercase hex of address + int32 port + int64 offset."""
    return (_pack_address(store_host, "STOREHOST") + INT64.pack(physical_offset)).hex().upper()


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
    n = 4 if len(raw) == 16 else 16
    host = str(ipaddress.ip_address(raw[:n]))
    (port,) = INT32.unpack_from(raw, n)
    (offset,) = INT64.unpack_from(raw, n + 4)
    return (host, port), offset
