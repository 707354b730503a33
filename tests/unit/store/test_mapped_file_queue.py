"""MappedFile / MappedFileQueue on real 4 KiB files."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from rocketpy.store.mapped_file import MappedFile, offset_to_file_name
from rocketpy.store.mapped_file_queue import MappedFileQueue


def test_mapped_file_queue_append_roll_load_truncate(tmp_path: Path) -> None:
    """1. Create three 4 KiB segments, fill the first two, half the third, flush.
    2. Reload the directory into a new queue. 3. Truncate at 5000.
    Expected: names are 20-digit offsets; reload sees the bytes; lookups map offsets to
    segments; truncation deletes the third segment and positions the second at 904."""
    q = MappedFileQueue(tmp_path, 4096)
    for start in (0, 4096, 8192):
        mf = q.create_next(start)
        q.add(mf)
        mf.append(bytes([start // 4096 + 1]) * (4096 if start < 8192 else 2048))
    assert [p.name for p in sorted(tmp_path.iterdir())] == [
        offset_to_file_name(0),
        "00000000000000004096",
        "00000000000000008192",
    ]
    assert q.max_offset == 8192 + 2048
    assert q.flush(q.max_offset) == q.max_offset
    q.close()

    again = MappedFileQueue(tmp_path, 4096)
    again.load()
    assert again.min_offset == 0
    assert again.max_offset == 3 * 4096
    found = again.find(5000)
    assert found is not None
    assert found.file_from_offset == 4096
    assert again.read(8192 + 2040, 16) == b"\x03" * 8 + b"\0" * 8
    assert again.find(3 * 4096) is None
    again.truncate_dirty_files(5000)
    assert len(again.files) == 2
    assert again.max_offset == 5000
    assert not (tmp_path / "00000000000000008192").exists()
    again.close()


def test_mapped_file_wrong_size_refused(tmp_path: Path) -> None:
    """1. Write a 100-byte file named like a segment. 2. Load a 4 KiB queue.
    Expected: ValueError naming the length mismatch."""
    (tmp_path / offset_to_file_name(0)).write_bytes(b"x" * 100)
    q = MappedFileQueue(tmp_path, 4096)
    with pytest.raises(ValueError, match="not matched"):
        q.load()


def test_mapped_file_append_overflow(tmp_path: Path) -> None:
    """1. Append 4000 bytes then 100 to a 4 KiB segment. Expected: the second append raises."""
    mf = MappedFile.create(tmp_path, 0, 4096)
    mf.append(b"a" * 4000)
    with pytest.raises(ValueError, match="do not fit"):
        mf.append(b"b" * 100)
    assert mf.remaining == 96
    mf.destroy()
    assert not mf.path.exists()


def _can_fallocate(directory: Path) -> bool:
    probe = directory / "probe"
    fd = os.open(probe, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.posix_fallocate(fd, 0, 4096)
    except OSError:
        return False
    finally:
        os.close(fd)
        probe.unlink()
    return True


def _vm_flags(path: Path) -> list[set[str]]:
    """The VmFlags of each of this process's mappings of ``path``, in address order
    (/proc/self/smaps)."""
    lines = Path("/proc/self/smaps").read_text().splitlines()
    flags = []
    for i, line in enumerate(lines):
        if line.endswith(str(path)):
            for detail in lines[i + 1 :]:
                if detail.startswith("VmFlags:"):
                    flags.append(set(detail.split()[1:]))
                    break
    assert flags, f"{path} is not mapped"
    return flags


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="needs Linux /proc smaps")
def test_appended_segment_is_allocated_and_read_ahead_off_until_written_out(
    tmp_path: Path,
) -> None:
    """1. Create an 8 MiB segment through a queue built with ``allocate`` (the commit log's)
    and one without. 2. Write 5 MiB to the first and flush them. 3. Call ``written_out``.
    Expected: the allocated one has all its blocks on disk and its mapping is marked random
    read (``rr``) ahead of the writer only: after the flush the released 4 MiB are normal
    again and the rest still ``rr``; after written_out nothing is. The plain one is sparse
    and never marked."""
    size = 8 * 1024 * 1024
    appended = MappedFileQueue(tmp_path / "a", size, allocate=True).create_next(0)
    plain = MappedFileQueue(tmp_path / "p", size).create_next(0)
    try:
        if _can_fallocate(tmp_path):
            assert appended.path.stat().st_blocks * 512 >= size
        assert plain.path.stat().st_blocks == 0
        assert ["rr" in f for f in _vm_flags(appended.path)] == [True]
        assert ["rr" in f for f in _vm_flags(plain.path)] == [False]
        appended.append(b"r" * (5 * 1024 * 1024))
        appended.flush(appended.wrote_position)
        assert ["rr" in f for f in _vm_flags(appended.path)] == [False, True]
        appended.written_out()
        assert not any("rr" in f for f in _vm_flags(appended.path))
    finally:
        appended.close()
        plain.close()


def test_mapped_file_queue_recreates_a_deleted_directory(tmp_path: Path) -> None:
    """1. A consume-queue-like queue under topic/queue dirs gets one segment. 2. The topic's
    tree is removed (deleteTopics) while the queue object lives on. 3. The next segment is made.
    Expected: it is created in a new directory instead of raising FileNotFoundError (which
    stopped the reput in the fuzz campaign)."""
    directory = tmp_path / "FuzzT1" / "3"
    q = MappedFileQueue(directory, 4096)
    q.add(q.create_next(0))
    shutil.rmtree(tmp_path / "FuzzT1")
    mf = q.create_next(4096)
    q.add(mf)
    assert mf.append(b"x" * 10) is not None
    assert (directory / "00000000000000004096").exists()
