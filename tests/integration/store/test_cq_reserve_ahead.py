"""A consume queue reserves its next chunk of disk blocks before it needs it.

Without this, the reput reached the end of a queue's reserved room and waited for the
allocation thread (behind a segment preallocation, and for the GIL the busy loop holds); the
queues of a busy topic fill together, so dispatch stood still for a hundred milliseconds and
then blocked the loop while it caught up.
"""

from __future__ import annotations

import asyncio
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from rocketpy.common.aio import wait_until
from rocketpy.store.consume_queue.consume_queue import RESERVE_AHEAD, ConsumeQueue
from rocketpy.store.consume_queue.unit import UNIT_SIZE, CqUnit
from rocketpy.store.mapped_file import RESERVE_CHUNK

pytestmark = pytest.mark.integration

SIZE = 100  # each unit's commit-log record size


async def test_put_nowait_reserves_the_next_chunk_before_the_room_runs_out(
    tmp_path: Path,
) -> None:
    """1. A queue with the default segment size (300,000 units) and an allocation thread; its
    first unit through ``put`` (which makes the segment).
    2. ``put_nowait`` until less than RESERVE_AHEAD of the first 1 MiB chunk is left.
    3. Wait for the allocation thread; then ``put_nowait`` on past the first chunk.
    Expected: the second chunk is reserved without another ``put`` (the file holds its disk
    blocks), and every ``put_nowait`` past the first chunk lands without the slow path."""
    with ThreadPoolExecutor(1) as alloc:
        q = ConsumeQueue(tmp_path, "TopicA", 0, 300_000 * UNIT_SIZE, alloc)
        assert await q.put(CqUnit(commit_log_offset=0, size=SIZE, tags_code=0), 0, alloc)
        mf = q.mfq.last
        assert mf is not None
        assert mf.allocated == RESERVE_CHUNK
        offset = 1
        while mf.allocated - mf.wrote_position >= RESERVE_AHEAD:
            assert q.put_nowait(offset * SIZE, SIZE, 0, offset)
            offset += 1
        await wait_until(lambda: mf.allocated >= 2 * RESERVE_CHUNK, 10)
        assert os.stat(mf.path).st_blocks * 512 >= 2 * RESERVE_CHUNK
        past = RESERVE_CHUNK // UNIT_SIZE + 1_000
        while offset < past:
            assert q.put_nowait(offset * SIZE, SIZE, 0, offset), f"unit {offset} took the slow path"
            offset += 1
        assert q.max_offset == past
        q.close()


async def test_segment_after_a_full_one_is_made_ahead_and_taken_without_waiting(
    tmp_path: Path,
) -> None:
    """1. A queue of 3 MiB segments (157,286 units) and an allocation thread; units through
    ``put_nowait`` until less than RESERVE_AHEAD of the first segment is left.
    2. Wait for the allocation thread; shut it down; fill the segment; put the next unit
    through ``put`` (the roll).
    Expected: the second segment's file exists (with its first MiB of blocks) before the
    roll; the roll takes it with the allocation thread gone (it made nothing); the unit lands
    at the start of the second segment; closing the queue keeps both files."""
    file_size = 3 * RESERVE_CHUNK - 3 * RESERVE_CHUNK % UNIT_SIZE
    alloc = ThreadPoolExecutor(1)
    q = ConsumeQueue(tmp_path, "TopicB", 0, file_size, alloc)
    assert await q.put(CqUnit(commit_log_offset=0, size=SIZE, tags_code=0), 0, alloc)
    first = q.mfq.last
    assert first is not None
    offset = 1
    units = first.size // UNIT_SIZE
    while first.size - first.wrote_position >= RESERVE_AHEAD:
        if offset % 1_000 == 0:
            await asyncio.sleep(0)  # the loop turns as it does between dispatch passes
        if not q.put_nowait(offset * SIZE, SIZE, 0, offset):
            # The reput's slow path: reserves what the allocation thread has not yet.
            unit = CqUnit(commit_log_offset=offset * SIZE, size=SIZE, tags_code=0)
            assert await q.put(unit, offset, alloc)
        offset += 1
    second_path = first.path.with_name(f"{first.file_from_offset + first.size:020d}")
    await wait_until(second_path.exists, 10)
    await wait_until(lambda: os.stat(second_path).st_blocks * 512 >= RESERVE_CHUNK, 10)
    alloc.shutdown(wait=True)
    while offset < units:
        assert q.put_nowait(offset * SIZE, SIZE, 0, offset)
        offset += 1
    assert await q.put(
        CqUnit(commit_log_offset=offset * SIZE, size=SIZE, tags_code=0), offset, alloc
    )
    second = q.mfq.last
    assert second is not None
    assert second is not first
    assert second.path == second_path
    assert q.max_offset == units + 1
    q.close()
    assert first.path.exists()
    assert second_path.exists()


async def test_recovery_drops_a_segment_made_ahead_behind_a_partial_one(tmp_path: Path) -> None:
    """1. A queue of 1 MiB segments fills its first segment until its next one is made ahead.
    2. Without closing it (a crash), a new queue on the same directory recovers.
    Expected: the recovered queue ends after the last unit written; the segment made ahead
    is deleted as a dirty file (a queue rolls only when its last segment is full)."""
    file_size = RESERVE_CHUNK - RESERVE_CHUNK % UNIT_SIZE
    with ThreadPoolExecutor(1) as alloc:
        q = ConsumeQueue(tmp_path, "TopicC", 0, file_size, alloc)
        assert await q.put(CqUnit(commit_log_offset=0, size=SIZE, tags_code=0), 0, alloc)
        first = q.mfq.last
        assert first is not None
        offset = 1
        while first.size - first.wrote_position >= RESERVE_AHEAD:
            assert q.put_nowait(offset * SIZE, SIZE, 0, offset)
            offset += 1
        spare = first.path.with_name(f"{first.file_from_offset + first.size:020d}")
        await wait_until(spare.exists, 10)
        first.flush(first.wrote_position)
        again = ConsumeQueue(tmp_path, "TopicC", 0, file_size)
        again.recover()
        assert again.max_offset == offset
        assert not spare.exists()
        again.close()
        q.mfq.close()
