"""Making the commit log's next segment (``AllocateMappedFileService``).

Owns: the segment created ahead of need on the allocation executor, the roll lock, the roll
itself (take the segment made ahead when it still starts where the log ends, else make one),
an HA slave's first segment (where the master's bytes start), and the pages faulted in ahead
of the appender (:meth:`SegmentAllocator.warm`, on the same executor).
Must not: append or flush; a failed creation (a full disk) propagates as ``OSError`` to the
caller, which decides the answer. Blocking work (create, destroy) runs on the executor.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Final

import structlog

from rocketpy.store.mapped_file import MappedFile
from rocketpy.store.mapped_file_queue import MappedFileQueue

log = structlog.get_logger(__name__)

#: How far ahead of the last segment's write position its pages are kept faulted in (at most
#: this much resident beyond what is written), refilled once half of it is written.
WARM_AHEAD: Final = 4 * 1024 * 1024


class SegmentAllocator:
    """Rolls ``mfq`` to a new last segment, one created ahead when possible."""

    def __init__(self, mfq: MappedFileQueue, executor: Executor) -> None:
        self._mfq = mfq
        self._executor = executor
        #: Held while a segment is being added (rolls, a replica's first segment).
        self.lock = asyncio.Lock()
        # The next segment, being created on the allocation executor.
        self._ahead: asyncio.Future[MappedFile] | None = None
        # The segment whose pages warm() faults in, and the end of those asked for so far;
        # whether a populate is running; False once the platform cannot populate.
        self._warm_file: MappedFile | None = None
        self._warmed_to = 0
        self._warming = False
        self._can_warm = True

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

    def warming(self, on_append: Callable[[], None]) -> Callable[[], None]:
        """``on_append`` followed by :meth:`warm`: the hook to call after every append."""
        warm = self.warm

        def appended() -> None:
            on_append()
            warm()

        return appended

    def warm(self) -> None:
        """Keep the last segment's pages up to :data:`WARM_AHEAD` past its write position
        faulted in (``MappedFile.populate`` on the executor, one range at a time), so its
        appends take no page fault. Called after appends: cheap when nothing is due."""
        mf = self._mfq.last
        if mf is None or self._warming or not self._can_warm:
            return
        pos = mf.wrote_position
        if mf is not self._warm_file:
            self._warm_file, self._warmed_to = mf, pos
        elif self._warmed_to - pos >= WARM_AHEAD // 2:
            return
        start, end = max(pos, self._warmed_to), min(mf.allocated, pos + WARM_AHEAD)
        if end <= start:
            return
        loop = asyncio.get_running_loop()
        try:
            done = loop.run_in_executor(self._executor, mf.populate, start, end)
        except RuntimeError:  # the executor is shut down (the store is stopping)
            return
        self._warmed_to = end
        self._warming = True
        done.add_done_callback(self._warmed)

    def _warmed(self, done: asyncio.Future[bool]) -> None:
        self._warming = False
        if done.cancelled():
            return
        error = done.exception()
        if error is not None or not done.result():
            self._can_warm = False
            log.info("pages are not faulted in ahead of the appender on this platform",
                     error=None if error is None else str(error))  # fmt: skip

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
