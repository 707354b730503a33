"""Atomic replace with a .bak of the previous content; load with fallback to the .bak."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from rocketpy.common.atomic_file import (
    LatestWinsWriter,
    backup_path,
    read_with_backup,
    remove_with_backup,
    temp_path,
    write_atomic,
    write_atomic_async,
)
from rocketpy.common.errors import CodecError, StoreError


def _parse(data: bytes) -> str | None:
    """Test format: 'ok:<text>' is valid, 'ok:' is valid-but-empty, anything else damaged."""
    text = data.decode()
    if not text.startswith("ok:"):
        raise CodecError("not ok", field="test", offset=0)
    return text[3:] or None


def test_atomic_write_keeps_previous_content_in_bak(tmp_path: Path) -> None:
    """1. Write v1 into a missing directory. 2. Write v2. 3. Write v3.
    Expected: after 1 there is no .bak; after each later write the .bak holds the previous
    content (MixAll.string2File); no temp files remain."""
    path = tmp_path / "config" / "topics.json"
    write_atomic(path, b"ok:v1")
    assert path.read_bytes() == b"ok:v1"
    assert not backup_path(path).exists()
    write_atomic(path, b"ok:v2")
    assert (path.read_bytes(), backup_path(path).read_bytes()) == (b"ok:v2", b"ok:v1")
    write_atomic(path, b"ok:v3")
    assert (path.read_bytes(), backup_path(path).read_bytes()) == (b"ok:v3", b"ok:v2")
    assert sorted(p.name for p in path.parent.iterdir()) == ["topics.json", "topics.json.bak"]


def test_atomic_write_without_backup(tmp_path: Path) -> None:
    """keep_backup=False (broker identity files) never creates a .bak."""
    path = tmp_path / "brokerIdentity"
    write_atomic(path, b"a", keep_backup=False)
    write_atomic(path, b"b", keep_backup=False)
    assert path.read_bytes() == b"b"
    assert not backup_path(path).exists()


def test_atomic_crash_before_backup_rename_leaves_old_content(tmp_path: Path) -> None:
    """1. Write v1 and v2. 2. Simulate a crash after the temp file of v3 was written but before
    any rename (a half-written .tmp). 3. Load.
    Expected: v2 loads from the main file; the stray temp file is removed."""
    path = tmp_path / "consumerOffset.json"
    write_atomic(path, b"ok:v1")
    write_atomic(path, b"ok:v2")
    temp_path(path).write_bytes(b"ok:v")
    loaded = read_with_backup(path, _parse)
    assert loaded is not None
    assert (loaded.value, loaded.from_backup) == ("v2", False)
    assert not temp_path(path).exists()


def test_atomic_crash_between_renames_loads_previous(tmp_path: Path) -> None:
    """1. Write v1 and v2. 2. Simulate a crash after <file> was renamed to .bak and before the
    temp file was renamed to <file>. 3. Load. 4. Write v4.
    Expected: v2 loads from the .bak (the write of v3 never happened); after v4 the .bak still
    holds v2, the last content that was complete in <file>."""
    path = tmp_path / "consumerOffset.json"
    write_atomic(path, b"ok:v1")
    write_atomic(path, b"ok:v2")
    path.replace(backup_path(path))
    temp_path(path).write_bytes(b"ok:v3")
    loaded = read_with_backup(path, _parse)
    assert loaded is not None
    assert (loaded.value, loaded.from_backup) == ("v2", True)
    write_atomic(path, b"ok:v4")
    assert (path.read_bytes(), backup_path(path).read_bytes()) == (b"ok:v4", b"ok:v2")


def test_atomic_load_missing_main_uses_bak(tmp_path: Path) -> None:
    """1. Only a .bak exists (crash between upstream's move-to-bak and rewrite). 2. Load.
    Expected: the .bak content, flagged from_backup."""
    path = tmp_path / "subscriptionGroup.json"
    backup_path(path).write_bytes(b"ok:old")
    loaded = read_with_backup(path, _parse)
    assert loaded is not None
    assert (loaded.value, loaded.path, loaded.from_backup) == ("old", backup_path(path), True)


@pytest.mark.parametrize("main", [b"", b"ok:"])
def test_atomic_load_empty_main_uses_bak_and_clears_main(tmp_path: Path, main: bytes) -> None:
    """1. Main file empty (0 bytes) or valid-but-empty; .bak good. 2. Load. 3. Write v3.
    Expected: the .bak loads; the empty main is removed so the next write keeps the good
    content as the new .bak instead of the empty file."""
    path = tmp_path / "epochFileCheckpoint"
    path.write_bytes(main)
    backup_path(path).write_bytes(b"ok:good")
    loaded = read_with_backup(path, _parse)
    assert loaded is not None
    assert loaded.value == "good"
    assert not path.exists()
    write_atomic(path, b"ok:v3")
    assert backup_path(path).read_bytes() == b"ok:good"


def test_atomic_load_damaged_main_uses_bak_and_quarantines(tmp_path: Path) -> None:
    """1. Main damaged, .bak good. 2. Load.
    Expected: .bak value; the damaged file is kept as <file>.corrupt, not deleted."""
    path = tmp_path / "topics.json"
    path.write_bytes(b"garbage")
    backup_path(path).write_bytes(b"ok:good")
    loaded = read_with_backup(path, _parse)
    assert loaded is not None
    assert loaded.value == "good"
    assert (tmp_path / "topics.json.corrupt").read_bytes() == b"garbage"


def test_atomic_load_both_damaged_names_both_paths(tmp_path: Path) -> None:
    """Main and .bak damaged -> StoreError naming both paths; nothing is moved."""
    path = tmp_path / "topics.json"
    path.write_bytes(b"garbage")
    backup_path(path).write_bytes(b"also garbage")
    with pytest.raises(StoreError) as info:
        read_with_backup(path, _parse)
    assert str(path) in str(info.value)
    assert str(backup_path(path)) in str(info.value)
    assert path.exists()


def test_atomic_load_damaged_main_without_bak_is_an_error(tmp_path: Path) -> None:
    """Stricter than upstream: a damaged main file and no backup is an error, not an empty
    table."""
    path = tmp_path / "topics.json"
    path.write_bytes(b"garbage")
    with pytest.raises(StoreError, match="missing or empty"):
        read_with_backup(path, _parse)


def test_atomic_load_nothing(tmp_path: Path) -> None:
    """Neither file exists -> None (a fresh store)."""
    assert read_with_backup(tmp_path / "x.json", _parse) is None


def test_atomic_remove_with_backup(tmp_path: Path) -> None:
    """remove_with_backup deletes the file and its .bak; a second call is harmless."""
    path = tmp_path / "epochFileCheckpoint"
    write_atomic(path, b"ok:1")
    write_atomic(path, b"ok:2")
    remove_with_backup(path)
    remove_with_backup(path)
    assert list(tmp_path.iterdir()) == []


def test_atomic_write_failure_keeps_old_content(tmp_path: Path) -> None:
    """1. Write v1. 2. Block the temp file name with a directory and try to write v2.
    Expected: OSError; the main file still holds v1 and the .bak was not touched."""
    path = tmp_path / "topics.json"
    write_atomic(path, b"ok:v1")
    temp_path(path).mkdir()
    with pytest.raises(IsADirectoryError):
        write_atomic(path, b"ok:v2")
    assert path.read_bytes() == b"ok:v1"
    assert not backup_path(path).exists()


async def test_atomic_async_wrappers(tmp_path: Path) -> None:
    """The async write wrapper runs on the default executor and gives the same result."""
    path = tmp_path / "a.json"
    async with asyncio.timeout(5):
        await write_atomic_async(None, path, b"ok:1")
        await write_atomic_async(None, path, b"ok:2")
    loaded = read_with_backup(path, _parse)
    assert loaded is not None
    assert loaded.value == "2"
    assert backup_path(path).read_bytes() == b"ok:1"


def test_atomic_latest_wins_writer_skips_stale_write(tmp_path: Path) -> None:
    """1. Version 2 is written before version 1 (a cancelled waiter's write ran late).
    Expected: version 1 is skipped; the file never goes back in time."""
    path = tmp_path / "epochFileCheckpoint"
    writer = LatestWinsWriter(path, None)
    writer.write_sync(2, b"ok:two")
    writer.write_sync(1, b"ok:one")
    assert path.read_bytes() == b"ok:two"


async def test_atomic_latest_wins_writer_none_removes(tmp_path: Path) -> None:
    """write(None) removes the file and its backup."""
    path = tmp_path / "f"
    writer = LatestWinsWriter(path, None)
    async with asyncio.timeout(5):
        await writer.write(b"ok:1")
        await writer.write(b"ok:2")
        await writer.write(None)
    assert list(tmp_path.iterdir()) == []


def test_atomic_file_concurrent_writers_take_turns(tmp_path: Path) -> None:
    """1. 16 threads write one file 20 times each, all at once (as concurrent
    UPDATE_CONTROLLER_CONFIG requests do on the default executor).
    Expected: no writer fails (they shared ``<file>.tmp`` before); the file holds one whole
    write; no temp file is left."""
    path = tmp_path / "controller.properties"
    contents = [f"writer={i}\n".encode() * 200 for i in range(16)]

    def writer(data: bytes) -> None:
        for _ in range(20):
            write_atomic(path, data)

    with ThreadPoolExecutor(16) as pool:
        for future in [pool.submit(writer, c) for c in contents]:
            future.result()
    assert path.read_bytes() in contents
    assert not temp_path(path).exists()
