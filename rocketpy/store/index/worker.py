"""The index's own process: ``python -m rocketpy.store.index.worker`` (started by
:class:`~rocketpy.store.index.process.IndexProcess`, never by hand).

Owns: the child side of the index process -- an :class:`IndexService` on its own event loop
serving the broker over one socket (an inherited file descriptor), and the message shapes
both sides speak. Upstream builds the index on the reput's dispatcher thread beside the send
path; a Python thread would hold the one GIL the send path needs, so the keys are hashed and
written here, on another core.

Wire: a msgpack stream each way. Broker to worker, in commit-log order: ``["d", items]``
(records to index, no reply; each item a :func:`encode_hint` of a dispatch hint),
``["q", id, topic, key, max_num, begin, end]`` (query), ``["x", id, min_phy_offset]``
(delete expired files), ``["f", id]`` (flush), ``["s", id]`` (statistics). Worker to broker:
``["ready", last indexed record's offset or -1]`` once the files are loaded, ``["error", text]``
when they cannot be, and
``[id, result...]`` per call. The socket's end of file stops the worker: its files are
flushed and closed (a broker killed with -9 leaves them whole).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import msgpack
import structlog

from rocketpy.common.aio import run
from rocketpy.store.dispatch import BatchHint, DispatchRequest, Hint
from rocketpy.store.index.index_service import IndexService

log = structlog.get_logger(__name__)

#: Bytes read from the socket at a time.
_READ_SIZE = 1 << 20


def encode_hint(hint: Hint) -> tuple[Any, ...]:
    """What the index needs of a dispatch hint: a batch's (topic, store timestamp, units,
    properties, UNIQ_KEYs), a record's (topic, store timestamp, commit-log offset, properties,
    sys flag) -- told apart by their third field (a batch's is a list)."""
    if isinstance(hint, BatchHint):
        return (hint.topic, hint.store_timestamp, hint.units, hint.properties, hint.uniqs)
    return (hint.topic, hint.store_timestamp, hint.commit_log_offset, hint.properties,
            hint.sys_flag)  # fmt: skip


def dispatched_records(messages: list[bytes]) -> int:
    """How many records packed ``["d", items]`` messages hold (a batch's properties count
    its records): what the broker counts as dropped when it cannot send them."""
    count = 0
    for message in messages:
        for item in msgpack.unpackb(message, raw=False)[1]:
            count += len(item[3]) if type(item[2]) is list else 1
    return count


def decode_hint(item: list[Any]) -> Hint:
    """:func:`encode_hint`'s hint again, with what the index reads of it."""
    topic, timestamp, third, properties, last = item
    if type(third) is list:
        return BatchHint(topic, 0, timestamp, 0, 0, third, properties, last)
    return DispatchRequest(topic, 0, third, 0, 0, timestamp, 0, properties, last, 0)


async def serve(service: IndexService, sock: socket.socket) -> None:
    """Load and start ``service``, then answer the broker on ``sock`` until it closes it;
    the service is stopped (flushed, closed) on the way out."""
    reader, writer = await asyncio.open_connection(sock=sock)
    pack = msgpack.Packer().pack
    try:
        await service.load(last_exit_ok=True)
        await service.start()
    except Exception as e:  # the broker's start-up error names it
        writer.write(pack(["error", f"{type(e).__name__}: {e}"]))
        await writer.drain()
        raise
    writer.write(pack(["ready", service.last_indexed()]))
    unpacker = msgpack.Unpacker(raw=False, max_buffer_size=1 << 30)
    try:
        while chunk := await reader.read(_READ_SIZE):
            unpacker.feed(chunk)
            for message in unpacker:
                reply = await _handle(service, message)
                if reply is not None:
                    writer.write(pack(reply))
    finally:
        await service.stop()
        writer.close()


async def _handle(service: IndexService, message: list[Any]) -> list[Any] | None:
    op = message[0]
    if op == "d":
        service.dispatch_run([decode_hint(item) for item in message[1]])
        return None
    call_id = message[1]
    if op == "q":
        found = service.query_offsets(*message[2:7])
        return [call_id, list(found.phy_offsets), found.index_last_update_timestamp,
                found.index_last_update_phyoffset]  # fmt: skip
    if op == "x":
        return [call_id, await service.delete_expired_files(message[2])]
    if op == "f":
        await service.flush()
        return [call_id]
    if op == "s":
        stats = service.statistics()
        return [call_id, list(stats.file_names), stats.spare_ready, stats.pending_keys,
                stats.dropped_keys]  # fmt: skip
    raise ValueError(f"unknown index worker message {op!r}")


def main(argv: list[str] | None = None) -> int:
    """Parse the broker's arguments and serve until the socket closes."""
    ap = argparse.ArgumentParser(prog="rocketpy.store.index.worker")
    ap.add_argument("--dir", required=True, type=Path)
    ap.add_argument("--fd", required=True, type=int)
    ap.add_argument("--hash-slot-num", required=True, type=int)
    ap.add_argument("--index-num", required=True, type=int)
    ap.add_argument("--max-msgs-num-batch", required=True, type=int)
    args = ap.parse_args(argv)
    os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    # stdout is not the broker's channel, but keep it quiet: logs go to stderr (the broker's).
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    executor = ThreadPoolExecutor(1, thread_name_prefix="index")
    service = IndexService(
        args.dir,
        hash_slot_num=args.hash_slot_num,
        index_num=args.index_num,
        max_msgs_num_batch=args.max_msgs_num_batch,
        alloc_executor=executor,
        flush_executor=executor,
    )
    sock = socket.socket(fileno=args.fd)

    async def worker() -> int:
        await serve(service, sock)
        return 0

    try:
        return run(worker())
    except Exception:  # the exit code and this line say it
        log.exception("index worker failed")
        return 1
    finally:
        executor.shutdown(wait=True)


if __name__ == "__main__":
    sys.exit(main())
