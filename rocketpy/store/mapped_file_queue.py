"""An ordered run of :class:`MappedFile` segments in one directory (store.md section 2).

Owns: loading the directory (size check), offset -> segment lookup, rolling to a new segment and
truncating dirty segments. Blocking methods (``load``, ``create_next``, ``truncate_dirty_files``,
``flush``, ``close``) run on an executor; lookups run on the loop.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import structlog

from rocketpy.store.mapped_file import MappedFile

log = structlog.get_logger(__name__)


_CREATE_ATTEMPTS: Final = 5


class MappedFileQueue:
    """Segments of ``file_size`` bytes under ``directory``; the last one is written."""

    def __init__(self, directory: Path, file_size: int, *, allocate: bool = False) -> None:
        self.directory = directory
        self.file_size = file_size
        # New segments get their disk blocks up front (see MappedFile.create).
        self.allocate = allocate
        self.files: list[MappedFile] = []

    def load(self) -> None:
        """Map every segment; each is first marked fully written. Blocks.

        Raises:
            ValueError: a segment has the wrong size (the store refuses to start).
        """
        if not self.directory.is_dir():
            return
        names = sorted(p for p in self.directory.iterdir() if p.name.isdigit())
        for path in names:
            mf = MappedFile.open(path, self.file_size)
            mf.wrote_position = mf.flushed_position = self.file_size
            self.files.append(mf)

    @property
    def last(self) -> MappedFile | None:
        """The segment being written, if any."""
        return self.files[-1] if self.files else None

    @property
    def min_offset(self) -> int:
        """First segment's start (0 when empty)."""
        return self.files[0].file_from_offset if self.files else 0

    @property
    def max_offset(self) -> int:
        """Last segment start + its write position."""
        last = self.last
        return last.file_from_offset + last.wrote_position if last else 0

    def next_file_offset(self) -> int:
        """Start offset of the segment after the last one."""
        last = self.last
        return last.file_from_offset + self.file_size if last else 0

    def create_next(self, start: int) -> MappedFile:
        """Create and map the segment starting at ``start``, and the directory if it is gone.
        Blocks.

        The directory goes when its topic is deleted (``deleteTopics`` removes the topic's
        consume-queue tree off the loop) while the reput still dispatches that topic's
        messages into a queue made again for them: the fuzz campaign's DELETE_TOPIC_IN_BROKER
        met such a dispatch, the FileNotFoundError stopped the reput, and no message of any
        topic became pullable after it.
        """
        # deleteTopics' rmtree runs on another thread and may remove the directory between
        # the mkdir and the segment's directory fsync, or while mkdir checks it (pathlib then
        # raises FileExistsError): make it again, a few times.
        for attempt in range(_CREATE_ATTEMPTS):
            try:
                self.directory.mkdir(parents=True, exist_ok=True)
                return MappedFile.create(self.directory, start, self.file_size,
                                         allocate=self.allocate)  # fmt: skip
            except (FileNotFoundError, FileExistsError):
                if attempt == _CREATE_ATTEMPTS - 1:
                    raise
        raise AssertionError("unreachable")

    def add(self, mf: MappedFile) -> None:
        """Append a segment made by :meth:`create_next` (on the loop)."""
        self.files.append(mf)

    def find(self, offset: int) -> MappedFile | None:
        """The segment holding global ``offset``, or None."""
        if not self.files:
            return None
        first = self.files[0].file_from_offset
        idx = (offset - first) // self.file_size
        if 0 <= idx < len(self.files):
            mf = self.files[idx]
            if mf.file_from_offset <= offset < mf.file_from_offset + self.file_size:
                return mf
        return None

    def read(self, offset: int, size: int) -> bytes | None:
        """``size`` bytes at global ``offset`` if they lie within one written segment."""
        mf = self.find(offset)
        if mf is None:
            return None
        pos = offset - mf.file_from_offset
        if pos + size > mf.wrote_position:
            return None
        return mf.read(pos, size)

    def truncate_dirty_files(self, offset: int) -> None:
        """Delete segments wholly above ``offset``; position the one containing it. Blocks."""
        keep: list[MappedFile] = []
        for mf in self.files:
            if mf.file_from_offset + self.file_size <= offset:
                keep.append(mf)
            elif mf.file_from_offset <= offset:
                pos = offset - mf.file_from_offset
                mf.wrote_position = mf.flushed_position = pos
                keep.append(mf)
            else:
                log.info("deleting dirty segment", path=str(mf.path), above=offset)
                mf.destroy()
        self.files = keep

    def flush(self, upto: int) -> int:
        """msync every segment up to global ``upto``; returns the flushed global offset. Blocks."""
        flushed = 0
        for mf in list(self.files):
            if mf.file_from_offset >= upto:
                break
            pos = mf.flush(upto - mf.file_from_offset)
            flushed = mf.file_from_offset + pos
        return flushed

    def close(self) -> None:
        """Unmap every segment. Blocks."""
        for mf in self.files:
            mf.close()
