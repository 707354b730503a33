"""SIGKILL a SYNC_FLUSH writer at random points; every acknowledged message must survive."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import sys
from pathlib import Path

import pytest

from rocketpy.store.commit_log.record import decode_record
from rocketpy.store.message_store import MessageStore

from .crash_child import body, config

pytestmark = [pytest.mark.integration, pytest.mark.process]

CHILD = Path(__file__).with_name("crash_child.py")


async def _run_and_kill(root: Path, rng: random.Random) -> list[tuple[int, int]]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(CHILD), str(root), stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[3])},
    )  # fmt: skip
    assert proc.stdout is not None
    acked: list[tuple[int, int]] = []
    try:
        async with asyncio.timeout(20):
            # structlog lines of the child's start-up come first.
            while (await proc.stdout.readline()).strip() != b"ready":
                pass
            for _ in range(rng.randint(0, 40)):
                line = await proc.stdout.readline()
                wrote, queue_offset = line.split()
                acked.append((int(wrote), int(queue_offset)))
    finally:
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
    return acked


async def _verify(root: Path, acked: dict[int, int]) -> None:
    store = MessageStore(config(root))
    await store.start()
    try:
        assert store.max_offset_in_queue("Crash", 0) >= len(acked)
        for queue_offset, wrote in acked.items():
            raw = store.look_message_by_offset(wrote)
            assert raw is not None, wrote
            rec = decode_record(raw)
            assert (rec.queue_offset, rec.body) == (queue_offset, body(queue_offset))
        q = store.queues[("Crash", 0)] if acked else None
        if q is not None:
            for n in range(q.max_offset):
                unit = q.get_unit(n)
                assert unit is not None
                raw = store.look_message_by_offset(unit.commit_log_offset)
                assert raw is not None
                assert decode_record(raw).queue_offset == n
    finally:
        await store.stop()


def _kills(default: int) -> int:
    return int(os.environ.get("ROCKETPY_CRASH_KILLS", default))


async def _crash_loop(tmp_path: Path, kills: int) -> None:
    rng = random.Random(1234)
    acked: dict[int, int] = {}
    for _ in range(kills):
        for wrote, queue_offset in await _run_and_kill(tmp_path, rng):
            acked[queue_offset] = wrote
        # Leave ``abort`` in place: the next start is an abnormal recovery.
        await _verify(tmp_path, acked)
        config(tmp_path).abort_path.write_text("crashed")


async def test_crash_recovery_sigkill_fast(tmp_path: Path) -> None:
    """1. Run the SYNC_FLUSH child, read a random number of acks, SIGKILL it (x50 by default).
    2. After each kill reopen the store (abnormal recovery) and verify, then mark a crash again.
    Expected: every acknowledged message reads back byte-identical at its offset, and every
    consume-queue unit points at the record with that queue offset."""
    await _crash_loop(tmp_path, _kills(50))


@pytest.mark.chaos
async def test_crash_recovery_sigkill_chaos(tmp_path: Path) -> None:
    """Same as the fast variant with 2000 kills. Expected: the same invariants every time."""
    await _crash_loop(tmp_path, _kills(2000))
