"""IndexFile: one memory-mapped hash index file (``index/<yyyyMMddHHmmssSSS>``).

Owns: the mapping of one file, putting keys into it and walking a key's chain. Must not: create,
map, msync, close or delete on the event loop: :meth:`IndexFile.create`, :meth:`IndexFile.open`,
:meth:`flush`, :meth:`close` and :meth:`destroy` block and run on the store's executors. On the
loop: :meth:`put_key` (a few small copies into the already mapped file) and
:meth:`select_phy_offsets` (small reads). Mirrors ``store/index/IndexFile`` (layout in
:mod:`rocketpy.store.index.record`, store.md section 9).

Files are created sparse at their full size (``ftruncate``), as upstream's ``DefaultMappedFile``
does for index files (they are not pre-touched); with tiny test sizes that is irrelevant, with
the default 420 MB the first write to a page may fault it in.
"""

from __future__ import annotations

import mmap
import os
import threading
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Final

from rocketpy.common.errors import StoreError
from rocketpy.store.index import record as r
from rocketpy.store.index.record import IndexHeader
from rocketpy.store.mapped_file import create_sized, reserve_blocks

_SLOT_UNPACK: Final = r.SLOT.unpack_from
_SLOT_PACK: Final = r.SLOT.pack_into
_ENTRY_PACK: Final = r.ENTRY.pack_into
_HEADER_PACK: Final = r.HEADER.pack_into


class IndexFile:
    """One index file. The header lives in memory and is copied into the map on every put."""

    def __init__(self, path: Path, mapped: mmap.mmap, hash_slot_num: int, index_num: int) -> None:
        """Use :meth:`create` or :meth:`open`."""
        self.path = path
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.file_size = r.index_file_size(hash_slot_num, index_num)
        self._entries_pos = r.entry_position(hash_slot_num, 0)
        self.header = r.decode_index_header(mapped[: r.INDEX_HEADER_SIZE])
        self._map: mmap.mmap | None = mapped
        #: Entries below this number have disk blocks (written ones, or reserved by _grow),
        #: and the file's bytes below ``_allocated``.
        self._room = min(self.header.index_count, index_num)
        self._allocated = r.entry_position(hash_slot_num, self._room)
        # Serializes msync/close/unlink on executor threads; the loop's writes need no lock
        # (the loop is the only writer, and a file is closed only after it left the service).
        self._io_lock = threading.Lock()

    @property
    def name(self) -> str:
        """The file name (its creation time)."""
        return self.path.name

    @classmethod
    def create(cls, path: Path, hash_slot_num: int, index_num: int) -> IndexFile:
        """Create a zero-filled file of the full size and map it, with disk blocks for the
        header and the hash slots (written anywhere, any time) and none yet for the entries
        (:meth:`_grow` gives them blocks as they fill). Blocks.

        Raises:
            StoreError: the file already exists.
        """
        size = r.index_file_size(hash_slot_num, index_num)
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            raise StoreError(f"index file already exists: {path}")
        create_sized(path, size, r.entry_position(hash_slot_num, 0))
        fd = os.open(path, os.O_RDWR)
        try:
            mapped = mmap.mmap(fd, size, access=mmap.ACCESS_WRITE)
        finally:
            os.close(fd)
        return cls(path, mapped, hash_slot_num, index_num)

    @classmethod
    def open(cls, path: Path, hash_slot_num: int, index_num: int) -> IndexFile:
        """Map an existing file and load its header (``IndexFile`` + ``load``). Blocks.

        Raises:
            StoreError: the file's size does not match ``hash_slot_num``/``index_num``.
        """
        size = r.index_file_size(hash_slot_num, index_num)
        fd = os.open(path, os.O_RDWR)
        try:
            actual = os.fstat(fd).st_size
            if actual != size:
                raise StoreError(
                    f"index file {path} is {actual} bytes, expected {size} for "
                    f"maxHashSlotNum={hash_slot_num} maxIndexNum={index_num}"
                )
            mapped = mmap.mmap(fd, size, access=mmap.ACCESS_WRITE)
        finally:
            os.close(fd)
        return cls(path, mapped, hash_slot_num, index_num)

    def _mapped(self) -> mmap.mmap:
        if self._map is None:
            raise StoreError(f"index file {self.path} is closed")
        return self._map

    def _store_header(self, header: IndexHeader) -> None:
        self.header = header
        r.HEADER.pack_into(
            self._mapped(),
            0,
            header.begin_timestamp,
            header.end_timestamp,
            header.begin_phy_offset,
            header.end_phy_offset,
            header.hash_slot_count,
            header.index_count,
        )

    def start_after(self, end_phy_offset: int, end_timestamp: int) -> None:
        """Begin where the previous file ended (the ``IndexFile`` constructor arguments):
        positive values become this file's begin and end."""
        header = self.header
        if end_phy_offset > 0:
            header = replace(header, begin_phy_offset=end_phy_offset, end_phy_offset=end_phy_offset)
        if end_timestamp > 0:
            header = replace(header, begin_timestamp=end_timestamp, end_timestamp=end_timestamp)
        self._store_header(header)

    def is_write_full(self) -> bool:
        """``indexCount >= indexNum``."""
        return self.header.index_count >= self.index_num

    def is_time_matched(self, begin: int, end: int) -> bool:
        """The file's [begin, end] timestamps overlap the query's."""
        return r.is_time_matched(begin, end, self.header)

    def put_key(self, key: str, phy_offset: int, store_timestamp: int) -> bool:
        """Add ``key`` -> ``phy_offset`` (``IndexFile.putKey``); False when the file is full.
        On the loop: small copies."""
        return self.put_hashes(((r.index_key_hash(key), phy_offset, store_timestamp),)) == 1

    def put_hashes(self, entries: Sequence[tuple[int, int, int]]) -> int:
        """:meth:`put_key` for each ``(index key hash, phy offset, store timestamp)`` in order
        (the hash as :func:`~rocketpy.store.index.record.index_key_hash` gives it), until the
        file is full; the header is written once, after the last entry (its bytes end as
        ``put_key`` one at a time leaves them). Returns how many were added. Runs for every
        indexed key (``IndexService.dispatch_run``), so the record helpers
        (``slot_position``, ``entry_position``, ``time_diff_seconds``) are inlined here."""
        header = self.header
        index_no = header.index_count
        index_num = self.index_num
        if index_no >= index_num:
            return 0
        if index_no + len(entries) > self._room:
            self._grow(min(index_no + len(entries), index_num))
        mapped = self._map
        if mapped is None:
            raise StoreError(f"index file {self.path} is closed")
        slots = self.hash_slot_num
        entries_pos = self._entries_pos
        begin = header.begin_timestamp
        begin_phy = header.begin_phy_offset
        slot_count = header.hash_slot_count
        added = 0
        phy_offset = store_timestamp = 0
        # Only what fits: the header's end fields take the last entry *written*.
        for key_hash, phy_offset, store_timestamp in entries[: index_num - index_no]:
            slot_pos = r.INDEX_HEADER_SIZE + (key_hash % slots) * r.HASH_SLOT_SIZE
            slot_value = _SLOT_UNPACK(mapped, slot_pos)[0]
            if slot_value <= r.INVALID_INDEX or slot_value > index_no:
                slot_value = r.INVALID_INDEX
                slot_count += 1
            # time_diff_seconds: Java's truncating long division, clamped to [0, INT_MAX].
            diff = store_timestamp - begin
            time_diff = 0 if begin <= 0 or diff < 1000 else min(diff // 1000, r.INT_MAX)
            _ENTRY_PACK(
                mapped, entries_pos + index_no * r.INDEX_SIZE,
                key_hash, phy_offset, time_diff, slot_value,
            )  # fmt: skip
            _SLOT_PACK(mapped, slot_pos, index_no)
            # Upstream quirk kept for identical files: the first entry's timeDiff is taken
            # against the begin inherited from the previous file, then begin moves to its time.
            if index_no <= 1:
                begin = store_timestamp
                begin_phy = phy_offset
            index_no += 1
            added += 1
        if added:
            header.begin_timestamp = begin
            header.begin_phy_offset = begin_phy
            header.hash_slot_count = slot_count
            header.end_timestamp = store_timestamp
            header.end_phy_offset = phy_offset
            header.index_count = index_no
            _HEADER_PACK(
                mapped, 0, begin, store_timestamp, begin_phy, phy_offset, slot_count, index_no
            )
        return added

    def _grow(self, entries: int) -> None:
        """Give the first ``entries`` entries disk blocks (``reserve_blocks``: whole MiBs at a
        time, on the loop: one ``posix_fallocate`` every ~52,000 entries). A store through the
        mapping into a hole the file system cannot fill (a full disk) is SIGBUS, which ends a
        Python process.

        Raises:
            OSError: no blocks (a full disk): nothing is written; the reput tries again.
        """
        end = r.entry_position(self.hash_slot_num, entries)
        self._allocated = reserve_blocks(self.path, self._allocated, end, self.file_size)
        self._room = (self._allocated - self._entries_pos) // r.INDEX_SIZE

    def select_phy_offsets(
        self, out: list[int], key: str, max_num: int, begin: int, end: int
    ) -> None:
        """Append offsets of entries whose hash equals ``key``'s and whose time is in
        [begin, end], newest first, until ``out`` holds ``max_num`` (``selectPhyOffset``).

        Only the hash is compared, as upstream: different keys with the same hash both match,
        and the caller (QUERY_MESSAGE) filters by the message's real keys.
        """
        header = self.header
        mapped = self._mapped()
        key_hash = r.index_key_hash(key)
        (slot_value,) = r.SLOT.unpack_from(mapped, r.slot_position(key_hash, self.hash_slot_num))
        if (
            slot_value <= r.INVALID_INDEX
            or slot_value > header.index_count
            or header.index_count <= 1
        ):
            return
        index_no = slot_value
        while len(out) < max_num:
            entry_hash, phy_offset, time_diff, prev = r.ENTRY.unpack_from(
                mapped, r.entry_position(self.hash_slot_num, index_no)
            )
            if time_diff < 0:
                break
            time_read = header.begin_timestamp + time_diff * 1000
            if entry_hash == key_hash and begin <= time_read <= end:
                out.append(phy_offset)
            if (
                prev <= r.INVALID_INDEX
                or prev > header.index_count
                or prev == index_no
                or time_read < begin
            ):
                break
            index_no = prev

    def flush(self) -> None:
        """msync the file (the header is already in the map). Blocks; no-op once closed."""
        with self._io_lock:
            if self._map is not None:
                self._map.flush()

    def close(self) -> None:
        """Flush and unmap (``IndexFile.shutdown``); idempotent. Blocks."""
        with self._io_lock:
            mapped, self._map = self._map, None
            if mapped is not None:
                try:
                    mapped.flush()
                finally:
                    mapped.close()

    def destroy(self) -> None:
        """Unmap and delete the file. Blocks."""
        with self._io_lock:
            mapped, self._map = self._map, None
            if mapped is not None:
                mapped.close()
            self.path.unlink(missing_ok=True)
