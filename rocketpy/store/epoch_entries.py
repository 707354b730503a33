"""Epoch history of a replica (RIP-44): entries, their rules, and the ``epochFileCheckpoint`` text.

Owns: :class:`EpochEntry`, the pure operations of ``EpochFileCache`` (append with validation,
truncation, lookup, the consistent-point search of ``findConsistentPoint``) and the file codec of
``CheckpointFile``/``EpochEntrySerializer``. Must not: touch files or log (``epoch_cache.py`` is
the driver). Mirrors ``store/ha/autoswitch/EpochFileCache.java`` and
``common/utils/CheckpointFile.java`` (ha.md sections 3.6 and 4).

An entry list is a tuple sorted by epoch; epochs and start offsets strictly increase. ``end_offset``
is never stored: each entry ends where the next starts, the last at ``LONG_MAX`` (unbounded)
unless a caller sets it (the slave's and master's max offsets during truncation).

File format (UTF-8 text, ``\\n`` line separator, which the CRC covers):

| line | content | upstream |
| --- | --- | --- |
| 1 | number of entries, decimal | ``entries.size()`` |
| 2 | CRC-32 of the entry block ``& 0x7FFFFFFF``, decimal; 0 = unchecked | ``UtilAll.crc32`` |
| 3.. | ``<epoch>-<startOffset>`` per entry; the block is every such line *with* its ``\\n`` | |

Example, entries (1, 0) and (2, 1048576): ``2\\n447245663\\n1-0\\n2-1048576\\n``.
"""

from __future__ import annotations

import itertools
import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Final

from rocketpy.common.errors import CodecError, StoreError

LONG_MAX: Final = 2**63 - 1  # Long.MAX_VALUE: the end of the last (open) epoch
INT_MAX: Final = 2**31 - 1
_CRC_MASK: Final = 0x7FFFFFFF
_NOT_CHECK_CRC: Final = 0  # CheckpointFile.NOT_CHECK_CRC_MAGIC_CODE
_JAVA_INT: Final = re.compile(r"[+-]?[0-9]+")
_LINE_SPLIT: Final = re.compile(r"\r\n|\r|\n")  # BufferedReader.readLine's terminators


@dataclass(frozen=True, slots=True, kw_only=True)
class EpochEntry:
    """One epoch and where its data starts in the commit log (``remoting.protocol.EpochEntry``).

    Attributes:
        epoch: the master epoch (int32, > 0 in practice).
        start_offset: commit-log offset of the first byte written in this epoch.
        end_offset: exclusive end: the next epoch's start, or :data:`LONG_MAX` for the last.
    """

    epoch: int
    start_offset: int
    end_offset: int = LONG_MAX

    def contains(self, offset: int) -> bool:
        """``start <= offset < end`` (``findEpochEntryByOffset``)."""
        return self.start_offset <= offset < self.end_offset


class EpochAppendRefused(StoreError):
    """``appendEntry`` refused an entry: its epoch or start offset goes backwards."""

    def __init__(self, entry: EpochEntry, last: EpochEntry, reason: str) -> None:
        self.entry = entry
        self.last = last
        super().__init__(f"cannot append {entry} after {last}: {reason}")


def link_end_offsets(
    entries: Sequence[EpochEntry], last_end: int = LONG_MAX
) -> tuple[EpochEntry, ...]:
    """Set each entry's end to the next entry's start and the last one's to ``last_end``.

    Mirrors ``EpochFileCache.initEntries`` plus ``setLastEpochEntryEndOffset``.
    """
    out = [replace(e, end_offset=nxt.start_offset) for e, nxt in itertools.pairwise(entries)]
    if entries:
        out.append(replace(entries[-1], end_offset=last_end))
    return tuple(out)


def append_entry(entries: Sequence[EpochEntry], entry: EpochEntry) -> tuple[EpochEntry, ...]:
    """The list after ``appendEntry(entry)``.

    Upstream refuses when ``last.epoch >= entry.epoch`` or ``last.startOffset >=
    entry.startOffset``. Decided here for H-06 (upstream #9689): an entry whose start equals the
    last entry's start, with a higher epoch, *replaces* the last entry (that epoch owns no data),
    as Kafka's ``LeaderEpochFileCache.assign`` does. Upstream silently dropped the new epoch, so
    a master re-elected without writes kept advertising the old one. Start offsets stay strictly
    increasing, so a Java broker reading our file sees the invariant it expects.

    Raises:
        EpochAppendRefused: the epoch does not increase, or the start offset goes backwards.
    """
    if not entries:
        return (replace(entry, end_offset=LONG_MAX),)
    last = entries[-1]
    if entry.epoch <= last.epoch:
        raise EpochAppendRefused(entry, last, "epoch must increase")
    if entry.start_offset < last.start_offset:
        raise EpochAppendRefused(entry, last, "start offset must not go backwards")
    kept = list(entries[:-1]) if entry.start_offset == last.start_offset else list(entries)
    return link_end_offsets([*kept, entry])


def truncate_suffix_by_offset(entries: Sequence[EpochEntry], offset: int) -> tuple[EpochEntry, ...]:
    """Drop entries with ``start >= offset`` (``truncateSuffixByOffset``); the survivor is open.

    Upstream means to reset the surviving last entry's end to unbounded but does it on a copy
    (ha.md section 4.1); here it really is unbounded.
    """
    return link_end_offsets([e for e in entries if e.start_offset < offset])


def truncate_suffix_by_epoch(entries: Sequence[EpochEntry], epoch: int) -> tuple[EpochEntry, ...]:
    """Drop entries with ``epoch >= epoch`` (``truncateSuffixByEpoch``); the survivor is open."""
    return link_end_offsets([e for e in entries if e.epoch < epoch])


def truncate_prefix_by_offset(entries: Sequence[EpochEntry], offset: int) -> tuple[EpochEntry, ...]:
    """Drop entries with ``end <= offset`` (``truncatePrefixByOffset``: log head deleted)."""
    return tuple(e for e in entries if e.end_offset > offset)


def find_epoch_entry_by_offset(entries: Sequence[EpochEntry], offset: int) -> EpochEntry | None:
    """The entry with ``start <= offset < end``, or None."""
    return next((e for e in entries if e.contains(offset)), None)


def next_entry(entries: Sequence[EpochEntry], epoch: int) -> EpochEntry | None:
    """The first entry with an epoch greater than ``epoch`` (``nextEntry``), or None."""
    return next((e for e in entries if e.epoch > epoch), None)


def find_consistent_point(local: Sequence[EpochEntry], remote: Sequence[EpochEntry]) -> int | None:
    """The offset up to which ``local`` and ``remote`` histories agree (ha.md section 3.6).

    Mirrors ``EpochFileCache.findConsistentPoint``: walk the local entries from the highest
    epoch down; the first one that the remote has with the *same start offset* gives
    ``min(local.end, remote.end)``. Both lists must carry their end offsets (the last entry's
    end = that side's max commit-log offset, see :func:`link_end_offsets`).

    Returns:
        The consistent offset, or None when the histories share no (epoch, start) pair
        (upstream's -1: the slave must not truncate, H-04).
    """
    by_epoch = {e.epoch: e for e in remote}
    for mine in sorted(local, key=lambda e: e.epoch, reverse=True):
        theirs = by_epoch.get(mine.epoch)
        if theirs is not None and theirs.start_offset == mine.start_offset:
            return min(mine.end_offset, theirs.end_offset)
    return None


def _entry_line(entry: EpochEntry) -> str:
    if not 0 <= entry.epoch <= INT_MAX or not 0 <= entry.start_offset <= LONG_MAX:
        # A negative value would read back as a different split on '-'.
        raise CodecError(f"epoch entry out of range: {entry}", field="epochEntry")
    return f"{entry.epoch}-{entry.start_offset}\n"


def encode_epoch_file(entries: Sequence[EpochEntry]) -> bytes:
    """The ``epochFileCheckpoint`` content for ``entries`` (``CheckpointFile.write``).

    Raises:
        CodecError: a negative or out-of-range epoch or offset.
    """
    block = "".join(_entry_line(e) for e in entries)
    crc = zlib.crc32(block.encode("utf-8")) & _CRC_MASK
    return f"{len(entries)}\n{crc}\n{block}".encode()


def _parse_java_int(text: str, *, field: str, line: int, limit: int) -> int:
    """Integer.parseInt / Long.parseLong: optional sign, ASCII digits only, in range."""
    if not _JAVA_INT.fullmatch(text):
        raise CodecError(f"not a number: {text!r}", field=field, offset=line)
    value = int(text)
    if not -limit - 1 <= value <= limit:
        raise CodecError(f"out of range: {text}", field=field, offset=line)
    return value


def _java_split_dash(line: str) -> list[str]:
    """``line.split("-")``: Java drops trailing empty strings."""
    parts = line.split("-")
    while parts and not parts[-1]:
        parts.pop()
    return parts


def decode_epoch_file(data: bytes) -> tuple[EpochEntry, ...]:
    """Parse ``epochFileCheckpoint`` content (``CheckpointFile.read``); ends are linked.

    Lines that do not split into exactly two parts on ``-`` are not entries but still count in
    the CRC, as upstream. ``offset`` in errors is the 0-based line number.

    Raises:
        CodecError: not UTF-8, a missing/non-numeric header line or entry field, an entry count
            different from line 1, a CRC mismatch (unless the stored CRC is 0), or epochs that do
            not increase (stricter than upstream's TreeMap, which would silently reorder).
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CodecError("epoch file is not UTF-8", field="epochFile", offset=e.start) from e
    lines = _LINE_SPLIT.split(text)
    if lines and lines[-1] == "":
        lines.pop()  # the terminator of the last line
    if len(lines) < 2:
        raise CodecError("epoch file has no size and crc lines", field="size", offset=len(lines))
    expected = _parse_java_int(lines[0], field="size", line=0, limit=INT_MAX)
    expected_crc = _parse_java_int(lines[1], field="crc32", line=1, limit=INT_MAX)
    entries: list[EpochEntry] = []
    for number, line in enumerate(lines[2:], start=2):
        parts = _java_split_dash(line)
        if len(parts) != 2:
            continue
        epoch = _parse_java_int(parts[0], field="epoch", line=number, limit=INT_MAX)
        start = _parse_java_int(parts[1], field="startOffset", line=number, limit=LONG_MAX)
        entries.append(EpochEntry(epoch=epoch, start_offset=start))
    for prev, cur in itertools.pairwise(entries):
        if cur.epoch <= prev.epoch or cur.start_offset < prev.start_offset:
            raise CodecError(f"entries out of order: {prev} then {cur}", field="epoch", offset=2)
    if len(entries) != expected:
        raise CodecError(
            f"expect {expected} entries, only found {len(entries)}", field="size", offset=0
        )
    block = "".join(line + "\n" for line in lines[2:])
    crc = zlib.crc32(block.encode("utf-8")) & _CRC_MASK
    if expected_crc not in (_NOT_CHECK_CRC, crc):
        raise CodecError(
            f"entries crc32 not match, file={expected_crc}, truth={crc}", field="crc32", offset=1
        )
    return link_end_offsets(entries)
