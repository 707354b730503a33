"""Message pieces the broker handles outside the commit log: property keys and the properties
string, offset message ids, unique ids, and the SEND_BATCH_MESSAGE body. Pure.

Owns: :class:`MessageConst` keys (the properties codec itself lives with the record codec in
``store/commit_log/record.py``),
:func:`create_offset_msg_id`/:func:`decode_offset_msg_id`, :class:`UniqIdGenerator`
(``MessageClientIDSetter``), :func:`decode_batch_body` (``MessageDecoder.decodeMessages``).
message-format.md sections 3, 4, 5. Must not: do I/O.

Batch body entry layout (big-endian):

| offset | size | field |
| --- | --- | --- |
| 0 | 4 | TOTALSIZE = 20 + bodyLen + 2 + propLen |
| 4 | 4 | MAGICCODE (ignored) |
| 8 | 4 | BODYCRC (ignored) |
| 12 | 4 | FLAG |
| 16 | 4 | BODYLEN |
| 20 | bodyLen | BODY |
| 20+b | 2 | PROPLEN |
| 22+b | propLen | PROPERTIES |
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import struct
from dataclasses import dataclass
from typing import Final

from rocketpy.common.errors import CodecError
from rocketpy.store.commit_log.record import decode_properties, encode_properties

NAME_VALUE_SEPARATOR: Final = "\x01"
PROPERTY_SEPARATOR: Final = "\x02"


class MessageConst:
    """Property keys (``MessageConst``) the broker reads or writes."""

    KEYS: Final = "KEYS"
    TAGS: Final = "TAGS"
    WAIT: Final = "WAIT"
    DELAY: Final = "DELAY"
    UNIQ_KEY: Final = "UNIQ_KEY"
    TRAN_MSG: Final = "TRAN_MSG"
    PGROUP: Final = "PGROUP"
    REAL_TOPIC: Final = "REAL_TOPIC"
    REAL_QID: Final = "REAL_QID"
    RETRY_TOPIC: Final = "RETRY_TOPIC"
    ORIGIN_MESSAGE_ID: Final = "ORIGIN_MESSAGE_ID"
    MAX_RECONSUME_TIMES: Final = "MAX_RECONSUME_TIMES"
    RECONSUME_TIME: Final = "RECONSUME_TIME"
    CLUSTER: Final = "CLUSTER"
    MSG_REGION: Final = "MSG_REGION"
    TRACE_ON: Final = "TRACE_ON"
    POP_CK: Final = "POP_CK"


_OFFSET_ID_V4: Final = struct.Struct(">4siq")
_OFFSET_ID_V6: Final = struct.Struct(">16siq")


def create_offset_msg_id(host: str, port: int, phy_offset: int) -> str:
    """``MessageDecoder.createMessageId``: store host IP + port + commit-log offset, upper hex."""
    packed = ipaddress.ip_address(host).packed
    layout = _OFFSET_ID_V4 if len(packed) == 4 else _OFFSET_ID_V6
    return layout.pack(packed, port, phy_offset).hex().upper()


def decode_offset_msg_id(msg_id: str) -> tuple[str, int, int]:
    """``MessageDecoder.decodeMessageId``: (host, port, commit-log offset).

    Raises:
        CodecError: not 32 (IPv4) or 56 (IPv6) hex characters.
    """
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError as e:
        raise CodecError(f"offset msgId is not hex: {msg_id!r}", field="msgId") from e
    if len(raw) == _OFFSET_ID_V4.size:
        addr, port, offset = _OFFSET_ID_V4.unpack(raw)
    elif len(raw) == _OFFSET_ID_V6.size:
        addr, port, offset = _OFFSET_ID_V6.unpack(raw)
    else:
        raise CodecError(f"offset msgId has a bad length: {msg_id!r}", field="msgId")
    return str(ipaddress.ip_address(addr)), port, offset


def month_start_ms(now_ms: int) -> int:
    """Wall-clock ms at 00:00 local time on the first day of ``now_ms``'s month (upstream uses
    the JVM's default time zone)."""
    now = dt.datetime.fromtimestamp(now_ms / 1000).astimezone()
    start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    return int(start.timestamp() * 1000)


class UniqIdGenerator:
    """``MessageClientIDSetter.createUniqID``: 16 bytes as 32 upper-case hex characters.

    Layout: IPv4 (4) + pid (int16) + a per-process hash (int32) + ms since the start of the
    current month (int32) + counter (int16).
    """

    _FIX: Final = struct.Struct(">4shi")
    _VAR: Final = struct.Struct(">ih")

    def __init__(self, ip: str, pid: int, seed: int) -> None:
        """Args: ``ip`` an IPv4 address of this host (others fall back to loopback); ``pid``;
        ``seed`` stands in for the Java class-loader hash."""
        try:
            packed = ipaddress.IPv4Address(ip).packed
        except ValueError:
            packed = ipaddress.IPv4Address("127.0.0.1").packed
        self._prefix = self._FIX.pack(packed, pid & 0x7FFF, seed & 0x7FFFFFFF).hex().upper()
        self._counter = 0

    def create(self, now_ms: int) -> str:
        """A new id for wall-clock time ``now_ms``."""
        self._counter = (self._counter + 1) & 0x7FFF
        diff = (now_ms - month_start_ms(now_ms)) & 0x7FFFFFFF
        return self._prefix + self._VAR.pack(diff, self._counter).hex().upper()


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchEntry:
    """One message of a SEND_BATCH_MESSAGE body."""

    flag: int
    body: bytes
    properties: dict[str, str]


_BATCH_HEAD: Final = struct.Struct(">iiiii")
_PROP_LEN: Final = struct.Struct(">h")


def decode_batch_body(body: bytes | memoryview) -> list[BatchEntry]:
    """``MessageDecoder.decodeMessages`` of a client batch.

    Raises:
        CodecError: a truncated or inconsistent entry (names the offset).
    """
    view = memoryview(body)
    out: list[BatchEntry] = []
    pos = 0
    while pos < len(view):
        if len(view) - pos < _BATCH_HEAD.size:
            raise CodecError("truncated batch entry header", field="batch", offset=pos)
        total, _magic, _crc, flag, body_len = _BATCH_HEAD.unpack_from(view, pos)
        start = pos + _BATCH_HEAD.size
        end_body = start + body_len
        if body_len < 0 or end_body + _PROP_LEN.size > len(view):
            raise CodecError("batch entry body overruns the request", field="batch", offset=pos)
        (prop_len,) = _PROP_LEN.unpack_from(view, end_body)
        end = end_body + _PROP_LEN.size + prop_len
        if prop_len < 0 or end > len(view) or total != end - pos:
            raise CodecError("batch entry size mismatch", field="batch", offset=pos)
        try:
            props_text = bytes(view[end_body + _PROP_LEN.size : end]).decode("utf-8")
        except UnicodeDecodeError as e:
            raise CodecError(
                "batch entry properties are not UTF-8", field="batch", offset=pos
            ) from e
        out.append(
            BatchEntry(
                flag=flag,
                body=bytes(view[start:end_body]),
                properties=decode_properties(props_text),
            )
        )
        pos = end
    return out


def encode_batch_body(entries: list[BatchEntry]) -> bytes:
    """``MessageDecoder.encodeMessages`` (what a client sends; used by tests and tools)."""
    parts: list[bytes] = []
    for entry in entries:
        props = encode_properties(entry.properties).encode("utf-8")
        total = _BATCH_HEAD.size + len(entry.body) + _PROP_LEN.size + len(props)
        parts.append(_BATCH_HEAD.pack(total, 0, 0, entry.flag, len(entry.body)))
        parts.append(entry.body)
        parts.append(_PROP_LEN.pack(len(props)))
        parts.append(props)
    return b"".join(parts)
