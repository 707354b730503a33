"""SIGKILL a process appending to a DLedger log; no flushed (acknowledged) entry may be lost
(dledger-commitlog.md section 1.5, acceptance check 10 at the store layer)."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import sys
from pathlib import Path

import pytest

from rocketpy.common.message.decoder import decode_record
from rocketpy.store.dledger_log.reader import CommittedReader
from rocketpy.store.dledger_log.store import DLedgerLogStore
from tests.helpers.dledger_crash_child import body, config
from tests.helpers.dledger_files import all_entries

pytestmark = [pytest.mark.integration, pytest.mark.process]

CHILD = Path(__file__).parents[2] / "helpers" / "dledger_crash_child.py"
ROUNDS = 6


async def _next(stream: asyncio.StreamReader, kind: bytes) -> list[bytes]:
    """The next ``kind`` line (the writer's log lines share its stdout)."""
    while True:
        raw = await stream.readline()
        if not raw:
            raise EOFError("writer exited")
        words = raw.split()
        if words[:1] == [kind]:
            return words


async def _round(root: Path, term: int, acks_wanted: int) -> tuple[int, int]:
    """Start a writer at ``term``, read its ready line and ``acks_wanted`` acks, SIGKILL it.
    Returns (end index it recovered to, last index it acknowledged)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(CHILD), str(root), str(term),
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[3])},
    )  # fmt: skip
    assert proc.stdout is not None
    try:
        async with asyncio.timeout(30):
            ready = await _next(proc.stdout, b"ready")
            acked = -1
            for _ in range(acks_wanted):
                acked = int((await _next(proc.stdout, b"ack"))[1])
    finally:
        proc.send_signal(signal.SIGKILL)
        async with asyncio.timeout(10):
            await proc.wait()
    return int(ready[1]), acked


@pytest.mark.timeout(120)
async def test_sigkill_loses_no_acknowledged_entry(tmp_path: Path) -> None:
    """1. Six times: start a writer at term 1..6 (it recovers the log first), read a random
    number of acks, SIGKILL it mid-append. 2. Recover in this process.
    Expected: every writer recovered at least up to the previous writer's last ack; finally
    every entry up to the last ack is there with its own body, PHYSICALOFFSET = pos + 48, terms
    never go down, entries are contiguous, committed index <= end, and the committed reader
    yields exactly the entries up to the committed index."""
    rng = random.Random(20260522)
    acked = -1
    for term in range(1, ROUNDS + 1):
        recovered, last = await _round(tmp_path, term, rng.randint(3, 40))
        assert recovered >= acked, f"round {term}: recovered {recovered} < acked {acked}"
        acked = max(acked, last)

    store = DLedgerLogStore(config(tmp_path))
    await asyncio.to_thread(store.load)
    try:
        assert store.ledger_end_index >= acked
        assert -1 <= store.committed_index <= store.ledger_end_index
        terms = []
        for i in range(store.ledger_end_index + 1):
            entry = store.get(i)
            rec = decode_record(entry.body)
            assert rec.body == body(i)
            assert rec.physical_offset == entry.pos + 48
            terms.append(entry.term)
        assert terms == sorted(terms)
        store.update_committed_index(store.ledger_end_index)
        got = list(CommittedReader(store).iter_committed(0))
        assert [r.index for r in got] == list(range(store.ledger_end_index + 1))
    finally:
        await asyncio.to_thread(store.close)
    raw = all_entries(tmp_path / "dledger-n0" / "data", store.write_pos)
    assert [e.index for e in raw] == list(range(store.ledger_end_index + 1))
