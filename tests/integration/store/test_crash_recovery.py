"""SIGKILL a SYNC_FLUSH writer at random points; every acknowledged message must survive.

The 2000-kill variant is ``tests/chaos/test_crash_recovery_chaos.py``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.crash_loop import crash_kills, crash_loop

pytestmark = [pytest.mark.integration, pytest.mark.process]


@pytest.fixture
def crash_root(tmp_path: Path) -> Iterator[Path]:
    """A directory on tmpfs when the machine has one: a SIGKILL (unlike a power cut) leaves
    the page cache intact, so the invariants are the same, and the 200 kills do not queue
    behind a shared disk's fdatasync. The chaos variant stays on the real disk."""
    shm = Path("/dev/shm")  # noqa: S108 - mkdtemp below makes a private directory
    if not shm.is_dir() or not os.access(shm, os.W_OK):
        yield tmp_path
        return
    root = Path(tempfile.mkdtemp(prefix="rocketpy-crash-", dir=shm))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.timeout(300)  # 200 kills take ~40 s on 2 busy cores
async def test_crash_recovery_sigkill_fast(crash_root: Path) -> None:
    """1. Fork a SYNC_FLUSH writer, read a random number of acks, SIGKILL it (x200 by default).
    2. After each kill reopen the store (abnormal recovery) and verify, then mark a crash again.
    Expected: every acknowledged message reads back byte-identical at its offset, and every
    consume-queue unit points at the record with that queue offset."""
    await crash_loop(crash_root, crash_kills(200))


@pytest.mark.timeout(300)
async def test_crash_recovery_sigkill_default_segments(tmp_path: Path) -> None:
    """The fast variant at upstream's segment sizes (1 GiB commit log, 6 MB consume queue) on
    the real disk, 20 kills (ROCKETPY_CRASH_KILLS_DEFAULT). Expected: the same invariants;
    segments created ahead and never written cost nothing."""
    await crash_loop(tmp_path, int(os.environ.get("ROCKETPY_CRASH_KILLS_DEFAULT", "20")), True)
