"""Small metadata files replaced atomically, with upstream's ``<file>.bak`` kept alongside.

Owns: the one place where rocketpy writes a whole small file (config JSON, the epoch file, broker
identity files) and reads it back with a fallback to the backup. Must not: be called on the event
loop; the sync functions block on the disk (``os.fsync``), so callers run them on the store's
executor, or use the ``*_async`` wrappers which do exactly that.

Mirrors ``MixAll.string2File`` / ``ConfigManager.persist`` / ``ConfigManager.load`` (store.md
section 7), made crash-safe as STYLE.md section 6 asks:

| step | upstream 5.x ``string2File`` | here (:func:`write_atomic`) |
| --- | --- | --- |
| 1 | copy ``<file>`` to ``<file>.bak`` | write ``<file>.tmp``, ``fsync`` it |
| 2 | rewrite ``<file>`` in place | rename ``<file>`` to ``<file>.bak`` (as ``ConfigManager``) |
| 3 | | rename ``<file>.tmp`` to ``<file>``, ``fsync`` the directory |

So ``<file>.bak`` always holds the previous content, as upstream's does, and ``<file>`` is never
partly written. A crash before step 2 leaves everything as it was plus a stray ``<file>.tmp``
(removed by :func:`read_with_backup`); a crash between steps 2 and 3 leaves no ``<file>``, so the
loader takes ``<file>.bak``: the previous content, as if the write had not happened.

Loading (:func:`read_with_backup`) follows ``ConfigManager.load``: a missing, empty or unparsable
main file falls back to ``<file>.bak``. Stricter than upstream: a main file that exists but does
not parse, with no usable backup, is an error naming both paths (upstream starts with an empty
table), and a damaged main file is moved aside to ``<file>.corrupt`` rather than deleted, so the
next write cannot move it over the good backup.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import threading
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

import structlog

from rocketpy.common.errors import CodecError, StoreError

log = structlog.get_logger(__name__)

T = TypeVar("T")

BACKUP_SUFFIX = ".bak"
TEMP_SUFFIX = ".tmp"
CORRUPT_SUFFIX = ".corrupt"


def backup_path(path: Path) -> Path:
    """``<file>.bak`` (``CheckpointFile.getBackFilePath``, ``ConfigManager.loadBak``)."""
    return path.with_name(path.name + BACKUP_SUFFIX)


def temp_path(path: Path) -> Path:
    """``<file>.tmp``: the new content before it is renamed into place."""
    return path.with_name(path.name + TEMP_SUFFIX)


def fsync_dir(directory: Path) -> None:
    """Make renames and unlinks in ``directory`` durable (``MixAll.fsyncDirectory``)."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_synced(path: Path, data: bytes) -> None:
    with path.open("wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _move_to_backup(path: Path) -> None:
    """Rename ``<file>`` to ``<file>.bak`` (no-op when missing), as 5.x ``ConfigManager.persist``.

    A rename rather than a hard link or copy: upstream's ``string2File`` rewrites ``.bak`` in
    place, which would also rewrite ``<file>`` if the two shared an inode.
    """
    with contextlib.suppress(FileNotFoundError):
        os.replace(path, backup_path(path))


def write_atomic(path: Path, data: bytes, *, keep_backup: bool = True) -> None:
    """Replace ``path`` with ``data`` atomically and durably. Blocks: run it off the loop.

    Args:
        path: the file; its directory is created if missing.
        data: the complete new content.
        keep_backup: keep the previous content as ``<file>.bak`` (``string2File``).
            Broker identity files pass False: upstream deletes them before writing, so they
            never have a backup (controller.md section 9).

    Raises:
        OSError: the disk refused; the previous content stays loadable by
            :func:`read_with_backup` (from ``path`` or, if the failure came after step 2, ``.bak``).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path(path)
    # Writers of one file take turns: two at once would share ``<file>.tmp`` (concurrent
    # UPDATE_CONTROLLER_CONFIG requests on the default executor's threads did).
    with _lock_for(path):
        _write_synced(tmp, data)
        if keep_backup:
            _move_to_backup(path)
        os.replace(tmp, path)
        fsync_dir(path.parent)


_LOCKS: dict[Path, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


def _lock_for(path: Path) -> threading.Lock:
    """The lock of ``path`` (one per file written in this process; a daemon writes few)."""
    key = path.absolute()
    with _LOCKS_GUARD:
        lock = _LOCKS.get(key)
        if lock is None:
            lock = _LOCKS[key] = threading.Lock()
        return lock


def remove_with_backup(path: Path) -> None:
    """Delete ``path``, its backup and any stray temp file. Blocks: run it off the loop."""
    removed = False
    for p in (path, backup_path(path), temp_path(path)):
        with contextlib.suppress(FileNotFoundError):
            p.unlink()
            removed = True
    if removed and path.parent.exists():
        fsync_dir(path.parent)


@dataclass(frozen=True, slots=True, kw_only=True)
class Loaded(Generic[T]):
    """What :func:`read_with_backup` found.

    Attributes:
        value: the parsed content.
        path: the file it came from (the main file or its ``.bak``).
        from_backup: True when the main file was missing, empty or damaged.
    """

    value: T
    path: Path
    from_backup: bool


def _read_bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def _try_parse(path: Path, parse: Callable[[bytes], T | None]) -> tuple[T | None, Exception | None]:
    """Parse one file: (value, None), (None, None) when missing/empty, (None, error) if damaged."""
    data = _read_bytes(path)
    if not data:
        return None, None
    try:
        return parse(data), None
    except (CodecError, ValueError, UnicodeDecodeError) as e:
        return None, e


def read_with_backup(path: Path, parse: Callable[[bytes], T | None]) -> Loaded[T] | None:
    """Load ``path``, falling back to ``<file>.bak``. Blocks: run it off the loop.

    Args:
        path: the main file.
        parse: bytes to value; raises CodecError/ValueError when damaged; returns None when
            the content is valid but empty (the epoch file's "zero entries", which upstream's
            ``CheckpointFile.read`` also answers from the backup).

    Returns:
        The value and where it came from, or None when neither file has any content.

    Raises:
        StoreError: a file exists with content that does not parse and no usable alternative
            exists; the message names both paths and both causes.
    """
    with contextlib.suppress(FileNotFoundError):
        temp_path(path).unlink()  # an interrupted write_atomic; main or .bak is intact
    value, main_error = _try_parse(path, parse)
    if value is not None:
        return Loaded(value=value, path=path, from_backup=False)
    bak = backup_path(path)
    if main_error is not None:
        log.error(
            "load file failed, and try to load backup file", path=str(path), error=str(main_error)
        )
    bak_value, bak_error = _try_parse(bak, parse)
    if bak_error is not None or (main_error is not None and bak_value is None):
        raise StoreError(
            f"cannot load {path} ({main_error or 'missing or empty'}) "
            f"nor its backup {bak} ({bak_error or 'missing or empty'})"
        ) from (bak_error or main_error)
    if bak_value is None:
        return None
    # Get a damaged or empty main file out of the way of the next write's backup step, which
    # would otherwise copy it over the good backup (upstream deletes it). Damaged content is
    # kept for inspection.
    if main_error is not None:
        os.replace(path, path.with_name(path.name + CORRUPT_SUFFIX))
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    log.warning("load backup file OK", path=str(bak))
    return Loaded(value=bak_value, path=bak, from_backup=True)


async def write_atomic_async(
    executor: Executor | None, path: Path, data: bytes, *, keep_backup: bool = True
) -> None:
    """:func:`write_atomic` on ``executor`` (None: the loop's default executor)."""
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(executor, lambda: write_atomic(path, data, keep_backup=keep_backup))


class LatestWinsWriter:
    """Writes successive versions of one file off the loop; an older version never overwrites a
    newer one.

    Each :meth:`write` takes a sequence number on the loop. The write runs on the executor; if
    a waiter was cancelled and its write ends up running after a later one (possible with a
    multi-threaded executor), the stale write is skipped. So when ``await write(v)`` returns,
    the file holds ``v`` or something newer.
    """

    def __init__(self, path: Path, executor: Executor | None, *, keep_backup: bool = True) -> None:
        """Args: ``path`` the file; ``executor`` where writes run (None: the loop's default);
        ``keep_backup`` as in :func:`write_atomic`."""
        self.path = path
        self._executor = executor
        self._keep_backup = keep_backup
        self._seq = itertools.count(1)
        self._lock = threading.Lock()
        self._written = 0

    async def write(self, data: bytes | None) -> None:
        """Replace the file with ``data``, or remove it and its backup when ``data`` is None.

        Raises:
            OSError: the disk refused.
        """
        seq = next(self._seq)
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._executor, self.write_sync, seq, data)

    def write_sync(self, seq: int, data: bytes | None) -> None:
        """The blocking part of :meth:`write`; skips ``seq`` if a newer one is on disk."""
        with self._lock:
            if seq <= self._written:
                return
            if data is None:
                remove_with_backup(self.path)
            else:
                write_atomic(self.path, data, keep_backup=self._keep_backup)
            self._written = seq
