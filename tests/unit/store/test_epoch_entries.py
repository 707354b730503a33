"""Pure epoch rules: append validation, truncation, lookup, consistent point, file decoding."""

from __future__ import annotations

import zlib

import pytest

from rocketpy.common.errors import CodecError
from rocketpy.store.epoch_entries import (
    LONG_MAX,
    EpochAppendRefused,
    EpochEntry,
    append_entry,
    decode_epoch_file,
    find_consistent_point,
    find_epoch_entry_by_offset,
    link_end_offsets,
    next_entry,
    truncate_prefix_by_offset,
    truncate_suffix_by_epoch,
    truncate_suffix_by_offset,
)


def _h(*pairs: tuple[int, int], last_end: int = LONG_MAX) -> tuple[EpochEntry, ...]:
    """A history from (epoch, start) pairs, ends linked, last end = last_end."""
    return link_end_offsets([EpochEntry(epoch=e, start_offset=s) for e, s in pairs], last_end)


def _pairs(entries: tuple[EpochEntry, ...]) -> list[tuple[int, int]]:
    return [(e.epoch, e.start_offset) for e in entries]


def test_epoch_append_links_previous_end() -> None:
    """Appending (2, 300) after (1, 100) ends epoch 1 at 300; epoch 2 is open."""
    after = append_entry(_h((1, 100)), EpochEntry(epoch=2, start_offset=300))
    assert after == (
        EpochEntry(epoch=1, start_offset=100, end_offset=300),
        EpochEntry(epoch=2, start_offset=300, end_offset=LONG_MAX),
    )


@pytest.mark.parametrize(
    ("epoch", "start", "reason"),
    [
        (2, 400, "epoch must increase"),  # same epoch
        (1, 400, "epoch must increase"),  # older epoch
        (3, 299, "start offset must not go backwards"),
    ],
)
def test_epoch_append_refused(epoch: int, start: int, reason: str) -> None:
    """appendEntry refuses a non-increasing epoch or a start offset below the last start."""
    with pytest.raises(EpochAppendRefused, match=reason):
        append_entry(_h((1, 100), (2, 300)), EpochEntry(epoch=epoch, start_offset=start))


def test_h06_new_epoch_without_writes_replaces_empty_epoch() -> None:
    """H-06 (#9689): 1. Master at epoch 2 since offset 300 writes nothing. 2. Re-elected as
    epoch 3 at offset 300, then epoch 4 at 300 again.
    Expected: the newest epoch is recorded each time (replacing the data-less one), never
    dropped; epochs and starts stay strictly increasing."""
    history = _h((1, 100), (2, 300))
    history = append_entry(history, EpochEntry(epoch=3, start_offset=300))
    assert _pairs(history) == [(1, 100), (3, 300)]
    history = append_entry(history, EpochEntry(epoch=4, start_offset=300))
    assert _pairs(history) == [(1, 100), (4, 300)]
    assert find_epoch_entry_by_offset(history, 300) == history[-1]


def test_epoch_append_to_empty() -> None:
    """The first entry is always accepted and open-ended."""
    assert append_entry((), EpochEntry(epoch=5, start_offset=42, end_offset=7)) == (
        EpochEntry(epoch=5, start_offset=42),
    )


def test_epoch_truncate_suffix_by_offset_reopens_last() -> None:
    """Removing epochs starting at/after 300 leaves epoch 1 open-ended (not ended at 300, the
    upstream copy bug)."""
    assert truncate_suffix_by_offset(_h((1, 100), (2, 300), (3, 500)), 300) == (
        EpochEntry(epoch=1, start_offset=100),
    )
    assert _pairs(truncate_suffix_by_offset(_h((1, 100), (2, 300)), 301)) == [(1, 100), (2, 300)]


def test_epoch_truncate_suffix_by_epoch() -> None:
    """Removing epochs >= 2 keeps epoch 1, open-ended."""
    assert truncate_suffix_by_epoch(_h((1, 100), (2, 300), (3, 500)), 2) == (
        EpochEntry(epoch=1, start_offset=100),
    )


def test_h05_truncate_prefix_by_offset() -> None:
    """H-05: after deleting the log head up to 500, epochs ending at or before 500 go; the last
    (open) epoch is never removed by a prefix truncation."""
    history = _h((1, 0), (2, 300), (3, 500))
    assert _pairs(truncate_prefix_by_offset(history, 500)) == [(3, 500)]
    assert _pairs(truncate_prefix_by_offset(history, 499)) == [(2, 300), (3, 500)]
    assert _pairs(truncate_prefix_by_offset(history, 10**12)) == [(3, 500)]


def test_epoch_find_by_offset_and_next() -> None:
    """findEpochEntryByOffset uses [start, end); nextEntry is the first higher epoch."""
    history = _h((1, 100), (2, 300), (4, 500), last_end=700)
    assert find_epoch_entry_by_offset(history, 99) is None
    assert find_epoch_entry_by_offset(history, 100) == history[0]
    assert find_epoch_entry_by_offset(history, 299) == history[0]
    assert find_epoch_entry_by_offset(history, 300) == history[1]
    assert find_epoch_entry_by_offset(history, 700) is None
    assert next_entry(history, 2) == history[2]
    assert next_entry(history, 3) == history[2]
    assert next_entry(history, 4) is None


LOCAL = ((1, 100), (2, 300), (3, 500))


@pytest.mark.parametrize(
    ("local_end", "remote", "remote_end", "expected"),
    [
        # H-03 (EpochFileCacheTest): epoch 3 differs in start -> epoch 2, min(500, 450)
        (700, ((1, 100), (2, 300), (3, 450)), 700, 450),
        # H-03: same starts, local end 700, remote end 600 -> 600
        (700, LOCAL, 600, 600),
        # H-03: no shared (epoch, start) pair -> none
        (700, ((1, 200), (2, 500)), 900, None),
        # H-03: remote has an extra epoch 4@800, local ends at 700 -> 700
        (700, (*LOCAL, (4, 800)), 1000, 700),
    ],
    ids=["h03-diverged-start", "h03-remote-shorter", "h03-none", "h03-remote-extra-epoch"],
)
def test_h03_consistent_point(
    local_end: int,
    remote: tuple[tuple[int, int], ...],
    remote_end: int,
    expected: int | None,
) -> None:
    """H-03: the consistent point of local (1@100, 2@300, 3@500) against each remote history."""
    local = _h(*LOCAL, last_end=local_end)
    assert find_consistent_point(local, _h(*remote, last_end=remote_end)) == expected


def test_ha36_example_consistent_point() -> None:
    """ha.md 3.6 example: master 1@0, 2@1000, 4@5000 max 8000; slave 1@0, 2@1000, 3@3000 max
    4000. Expected: epoch 3 unknown to the master; epoch 2 matches -> min(3000, 5000) = 3000;
    truncating the slave there drops its epoch 3."""
    master = _h((1, 0), (2, 1000), (4, 5000), last_end=8000)
    slave = _h((1, 0), (2, 1000), (3, 3000), last_end=4000)
    point = find_consistent_point(slave, master)
    assert point == 3000
    assert _pairs(truncate_suffix_by_offset(slave, 3000)) == [(1, 0), (2, 1000)]


def test_h04_no_consistent_point_is_none() -> None:
    """H-04: histories sharing no (epoch, start) pair give None, never 0 (no truncation to
    zero)."""
    assert find_consistent_point(_h((5, 0), last_end=100), _h((6, 0), last_end=100)) is None
    assert find_consistent_point((), _h((1, 0), last_end=100)) is None


def test_h02_old_master_divergent_tail() -> None:
    """H-02 (the algorithm part): broker 1 was master at epoch 1 and wrote one unreplicated
    message (0..1100 locally, 0..1000 replicated); broker 2 became master at epoch 2 at 1000
    and wrote up to 2000. Expected: broker 1 truncates to 1000."""
    old_master = _h((1, 0), last_end=1100)
    new_master = _h((1, 0), (2, 1000), last_end=2000)
    assert find_consistent_point(old_master, new_master) == 1000


@pytest.mark.parametrize(
    ("content", "match"),
    [
        (b"", "no size and crc"),
        (b"2\n", "no size and crc"),
        (b"x\n0\n", "field=size"),
        (b"2\n0\n1-0\n", "expect 2 entries, only found 1"),
        (b"1\n12345\n1-0\n", "crc32 not match"),
        (b"1\n0\n1-abc\n", "field=startOffset"),
        (b"1\n0\n-5\n", "field=epoch"),  # Java: "".split gives ["", "5"] -> parseInt("") fails
        (b"1\n0\n1-99999999999999999999\n", "out of range"),
        (b"2\n0\n2-0\n1-5\n", "out of order"),
        (b"1\n0\n1-\xff\n", "UTF-8"),
    ],
)
def test_epoch_decode_errors(content: bytes, match: str) -> None:
    """Damaged files raise CodecError naming what is wrong."""
    with pytest.raises(CodecError, match=match):
        decode_epoch_file(content)


def test_epoch_decode_upstream_tolerances() -> None:
    """1. CRC 0 disables the check. 2. Lines that do not split in two on '-' are skipped but
    counted in the CRC. 3. CRLF line ends and a missing final newline are accepted
    (BufferedReader.readLine). 4. Trailing '-' is dropped by Java's split."""
    assert _pairs(decode_epoch_file(b"1\n0\n1-0\n")) == [(1, 0)]
    noisy_crc = zlib.crc32(b"junk\n1-0\n") & 0x7FFFFFFF
    assert _pairs(decode_epoch_file(b"1\n%d\njunk\n1-0\n" % noisy_crc)) == [(1, 0)]
    assert _pairs(decode_epoch_file(b"2\r\n0\r\n1-0\r\n2-10")) == [(1, 0), (2, 10)]
    assert _pairs(decode_epoch_file(b"1\n0\n3-7-\n")) == [(3, 7)]
