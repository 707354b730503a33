"""A consume queue's segments have readahead off ahead of the writer (``MappedFile.appending``).

Without it, the first unit written into a new segment faulted its page in on the event loop and
the kernel zero-filled a whole readahead window of the sparse file with it (2-12 ms a segment):
the first sends to a topic of 1,024 queues (upstream's BenchmarkTest) stalled the master and
every slave for seconds. Checked in the kernel's own view of the mappings (``VmFlags: rr`` in
``/proc/self/smaps``), not by timing.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from rocketpy.store.consume_queue.consume_queue import ConsumeQueue
from rocketpy.store.consume_queue.unit import UNIT_SIZE, CqUnit

pytestmark = pytest.mark.integration


def _random_read_advised(path: Path) -> list[bool]:
    """For each mapping of ``path`` in this process (one per advised range), whether the kernel
    reads it as random access (no readahead)."""
    out: list[bool] = []
    current = False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        fields = line.split()
        if "-" in fields[0] and len(fields) >= 5 and not fields[0].endswith(":"):
            current = fields[-1] == str(path)
        elif current and fields[0] == "VmFlags:":
            out.append("rr" in fields[1:])
    return out


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="needs Linux /proc")
async def test_new_and_recovered_segments_are_written_without_readahead(tmp_path: Path) -> None:
    """1. A queue with the default segment size; its first unit (which makes the segment).
    2. Close it and recover it from the files (a restart), then one more unit.
    Expected: both times the segment's mapping from the write position on is advised random
    (VmFlags rr), so the writer's page faults zero-fill no readahead window."""
    with ThreadPoolExecutor(1) as alloc:
        q = ConsumeQueue(tmp_path, "TopicA", 0, 300_000 * UNIT_SIZE, alloc)
        assert await q.put(CqUnit(commit_log_offset=0, size=100, tags_code=0), 0, alloc)
        mf = q.mfq.last
        assert mf is not None
        assert True in _random_read_advised(mf.path)
        q.close()
        again = ConsumeQueue(tmp_path, "TopicA", 0, 300_000 * UNIT_SIZE, alloc)
        again.recover()
        last = again.mfq.last
        assert last is not None
        assert last.wrote_position == UNIT_SIZE
        assert True in _random_read_advised(last.path)
        assert await again.put(CqUnit(commit_log_offset=100, size=100, tags_code=0), 1, alloc)
        again.close()
