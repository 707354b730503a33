"""An independent reader of DLedger data and index files for tests (dledger-commitlog.md 1.2).

Written against the spec's tables with ``struct`` only, never with
``rocketpy.store.dledger_log``, so a codec bug cannot hide itself in its own tests.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from pathlib import Path

HEADER = struct.Struct(">iiqqqiiii")  # magic size index term pos channel chainCrc bodyCrc bodyLen
UNIT = struct.Struct(">iqiqq")  # magic pos size index term


@dataclass(frozen=True)
class RawEntry:
    """One entry as found in a data file."""

    file: str
    pos: int
    size: int
    index: int
    term: int
    body: bytes


@dataclass(frozen=True)
class RawFile:
    """One data file walked: its entries and where its blank tail starts (None: no blank)."""

    name: str
    entries: list[RawEntry]
    blank_at: int | None
    blank_left: int | None


def walk_data_dir(data_dir: Path, end: int | None = None) -> list[RawFile]:
    """Every data file's entries, stopping in each file at the blank or the first zero size,
    and at the data offset ``end`` when given (truncation leaves stale bytes behind it)."""
    out: list[RawFile] = []
    for path in sorted(p for p in data_dir.iterdir() if p.name.isdigit()):
        with path.open("rb") as f:
            raw = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)  # sparse: read what is walked
        start = int(path.name)
        entries: list[RawEntry] = []
        at, blank_at, blank_left = 0, None, None
        while at + 8 <= len(raw) and (end is None or start + at < end):
            magic, size = struct.unpack_from(">ii", raw, at)
            if magic == -1:
                blank_at, blank_left = at, size
                break
            if size == 0:
                break
            fields = HEADER.unpack_from(raw, at)
            assert fields[0] == 1, f"magic {fields[0]} at {start + at}"
            assert fields[1] == 48 + fields[8], f"size at {start + at}"
            assert fields[5:8] == (0, 0, 0), "channel, chainCrc, bodyCrc are 0"
            body = raw[at + 48 : at + size]
            entries.append(RawEntry(path.name, fields[4], size, fields[2], fields[3], body))
            assert fields[4] == start + at, f"pos {fields[4]} != {start + at}"
            at += size
        raw.close()
        out.append(RawFile(path.name, entries, blank_at, blank_left))
    return out


def all_entries(data_dir: Path, end: int | None = None) -> list[RawEntry]:
    """The entries of every data file in order (up to ``end``)."""
    return [e for f in walk_data_dir(data_dir, end) for e in f.entries]


def read_units(index_dir: Path, count: int) -> list[tuple[int, int, int, int, int]]:
    """The first ``count`` index units (magic, pos, size, index, term) across the index files."""
    want = count * 32
    blob = b""
    for path in sorted(p for p in index_dir.iterdir() if p.name.isdigit()):
        if len(blob) >= want:
            break
        with path.open("rb") as f:
            blob += f.read(want - len(blob))
    return [UNIT.unpack_from(blob, i * 32) for i in range(count)]
