"""One fixed-size memory-mapped segment named by its 20-digit start offset (store.md section 2).

Owns: creating/opening/deleting a segment file (blocking: run on an executor), appending bytes
(on the loop: a copy into an already mapped region), reading slices, and making the written
range durable (blocking: the flush executor). The loop is the only writer of ``wrote_position``;
the flush thread only reads bytes below the position it is handed.

Durability uses ``fdatasync`` on the file, not ``mmap.flush``: CPython 3.11's ``mmap.flush`` runs
``msync`` without releasing the GIL, which stalls the event loop (and every append) for the whole
disk write. On Linux a shared mapping's dirty pages are the file's page cache, so ``fdatasync``
writes them (``msync(MS_SYNC)`` is itself a ranged fsync there).

Page faults: the appender's first store to each page of a fresh segment faults it in (a page
cache page allocated and zeroed in the faulting thread, the event loop: about a tenth of a
batched send's CPU on a virtual machine). :meth:`MappedFile.populate` faults the pages ahead
of it in from the allocation thread instead (``madvise(MADV_POPULATE_WRITE)``, Linux 5.14+,
called through ctypes: ``mmap.madvise`` keeps the GIL for the whole call).

Resident memory: the whole pages of a range about to be made durable are dropped from this
process's mapping first (``madvise(MADV_DONTNEED)``, a no-op for the data: the page cache and
the file keep them, dirty pages still dirty), so RSS stays flat however many GiB are appended
and writeback finds no writable mapping to clean (each one a TLB shootdown); a later read
faults the page back in.
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Final

import structlog

from rocketpy.common.atomic_file import temp_path

log = structlog.get_logger(__name__)

PAGE_SIZE = mmap.PAGESIZE
# zero() writes this many bytes at a time.
_ZERO_CHUNK = 1024 * 1024
#: reserve() allocates a sparse segment's blocks this many bytes at a time.
RESERVE_CHUNK = 1024 * 1024


#: ``madvise`` advice: fault a range in writable without touching its bytes (Linux 5.14+).
_MADV_POPULATE_WRITE: Final = 23


def _libc_madvise() -> Callable[[int, int, int], int] | None:
    """libc's ``madvise`` through ctypes (which releases the GIL for the call); None off Linux
    or without a libc to load."""
    if sys.platform != "linux":
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):
        return None
    fn.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    fn.restype = ctypes.c_int
    return fn


_MADVISE: Final = _libc_madvise()


def _address_of(mapping: mmap.mmap) -> int:
    """Where ``mapping`` starts in memory (its buffer is exported only for this call); 0 for
    one that cannot say (read-only, closed, or no madvise to use it for)."""
    if _MADVISE is None:
        return 0
    try:
        anchor = ctypes.c_char.from_buffer(mapping)
    except (TypeError, ValueError):
        return 0
    address = ctypes.addressof(anchor)
    del anchor
    return address


def offset_to_file_name(offset: int) -> str:
    """``UtilAll.offset2FileName``: 20 zero-padded decimal digits."""
    return f"{offset:020d}"


def allocate_blocks(fd: int, size: int, offset: int = 0) -> None:
    """``posix_fallocate`` ``size`` bytes from ``offset`` (by default the whole file); a file
    system without it keeps the file sparse (ENOSPC and other errors propagate).

    Every file this store writes through a mapping gets its blocks this way before the bytes
    are written: a store through a mapping into a hole the file system cannot fill (a full
    disk) raises SIGBUS, which kills a Python process -- upstream's JVM turns it into an
    InternalError instead."""
    try:
        os.posix_fallocate(fd, offset, size)
    except OSError as exc:
        if exc.errno not in (errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
            raise


def create_sized(path: Path, size: int, blocks: int = 0) -> None:
    """Create ``path`` zero-filled at ``size`` bytes, its first ``blocks`` bytes with disk
    blocks (:func:`allocate_blocks`). Sized under a temporary name (``temp_path``), then
    renamed: a crash never leaves a short file -- a kill between a create and its ftruncate
    once left a 0-byte index file that the next start refused to load. Blocks.

    Raises:
        OSError: ENOSPC and the like; no file is left behind.
    """
    tmp = temp_path(path)
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.ftruncate(fd, size)
        if blocks:
            allocate_blocks(fd, blocks)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    finally:
        os.close(fd)
    os.replace(tmp, path)


def reserve_blocks(path: Path, allocated: int, end: int, limit: int) -> int:
    """Give ``path``'s bytes from ``allocated`` to ``end`` -- rounded up to
    :data:`RESERVE_CHUNK`, at most ``limit`` (the file's size) -- disk blocks; the new end of
    the allocated bytes. For files filled in order, whose blocks are not all taken up front.
    Blocks.

    Raises:
        OSError: ENOSPC and the like: nothing may be written past ``allocated``.
    """
    upto = min(limit, -(-end // RESERVE_CHUNK) * RESERVE_CHUNK)
    fd = os.open(path, os.O_RDWR)
    try:
        allocate_blocks(fd, upto - allocated, allocated)
    finally:
        os.close(fd)
    return upto


def _closed_map() -> mmap.mmap:
    mapping = mmap.mmap(-1, 1)
    mapping.close()
    return mapping


#: What a closed file's ``buffer`` is: any access raises ValueError ("mmap closed or invalid").
_CLOSED_MAP: Final = _closed_map()


class MappedFile:
    """A mapped segment; ``file_from_offset`` is its first byte's global offset."""

    def __init__(self, path: Path, file_from_offset: int, size: int, mapping: mmap.mmap) -> None:
        self.path = path
        self.file_from_offset = file_from_offset
        self.size = size
        self._map: mmap.mmap | None = mapping
        #: The mapping, for code that encodes or decodes in place (``struct.pack_into``): an
        #: attribute, not a property (read per record); a closed map once closed, on which
        #: every access raises ValueError.
        self.buffer: mmap.mmap = mapping
        # Where the mapping starts in memory, for populate() (taken now: no thread uses it yet).
        self._address = _address_of(mapping)
        self.wrote_position = 0
        self.flushed_position = 0
        # Pages below this position were released from the mapping (still in the file).
        self.released_position = 0
        #: Bytes from the start known to have disk blocks (allocate_blocks): writers of a
        #: segment made sparse stay below it, calling reserve() first.
        self.allocated = 0

    @classmethod
    def create(
        cls, directory: Path, file_from_offset: int, size: int, *, allocate: bool = False
    ) -> MappedFile:
        """Create (or reopen) the zero-filled segment starting at ``file_from_offset``. Blocks.

        ``allocate`` (a segment an appender fills in order, the commit log's) reserves the
        disk blocks up front (``posix_fallocate``, without the GIL; a file system that cannot
        keeps the file sparse) and turns readahead off for the mapping until
        :meth:`written_out`. Without both, the writer's first touch of a page makes the
        kernel read (zero-fill) a readahead window of large folios in the faulting thread:
        about 20 ms of kernel time every 8 MiB on ext4, and the faulting thread is the
        event loop.
        """
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / offset_to_file_name(file_from_offset)
        if not path.exists():
            create_sized(path, size, size if allocate else 0)
        fd = os.open(path, os.O_RDWR)
        try:
            mapping = mmap.mmap(fd, size, access=mmap.ACCESS_WRITE)
        finally:
            os.close(fd)
        mf = cls(path, file_from_offset, size, mapping)
        if allocate:
            mf.allocated = size
            mf.appending()
        # fsync the directory so the new name survives a crash of the machine.
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        return mf

    @classmethod
    def open(cls, path: Path, size: int) -> MappedFile:
        """Map an existing segment. Blocks.

        Raises:
            ValueError: the file's length is not ``size`` or its name is not an offset.
        """
        actual = path.stat().st_size
        if actual != size:
            raise ValueError(f"{path}: length {actual} not matched message store config {size}")
        offset = int(path.name)
        fd = os.open(path, os.O_RDWR)
        try:
            mapping = mmap.mmap(fd, size, access=mmap.ACCESS_WRITE)
        finally:
            os.close(fd)
        return cls(path, offset, size, mapping)

    @property
    def _mapping(self) -> mmap.mmap:
        if self._map is None:
            raise ValueError(f"mapped file {self.path} is closed")
        return self._map

    @property
    def remaining(self) -> int:
        """Bytes left after the write position."""
        return self.size - self.wrote_position

    @property
    def is_full(self) -> bool:
        """Whether the write position reached the end."""
        return self.wrote_position >= self.size

    def append(self, data: bytes | bytearray | memoryview) -> int:
        """Copy ``data`` at the write position; returns the position it was written at.

        Raises:
            ValueError: it does not fit.
        """
        pos = self.wrote_position
        end = pos + len(data)
        if end > self.size:
            raise ValueError(f"{len(data)} bytes do not fit at {pos} in {self.path}")
        self._mapping[pos:end] = data
        self.wrote_position = end
        return pos

    def read(self, pos: int, size: int) -> bytes:
        """A copy of ``size`` bytes at ``pos`` (relative to the segment)."""
        return self._mapping[pos : pos + size]

    def zero(self, start: int, end: int) -> None:
        """Overwrite ``[start, end)`` with zeros, a MiB at a time (a cut tail, so that nothing
        behind the new end can look valid to a later recovery)."""
        for pos in range(start, end, _ZERO_CHUNK):
            self._mapping[pos : min(pos + _ZERO_CHUNK, end)] = bytes(min(_ZERO_CHUNK, end - pos))

    def drop_pages(self, start: int, end: int) -> None:
        """Release the whole pages of ``[start, end)`` from this process's mapping (the page
        cache and the file keep them; a later read faults them back in). No-op once closed."""
        start -= start % PAGE_SIZE
        if end > start and self._map is not None:
            self._map.madvise(mmap.MADV_DONTNEED, start, end - start)

    def populate(self, start: int, end: int) -> bool:
        """Fault the pages of ``[start, end)`` into the mapping, writable, leaving their bytes
        as they are, so the appender that writes them next takes no page fault. Only within
        :attr:`allocated` (a page without disk blocks is left to the writer). Blocks (without
        the GIL): run it on an executor. A mapping closed meanwhile makes the call fail
        harmlessly (the advice changes no byte of whatever it meets). False where the
        platform or the kernel cannot (the caller stops asking)."""
        if _MADVISE is None or not self._address:
            return False
        start -= start % PAGE_SIZE
        end = min(end, self.allocated)
        if end <= start or self._map is None:
            return True
        if _MADVISE(self._address + start, end - start, _MADV_POPULATE_WRITE) != 0:
            return ctypes.get_errno() not in (errno.EINVAL, errno.ENOSYS)
        return True

    def view(self, pos: int, size: int) -> memoryview:
        """A zero-copy slice; release it before :meth:`close`."""
        return memoryview(self._mapping)[pos : pos + size]

    def flush(self, upto: int) -> int:
        """Make bytes below ``upto`` durable; returns the new flushed position. Blocks.

        ``fdatasync`` releases the GIL (see the module docstring); a file deleted meanwhile
        has nothing left to make durable.
        """
        upto = min(upto, self.size)
        if upto > self.flushed_position:
            try:
                fd = os.open(self.path, os.O_RDONLY)
            except FileNotFoundError:
                return self.flushed_position
            try:
                # Unmapped first: writeback cleans each page it writes, and a page mapped
                # writable costs a TLB shootdown (an IPI to the CPU running the writer) per
                # page; an unmapped one costs nothing. The dirty pages stay in the page cache.
                self._release(upto)
                os.fdatasync(fd)
            finally:
                os.close(fd)
            self.flushed_position = upto
        return self.flushed_position

    def appending(self) -> None:
        """An appender fills this segment from its write position: readahead off from there
        (see :meth:`create`). Only ahead of the writer: random advice also turns off
        fault-around, which readers of written records need (consumers read 16 times more
        page faults without it), so each range :meth:`_release` passes and the whole segment
        at :meth:`written_out` go back to normal."""
        if self._map is not None:
            start = self.wrote_position - self.wrote_position % PAGE_SIZE
            if start < self.size:
                self._map.madvise(mmap.MADV_RANDOM, start, self.size - start)

    def reserve(self, end: int) -> None:
        """Give the bytes below ``end`` (rounded up to :data:`RESERVE_CHUNK`, at most the
        segment) disk blocks, from :attr:`allocated` on. Blocks.

        Raises:
            OSError: ENOSPC and the like: nothing may be written past :attr:`allocated`.
        """
        if end > self.allocated:
            self.allocated = reserve_blocks(self.path, self.allocated, end, self.size)

    def written_out(self) -> None:
        """The appender moved on: readahead back to normal for readers of this segment."""
        if self._map is not None:
            self._map.madvise(mmap.MADV_NORMAL)

    def _release(self, upto: int) -> None:
        """Drop the whole pages below ``upto`` (written, about to be synced) from the mapping:
        at every flush, for one TLB shootdown per flush instead of one per page written back
        (a consume queue fills a page in 205 units, so a flush writes few)."""
        end = upto - upto % PAGE_SIZE
        mapping = self._map
        if mapping is None or end <= self.released_position:
            return
        self.drop_pages(self.released_position, end)
        # Readers of what is written get readahead and fault-around back (see appending).
        mapping.madvise(mmap.MADV_NORMAL, self.released_position, end - self.released_position)
        self.released_position = end

    def close(self) -> None:
        """Unmap; idempotent. Blocks."""
        mapping, self._map = self._map, None
        if mapping is not None:
            self.buffer = _CLOSED_MAP
            mapping.close()

    def destroy(self) -> None:
        """Delete the file and unmap it. Blocks.

        The unlink comes first: a mapping still pinned by a live read view cannot be closed
        (``BufferError``); it is then left to be freed with the last view, and the bytes stay
        readable through it until then (what ``destroyMapedFileIntervalForcibly`` waits for
        upstream, where readers hold a reference count).
        """
        self.path.unlink(missing_ok=True)
        try:
            self.close()
        except BufferError:
            log.warning("mapped file still referenced, unmapped with its last view",
                        path=str(self.path))  # fmt: skip
