"""What the CommitLog adds to the message record codec: the end-of-file blank marker, the
recovery and reput checks (``CommitLog.checkMessageAndReturnSize``).

Owns: message-format.md section 1.1 and the record checks. Pure: no I/O. The record layout, its
encoder and its one reader are :mod:`rocketpy.common.message.record` and
:mod:`rocketpy.common.message.decoder`, shared with the client.

End-of-file blank marker (section 1.1): ``{int32 remaining, int32 0xCBD43194}`` where the next
record does not fit the segment.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass
from typing import Final

from rocketpy.common.errors import MessageCodecError
from rocketpy.common.message.decoder import decode_record, read_record
from rocketpy.common.message.record import MessageRecord
from rocketpy.store.mapped_file import MappedFile

BLANK_MAGIC: Final = -875286124  # 0xCBD43194
BLANK_SIZE: Final = 8
BLANK: Final = struct.Struct(">ii")


def encode_blank(remaining: int) -> bytes:
    """The end-of-file marker for a file with ``remaining`` bytes left (section 1.1)."""
    return BLANK.pack(remaining, BLANK_MAGIC)


def room_or_blank(mf: MappedFile, pos: int, size: int) -> bool | None:
    """Whether a record of ``size`` bytes fits segment ``mf`` at ``pos``: True; False when it
    never fits a segment; None after marking the rest of the segment blank (the marker needs
    ``BLANK_SIZE`` bytes after the last record, ``END_FILE_MIN_BLANK_LENGTH``): roll."""
    if size + BLANK_SIZE > mf.size:
        return False
    if size + BLANK_SIZE > mf.size - pos:
        BLANK.pack_into(mf.buffer, pos, mf.size - pos, BLANK_MAGIC)
        mf.wrote_position = mf.size
        return None
    return True


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


def valid_record_size(buf: memoryview, pos: int, *, check_crc: bool) -> int:
    """``checkMessageAndReturnSize`` reduced to a recovery walk's question, without copying
    the body: the size of the valid record at ``pos`` (> 0), 0 for the end-of-file blank
    marker, -1 for anything else (a torn tail, zeros, garbage). Valid means what
    :func:`~rocketpy.common.message.decoder.read_record` accepts (the body CRC when
    ``check_crc``, upstream's ``checkCRCOnRecover``) with a non-empty topic. Never raises."""
    try:
        total, magic = BLANK.unpack_from(buf, pos)
        if magic == BLANK_MAGIC:
            return 0
        topic = read_record(buf, pos, check_crc=check_crc)[16]
    except (struct.error, MessageCodecError):
        return -1
    return int(total) if topic else -1


def check_record(
    buf: bytes | bytearray | memoryview, pos: int = 0, *, check_crc: bool = True
) -> RecordCheck:
    """Validate and decode the record at ``pos`` (section 1.2); never raises on bad bytes."""
    avail = len(buf) - pos
    if avail < BLANK_SIZE:
        return RecordCheck(status=CheckStatus.INVALID, reason=f"{avail} bytes left")
    total, magic = BLANK.unpack_from(buf, pos)
    if magic == BLANK_MAGIC:
        return RecordCheck(status=CheckStatus.END_OF_FILE, size=0)
    try:
        rec = decode_record(buf, pos, check_crc=check_crc)
    except MessageCodecError as exc:
        return RecordCheck(status=CheckStatus.INVALID, reason=str(exc))
    return RecordCheck(status=CheckStatus.VALID, size=total, record=rec)
