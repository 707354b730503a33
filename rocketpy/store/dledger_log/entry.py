"""DLedger 0.3.1.2's on-disk entry, blank tail and index unit (dledger-commitlog.md section 1.2).

Owns: the byte layouts below and the offsets of the RocketMQ record carried in an entry's body
(section 1.3: PHYSICALOFFSET = entry pos + 48, which :mod:`.store` writes at a leader's append).
Mirrors ``DLedgerEntry``, ``DLedgerEntryCoder``, ``MmapFileList.BLANK_MAGIC_CODE`` and
``DLedgerCommitLog``'s ``checkMessageAndReturnSize`` framing. Pure: no I/O.
Must not: know files or terms of office; :mod:`.store` and :mod:`.recovery` do.

Entry (all big-endian):

=====  ====  ===========  ======================================================================
off    size  field        CommitLog-mode value (upstream name)
=====  ====  ===========  ======================================================================
0      4     magic        1 (``MAGIC_1``)
4      4     size         48 + body length
8      8     index        0-based, contiguous
16     8     term         leader term at append
24     8     pos          absolute data offset of this entry (``POS_OFFSET``)
32     4     channel      0 (reserved)
36     4     chainCrc     0 (never computed in 0.3.1.2)
40     4     bodyCrc      0 (never computed)
44     4     body length  (``HEADER_SIZE`` 44)
48     n     body         one RocketMQ message record (``BODY_OFFSET`` 48)
=====  ====  ===========  ======================================================================

Blank tail: where ``size + 8`` exceeds the room left in a data file, the rest of the file gets
``int -1, int bytes-left`` and zeros (magic first: the reverse of the CommitLog's blank).

Index unit (32 bytes, entry *i* at ``i * 32``): magic 4 | pos 8 | size 4 | index 8 | term 8.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Protocol

from rocketpy.common.errors import CodecError
from rocketpy.common.message.record import MAGIC_V1, MAGIC_V2
from rocketpy.store.commit_log.record import BLANK_MAGIC as COMMIT_LOG_BLANK_MAGIC

MAGIC_1: Final = 1
CURRENT_MAGIC: Final = MAGIC_1
#: ``MmapFileList.BLANK_MAGIC_CODE``: the first int of a data file's blank tail.
BLANK_MAGIC_CODE: Final = -1
#: ``MmapFileList.MIN_BLANK_LEN``: every data file keeps at least this much room for the blank.
MIN_BLANK_LEN: Final = 8
POS_OFFSET: Final = 24
HEADER_SIZE: Final = 44
BODY_OFFSET: Final = 48
INDEX_UNIT_SIZE: Final = 32

# magic size index term pos channel chainCrc bodyCrc bodyLength
ENTRY_HEADER: Final = struct.Struct(">iiqqqiiii")
# magic pos size index term
INDEX_UNIT: Final = struct.Struct(">iqiqq")
BLANK: Final = struct.Struct(">ii")
_INT32: Final = struct.Struct(">i")
_RECORD_MAGICS: Final = frozenset({MAGIC_V1, MAGIC_V2})


if TYPE_CHECKING:
    from typing_extensions import Buffer

    class Buf(Buffer, Protocol):
        """Bytes, a bytearray, a memoryview or a mapping: what ``struct`` reads, with a length
        (``typing_extensions.Buffer`` is no Protocol at run time before 3.12)."""

        def __len__(self) -> int: ...


class EntryCodecError(CodecError):
    """Bytes that are not a DLedger entry header or index unit."""


# Built per entry on the hot paths (every append as leader, every entry pushed to a
# follower), so like ``DispatchRequest`` these two are the cheapest slotted types to build:
# positional and not frozen (a frozen, keyword-only dataclass's ``__init__`` costs about five
# times as much). Treat instances as read-only values.
@dataclass(slots=True)
class EntryHeader:
    """The 48 bytes before an entry's body (``DLedgerEntryCoder.decode(buf, false)``)."""

    magic: int
    size: int
    index: int
    term: int
    pos: int
    body_length: int
    channel: int = 0
    chain_crc: int = 0
    body_crc: int = 0

    @property
    def record_offset(self) -> int:
        """Where the body (the message record) starts: the message's physical offset."""
        return self.pos + BODY_OFFSET

    @property
    def end(self) -> int:
        """The data offset just past this entry."""
        return self.pos + self.size


@dataclass(slots=True)
class DLedgerEntry:
    """A whole entry (``DLedgerEntry``): the header fields and the body."""

    index: int
    term: int
    pos: int
    body: bytes
    magic: int = CURRENT_MAGIC
    channel: int = 0
    chain_crc: int = 0
    body_crc: int = 0

    @property
    def size(self) -> int:
        """``computeSizeInBytes``: 48 + body length."""
        return BODY_OFFSET + len(self.body)

    def header(self) -> EntryHeader:
        """The header this entry is written with."""
        return EntryHeader(
            magic=self.magic,
            size=self.size,
            index=self.index,
            term=self.term,
            pos=self.pos,
            channel=self.channel,
            chain_crc=self.chain_crc,
            body_crc=self.body_crc,
            body_length=len(self.body),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class IndexUnit:
    """One 32-byte index unit (``DLedgerEntryCoder.encodeIndex``)."""

    magic: int
    pos: int
    size: int
    index: int
    term: int


def entry_size(body_length: int) -> int:
    """Bytes an entry with a ``body_length``-byte body takes in a data file."""
    return BODY_OFFSET + body_length


def record_offset(entry_pos: int) -> int:
    """A message's physical offset: its entry's position + ``BODY_OFFSET`` (section 1.3)."""
    return entry_pos + BODY_OFFSET


def entry_pos_of(physical_offset: int) -> int:
    """The position of the entry whose record starts at ``physical_offset``."""
    return physical_offset - BODY_OFFSET


def pack_header_into(buf: Buf, off: int, header: EntryHeader) -> None:
    """Write the 48-byte header at ``off``."""
    ENTRY_HEADER.pack_into(
        buf,
        off,
        header.magic,
        header.size,
        header.index,
        header.term,
        header.pos,
        header.channel,
        header.chain_crc,
        header.body_crc,
        header.body_length,
    )


def encode_entry(entry: DLedgerEntry) -> bytes:
    """``DLedgerEntryCoder.encode``: header + body, exactly as written to a data file."""
    out = bytearray(entry.size)
    pack_header_into(out, 0, entry.header())
    out[BODY_OFFSET:] = entry.body
    return bytes(out)


def decode_header(buf: Buf, off: int = 0) -> EntryHeader:
    """The header at ``off``; no validation beyond length.

    Raises:
        EntryCodecError: fewer than 48 bytes at ``off``.
    """
    if len(buf) - off < BODY_OFFSET:
        raise EntryCodecError("truncated entry header", field="header", offset=off)
    magic, size, index, term, pos, channel, chain, bcrc, blen = ENTRY_HEADER.unpack_from(buf, off)
    return EntryHeader(
        magic=magic,
        size=size,
        index=index,
        term=term,
        pos=pos,
        channel=channel,
        chain_crc=chain,
        body_crc=bcrc,
        body_length=blen,
    )


def decode_entry(buf: Buf, off: int = 0) -> DLedgerEntry:
    """The whole entry at ``off``.

    Raises:
        EntryCodecError: a truncated header or body, or a body length that disagrees with size.
    """
    h = decode_header(buf, off)
    if h.body_length < 0 or h.body_length + BODY_OFFSET != h.size:
        raise EntryCodecError(
            f"size {h.size} != {h.body_length} + {BODY_OFFSET}", field="size", offset=off + 4
        )
    start = off + BODY_OFFSET
    if len(buf) - start < h.body_length:
        raise EntryCodecError("truncated entry body", field="body", offset=start)
    return DLedgerEntry(
        index=h.index,
        term=h.term,
        pos=h.pos,
        body=bytes(memoryview(buf)[start : start + h.body_length]),
        magic=h.magic,
        channel=h.channel,
        chain_crc=h.chain_crc,
        body_crc=h.body_crc,
    )


def validate_header(h: EntryHeader, *, at: int) -> str | None:
    """Why the header read at data offset ``at`` is not a well-formed entry, or None
    (the per-entry checks of ``DLedgerMmapFileStore.recover``)."""
    if not MAGIC_1 <= h.magic <= CURRENT_MAGIC:
        return f"magic {h.magic}"
    if h.pos != at:
        return f"pos {h.pos} != {at}"
    if h.body_length + BODY_OFFSET != h.size:
        return f"size {h.size} != {h.body_length} + {BODY_OFFSET}"
    if h.size <= HEADER_SIZE:
        return f"size {h.size} should > {HEADER_SIZE}"
    return None


def encode_blank(remaining: int) -> bytes:
    """The blank tail of a data file with ``remaining`` bytes left: ``-1, remaining``, zeros."""
    if remaining < MIN_BLANK_LEN:
        raise EntryCodecError(f"blank of {remaining} bytes < {MIN_BLANK_LEN}", field="blank")
    return BLANK.pack(BLANK_MAGIC_CODE, remaining) + bytes(remaining - MIN_BLANK_LEN)


def fits(body_length: int, remaining: int) -> bool:
    """Whether an entry fits in ``remaining`` bytes and still leaves room for a blank
    (``MmapFileList.preAppend``: ``len + MIN_BLANK_LEN > remaining`` rolls the file)."""
    return entry_size(body_length) + MIN_BLANK_LEN <= remaining


def encode_index_unit(unit: IndexUnit) -> bytes:
    """``DLedgerEntryCoder.encodeIndex``."""
    return INDEX_UNIT.pack(unit.magic, unit.pos, unit.size, unit.index, unit.term)


def decode_index_unit(buf: Buf, off: int = 0) -> IndexUnit:
    """The unit at ``off``.

    Raises:
        EntryCodecError: fewer than 32 bytes.
    """
    if len(buf) - off < INDEX_UNIT_SIZE:
        raise EntryCodecError("truncated index unit", field="index", offset=off)
    magic, pos, size, index, term = INDEX_UNIT.unpack_from(buf, off)
    return IndexUnit(magic=magic, pos=pos, size=size, index=index, term=term)


def index_unit_of(h: EntryHeader) -> IndexUnit:
    """The unit that belongs to an entry."""
    return IndexUnit(magic=h.magic, pos=h.pos, size=h.size, index=h.index, term=h.term)


def check_entry_size(buf: Buf, off: int = 0) -> int:
    """``DLedgerCommitLog.checkMessageAndReturnSize``'s framing at an entry position: the
    entry's size (> 0), 0 for the blank tail (roll to the next file), -1 for anything else
    (zeros, a torn header, an old CommitLog record, which :mod:`.reader` does not serve).
    Never raises."""
    if len(buf) - off < MIN_BLANK_LEN:
        return -1
    first, second = BLANK.unpack_from(buf, off)
    if second in _RECORD_MAGICS or second == COMMIT_LOG_BLANK_MAGIC:
        return -1  # an old CommitLog record or blank (section 1.7), not served here
    if first == BLANK_MAGIC_CODE:
        return 0
    if len(buf) - off < BODY_OFFSET:
        return -1
    # first = magic, second = size (the reput calls this per entry: no header object)
    body_length = _INT32.unpack_from(buf, off + HEADER_SIZE)[0]
    if not MAGIC_1 <= first <= CURRENT_MAGIC or body_length + BODY_OFFSET != second:
        return -1
    if second <= HEADER_SIZE or len(buf) - off < second:
        return -1
    record_size = _INT32.unpack_from(buf, off + BODY_OFFSET)[0]
    return second if record_size == body_length else -1
