"""The stored message record: what the CommitLog holds, HA replicates and pulls return.

Owns: encoding and decoding one record, the end-of-file blank marker, and the validity check used
by recovery and dispatch. Mirrors ``MessageExtEncoder`` / ``MessageDecoder.decode`` and
``CommitLog.checkMessageAndReturnSize`` (message-format.md sections 1, 1.1, 1.2). Pure.

Layout (big-endian; IPv4 hosts shown, IPv6 hosts are 16 + 4 bytes when SYSFLAG bit 4 / 5 is set):

| #  | size      | field                       | notes                                          |
| -- | --------- | --------------------------- | ---------------------------------------------- |
| 1  | 4         | TOTALSIZE                   | whole record, this field included               |
| 2  | 4         | MAGICCODE                   | v1 0xDAA320A7, v2 0xDAA320AB                    |
| 3  | 4         | BODYCRC                     | CRC-32 of the body masked with 0x7FFFFFFF       |
| 4  | 4         | QUEUEID                     |                                                |
| 5  | 4         | FLAG                        | producer's Message.flag                        |
| 6  | 8         | QUEUEOFFSET                 | consume-queue offset                           |
| 7  | 8         | PHYSICALOFFSET              | CommitLog offset of this record                |
| 8  | 4         | SYSFLAG                     | message-format.md section 2                    |
| 9  | 8         | BORNTIMESTAMP               |                                                |
| 10 | 8 / 20    | BORNHOST                    | address + int32 port                           |
| 11 | 8         | STORETIMESTAMP              |                                                |
| 12 | 8 / 20    | STOREHOST                   | address + int32 port                           |
| 13 | 4         | RECONSUMETIMES              |                                                |
| 14 | 8         | PREPARED_TRANSACTION_OFFSET |                                                |
| 15 | 4 + b     | BODYLEN, BODY               |                                                |
| 16 | 1/2 + t   | TOPICLEN, TOPIC             | v1: signed byte; v2: int16                     |
| 17 | 2 + p     | PROPLEN, PROPERTIES         | int16; message-format.md section 3             |

End-of-file blank marker: ``{int32 remaining, int32 0xCBD43194}``.
"""

from __future__ import annotations

import ipaddress
import struct
import zlib
from dataclasses import dataclass, field
from typing import Final

from rocketpy.common.errors import CodecError

MAGIC_V1: Final = -626843481  # 0xDAA320A7
MAGIC_V2: Final = -626843477  # 0xDAA320AB
BLANK_MAGIC: Final = -875286124  # 0xCBD43194
BORNHOST_V6_FLAG: Final = 0x10
STOREHOST_V6_FLAG: Final = 0x20
MAX_PROPERTIES_LENGTH: Final = 32767

_HEAD: Final = struct.Struct(">iiiiiqqiq")  # TOTALSIZE .. BORNTIMESTAMP: 48 bytes
_Q: Final = struct.Struct(">q")
_I: Final = struct.Struct(">i")
_H: Final = struct.Struct(">h")
_B: Final = struct.Struct(">b")
_BLANK: Final = struct.Struct(">ii")
_MID: Final = struct.Struct(">iq")  # RECONSUMETIMES, PREPARED_TRANSACTION_OFFSET


def body_crc(body: bytes | memoryview) -> int:
    """BODYCRC: CRC-32 masked with 0x7FFFFFFF (``UtilAll.crc32``)."""
    return zlib.crc32(body) & 0x7FFFFFFF


@dataclass(frozen=True, slots=True)
class Host:
    """An address and port as stored (IPv4 or IPv6)."""

    address: str
    port: int

    def encode(self) -> bytes:
        """4 or 16 address bytes followed by an int32 port."""
        try:
            packed = ipaddress.ip_address(self.address).packed
        except ValueError as e:
            raise CodecError(f"not an IP address: {self.address!r}", field="host") from e
        return packed + _I.pack(self.port)

    @property
    def is_v6(self) -> bool:
        """True for an IPv6 address."""
        return ":" in self.address


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageRecord:
    """One stored message."""

    topic: str
    body: bytes
    queue_id: int = 0
    flag: int = 0
    queue_offset: int = 0
    physical_offset: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: Host = field(default_factory=lambda: Host("127.0.0.1", 0))
    store_timestamp: int = 0
    store_host: Host = field(default_factory=lambda: Host("127.0.0.1", 0))
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    properties: str = ""
    body_crc: int = -1

    @property
    def effective_sys_flag(self) -> int:
        """SYSFLAG with the IPv6 bits set from the hosts, as the broker stores it."""
        flag = self.sys_flag & ~(BORNHOST_V6_FLAG | STOREHOST_V6_FLAG)
        if self.born_host.is_v6:
            flag |= BORNHOST_V6_FLAG
        if self.store_host.is_v6:
            flag |= STOREHOST_V6_FLAG
        return flag


def record_length(
    body_len: int,
    topic_len: int,
    props_len: int,
    *,
    v2: bool = False,
    born_v6: bool = False,
    store_v6: bool = False,
) -> int:
    """``MessageExtEncoder.calMsgLength``: 91 + body + topic + properties for v1 and IPv4 hosts."""
    return (
        4
        + 4
        + 4
        + 4
        + 4
        + 8
        + 8
        + 4
        + 8
        + (20 if born_v6 else 8)
        + 8
        + (20 if store_v6 else 8)
        + 4
        + 8
        + 4
        + body_len
        + (2 if v2 else 1)
        + topic_len
        + 2
        + props_len
    )


def encode_record(rec: MessageRecord, *, v2: bool | None = None) -> bytes:
    """The record bytes. ``v2=None`` picks v2 only for topics over 127 bytes, as 5.x does.

    Raises:
        CodecError: properties over 32767 bytes or a topic over the width's limit.
    """
    topic = rec.topic.encode("utf-8")
    props = rec.properties.encode("utf-8")
    use_v2 = len(topic) > 127 if v2 is None else v2
    if len(props) > MAX_PROPERTIES_LENGTH:
        raise CodecError(f"properties of {len(props)} bytes exceed 32767", field="properties")
    if len(topic) > (32767 if use_v2 else 127):
        raise CodecError(f"topic of {len(topic)} bytes too long", field="topic")
    sys_flag = rec.effective_sys_flag
    born, store = rec.born_host.encode(), rec.store_host.encode()
    total = record_length(
        len(rec.body),
        len(topic),
        len(props),
        v2=use_v2,
        born_v6=rec.born_host.is_v6,
        store_v6=rec.store_host.is_v6,
    )
    crc = body_crc(rec.body) if rec.body_crc < 0 else rec.body_crc
    return b"".join(
        (
            _HEAD.pack(
                total,
                MAGIC_V2 if use_v2 else MAGIC_V1,
                crc,
                rec.queue_id,
                rec.flag,
                rec.queue_offset,
                rec.physical_offset,
                sys_flag,
                rec.born_timestamp,
            ),
            born,
            _Q.pack(rec.store_timestamp),
            store,
            _MID.pack(rec.reconsume_times, rec.prepared_transaction_offset),
            _I.pack(len(rec.body)),
            rec.body,
            _H.pack(len(topic)) if use_v2 else _B.pack(len(topic)),
            topic,
            _H.pack(len(props)),
            props,
        )
    )


def encode_blank(remaining: int) -> bytes:
    """The 8-byte end-of-file marker written when a record does not fit the file's rest."""
    return _BLANK.pack(remaining, BLANK_MAGIC)


def _host(buf: memoryview, pos: int, v6: bool) -> tuple[Host, int]:
    size = 16 if v6 else 4
    addr = str(ipaddress.ip_address(bytes(buf[pos : pos + size])))
    (port,) = _I.unpack_from(buf, pos + size)
    return Host(addr, port), pos + size + 4


def _need(buf: memoryview, end: int, name: str, pos: int) -> None:
    if end > len(buf):
        raise CodecError("record runs past its end", field=name, offset=pos)


def decode_record(data: bytes | memoryview, *, check_crc: bool = True) -> MessageRecord:
    """Decode one record that starts at ``data[0]`` (trailing bytes are ignored).

    Raises:
        CodecError: a short buffer, a bad magic, a length that disagrees with TOTALSIZE, or (with
            ``check_crc``) a body whose CRC does not match; names the field.
    """
    buf = memoryview(data)
    if len(buf) < _HEAD.size:
        raise CodecError("record shorter than its fixed header", field="TOTALSIZE", offset=0)
    total, magic, crc, queue_id, flag, qoff, poff, sys_flag, born_ts = _HEAD.unpack_from(buf, 0)
    if magic not in (MAGIC_V1, MAGIC_V2):
        raise CodecError(f"bad magic code {magic & 0xFFFFFFFF:#x}", field="MAGICCODE", offset=4)
    _need(buf, total, "TOTALSIZE", 0)
    buf = buf[:total]
    try:
        born, pos = _host(buf, _HEAD.size, bool(sys_flag & BORNHOST_V6_FLAG))
        (store_ts,) = _Q.unpack_from(buf, pos)
        store, pos = _host(buf, pos + 8, bool(sys_flag & STOREHOST_V6_FLAG))
        reconsume, prepared = _MID.unpack_from(buf, pos)
        (body_len,) = _I.unpack_from(buf, pos + 12)
        pos += 16
        _need(buf, pos + body_len, "BODY", pos)
        body = bytes(buf[pos : pos + body_len])
        pos += body_len
        v2 = magic == MAGIC_V2
        (topic_len,) = (_H if v2 else _B).unpack_from(buf, pos)
        pos += 2 if v2 else 1
        topic = bytes(buf[pos : pos + topic_len]).decode("utf-8")
        pos += topic_len
        (props_len,) = _H.unpack_from(buf, pos)
        props = bytes(buf[pos + 2 : pos + 2 + props_len]).decode("utf-8")
        pos += 2 + props_len
    except (struct.error, ValueError) as e:
        raise CodecError(f"record does not decode: {e}", field="record") from e
    if body_len < 0 or topic_len < 0 or props_len < 0 or pos != total:
        raise CodecError(
            f"read total count {pos} not equals msg total size {total}", field="TOTALSIZE", offset=0
        )
    if check_crc and body_crc(body) != crc:
        raise CodecError("body CRC mismatch", field="BODYCRC", offset=8)
    return MessageRecord(
        topic=topic,
        body=body,
        queue_id=queue_id,
        flag=flag,
        queue_offset=qoff,
        physical_offset=poff,
        sys_flag=sys_flag,
        born_timestamp=born_ts,
        born_host=born,
        store_timestamp=store_ts,
        store_host=store,
        reconsume_times=reconsume,
        prepared_transaction_offset=prepared,
        properties=props,
        body_crc=crc,
    )


@dataclass(frozen=True, slots=True)
class CheckResult:
    """``checkMessageAndReturnSize``: ``size`` > 0 a record, 0 the file's end, -1 invalid."""

    size: int
    record: MessageRecord | None = None


def check_record(data: bytes | memoryview, *, check_crc: bool = True) -> CheckResult:
    """Classify the bytes at a read position: a valid record, the blank end marker, or invalid
    (torn tail, bad magic, CRC or length mismatch). Never raises."""
    buf = memoryview(data)
    if len(buf) < 8:
        return CheckResult(-1)
    total, magic = _BLANK.unpack_from(buf, 0)
    if magic == BLANK_MAGIC:
        return CheckResult(0)
    if magic not in (MAGIC_V1, MAGIC_V2) or total <= 0 or total > len(buf):
        return CheckResult(-1)
    try:
        rec = decode_record(buf, check_crc=check_crc)
    except CodecError:
        return CheckResult(-1)
    return CheckResult(total, rec)
