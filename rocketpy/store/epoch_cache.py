"""EpochFileCache: the replica's epoch history in memory, persisted to ``epochFileCheckpoint``.

Owns: the in-memory entry list and its file (``storePathEpochFile``, default
``<storePathRootDir>/epochFileCheckpoint``, plus ``.bak``). Must not: write files on the event
loop. Mutations change memory at once and then await the write on the executor, so a caller that
returns from ``await cache.append_entry(...)`` knows the entry is durable. Mirrors
``store/ha/autoswitch/EpochFileCache.java`` (ha.md section 4); rules and file format live in the
pure :mod:`rocketpy.store.epoch_entries`.

Persistence differences from upstream (ha.md section 4.2): files are replaced atomically (temp,
fsync, rename) with the previous content kept in ``.bak``; an empty list removes both files
(upstream writes nothing, and a zero-entry file would make readers fall back to the ``.bak``);
damage in both files is a :class:`StoreError` naming both paths instead of an unhandled
``NumberFormatException``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from concurrent.futures import Executor
from pathlib import Path

import structlog

from rocketpy.common.atomic_file import LatestWinsWriter, read_with_backup
from rocketpy.common.errors import StoreError
from rocketpy.store import epoch_entries as ee
from rocketpy.store.epoch_entries import EpochAppendRefused, EpochEntry

log = structlog.get_logger(__name__)

EPOCH_FILE_NAME = "epochFileCheckpoint"


def _parse(data: bytes) -> tuple[EpochEntry, ...] | None:
    """Zero entries counts as "empty" so the loader tries the .bak (CheckpointFile.read)."""
    return ee.decode_epoch_file(data) or None


class EpochFileCache:
    """Epoch -> start offset history of this replica, optionally backed by a file.

    Create a file-backed cache with :meth:`load` (blocking) or :meth:`open` (on an executor); a
    cache with ``path=None`` is memory-only, like upstream's ``new EpochFileCache()`` used for
    the master's entries during truncation.
    """

    def __init__(
        self,
        path: Path | None = None,
        entries: Sequence[EpochEntry] = (),
        *,
        executor: Executor | None = None,
    ) -> None:
        """Build a cache over ``entries`` (re-linked); nothing is written until a mutation.

        Args:
            path: the epoch file, or None for a memory-only cache.
            entries: the initial history, sorted by epoch.
            executor: where file writes run (None: the loop's default executor).
        """
        self.path = path
        self._entries: tuple[EpochEntry, ...] = ee.link_end_offsets(entries)
        self._writer = LatestWinsWriter(path, executor) if path is not None else None

    @classmethod
    def load(cls, path: Path, *, executor: Executor | None = None) -> EpochFileCache:
        """Read ``path`` with fallback to ``path.bak`` (``initCacheFromFile``). Blocks.

        Raises:
            StoreError: both files exist and neither parses (the message names both).
        """
        loaded = read_with_backup(path, _parse)
        entries = loaded.value if loaded is not None else ()
        log.info(
            "load epoch file",
            path=str(path),
            entries=len(entries),
            from_backup=bool(loaded and loaded.from_backup),
        )
        return cls(path, entries, executor=executor)

    @classmethod
    async def open(cls, path: Path, *, executor: Executor | None = None) -> EpochFileCache:
        """:meth:`load` on ``executor``."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(executor, lambda: cls.load(path, executor=executor))

    # -- reads (on the loop, no I/O) ------------------------------------------------------------

    def entries(self) -> tuple[EpochEntry, ...]:
        """All entries, sorted by epoch, with end offsets (``getAllEntries``)."""
        return self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def last_entry(self) -> EpochEntry | None:
        """The newest entry, or None."""
        return self._entries[-1] if self._entries else None

    def last_epoch(self) -> int:
        """The newest epoch, or -1 when empty (``lastEpoch``)."""
        return self._entries[-1].epoch if self._entries else -1

    def find_epoch_entry_by_offset(self, offset: int) -> EpochEntry | None:
        """The entry with ``start <= offset < end``, or None."""
        return ee.find_epoch_entry_by_offset(self._entries, offset)

    def next_entry(self, epoch: int) -> EpochEntry | None:
        """The first entry after ``epoch``, or None."""
        return ee.next_entry(self._entries, epoch)

    def find_consistent_point(
        self,
        master_entries: Sequence[EpochEntry],
        *,
        master_max_offset: int,
        local_max_offset: int,
    ) -> int | None:
        """Where this replica's history stops agreeing with the master's (ha.md section 3.6).

        Both lists get their last end set to that side's max offset first, as
        ``AutoSwitchHAClient.doTruncate`` does. Pure: nothing is truncated here.

        Returns:
            The offset to truncate the local commit log to, or None when no (epoch, start)
            pair is shared (upstream -1; the caller must refuse to replicate, H-04).
        """
        local = ee.link_end_offsets(self._entries, local_max_offset)
        master = ee.link_end_offsets(
            sorted(master_entries, key=lambda e: e.epoch), master_max_offset
        )
        return ee.find_consistent_point(local, master)

    # -- mutations (memory now, file before returning) -----------------------------------------

    async def append_entry(self, entry: EpochEntry) -> bool:
        """Append ``entry`` and persist (``appendEntry``).

        Returns:
            False (and logs, as upstream) when the entry is refused: its epoch is not above the
            last one, or its start offset is below the last one's. An entry starting where the
            last one starts replaces it (see :func:`epoch_entries.append_entry`).

        Raises:
            StoreError: the file could not be written (memory already holds the entry).
        """
        try:
            self._entries = ee.append_entry(self._entries, entry)
        except EpochAppendRefused as e:
            log.error(  # noqa: TRY400 - an expected refusal, not a failure: no traceback
                "The appending entry's lastEpoch or endOffset is not bigger than lastEntry, "
                "append failed",
                entry=str(e.entry),
                last=str(e.last),
            )
            return False
        await self._persist()
        return True

    async def truncate_suffix_by_offset(self, offset: int) -> None:
        """Remove entries starting at or after ``offset`` and persist."""
        self._entries = ee.truncate_suffix_by_offset(self._entries, offset)
        await self._persist()

    async def truncate_suffix_by_epoch(self, epoch: int) -> None:
        """Remove entries with epoch >= ``epoch`` and persist."""
        self._entries = ee.truncate_suffix_by_epoch(self._entries, epoch)
        await self._persist()

    async def truncate_prefix_by_offset(self, offset: int) -> None:
        """Remove entries ending at or before ``offset`` (log head deleted) and persist."""
        self._entries = ee.truncate_prefix_by_offset(self._entries, offset)
        await self._persist()

    async def init_from_entries(self, entries: Sequence[EpochEntry]) -> None:
        """Replace the whole history and persist (``initCacheFromEntries``)."""
        self._entries = ee.link_end_offsets(entries)
        await self._persist()

    async def _persist(self) -> None:
        if self._writer is None:
            return
        # An empty history removes the file and its .bak (ha.md 4.2: a zero-entry file would
        # make the next load fall back to the stale .bak).
        data = ee.encode_epoch_file(self._entries) if self._entries else None
        try:
            await self._writer.write(data)
        except OSError as e:
            raise StoreError(f"Error happen when flush epochEntries to {self.path}: {e}") from e
