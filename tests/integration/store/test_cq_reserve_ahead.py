"""A consume queue reserves its next chunk of disk blocks before it needs it.

Without this, the reput reached the end of a queue's reserved room and waited for the
allocation thread (behind a segment preallocation, and for the GIL the busy loop holds); the
queues of a busy topic fill together, so dispatch stood still for a hundred milliseconds and
then blocked the loop while it caught up.
"""

from __future__ import annotations

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
