"""Child process for the crash test: append with SYNC_FLUSH, print each acknowledged offset."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from rocketpy.store.commit_log.commit_log import MessageToStore, PutStatus
from rocketpy.store.config import MessageStoreConfig
from rocketpy.store.message_store import MessageStore


def config(root: Path) -> MessageStoreConfig:
    """4 KiB commit-log segments, SYNC_FLUSH: what the parent reopens after each kill."""
    return MessageStoreConfig.build({
        "storePathRootDir": str(root),
        "mappedFileSizeCommitLog": 4096,
        "mappedFileSizeConsumeQueue": 400,
        "flushDiskType": "SYNC_FLUSH",
    })  # fmt: skip


def body(queue_offset: int) -> bytes:
    """Deterministic body of the message with this queue offset."""
    return f"msg-{queue_offset}-".encode() * (1 + queue_offset % 7)


async def main(root: Path) -> None:
    """Append forever; each line is ``wrote_offset queue_offset`` after PUT_OK."""
    store = MessageStore(config(root))
    await store.start()
    next_offset = store.max_offset_in_queue("Crash", 0)
    print("ready", flush=True)
    while True:
        r = await store.put_message(
            MessageToStore(topic="Crash", queue_id=0, body=body(next_offset))
        )
        if r.status is not PutStatus.PUT_OK:
            raise SystemExit(f"put failed: {r.status}")
        print(r.wrote_offset, r.queue_offset, flush=True)
        next_offset = r.queue_offset + 1


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1])))
