"""The SEND_BATCH_MESSAGE body (message-format.md section 5): per message TOTALSIZE, MAGIC
(ignored), BODYCRC (ignored), FLAG, BODYLEN, BODY, PROPLEN (int16), PROPERTIES.

Owns: its encoder (the client's) and splitter (the broker's), ``MessageDecoder.encodeMessages``
and ``decodeMessages``. Pure.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import Final, NamedTuple

from rocketpy.common.errors import MessageCodecError
from rocketpy.common.message.properties import MAX_PROPERTIES_BYTES

# Batch item: TOTALSIZE MAGIC BODYCRC FLAG BODYLEN
BATCH_HEAD: Final = struct.Struct(">iiiii")
INT16: Final = struct.Struct(">h")


class BatchItem(NamedTuple):
    """One message of a SEND_BATCH_MESSAGE body (a tuple: one per batched message, built and
    unpacked on the send path)."""

    flag: int
    body: bytes
    properties: str


def encode_batch_body(items: Iterable[tuple[int, bytes, str]]) -> bytes:
    """``MessageDecoder.encodeMessages`` (client side): ``(flag, body, properties)`` per message
    (a :class:`BatchItem` or a plain tuple); MAGIC and BODYCRC are written as 0 (the broker
    ignores them).

    Raises:
        MessageCodecError: properties longer than 32767 bytes.
    """
    parts: list[bytes] = []
    for flag, body, properties in items:
        props = properties.encode()
        if len(props) > MAX_PROPERTIES_BYTES:
            raise MessageCodecError("properties longer than 32767 bytes", field="PROPERTIES")
        total = BATCH_HEAD.size + len(body) + 2 + len(props)
        parts += (BATCH_HEAD.pack(total, 0, 0, flag, len(body)), body, INT16.pack(len(props)))
        parts.append(props)
    return b"".join(parts)


def decode_batch_body(buf: bytes | bytearray | memoryview) -> list[tuple[int, bytes, str]]:
    """Split a batch send body (section 5) into ``(flag, body, properties text)`` tuples (the
    fields of :class:`BatchItem`; plain tuples: one per batched message on the send path).

    Raises:
        MessageCodecError: a length field points past the end or disagrees with TOTALSIZE.
    """
    data = buf if isinstance(buf, bytes) else bytes(buf)
    end_of_data = len(data)
    head = BATCH_HEAD.unpack_from
    head_size = BATCH_HEAD.size
    int16 = INT16.unpack_from
    out: list[tuple[int, bytes, str]] = []
    pos = 0
    while pos < end_of_data:
        if pos + head_size > end_of_data:
            raise MessageCodecError("truncated batch item header", field="TOTALSIZE", offset=pos)
        total, _, _, flag, body_len = head(data, pos)
        body_at = pos + head_size
        body_end = body_at + body_len
        if body_len < 0 or body_end + 2 > end_of_data:
            raise MessageCodecError(f"body length {body_len}", field="BODYLEN", offset=pos + 16)
        (props_len,) = int16(data, body_end)
        props_at = body_end + 2
        end = props_at + props_len
        if props_len < 0 or end > end_of_data:
            raise MessageCodecError(
                f"properties length {props_len}", field="PROPLEN", offset=props_at
            )
        if total != end - pos:
            raise MessageCodecError(f"total size {total} disagrees", field="TOTALSIZE", offset=pos)
        try:
            props = data[props_at:end].decode()
        except UnicodeDecodeError as exc:
            raise MessageCodecError(
                "properties not UTF-8", field="PROPERTIES", offset=props_at
            ) from exc
        out.append((flag, data[body_at:body_end], props))
        pos = end
    return out
