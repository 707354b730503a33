"""StoreCheckpoint: the ``checkpoint`` file, one memory-mapped 4096-byte page.

Owns: the on-disk layout (pure :func:`encode_checkpoint` / :func:`decode_checkpoint`) and the
driver that keeps the values in memory and writes them into the mapped page on flush. Must not:
msync on the event loop; :meth:`StoreCheckpoint.flush_async` snapshots the values on the loop and
does the copy and ``mmap.flush`` on the store's flush executor. Mirrors ``StoreCheckpoint``
(store.md section 6), 5.1.1+ layout:

| offset | size | field | upstream name | since |
| --- | --- | --- | --- | --- |
| 0 | 8 | int64 store timestamp of the last flushed commit-log message | physicMsgTimestamp | all |
| 8 | 8 | int64 store timestamp of the last flushed consume-queue unit | logicsMsgTimestamp | all |
| 16 | 8 | int64 end timestamp of the last flushed (full) index file | indexMsgTimestamp | all |
| 24 | 8 | int64 slave: master's flushed offset (HA exchange) | masterFlushedOffset | 5.0.0 |
| 32 | 8 | int64 confirm offset (controller / duplication mode) | confirmPhyOffset | 5.1.1 |
| 40 | 4056 | zero | | |

All big-endian. Decided (spec and upstream develop agree): ``confirmPhyOffset`` is written, so
a 5.1.1+ Java broker reads our file and we read theirs; an older file simply has zeros there.
"""

from __future__ import annotations

import asyncio
import mmap
import os
import struct
import threading
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import structlog

from rocketpy.common.errors import CodecError
from rocketpy.store.mapped_file import allocate_blocks

log = structlog.get_logger(__name__)

CHECKPOINT_FILE_SIZE: Final = 4096  # DefaultMappedFile.OS_PAGE_SIZE
_LAYOUT: Final = struct.Struct(">qqqqq")
# getMinTimestamp subtracts 3 s so recovery starts a little before the checkpointed moment.
_MIN_TIMESTAMP_MARGIN_MS: Final = 3000


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckpointValues:
    """The five persisted values (all int64)."""

    physic_msg_timestamp: int = 0
    logics_msg_timestamp: int = 0
    index_msg_timestamp: int = 0
    master_flushed_offset: int = 0
    confirm_phy_offset: int = 0

    def min_timestamp(self) -> int:
        """``getMinTimestamp``: min(physic, logics) - 3000 ms, at least 0."""
        return max(
            0, min(self.physic_msg_timestamp, self.logics_msg_timestamp) - _MIN_TIMESTAMP_MARGIN_MS
        )

    def min_timestamp_index(self) -> int:
        """``getMinTimestampIndex``: :meth:`min_timestamp` also bounded by the index timestamp."""
        return min(self.min_timestamp(), self.index_msg_timestamp)


def encode_checkpoint(values: CheckpointValues) -> bytes:
    """The whole 4096-byte page for ``values``."""
    page = bytearray(CHECKPOINT_FILE_SIZE)
    _pack(page, values)
    return bytes(page)


def decode_checkpoint(buf: bytes | bytearray | memoryview | mmap.mmap) -> CheckpointValues:
    """Read the values from the start of a checkpoint page.

    Raises:
        CodecError: fewer than 40 bytes.
    """
    if len(buf) < _LAYOUT.size:
        raise CodecError(
            f"checkpoint needs {_LAYOUT.size} bytes, got {len(buf)}", field="checkpoint", offset=0
        )
    physic, logics, index, master_flushed, confirm = _LAYOUT.unpack_from(buf, 0)
    return CheckpointValues(
        physic_msg_timestamp=physic,
        logics_msg_timestamp=logics,
        index_msg_timestamp=index,
        master_flushed_offset=master_flushed,
        confirm_phy_offset=confirm,
    )


class StoreCheckpoint:
    """The mapped ``checkpoint`` file. Setters run on the loop; flushing runs off it.

    Create with :meth:`open` (blocking: call it on an executor during store start-up).
    """

    def __init__(
        self, path: Path, file: mmap.mmap, values: CheckpointValues, existed: bool
    ) -> None:
        self.path = path
        self.existed = existed
        self.physic_msg_timestamp = values.physic_msg_timestamp
        self.logics_msg_timestamp = values.logics_msg_timestamp
        self.index_msg_timestamp = values.index_msg_timestamp
        self.master_flushed_offset = values.master_flushed_offset
        self.confirm_phy_offset = values.confirm_phy_offset
        self._map: mmap.mmap | None = file
        # Serializes flush threads against each other and against close().
        self._io_lock = threading.Lock()

    @classmethod
    def open(cls, path: Path) -> StoreCheckpoint:
        """Map ``path`` (created zero-filled if missing, extended to one page if short). Blocks.

        Returns:
            The checkpoint with the values read from the file (all zero for a new file).
        """
        path.parent.mkdir(parents=True, exist_ok=True)
        existed = path.exists()
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if os.fstat(fd).st_size < CHECKPOINT_FILE_SIZE:
                # FileChannel.map(READ_WRITE, 0, 4096) grows the file the same way.
                os.ftruncate(fd, CHECKPOINT_FILE_SIZE)
                allocate_blocks(fd, CHECKPOINT_FILE_SIZE)
            page = mmap.mmap(fd, CHECKPOINT_FILE_SIZE, access=mmap.ACCESS_WRITE)
        finally:
            os.close(fd)
        values = decode_checkpoint(page) if existed else CheckpointValues()
        log.info(
            "store checkpoint file exists" if existed else "store checkpoint file not exists",
            path=str(path),
            physic_msg_timestamp=values.physic_msg_timestamp,
            logics_msg_timestamp=values.logics_msg_timestamp,
            index_msg_timestamp=values.index_msg_timestamp,
            master_flushed_offset=values.master_flushed_offset,
            confirm_phy_offset=values.confirm_phy_offset,
        )
        return cls(path, page, values, existed)

    @classmethod
    async def open_async(cls, path: Path, executor: Executor | None) -> StoreCheckpoint:
        """:meth:`open` on ``executor``."""
        return await asyncio.get_running_loop().run_in_executor(executor, cls.open, path)

    def values(self) -> CheckpointValues:
        """A snapshot of the in-memory values."""
        return CheckpointValues(
            physic_msg_timestamp=self.physic_msg_timestamp,
            logics_msg_timestamp=self.logics_msg_timestamp,
            index_msg_timestamp=self.index_msg_timestamp,
            master_flushed_offset=self.master_flushed_offset,
            confirm_phy_offset=self.confirm_phy_offset,
        )

    def min_timestamp(self) -> int:
        """``getMinTimestamp`` of the in-memory values."""
        return self.values().min_timestamp()

    def min_timestamp_index(self) -> int:
        """``getMinTimestampIndex`` of the in-memory values."""
        return self.values().min_timestamp_index()

    def write(self, values: CheckpointValues) -> None:
        """Copy ``values`` into the page and msync it. Blocks: run it off the loop.

        Raises:
            ValueError: the checkpoint is closed.
        """
        with self._io_lock:
            if self._map is None:
                raise ValueError(f"checkpoint {self.path} is closed")
            _pack(self._map, values)
            self._map.flush()

    def flush(self) -> None:
        """Persist the current values (``StoreCheckpoint.flush``). Blocks: run it off the loop."""
        self.write(self.values())

    async def flush_async(self, executor: Executor | None) -> None:
        """Snapshot the values now, persist them on ``executor``, return when durable."""
        values = self.values()
        await asyncio.get_running_loop().run_in_executor(executor, self.write, values)

    def close(self) -> None:
        """Flush and unmap (``StoreCheckpoint.shutdown``); idempotent. Blocks."""
        self._close(self.values())

    def _close(self, values: CheckpointValues) -> None:
        with self._io_lock:
            page, self._map = self._map, None
            if page is None:
                return
            try:
                _pack(page, values)
                page.flush()
            finally:
                page.close()


def _pack(page: bytearray | mmap.mmap, values: CheckpointValues) -> None:
    _LAYOUT.pack_into(
        page,
        0,
        values.physic_msg_timestamp,
        values.logics_msg_timestamp,
        values.index_msg_timestamp,
        values.master_flushed_offset,
        values.confirm_phy_offset,
    )
