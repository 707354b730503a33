"""The 20-byte consume-queue unit (store.md section 4). Pure: no I/O.

====  ====  ===================  ==========================================
off   size  field                upstream
====  ====  ===================  ==========================================
0     8     commit-log offset    ``offset`` (int64)
8     4     record size          ``size`` (int32)
12    8     tags code            ``tagsCode`` (int64; message-format.md 6)
====  ====  ===================  ==========================================
"""

from __future__ import annotations

import functools
import struct
from dataclasses import dataclass
from typing import Final

from rocketpy.common.errors import CodecError

UNIT: Final = struct.Struct(">qiq")
UNIT_SIZE: Final = UNIT.size  # 20
# ``fillPreBlank`` placeholder size.
BLANK_UNIT_SIZE: Final = 0x7FFFFFFF


#: Units per :func:`units_struct` (a longer run is written in several).
MAX_UNITS_PER_PACK: Final = 256


@functools.lru_cache(maxsize=MAX_UNITS_PER_PACK)
def units_struct(count: int) -> struct.Struct:
    """The struct of ``count`` consecutive units (1 <= count <= :data:`MAX_UNITS_PER_PACK`),
    so a run of them is written with one ``pack_into``."""
    return struct.Struct(">" + "qiq" * count)


@dataclass(frozen=True, slots=True, kw_only=True)
class CqUnit:
    """One consume-queue entry."""

    commit_log_offset: int
    size: int
    tags_code: int

    @property
    def valid(self) -> bool:
        """Recovery stops at the first unit that is not ``offset >= 0 and size > 0``."""
        return self.commit_log_offset >= 0 and self.size > 0


BLANK_UNIT: Final = CqUnit(commit_log_offset=0, size=BLANK_UNIT_SIZE, tags_code=0)


def encode_unit(unit: CqUnit) -> bytes:
    """Encode one unit to 20 bytes."""
    return UNIT.pack(unit.commit_log_offset, unit.size, unit.tags_code)


def decode_unit(buf: bytes | bytearray | memoryview, pos: int = 0) -> CqUnit:
    """Decode the unit at ``pos``.

    Raises:
        CodecError: fewer than 20 bytes at ``pos``.
    """
    if len(buf) - pos < UNIT_SIZE:
        raise CodecError("truncated consume-queue unit", field="unit", offset=pos)
    offset, size, tags = UNIT.unpack_from(buf, pos)
    return CqUnit(commit_log_offset=offset, size=size, tags_code=tags)
