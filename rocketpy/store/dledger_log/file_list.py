"""DLedger's ``MmapFileList``: the data or the index files of one member, named by their
20-digit start offset (dledger-commitlog.md section 1.1).

Owns: appending whole units that never span files (data: an entry that does not leave
``MIN_BLANK_LEN`` bytes gets the file's blank tail written first and opens the next file; index:
files are a whole number of 32-byte units, so no blank), reads of written ranges, truncation to an
offset (``truncateOffset``) and rebuilding the list around an offset outside it
(``rebuildWithPos``). Reuses :class:`~rocketpy.store.mapped_file_queue.MappedFileQueue` for
loading, lookup, flushing and deleting segments. Mirrors ``MmapFileList``.

Blocking: ``load``, ``truncate``, ``rebuild_with_pos``, ``prepare_next``, ``flush``, ``close``
and an append that has to open a new file (unless :meth:`prepare_next` made it ahead); the driver
runs them off the loop. Appends into a mapped file are copies. Must not: parse entries
(:mod:`.entry`) or decide what to truncate (:mod:`.store`, :mod:`.recovery`).
"""

from __future__ import annotations

from pathlib import Path

import structlog

from rocketpy.common.errors import StoreError
from rocketpy.store.dledger_log.entry import MIN_BLANK_LEN, encode_blank
from rocketpy.store.mapped_file import MappedFile
from rocketpy.store.mapped_file_queue import MappedFileQueue

log = structlog.get_logger(__name__)


class MmapFileList:
    """Files of ``file_size`` bytes under ``directory``; the last one is appended to."""

    def __init__(self, directory: Path, file_size: int, *, use_blank: bool) -> None:
        """Args: ``use_blank`` True for data files (blank tail), False for index files."""
        # Blocks up front (allocate_blocks): a hole on a full disk is SIGBUS when written.
        self.queue = MappedFileQueue(directory, file_size, allocate=True)
        self.file_size = file_size
        self.use_blank = use_blank
        self._blank = MIN_BLANK_LEN if use_blank else 0
        self._ahead: MappedFile | None = None

    @property
    def files(self) -> list[MappedFile]:
        """The mapped files, ascending."""
        return self.queue.files

    @property
    def directory(self) -> Path:
        """Where the files live."""
        return self.queue.directory

    def load(self) -> None:
        """Map every file, each marked fully written (``MmapFileList.load``). Blocks.

        Raises:
            StoreError: a file has the wrong length or the offsets are not contiguous.
        """
        try:
            self.queue.load()
        except ValueError as exc:
            raise StoreError(f"load file failed: {exc}") from exc
        self.check_self()

    def check_self(self) -> None:
        """``checkSelf``: adjacent files are exactly one file size apart.

        Raises:
            StoreError: they are not.
        """
        for prev, cur in zip(self.files, self.files[1:], strict=False):
            if cur.file_from_offset - prev.file_from_offset != self.file_size:
                raise StoreError(
                    f"the mapped file list is damaged: {prev.path.name} then {cur.path.name}"
                )

    @property
    def max_wrote_position(self) -> int:
        """``getMaxWrotePosition``: last file start + its write position (0 when empty)."""
        return self.queue.max_offset

    @property
    def min_offset(self) -> int:
        """The first file's start (0 when empty)."""
        return self.queue.min_offset

    def prepare_next(self) -> None:
        """Create the file that the next roll will open, so the roll itself is only a list
        update (AllocateMappedFileService's role). Blocks."""
        start = self.queue.next_file_offset()
        if self._ahead is None or self._ahead.file_from_offset != start:
            self._drop_ahead()
            self._ahead = self.queue.create_next(start)

    def _drop_ahead(self, *, delete: bool = True) -> None:
        """Forget the file made ahead; deleted unless the list is only being closed (an
        all-zero file past the end is cut by the next recovery anyway)."""
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            if delete:
                ahead.destroy()
            else:
                ahead.close()

    def _open_next(self, start: int) -> MappedFile:
        ahead, self._ahead = self._ahead, None
        if ahead is not None and ahead.file_from_offset == start:
            mf = ahead
        else:
            if ahead is not None:
                ahead.destroy()
            mf = self.queue.create_next(start)
        self.queue.add(mf)
        return mf

    def pre_append(self, length: int) -> int:
        """``preAppend``: make room for ``length`` bytes in one file (writing the blank tail and
        opening the next file when needed); returns the global offset they will go to.

        Raises:
            StoreError: ``length`` can never fit a file.
        """
        blank = self._blank
        if length + blank > self.file_size:
            raise StoreError(f"{length} bytes never fit a {self.file_size}-byte file")
        mf = self.queue.last
        if mf is None or mf.is_full:
            start = mf.file_from_offset + self.file_size if mf else 0
            mf = self._open_next(start)
        if length + blank > mf.remaining:
            if not self.use_blank:
                raise StoreError(f"{length} bytes do not fit the {mf.remaining} left in {mf.path}")
            mf.append(encode_blank(mf.remaining))
            mf = self._open_next(mf.file_from_offset + self.file_size)
        return mf.file_from_offset + mf.wrote_position

    def append(self, data: bytes | bytearray | memoryview) -> int:
        """``append``: write ``data`` at the end; returns its global offset."""
        offset = self.pre_append(len(data))
        mf = self.files[-1]
        mf.append(data)
        return offset

    def last_with_room(self, length: int) -> tuple[MappedFile, int] | None:
        """The last file and its write position when ``length`` more bytes fit it (with room
        left for the blank tail), else None; opens and writes nothing."""
        files = self.queue.files
        if files:
            mf = files[-1]
            rel = mf.wrote_position
            if rel + length + self._blank <= mf.size:
                return mf, rel
        return None

    def last_for_write(self, length: int) -> tuple[MappedFile, int]:
        """:meth:`pre_append` for writers that encode in place: the file and the position in it
        where ``length`` bytes go; the caller writes them and advances ``wrote_position``."""
        room = self.last_with_room(length)
        if room is not None:  # the usual case, once per entry: room to spare in the last file
            return room
        offset = self.pre_append(length)
        mf = self.files[-1]
        return mf, offset - mf.file_from_offset

    def find(self, offset: int) -> MappedFile | None:
        """The file holding global ``offset``."""
        return self.queue.find(offset)

    def read(self, offset: int, size: int) -> bytes | None:
        """``size`` written bytes at global ``offset`` within one file, else None."""
        return self.queue.read(offset, size)

    def truncate(self, offset: int) -> None:
        """``truncateOffset``: files wholly above ``offset`` are deleted and the one holding it
        is written up to it. Blocks."""
        self._drop_ahead()
        self.queue.truncate_dirty_files(offset)

    def rebuild_with_pos(self, offset: int) -> None:
        """``rebuildWithPos``: ``offset`` lies outside the list (below its first file or past
        its last): drop every file and start a new one around ``offset``. Blocks."""
        self._drop_ahead()
        for mf in self.files:
            log.warning("rebuild: deleting file", path=str(mf.path), pos=offset)
            mf.destroy()
        self.files.clear()
        start = offset - offset % self.file_size
        mf = self.queue.create_next(start)
        mf.wrote_position = mf.flushed_position = offset - start
        self.queue.add(mf)

    def truncate_or_rebuild(self, offset: int) -> None:
        """:meth:`truncate`, and :meth:`rebuild_with_pos` when that cannot reach ``offset``."""
        self.truncate(offset)
        if self.max_wrote_position != offset:
            log.warning(
                "rebuild for wrotePos != truncatePos",
                wrote=self.max_wrote_position,
                truncate=offset,
            )
            self.rebuild_with_pos(offset)

    def flush(self) -> int:
        """Make every written byte durable; returns the flushed global offset. Blocks."""
        return self.queue.flush(self.max_wrote_position)

    def close(self) -> None:
        """Unmap every file. Blocks."""
        self._drop_ahead(delete=False)
        self.queue.close()
