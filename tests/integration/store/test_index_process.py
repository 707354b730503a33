"""The index built in a child process (``IndexProcess`` and ``python -m
rocketpy.store.index.worker``): real worker processes on real index files."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from rocketpy.common.aio import wait_until
from rocketpy.common.errors import StoreError
from rocketpy.store.dispatch import BatchHint, DispatchRequest
from rocketpy.store.index.process import IndexProcess

pytestmark = pytest.mark.integration

TOPIC = "TopicIdx"
TS = 1_700_000_000_000


def _batch(first: int, n: int) -> BatchHint:
    """Records ``first`` .. ``first + n - 1`` as one hinted batch at offsets 1000 * i, each
    with UNIQ_KEY ``U<i>``; every third also with KEYS ``k<i> shared``."""
    units: list[int] = []
    texts: list[str] = []
    for i in range(first, first + n):
        units += (1000 * i, 100, 0)
        texts.append(
            f"KEYS\x01k{i} shared\x02UNIQ_KEY\x01U{i}\x02" if i % 3 == 0 else "WAIT\x01true"
        )
    return BatchHint(
        TOPIC, 0, TS + first, first, 0, units, texts, [f"U{i}" for i in range(first, first + n)]
    )


def _record(i: int) -> DispatchRequest:
    """Record ``i`` as a parsed-back request (KEYS ``r<i>`` and its UNIQ_KEY in its text)."""
    text = f"KEYS\x01r{i}\x02UNIQ_KEY\x01U{i}\x02"
    return DispatchRequest(TOPIC, 1, 1000 * i, 100, 0, TS + i, 0, text, 0, 0)


async def _offsets(index: IndexProcess, key: str) -> list[int]:
    return sorted((await index.query_offsets(TOPIC, key, 64, 0, 2**62)).phy_offsets)


@asynccontextmanager
async def _running(
    directory: Path, *, index_num: int = 4096, high_water: int = 1 << 25
) -> AsyncIterator[IndexProcess]:
    index = IndexProcess(
        directory, hash_slot_num=64, index_num=index_num, max_msgs_num_batch=64,
        high_water=high_water,
    )  # fmt: skip
    await index.start()
    try:
        yield index
    finally:
        await index.stop()


async def test_the_worker_indexes_in_order_and_its_files_outlive_it(tmp_path: Path) -> None:
    """1. Start a worker; dispatch a hinted batch (records 0..9) and two parsed records (10,
    11), then query. Expected: each UNIQ_KEY and KEYS entry finds its record's offset (a
    query sent after the dispatch sees it); "shared" finds every third record.
    2. Dispatch record 12 and stop at once (it is still in the broker side's buffer); start
    another on the same directory. Expected: the same answers from the files alone, record 12
    included (a stop sends what waits first); the first worker exited."""
    async with asyncio.timeout(60):
        async with _running(tmp_path) as index:
            first_pid = index.pid
            index.dispatch_run([_batch(0, 10), _record(10)])
            index.dispatch(_record(11))
            assert await _offsets(index, "U3") == [3000]
            assert await _offsets(index, "k9") == [9000]
            assert await _offsets(index, "shared") == [0, 3000, 6000, 9000]
            assert await _offsets(index, "r11") == [11000]
            assert await _offsets(index, "U10") == [10000]
            assert len((await index.statistics()).file_names) == 1
            index.dispatch(_record(12))
        assert first_pid is not None
        assert not os.path.exists(f"/proc/{first_pid}/cmdline")
        async with _running(tmp_path) as again:
            assert await _offsets(again, "shared") == [0, 3000, 6000, 9000]
            assert await _offsets(again, "r11") == [11000]
            assert await _offsets(again, "r12") == [12000]


async def test_a_killed_worker_is_replaced_and_its_files_reloaded(tmp_path: Path) -> None:
    """1. Index records 0..9; SIGKILL the worker. 2. Dispatch record 20 once the broker side
    noticed (no worker). 3. Wait for the replacement; dispatch record 30.
    Expected: a query while none runs fails with StoreError; record 20 is counted dropped,
    not indexed; the replacement finds records 0..9 (files reloaded) and 30."""
    async with asyncio.timeout(60), _running(tmp_path) as index:
        index.dispatch_run([_batch(0, 10)])
        assert await _offsets(index, "U9") == [9000]
        dead = index.pid
        assert dead is not None
        os.kill(dead, signal.SIGKILL)
        await wait_until(lambda: index.pid is None, 10)
        with pytest.raises(StoreError):
            await _offsets(index, "U9")
        index.dispatch(_record(20))
        assert index.dropped == 1
        await wait_until(lambda: index.pid not in (None, dead), 10)
        index.dispatch(_record(30))
        assert await _offsets(index, "U9") == [9000]
        assert await _offsets(index, "r30") == [30000]
        assert await _offsets(index, "r20") == []
        assert (await index.statistics()).dropped_keys == 1


async def test_a_start_names_the_workers_reason(tmp_path: Path) -> None:
    """An index file of the wrong size in the directory (other sizes configured before).
    Expected: start raises StoreError carrying the worker's own error (the size mismatch);
    no worker is left running."""
    (tmp_path / "20260101000000000").write_bytes(b"\0" * 1000)
    index = IndexProcess(tmp_path, hash_slot_num=64, index_num=4096, max_msgs_num_batch=64)
    async with asyncio.timeout(60):
        with pytest.raises(StoreError, match="expected"):
            await index.start()
        assert index.pid is None
        await index.stop()


async def test_a_stalled_worker_holds_the_reput_until_it_catches_up(tmp_path: Path) -> None:
    """1. A worker with a 64 KiB high-water mark; SIGSTOP it. 2. Dispatch batches until the
    broker side reports a backlog. Expected: drain() does not return while the worker is
    stopped. 3. SIGCONT. Expected: drain() returns; the last record dispatched is found."""
    async with (
        asyncio.timeout(60),
        _running(tmp_path, index_num=1 << 20, high_water=64 * 1024) as index,
    ):
        pid = index.pid
        assert pid is not None
        os.kill(pid, signal.SIGSTOP)
        try:
            n = 0
            while True:
                index.dispatch_run([_batch(n, 50)])
                n += 50
                if n % 1000 == 0:
                    await asyncio.sleep(0.02)  # written out: what the socket cannot take waits
                    if index.backlogged():
                        break
                assert n < 500_000, "no backlog built up"
            waiting = asyncio.ensure_future(index.drain())
            await asyncio.sleep(0.5)
            assert not waiting.done()
        finally:
            os.kill(pid, signal.SIGCONT)
        await waiting
        assert not index.backlogged()
        assert await _offsets(index, f"U{n - 1}") == [1000 * (n - 1)]
