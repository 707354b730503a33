"""Child process for the crash test: append with SYNC_FLUSH, print each acknowledged offset.

Run as a zygote (``crash_child.py ROOT [default]``, ``default`` for upstream's segment sizes):
it imports the store once, then for every ``fork`` line on stdin forks a writer, prints
``pid N``, reaps it after the parent's SIGKILL and prints ``dead N``. Forking a warmed-up
interpreter instead of starting one per kill keeps 200 kills within the fast suite's budget.
The zygote itself never starts a loop or a thread.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from rocketpy.store.commit_log.put_types import MessageToStore, PutMessageStatus
from rocketpy.store.config import MessageStoreConfig
from rocketpy.store.message_store import MessageStore


def config(root: Path, default_sizes: bool = False) -> MessageStoreConfig:
    """SYNC_FLUSH with 4 KiB commit-log segments, or upstream's default sizes (1 GiB commit
    log, 6 MB consume queue): what the parent reopens after each kill."""
    keys: dict[str, str | int] = {"storePathRootDir": str(root), "flushDiskType": "SYNC_FLUSH"}
    if not default_sizes:
        keys |= {"mappedFileSizeCommitLog": 4096, "mappedFileSizeConsumeQueue": 400}
    return MessageStoreConfig.build(keys)


def emit(*words: object) -> None:
    """One line on stdout in one ``write`` (atomic on a pipe below PIPE_BUF): the zygote and its
    writer share the pipe, and ``print`` may split a line, letting the other's output in."""
    os.write(1, (" ".join(map(str, words)) + "\n").encode())


def body(queue_offset: int) -> bytes:
    """Deterministic body of the message with this queue offset."""
    return f"msg-{queue_offset}-".encode() * (1 + queue_offset % 7)


async def main(root: Path, default_sizes: bool) -> None:
    """Append forever; each line is ``wrote_offset queue_offset`` after PUT_OK."""
    store = MessageStore(config(root, default_sizes))
    await store.start()
    next_offset = store.max_offset_in_queue("Crash", 0)
    emit("ready", os.getpid())
    while True:
        r = await store.put_message(
            MessageToStore(topic="Crash", queue_id=0, body=body(next_offset))
        )
        if r.status is not PutMessageStatus.PUT_OK:
            raise SystemExit(f"put failed: {r.status}")
        emit("ack", r.wrote_offset, r.queue_offset)
        next_offset = r.queue_offset + 1


def zygote(root: Path, default_sizes: bool) -> None:
    """Fork one writer per ``fork`` line; report its pid and its death."""
    emit("zygote")
    for line in sys.stdin:
        if line.strip() != "fork":
            return
        pid = os.fork()
        if pid == 0:
            # The store's log lines go to stderr: stdout carries only whole protocol lines.
            sys.stdout = sys.stderr
            try:
                asyncio.run(main(root, default_sizes))
            finally:
                os._exit(1)
        emit("pid", pid)
        os.waitpid(pid, 0)
        emit("dead", pid)


if __name__ == "__main__":
    zygote(Path(sys.argv[1]), sys.argv[2:] == ["default"])
