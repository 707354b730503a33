"""ROCKETMQ binary header encoding (serialize type 1).

Owns: the binary header of ``RocketMQSerializable``. Pure.

Layout (remoting.md section 3; big-endian):

| offset | size   | field        | notes                                            |
| ------ | ------ | ------------ | ------------------------------------------------ |
| 0      | 2      | code         | int16                                            |
| 2      | 1      | language     | LanguageCode value                               |
| 3      | 2      | version      | int16                                            |
| 5      | 4      | opaque       | int32                                            |
| 9      | 4      | flag         | int32                                            |
| 13     | 4      | remarkLength | 0 when remark is null or empty                   |
| 17     | r      | remark       | UTF-8                                            |
| 17+r   | 4      | extLength    | total bytes of the entries that follow           |
| 21+r   | ext    | entries      | {keyLen int16, key, valLen int32, val} repeated  |

Decode quirk kept from Java: a zero-length string reads as null, so an empty remark is None and an
entry with an empty value is dropped from ``ext_fields`` (Java puts a null value, which every header
decoder treats as absent).
"""

from __future__ import annotations

import struct
from typing import Final

from rocketpy.common.errors import CodecError
from rocketpy.remoting.protocol.command import RemotingCommand

_FIXED: Final = struct.Struct(">hbhii")
_I32: Final = struct.Struct(">i")
_I16: Final = struct.Struct(">h")


def _int16(value: int) -> int:
    return ((value + 0x8000) & 0xFFFF) - 0x8000


def encode_header(cmd: RemotingCommand) -> bytes:
    """Encode the binary header of ``cmd``.

    Raises:
        CodecError: ``code`` or ``version`` does not fit in int16.
    """
    if not -32768 <= cmd.code <= 32767:
        raise CodecError(f"code {cmd.code} does not fit the ROCKETMQ header", field="code")
    remark = cmd.remark.encode() if cmd.remark else b""
    entries = bytearray()
    for key, value in (cmd.ext_fields or {}).items():
        k = key.encode()
        v = value.encode()
        entries += _I16.pack(len(k)) + k + _I32.pack(len(v)) + v
    language = cmd.language if 0 <= cmd.language <= 127 else 0
    return b"".join(
        (
            _FIXED.pack(cmd.code, language, _int16(cmd.version), cmd.opaque, cmd.flag),
            _I32.pack(len(remark)),
            remark,
            _I32.pack(len(entries)),
            bytes(entries),
        )
    )


def _take(buf: memoryview, pos: int, size: int, field: str) -> tuple[memoryview, int]:
    if size < 0 or pos + size > len(buf):
        raise CodecError(f"{field} length {size} exceeds the header", field=field, offset=pos)
    return buf[pos : pos + size], pos + size


def decode_header(data: bytes | bytearray | memoryview) -> RemotingCommand:
    """Decode a binary header.

    Raises:
        CodecError: truncated header, or a length that runs past its end.
    """
    buf = memoryview(data)
    if len(buf) < _FIXED.size + 4:
        raise CodecError("ROCKETMQ header too short", field="header", offset=0)
    code, language, version, opaque, flag = _FIXED.unpack_from(buf, 0)
    pos = _FIXED.size
    (remark_len,) = _I32.unpack_from(buf, pos)
    raw_remark, pos = _take(buf, pos + 4, remark_len, "remark")
    if pos + 4 > len(buf):
        raise CodecError("ROCKETMQ header ends before extLength", field="extLength", offset=pos)
    (ext_len,) = _I32.unpack_from(buf, pos)
    ext_buf, _ = _take(buf, pos + 4, ext_len, "extFields")
    ext: dict[str, str] = {}
    i = 0
    while i < len(ext_buf):
        if i + 2 > len(ext_buf):
            raise CodecError("truncated ext key length", field="extFields", offset=pos + 4 + i)
        (klen,) = _I16.unpack_from(ext_buf, i)
        key, i = _take(ext_buf, i + 2, klen, "extFields.key")
        if i + 4 > len(ext_buf):
            raise CodecError("truncated ext value length", field="extFields", offset=pos + 4 + i)
        (vlen,) = _I32.unpack_from(ext_buf, i)
        value, i = _take(ext_buf, i + 4, vlen, "extFields.value")
        if vlen > 0:
            ext[bytes(key).decode("utf-8", "replace")] = bytes(value).decode("utf-8", "replace")
    return RemotingCommand(
        code=code,
        language=language,
        version=version,
        opaque=opaque,
        flag=flag,
        remark=bytes(raw_remark).decode("utf-8", "replace") if remark_len > 0 else None,
        ext_fields=ext if ext_len > 0 else None,
    )
