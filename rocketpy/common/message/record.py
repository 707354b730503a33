"""The stored message record (CommitLog entry, pull and query bodies) and how it is written.

Owns: the byte layout of message-format.md sections 1 and 2, its flags and :func:`encode_record`
(``MessageExtEncoder`` / ``MessageDecoder.encode``), for the store, the broker and the client.
Reading records is :mod:`.decoder`'s; the properties text :mod:`.properties`'; the batch send body
:mod:`.batch_body`'s; the CommitLog's end-of-file marker and ``checkMessageAndReturnSize`` the
store's (:mod:`rocketpy.store.commit_log.record`). Pure: no I/O. All integers big-endian.

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
"""

from __future__ import annotations

import functools
import ipaddress
import struct
import zlib
from dataclasses import dataclass
from typing import Final

from rocketpy.common.errors import MessageCodecError
from rocketpy.common.message.properties import MAX_PROPERTIES_BYTES, decode_properties

MAGIC_V1: Final = -626843481  # 0xDAA320A7
MAGIC_V2: Final = -626843477  # 0xDAA320AB

COMPRESSED_FLAG: Final = 0x1
MULTI_TAGS_FLAG: Final = 0x2
TRANSACTION_TYPE_MASK: Final = 0xC
TRANSACTION_NOT_TYPE: Final = 0x0
TRANSACTION_PREPARED_TYPE: Final = 0x4
TRANSACTION_COMMIT_TYPE: Final = 0x8
TRANSACTION_ROLLBACK_TYPE: Final = 0xC
BORNHOST_V6_FLAG: Final = 0x10
STOREHOST_V6_FLAG: Final = 0x20
COMPRESSION_TYPE_MASK: Final = 0x700  # the compressor of a COMPRESSED_FLAG body (section 2)
COMPRESSION_LZ4: Final = 0x100
COMPRESSION_ZSTD: Final = 0x200
COMPRESSION_ZLIB: Final = 0x300

# TOTALSIZE MAGIC BODYCRC QUEUEID FLAG QUEUEOFFSET PHYSICALOFFSET SYSFLAG BORNTIMESTAMP
HEAD: Final = struct.Struct(">iiiiiqqiq")
# RECONSUMETIMES PREPARED_TRANSACTION_OFFSET BODYLEN
MIDDLE: Final = struct.Struct(">iqi")
INT8: Final = struct.Struct(">b")
INT16: Final = struct.Struct(">h")
INT32: Final = struct.Struct(">i")
INT64: Final = struct.Struct(">q")

QUEUE_OFFSET_POS: Final = 20
PHYSICAL_OFFSET_POS: Final = 28
SYSFLAG_POS: Final = 36
STORE_TIMESTAMP_POS_V4: Final = 56

Address = tuple[str, int]


def body_crc(body: bytes | memoryview) -> int:
    """``UtilAll.crc32``: CRC-32 masked to 31 bits."""
    return zlib.crc32(body) & 0x7FFFFFFF


_UNCONSUMABLE_TYPES: Final = frozenset({TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE})


def is_prepared_or_rollback(sys_flag: int) -> bool:
    """A prepared or rolled-back transaction record: queue offset 0, no consume-queue unit,
    never consumed."""
    return sys_flag & TRANSACTION_TYPE_MASK in _UNCONSUMABLE_TYPES


@functools.lru_cache(maxsize=4096)  # per appended message, from a handful of peers
def pack_address(addr: Address) -> bytes:
    """BORNHOST/STOREHOST bytes (address + int32 port); cached, the append path calls it per
    message.

    Raises:
        MessageCodecError: not an IP address.
    """
    return _pack_address(addr, "HOST")


def stored_sys_flag(sys_flag: int, born: bytes, store: bytes) -> int:
    """``sys_flag`` as a record stores it: BORNHOST_V6 and STOREHOST_V6 set from the packed
    hosts' lengths (20 bytes: IPv6), whatever the sender's flags said."""
    return (
        (sys_flag & _CLEAR_HOST_FLAGS)
        | (BORNHOST_V6_FLAG if len(born) == 20 else 0)
        | (STOREHOST_V6_FLAG if len(store) == 20 else 0)
    )


_CLEAR_HOST_FLAGS: Final = ~(BORNHOST_V6_FLAG | STOREHOST_V6_FLAG)


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


def _pack_address(addr: Address, fld: str) -> bytes:
    try:
        packed = _packed_ip(addr[0])
    except ValueError as exc:
        raise MessageCodecError(f"bad address {addr[0]!r}", field=fld) from exc
    return packed + INT32.pack(addr[1])


@functools.lru_cache(maxsize=4096)
def _packed_ip(host: str) -> bytes:
    # Parsed once per host: ipaddress parsing was 5% of a broker's send path.
    return ipaddress.ip_address(host).packed


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


def choose_magic(topic_bytes: bytes) -> int:
    """v2 when the topic is longer than a signed byte can say (``autoMessageVersionOnTopicLen``)."""
    return MAGIC_V2 if len(topic_bytes) > 127 else MAGIC_V1


def encode_record(rec: MessageRecord) -> bytes:
    """Encode ``rec``; the IPv6 sysflag bits are derived from the two addresses. The layout is
    :func:`record_struct`'s, which the CommitLog's append also packs.

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
    born = _pack_address(rec.born_host, "BORNHOST")
    store = _pack_address(rec.store_host, "STOREHOST")
    sys_flag = stored_sys_flag(rec.sys_flag, born, store)
    body = rec.body
    st = record_struct(
        len(born), len(store), len(body), len(topic), len(props), rec.magic == MAGIC_V2
    )
    return st.pack(
        st.size, rec.magic, body_crc(body), rec.queue_id, rec.flag, rec.queue_offset,
        rec.physical_offset, sys_flag, rec.born_timestamp, born, rec.store_timestamp, store,
        rec.reconsume_times, rec.prepared_transaction_offset, len(body), body, len(topic), topic,
        len(props), props,
    )  # fmt: skip
