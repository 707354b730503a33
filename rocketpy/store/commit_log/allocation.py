"""Making the commit log's next segment (``AllocateMappedFileService``).

Owns: the segment created ahead of need on the allocation executor, the roll lock, the roll
itself (take the segment made ahead when it still starts where the log ends, else make one),
and an HA slave's first segment (where the master's bytes start).
Must not: append or flush; a failed creation (a full disk) propagates as ``OSError`` to the
caller, which decides the answer. Blocking work (create, destroy) runs on the executor.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import Executor

import structlog

from rocketpy.store.mapped_file import MappedFile
from rocketpy.store.mapped_file_queue import MappedFileQueue

log = structlog.get_logger(__name__)


class SegmentAllocator:
    """Rolls ``mfq`` to a new last segment, one created ahead when possible."""

    def __init__(self, mfq: MappedFileQueue, executor: Executor) -> None:
        self._mfq = mfq
        self._executor = executor
        #: Held while a segment is being added (rolls, a replica's first segment).
        self.lock = asyncio.Lock()
        # The next segment, being created on the allocation executor.
        self._ahead: asyncio.Future[MappedFile] | None = None

    async def roll(self) -> None:
        """Make a writable last segment: the one created ahead when it fits, else a new one.

        Raises:
            OSError: the segment could not be created (ENOSPC, ...); nothing changed.
        """
        mfq = self._mfq
        async with self.lock:
            last = mfq.last
            if last is not None and not last.is_full:
                return
            start = mfq.next_file_offset()
            loop = asyncio.get_running_loop()
            mf: MappedFile | None = None
            ahead, self._ahead = self._ahead, None
            if ahead is not None:
                mf = await _awaited(ahead)
                # A truncation may have moved the end meanwhile.
                if mf is not None and mf.file_from_offset != start:
                    await loop.run_in_executor(self._executor, mf.destroy)
                    mf = None
            if mf is None:
                mf = await loop.run_in_executor(self._executor, mfq.create_next, start)
            if last is not None:
                last.written_out()
            mfq.add(mf)
            self.preallocate()

    async def writable_at(self, start: int) -> None:
        """A last segment to write replicated bytes from commit-log offset ``start`` to (an
        HA slave's): an empty log's first segment is ``start``'s, written up to it; a full
        last segment rolls, to the one made ahead as appends do.

        Raises:
            OSError: the segment could not be created; nothing changed.
        """
        mfq = self._mfq
        last = mfq.last
        if last is None:
            async with self.lock:
                if mfq.last is None:
                    seg = start - start % mfq.file_size
                    loop = asyncio.get_running_loop()
                    mf = await loop.run_in_executor(self._executor, mfq.create_next, seg)
                    mf.wrote_position = mf.flushed_position = start - seg
                    mfq.add(mf)
        elif last.is_full:
            await self.roll()

    def preallocate(self) -> None:
        """Create the segment after the last one on the executor, ahead of need: sized under a
        temporary name, renamed (see ``MappedFile.create``)."""
        if self._ahead is not None or self._mfq.last is None:
            return
        start = self._mfq.next_file_offset()
        self._ahead = asyncio.get_running_loop().run_in_executor(
            self._executor, self._mfq.create_next, start
        )

    async def drop_ahead(self) -> None:
        """Delete the segment created ahead, if any (at stop)."""
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            mf = await _awaited(ahead)
            if mf is not None:
                await asyncio.get_running_loop().run_in_executor(self._executor, mf.destroy)


async def _awaited(ahead: asyncio.Future[MappedFile]) -> MappedFile | None:
    """The segment created ahead, or None when that failed (a full disk: the roll tries again
    now, and the write is refused if there is still no room)."""
    try:
        return await ahead
    except OSError as e:
        log.warning("allocate mapped file ahead failed", error=str(e))
        return None
