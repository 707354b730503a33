"""The store's ``lock`` and ``abort`` files (store.md section 1). Blocking: run on an executor.

Owns: taking the OS lock on ``<root>/lock`` for the life of the store (``DefaultMessageStore``
locks byte 0 with ``FileChannel.tryLock``: a POSIX record lock, which is what ``lockf`` takes,
so a Java broker and ours exclude each other), and writing/reading ``<root>/abort``.

``abort`` holds the PID as text, as upstream; a second line ``bootId=<uuid>`` names the kernel
boot the store ran under (``/proc/sys/kernel/random/boot_id``). Java only tests the file's
existence. Recovery reads the boot id back: when the process died but the machine did not,
every byte the process wrote into its mappings is still in the page cache, so the consume
queues say exactly what was dispatched (see ``commit_log/recovery.py``).
"""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path
from typing import Final

import structlog

from rocketpy.common.errors import StoreError

log = structlog.get_logger(__name__)

BOOT_ID_PATH: Final = Path("/proc/sys/kernel/random/boot_id")
_BOOT_ID_KEY: Final = "bootId="


def current_boot_id() -> str | None:
    """This kernel boot's id, or None where the platform has none."""
    try:
        return BOOT_ID_PATH.read_text(encoding="ascii").strip() or None
    except OSError:
        return None


def write_abort(path: Path) -> None:
    """Create ``abort`` with the PID and the boot id."""
    boot = current_boot_id()
    text = f"{os.getpid()}\n" + (f"{_BOOT_ID_KEY}{boot}\n" if boot else "")
    path.write_text(text, encoding="ascii")


def abort_from_this_boot(path: Path) -> bool:
    """Whether ``abort`` was written under the running kernel boot (the machine has not
    restarted since the store that left it started)."""
    boot = current_boot_id()
    try:
        text = path.read_text(encoding="ascii", errors="replace")
    except OSError:
        return False
    for line in text.splitlines():
        if line.startswith(_BOOT_ID_KEY):
            return boot is not None and line[len(_BOOT_ID_KEY) :].strip() == boot
    return False


class StoreLock:
    """The held lock on ``<root>/lock``; released by :meth:`release` or by process exit."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, path: Path) -> StoreLock:
        """Lock ``path`` (created with the text ``lock``), without waiting.

        Raises:
            StoreError: another process holds it (a broker is running on this store), or
                the file cannot be opened.
        """
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise StoreError(f"cannot open store lock file {path}: {e.strerror}") from e
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
        except OSError as e:
            os.close(fd)
            if e.errno in (errno.EACCES, errno.EAGAIN):
                raise StoreError(
                    f"Lock failed, MQ already started: {path} is locked by another process "
                    f"(another broker is running on store {path.parent})"
                ) from e
            raise StoreError(f"cannot lock {path}: {e.strerror}") from e
        if os.fstat(fd).st_size == 0:
            os.write(fd, b"lock")
        return cls(path, fd)

    def release(self) -> None:
        """Unlock and close; idempotent."""
        fd, self._fd = self._fd, None
        if fd is not None:
            try:
                fcntl.lockf(fd, fcntl.LOCK_UN, 1, 0)
            finally:
                os.close(fd)
