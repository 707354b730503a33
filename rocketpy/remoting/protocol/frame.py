"""The RemotingCommand frame: length prefix, header word, header, body.

Owns: turning a :class:`RemotingCommand` into frame bytes and back, and the frame size limit.
Mirrors ``RemotingCommand.encode``/``decode`` and ``NettyDecoder``'s length-field decoder. Pure: no
I/O.

Layout (remoting.md section 1; all big-endian):

| offset | size | field      | meaning                                                     |
| ------ | ---- | ---------- | ----------------------------------------------------------- |
| 0      | 4    | length     | bytes after this field = 4 + headerLength + bodyLength      |
| 4      | 4    | headerWord | bits 31..24 serialize type (0 JSON, 1 ROCKETMQ); 23..0 hlen |
| 8      | hlen | header     | JSON text or ROCKETMQ binary header                         |
| 8+hlen | rest | body       | opaque bytes; absent when empty                             |

Netty counts the 4-byte prefix in its 16 MiB ``maxFrameLength``, so the largest accepted ``length``
value is ``max_frame_bytes - 4``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum
from typing import Final

from rocketpy.common.errors import CodecError, FrameTooLarge
from rocketpy.remoting.protocol import header_json, header_rocketmq
from rocketpy.remoting.protocol.command import RemotingCommand

LENGTH: Final = struct.Struct(">i")
_PREFIX: Final = struct.Struct(">iI")
#: A frame's length and header word; for a JSON header (serialize type 0) the word is the
#: header's length.
JSON_PREFIX: Final = _PREFIX
_WORD: Final = struct.Struct(">I")
DEFAULT_MAX_FRAME_BYTES: Final = 16 * 1024 * 1024
_MAX_HEADER: Final = 0xFFFFFF


class SerializeType(IntEnum):
    """Header encodings (``SerializeType``)."""

    JSON = 0
    ROCKETMQ = 1


@dataclass(frozen=True, slots=True)
class FrameLimits:
    """Size limits applied before a frame is read."""

    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES


def read_length(data: bytes | bytearray | memoryview, limits: FrameLimits, offset: int = 0) -> int:
    """Validate the 4-byte length prefix at ``offset`` of ``data`` and return it (the bytes
    that follow the prefix).

    Raises:
        FrameTooLarge: the frame, prefix included, exceeds ``limits.max_frame_bytes``.
        CodecError: the length cannot even hold the header word.
    """
    length: int = LENGTH.unpack_from(data, offset)[0]
    if length < 4:
        raise CodecError(f"frame length {length} too small", field="length", offset=0)
    if length + 4 > limits.max_frame_bytes:
        raise FrameTooLarge(
            f"frame length {length} exceeds max frame {limits.max_frame_bytes}",
            field="length",
            offset=0,
        )
    return length


def encode_frame(cmd: RemotingCommand, serialize_type: int = SerializeType.JSON) -> bytes:
    """Encode ``cmd`` as a whole frame, length prefix included."""
    if serialize_type == SerializeType.JSON:
        header = header_json.encode_header(cmd)
    elif serialize_type == SerializeType.ROCKETMQ:
        header = header_rocketmq.encode_header(cmd)
    else:
        raise CodecError(f"unknown serialize type {serialize_type}", field="serializeType")
    if len(header) > _MAX_HEADER:
        raise CodecError(f"header of {len(header)} bytes exceeds 24 bits", field="headerLength")
    body = cmd.body or b""
    prefix = _PREFIX.pack(4 + len(header) + len(body), (serialize_type << 24) | len(header))
    return b"".join((prefix, header, body)) if body else prefix + header


def decode_frame(payload: bytes | bytearray | memoryview) -> RemotingCommand:
    """Decode everything after the length prefix into a command.

    Raises:
        CodecError: bad header length, unknown serialize type, or a header that does not decode.
    """
    return decode_frame_in(payload, 0, len(payload))


def decode_frame_in(buf: bytes | bytearray | memoryview, start: int, end: int) -> RemotingCommand:
    """:func:`decode_frame` of ``buf[start:end]``, read in place: a connection decodes each
    frame of its receive buffer without copying the frame out first (the header and body are
    copied once each).

    Raises:
        CodecError: as :func:`decode_frame`.
    """
    if end - start < 4:
        raise CodecError("frame shorter than its header word", field="headerWord", offset=4)
    (word,) = _WORD.unpack_from(buf, start)
    serialize_type = word >> 24
    header_len = word & _MAX_HEADER
    header_end = start + 4 + header_len
    if header_end > end:
        raise CodecError(
            f"decode error, bad header length: {header_len}", field="headerLength", offset=4
        )
    header = buf[start + 4 : header_end]
    if serialize_type == SerializeType.JSON:
        cmd = header_json.decode_header(header)
    elif serialize_type == SerializeType.ROCKETMQ:
        cmd = header_rocketmq.decode_header(header)
    else:
        raise CodecError(
            f"unknown serialize type {serialize_type}", field="serializeType", offset=4
        )
    cmd.serialize_type = serialize_type
    if end > header_end:
        cmd.body = bytes(buf[header_end:end])
    return cmd
