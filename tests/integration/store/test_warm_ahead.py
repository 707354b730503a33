"""The commit log's pages ahead of the appender are faulted in off the event loop
(``SegmentAllocator.warm``, ``MappedFile.populate``).

Without it the event loop took the page fault that allocates and zeroes each fresh page of
the segment, one per 4 KiB appended (on this kind of virtual machine about a tenth of a
batched send's CPU). Checked in the kernel's own counts -- the resident bytes of the
segment's mapping (``/proc/self/smaps``) and the faults the appending thread took
(``/proc/thread-self/stat``) -- not by timing.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from rocketpy.common.aio import wait_until
from rocketpy.store.commit_log.allocation import WARM_AHEAD
from rocketpy.store.commit_log.put_types import MessageToStore, PutMessageStatus
from rocketpy.store.config import MessageStoreConfig
from rocketpy.store.mapped_file import MappedFile
from rocketpy.store.message_store import MessageStore

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not Path("/proc/thread-self/stat").exists(), reason="needs Linux /proc"),
]

MIB = 1024 * 1024


def _resident(path: Path) -> int:
    """Bytes of ``path``'s mappings in this process that are resident (all its ranges)."""
    total, current = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        fields = line.split()
        if "-" in fields[0] and not fields[0].endswith(":"):
            current = fields[-1] == str(path)
        elif current and fields[0] == "Rss:":
            total += int(fields[1]) * 1024
    return total


def _faults() -> int:
    """Minor plus major page faults this thread has taken."""
    stat = Path(f"/proc/self/task/{threading.get_native_id()}/stat").read_text()
    fields = stat.rsplit(")", 1)[1].split()
    return int(fields[7]) + int(fields[9])


def _populates(tmp_path: Path) -> bool:
    """Whether this kernel can populate a mapping (MADV_POPULATE_WRITE, Linux 5.14+)."""
    mf = MappedFile.create(tmp_path / "probe", 0, 64 * 1024, allocate=True)
    try:
        return mf.populate(0, 64 * 1024)
    finally:
        mf.destroy()


def _msg(i: int) -> MessageToStore:
    return MessageToStore(
        topic="TopicWarm", queue_id=0, body=bytes(400), born_timestamp=1000 + i,
        born_host=("127.0.0.1", 5000), properties=f"UNIQ_KEY\x01U{i:08d}\x02",
    )  # fmt: skip


async def test_the_appender_writes_into_pages_faulted_in_ahead(tmp_path: Path) -> None:
    """1. A store with the default 1 GiB segment; one put (the first segment, the first warm).
    2. Wait for the warm to land. 3. Append 1 MiB more with puts that never await (what the
    send path does), then once more after the window is refilled.
    Expected: the segment's mapping holds about WARM_AHEAD resident past the write position
    after each put; the appending thread takes almost no page faults for the 256 pages it
    fills (the 1 MiB lies inside the window), where without the warm it took one per page."""
    if not _populates(tmp_path):
        pytest.skip("this kernel cannot populate a mapping (MADV_POPULATE_WRITE)")
    async with asyncio.timeout(30):
        store = MessageStore(MessageStoreConfig.build({
            "storePathRootDir": str(tmp_path / "store"), "flushDiskType": "ASYNC_FLUSH",
        }))  # fmt: skip
        await store.start()
        try:
            assert (await store.put_message(_msg(0))).status is PutMessageStatus.PUT_OK
            mf = store.commit_log.mfq.last
            assert mf is not None
            i = 1
            for _ in range(2):
                await wait_until(
                    lambda: _resident(mf.path) >= mf.wrote_position + WARM_AHEAD - 2 * MIB,
                    timeout_s=10,
                )
                start, before = mf.wrote_position, _faults()
                while mf.wrote_position < start + MIB:
                    result = store.put_message_nowait(_msg(i))
                    assert result is not None
                    assert result.status is PutMessageStatus.PUT_OK
                    i += 1
                taken = _faults() - before
                assert taken < 16, f"{taken} page faults appending 256 pages"
                await asyncio.sleep(0)  # the warm after the last put runs
        finally:
            await store.stop()


def test_populate_stays_within_the_blocks_and_the_mapping(tmp_path: Path) -> None:
    """1. A sparse segment (no blocks reserved) and one with blocks. 2. Populate all of each.
    3. Close one and populate it again.
    Expected: nothing of the sparse one is faulted in (its pages have no disk blocks: a store
    there is the writer's, which reserves them first); all of the other is; a closed segment
    is a no-op."""
    if not _populates(tmp_path):
        pytest.skip("this kernel cannot populate a mapping (MADV_POPULATE_WRITE)")
    sparse = MappedFile.create(tmp_path / "sparse", 0, 4 * MIB)
    full = MappedFile.create(tmp_path / "full", 0, 4 * MIB, allocate=True)
    try:
        assert sparse.populate(0, 4 * MIB)
        assert full.populate(0, 4 * MIB)
        assert _resident(sparse.path) == 0
        assert _resident(full.path) == 4 * MIB
        full.close()
        assert full.populate(0, 4 * MIB)
    finally:
        sparse.destroy()
        full.destroy()
