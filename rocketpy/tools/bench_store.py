"""``make bench-store``: MessageStore appends/s and MB/s beside the raw ceilings of the same disk.

Owns: one benchmark run in ``--dir``. For each message size it measures, in this order:

* ceiling ``mmap copy``: a bare loop copying one pre-encoded record into a mapped file;
* ceiling ``write+fdatasync``: a bare loop of ``os.write`` + ``os.fdatasync`` (calls/s);
* ``ASYNC_FLUSH``: one producer awaiting ``put_message`` back to back (yielding to the loop every
  256 appends so the flush and reput tasks run), then how long the reput needs to catch up;
* ``ASYNC_FLUSH + index``: the same with the IndexService registered, as a broker always runs it
  (``messageIndexEnable``), and a distinct ``UNIQ_KEY`` per message as clients send;
* ``ASYNC_FLUSH, batches of N``: the first phase with ``--batch`` messages per ``put_batch``
  (what a SEND_BATCH_MESSAGE costs the store), counted in messages;
* ``SYSTEM SYNC_FLUSH``: ``--producers`` concurrent producers, each acknowledged only after its
  bytes are durable (group commit), with the number of fdatasync passes.

RSS (``VmRSS``) is printed before and after each phase; ``--flat-gib N`` appends N GiB of 1 KiB
messages and prints RSS after each GiB. ``--profile`` prints a cProfile of the ASYNC phase.
Must not: be used as a test (numbers vary by machine).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import mmap
import os
import pstats
import shutil
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from rocketpy.common import aio
from rocketpy.common.aio import wait_until
from rocketpy.common.message.const import MessageConst
from rocketpy.common.message.properties import encode_properties
from rocketpy.common.message.record import MessageRecord, encode_record
from rocketpy.store.commit_log.put_types import (
    MessageBatch,
    MessageToStore,
    PutMessageStatus,
    PutResult,
)
from rocketpy.store.config import MessageStoreConfig
from rocketpy.store.index.index_service import IndexService
from rocketpy.store.mapped_file import allocate_blocks
from rocketpy.store.message_store import MessageStore

TOPIC = "BenchStoreTopic"
PROPERTIES = encode_properties({MessageConst.TAGS: "TagA", MessageConst.WAIT: "true"})
_MIB = 1024 * 1024


def rss_mib() -> float:
    """Resident set size of this process in MiB (Linux ``/proc/self/status``)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def rss_parts() -> str:
    """``RssAnon``/``RssFile``/``RssShmem`` in MiB: heap versus mapped store pages."""
    parts = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("RssAnon", "RssFile", "RssShmem"):
            parts[name[3:].lower()] = int(value.split()[0]) / 1024
    return " ".join(f"{k} {v:.0f}" for k, v in parts.items())


def _line(label: str, count: int, seconds: float, nbytes: int, extra: str = "") -> None:
    rate = count / seconds if seconds else 0.0
    mb = nbytes / seconds / _MIB if seconds else 0.0
    print(f"  {label:<34} {rate:>12,.0f} /s {mb:>9.1f} MB/s  {extra}", flush=True)


def _record(size: int) -> bytes:
    return encode_record(
        MessageRecord(
            topic=TOPIC, queue_id=0, body=b"x" * size, properties=PROPERTIES,
            store_host=("127.0.0.1", 10911), born_host=("127.0.0.1", 50000),
        )
    )  # fmt: skip


def ceiling_mmap(directory: Path, record: bytes, seconds: float, file_size: int) -> None:
    """Bare loop copying a pre-encoded record into mapped files as the commit log fills them:
    fresh segments of ``file_size``, blocks allocated up front, a new one when full (pages
    written a second time would be cheaper than any append ever is)."""
    n, count, segments = len(record), 0, 0
    elapsed = 0.0
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        path = directory / f"ceiling-mmap-{segments}"
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        os.ftruncate(fd, file_size)
        allocate_blocks(fd, file_size)  # as the commit log's segments
        mm = mmap.mmap(fd, file_size)
        os.close(fd)
        segments += 1
        pos, limit = 0, file_size - n
        start = time.perf_counter()  # the segment's creation is not counted, as in the store
        while pos <= limit and time.perf_counter() < deadline:
            for _ in range(min(1000, (limit - pos) // n + 1)):
                mm[pos : pos + n] = record
                pos += n
        count += pos // n
        elapsed += time.perf_counter() - start
        mm.close()
        path.unlink()
    _line("ceiling: bare mmap copy", count, elapsed, count * n, f"({segments} fresh segments)")


def ceiling_fsync(directory: Path, record: bytes, seconds: float) -> float:
    """Bare ``write`` + ``fdatasync`` loop; returns calls/s."""
    path = directory / "ceiling-fsync"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    count = 0
    start = time.perf_counter()
    deadline = start + seconds
    while time.perf_counter() < deadline:
        os.write(fd, record)
        os.fdatasync(fd)
        count += 1
    elapsed = time.perf_counter() - start
    os.close(fd)
    path.unlink()
    _line("ceiling: bare write+fdatasync", count, elapsed, count * len(record), "(calls)")
    return count / elapsed


def _config(root: Path, flush: str, file_size: int) -> MessageStoreConfig:
    return MessageStoreConfig.build({
        "storePathRootDir": str(root),
        "mappedFileSizeCommitLog": file_size,
        "flushDiskType": flush,
    })  # fmt: skip


def _message(size: int, uniq_key: str = "") -> MessageToStore:
    props = (
        PROPERTIES + encode_properties({MessageConst.UNIQ_KEY: uniq_key})
        if uniq_key
        else PROPERTIES
    )
    return MessageToStore(
        topic=TOPIC, queue_id=0, body=b"x" * size, properties=props,
        born_host=("127.0.0.1", 50000), born_timestamp=int(time.time() * 1000),
    )  # fmt: skip


async def bench_async(
    root: Path,
    size: int,
    seconds: float,
    file_size: int,
    *,
    profile: bool,
    index: bool = False,
    batch: int = 1,
) -> None:
    """One producer, ASYNC_FLUSH; with ``index``, the IndexService is a dispatcher and every
    message has its own ``UNIQ_KEY`` (a pool of 4096, 32 hex digits as clients make them);
    with ``batch`` > 1, messages go in batches of that many (SEND_BATCH_MESSAGE's store call)."""
    store = MessageStore(_config(root, "ASYNC_FLUSH", file_size))
    index_service = None
    if index:
        index_service = IndexService(root / "index")
        await index_service.load(last_exit_ok=True)
        await index_service.start()
        store.register_dispatcher(index_service)
    await store.start()
    msgs: list[Any] = [
        _message(size, f"{i:032X}" if index else "") for i in range(4096 if index else 1)
    ]
    put: Callable[[Any], Awaitable[PutResult]] = store.put_message
    put_nowait: Callable[[Any], PutResult | None] = store.put_message_nowait
    # Steady state: the queue's first consume-queue segment exists before the clock starts.
    await put(msgs[0])
    if batch > 1:
        m = msgs[0]
        items = [(m.flag, m.body, m.properties)] * batch
        msgs = [MessageBatch(topic=m.topic, queue_id=m.queue_id, items=items,
                             born_host=m.born_host, born_timestamp=m.born_timestamp)]  # fmt: skip
        put, put_nowait = store.put_batch, store.put_batch_nowait
    await wait_until(lambda: store.reput.behind() == 0, 10)
    count = 0
    before = rss_mib()
    prof = cProfile.Profile() if profile else None
    if prof is not None:
        prof.enable()
    start = time.perf_counter()
    deadline = start + seconds
    while time.perf_counter() < deadline:
        for msg in msgs[count % len(msgs) : count % len(msgs) + 256] if index else [msgs[0]] * 256:
            # As the broker's send path: no coroutine unless the append must wait (a roll).
            r = put_nowait(msg) or await put(msg)
            if r.status is not PutMessageStatus.PUT_OK:
                raise SystemExit(f"put failed: {r.status}")
        count += 256 * batch
        await asyncio.sleep(0)
    elapsed = time.perf_counter() - start
    if prof is not None:
        prof.disable()
    nbytes = store.commit_log.max_offset
    behind = store.reput.behind()
    t0 = time.perf_counter()
    await wait_until(lambda: store.reput.behind() == 0, 600)
    catch_up = time.perf_counter() - t0
    label = "ASYNC_FLUSH + index" if index else "ASYNC_FLUSH"
    what = f"batches of {batch}" if batch > 1 else "1 producer"
    # The rate counts the reput's catch-up: an append is done once its consume-queue unit
    # (and index entries) are built, not when the producer loop has moved on.
    _line(f"{label} {size} B, {what}", count, elapsed + catch_up, nbytes,
          f"rss {before:.0f}->{rss_mib():.0f} MiB, reput behind {behind / _MIB:.1f} MiB at "
          f"the end, caught up in {catch_up:.2f}s (counted)")  # fmt: skip
    await store.stop()
    if index_service is not None:
        await index_service.stop()
    if prof is not None:
        pstats.Stats(prof, stream=sys.stdout).sort_stats("tottime").print_stats(25)


async def bench_sync(root: Path, size: int, seconds: float, file_size: int, producers: int) -> None:
    """``producers`` concurrent producers, SYNC_FLUSH group commit."""
    store = MessageStore(_config(root, "SYNC_FLUSH", file_size))
    await store.start()
    msg = _message(size)
    acks = 0
    deadline = time.perf_counter() + seconds

    async def producer() -> None:
        nonlocal acks
        while time.perf_counter() < deadline:
            r = await store.put_message(msg)
            if r.status is not PutMessageStatus.PUT_OK:
                raise SystemExit(f"put failed: {r.status}")
            acks += 1

    before = rss_mib()
    flushes = store.commit_log.flusher.passes
    start = time.perf_counter()
    async with asyncio.TaskGroup() as tg:
        for i in range(producers):
            tg.create_task(producer(), name=f"bench/producer-{i}")
    elapsed = time.perf_counter() - start
    passes = store.commit_log.flusher.passes - flushes
    nbytes = store.commit_log.flushed_offset
    _line(f"SYNC_FLUSH {size} B, {producers} producers", acks, elapsed, nbytes,
          f"durable acks; {passes / elapsed:,.0f} fdatasync/s, {acks / max(passes, 1):.0f} "
          f"acks per fdatasync, rss {before:.0f}->{rss_mib():.0f} MiB")  # fmt: skip
    await store.stop()


async def bench_flat(root: Path, gib: int, file_size: int) -> None:
    """Append ``gib`` GiB of 1 KiB messages; RSS after each GiB."""
    store = MessageStore(_config(root, "ASYNC_FLUSH", file_size))
    await store.start()
    msg = _message(1024)
    print(f"  flat memory: rss at start {rss_mib():.0f} MiB", flush=True)
    start = time.perf_counter()
    for n in range(1, gib + 1):
        while store.commit_log.max_offset < n * 1024 * _MIB:
            for _ in range(256):
                await store.put_message(msg)
            await asyncio.sleep(0)
        print(f"  after {n} GiB: rss {rss_mib():.0f} MiB ({rss_parts()}) "
              f"({time.perf_counter() - start:.0f}s)", flush=True)  # fmt: skip
        # Retention would delete old segments; here they are dropped by hand to spare the disk.
        await store.clean.run_once()
    await store.stop()


async def run(args: argparse.Namespace) -> None:
    """Every phase, sizes in order."""
    base: Path = args.dir
    print(f"bench-store in {base}, {args.seconds}s per phase, rss {rss_mib():.0f} MiB", flush=True)
    for size in args.size:
        print(f"message body {size} B (record {len(_record(size))} B):", flush=True)
        record = _record(size)
        ceiling_mmap(base, record, args.seconds, args.file_size)
        ceiling_fsync(base, record, args.seconds)
        for name in ("async", "async-index", "async-batch", "sync"):
            root = base / f"{name}-{size}"
            shutil.rmtree(root, ignore_errors=True)
            if name.startswith("async"):
                await bench_async(
                    root, size, args.seconds, args.file_size,
                    profile=args.profile, index=name == "async-index",
                    batch=args.batch if name == "async-batch" else 1,
                )  # fmt: skip
            else:
                await bench_sync(root, size, args.seconds, args.file_size, args.producers)
            shutil.rmtree(root, ignore_errors=True)
    if args.flat_gib:
        root = base / "flat"
        shutil.rmtree(root, ignore_errors=True)
        await bench_flat(root, args.flat_gib, args.file_size)
        shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    """Parse arguments and run."""
    parser = argparse.ArgumentParser(prog="bench_store", description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, required=True, help="store directory (on the disk)")
    parser.add_argument("--size", type=int, action="append", help="body bytes (repeatable)")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--producers", type=int, default=64)
    parser.add_argument("--batch", type=int, default=32, help="messages per batch (batch phase)")
    parser.add_argument("--file-size", type=int, default=256 * _MIB, help="commit-log segment")
    parser.add_argument("--flat-gib", type=int, default=0, help="also append N GiB, print RSS")
    parser.add_argument("--profile", action="store_true", help="cProfile the ASYNC phases")
    args = parser.parse_args(argv)
    args.size = args.size or [128, 1024]
    args.dir.mkdir(parents=True, exist_ok=True)

    async def phases() -> int:
        await run(args)
        return 0

    # On the loop and interpreter settings the broker daemon runs with (uvloop, GIL switch).
    return aio.run(phases())


if __name__ == "__main__":
    raise SystemExit(main())
