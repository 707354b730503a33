"""The crash test's long run: 2000 SIGKILLs of a SYNC_FLUSH writer on the real disk (the fast
variants are ``tests/integration/store/test_crash_recovery.py``). It lives here, not beside them,
so that ``pytest tests/integration`` never selects a run of many minutes whose 3600 s timeout
marker overrides ``--timeout``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.crash_loop import crash_kills, crash_loop

pytestmark = [pytest.mark.chaos, pytest.mark.process]


@pytest.mark.timeout(3600)
async def test_crash_recovery_sigkill_chaos(tmp_path: Path) -> None:
    """As ``test_crash_recovery_sigkill_fast`` with 2000 kills on the real disk.
    Expected: the same invariants every time."""
    await crash_loop(tmp_path, crash_kills(2000))
