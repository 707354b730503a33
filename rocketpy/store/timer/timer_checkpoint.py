"""TimerCheckpoint: the ``config/timercheck`` file (a 4096-byte page, 56 bytes used).

Owns: reading the file at start-up and writing it in place (``pwrite`` + ``fdatasync``; upstream
maps the page and forces it). Layout in :mod:`rocketpy.store.timer.record`. Mirrors
``store/timer/TimerCheckpoint``. Must not: compute what it holds (the timer message store's
``prepareTimerCheckPoint`` does). ``load`` and ``write`` block (executor).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from rocketpy.store.timer.record import (
    CHECKPOINT_FILE_SIZE,
    TimerCheckpointData,
    decode_checkpoint,
    encode_checkpoint,
)


class TimerCheckpoint:
    """The checkpoint file and its last written value."""

    def __init__(self, path: Path) -> None:
        """Args: ``path`` ``<storePathRootDir>/config/timercheck``."""
        self.path = path
        self.existed = False
        self._lock = threading.Lock()

    def load(self) -> TimerCheckpointData:
        """The stored values (all zero when the file does not exist yet). Blocks."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return TimerCheckpointData()
        self.existed = True
        return decode_checkpoint(raw[:CHECKPOINT_FILE_SIZE])

    def write(self, data: TimerCheckpointData) -> None:
        """Write ``data`` into the page and make it durable. Blocks."""
        page = encode_checkpoint(data)
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                if os.fstat(fd).st_size < CHECKPOINT_FILE_SIZE:
                    os.ftruncate(fd, CHECKPOINT_FILE_SIZE)
                os.pwrite(fd, page, 0)
                os.fdatasync(fd)
            finally:
                os.close(fd)
            self.existed = True
