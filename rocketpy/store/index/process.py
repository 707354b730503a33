"""The index built in a child process (``messageIndexWorkerEnable=true``).

Owns: :class:`IndexProcess`, the broker's side of :mod:`rocketpy.store.index.worker` -- what the
store sees of the index (a dispatcher, queries, expired-file deletion, flush, stop) with the
keys hashed and written on another core. Upstream builds the index on the reput's dispatcher
thread, beside the send path; here a thread would share the event loop's GIL, and the index
was a quarter of the loop's CPU per batched message. The broker packs each dispatch pass's
records (one msgpack write) and the worker indexes them in commit-log order; a query goes
behind the records sent before it, so it sees them.

Failure: a worker that cannot load its files stops the broker's start with the worker's own
error. One that dies later is logged and started again (its files are reloaded); the store
then dispatches again from the last record the files hold (``on_restart``: the reput's
rewind), so what the dead worker lost or was never sent is indexed after all (without that
hook it is counted in :meth:`IndexProcess.dropped`); queries meanwhile fail with StoreError.
A worker behind by more than :data:`HIGH_WATER` bytes holds the
reput (the consume queues wait, as upstream's dispatcher waits for its index), never the
appends.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import msgpack
import structlog

import rocketpy
from rocketpy.common.errors import StoreError
from rocketpy.store.dispatch import BatchHint, DispatchRequest, Hint
from rocketpy.store.index.index_service import IndexServiceStatistics, QueryOffsetResult
from rocketpy.store.index.worker import dispatched_records, encode_hint

log = structlog.get_logger(__name__)

#: Bytes waiting for the worker above which the reput waits (:meth:`IndexProcess.drain`).
HIGH_WATER: Final = 32 * 1024 * 1024
#: How long the reput waits for a worker behind before it says so (and waits again).
DRAIN_WARN_S: Final = 10.0
#: Dispatch messages are written to the worker when this many bytes wait, or
#: :data:`SEND_DELAY_S` after the first: a worker woken per dispatch pass (a few per
#: millisecond under load) spent more CPU waking than indexing. A call sends them first.
SEND_BYTES: Final = 128 * 1024
SEND_DELAY_S: Final = 0.005
#: Before a worker that died is started again.
RESPAWN_DELAY_S: Final = 1.0
_READ_SIZE: Final = 1 << 16
#: Where the ``rocketpy`` package is imported from (the worker imports it from there too).
_ROOT: Final = str(Path(rocketpy.__file__).resolve().parent.parent)


class IndexProcess:
    """The index of ``directory`` built by a worker process (see the module docstring)."""

    def __init__(
        self,
        directory: Path,
        *,
        hash_slot_num: int,
        index_num: int,
        max_msgs_num_batch: int,
        start_timeout_s: float = 60.0,
        call_timeout_s: float = 10.0,
        stop_timeout_s: float = 60.0,
        high_water: int = HIGH_WATER,
        on_restart: Callable[[], None] | None = None,
    ) -> None:
        """Args: the ``index`` directory and ``maxHashSlotNum``/``maxIndexNum``/
        ``maxMsgsNumBatch``; how long a start (loading the files), a call and a stop (the
        worker's last writes and flush) may take; the bytes waiting for the worker above
        which the reput waits; what to call once a worker that died is replaced (the store
        asks its reput to :meth:`rewind <rocketpy.store.consume_queue.reput.ReputService.
        rewind>` for this dispatcher; dispatches are dropped until :meth:`rewound`)."""
        self._args = [
            "--dir", str(directory), "--hash-slot-num", str(hash_slot_num),
            "--index-num", str(index_num), "--max-msgs-num-batch", str(max_msgs_num_batch),
        ]  # fmt: skip
        self._dir = directory
        self._start_timeout_s = start_timeout_s
        self._call_timeout_s = call_timeout_s
        self._stop_timeout_s = stop_timeout_s
        self._high_water = high_water
        self._on_restart = on_restart
        # A replacement worker is waiting for the reput's rewind: dispatches are dropped.
        self._resyncing = False
        self._pack = msgpack.Packer().pack
        self._proc: asyncio.subprocess.Process | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._reader: asyncio.Task[None] | None = None
        self._respawn: asyncio.Task[None] | None = None
        self._calls: dict[int, asyncio.Future[list[Any]]] = {}
        self._next_call = 0
        self._stopping = False
        self._dropped = 0
        self._last_held = -1
        # Dispatch messages not yet written, their size, and the timer that writes them.
        self._unsent: list[bytes] = []
        self._unsent_bytes = 0
        self._send_timer: asyncio.TimerHandle | None = None

    @property
    def pid(self) -> int | None:
        """The running worker's pid."""
        return self._proc.pid if self._proc is not None and self._writer is not None else None

    @property
    def dropped(self) -> int:
        """Records dispatched while no worker ran, never sent again (without ``on_restart``)."""
        return self._dropped

    # -- life cycle ------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the worker and wait until its files are loaded.

        Raises:
            StoreError: the worker could not load the files (its error), exited, or did not
                answer within the start deadline.
        """
        self._stopping = False
        await self._spawn()

    async def _spawn(self) -> None:
        parent, child = socket.socketpair()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_ROOT, env.get("PYTHONPATH")) if p)
        try:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "rocketpy.store.index.worker",
                "--fd", str(child.fileno()), *self._args,
                pass_fds=(child.fileno(),),
                stdin=asyncio.subprocess.DEVNULL,
                env=env,
                # Not in the broker's process group: a terminal's Ctrl-C stops the broker,
                # whose stop then flushes the worker; the socket's end stops it.
                start_new_session=True,
            )  # fmt: skip
        except BaseException:
            parent.close()
            raise
        finally:
            child.close()
        reader, writer = await asyncio.open_connection(sock=parent)
        unpacker = msgpack.Unpacker(raw=False)
        try:
            async with asyncio.timeout(self._start_timeout_s):
                first = await _next_message(reader, unpacker)
        except TimeoutError:
            await _end(proc, writer)
            raise StoreError(
                f"index worker for {self._dir} did not load within {self._start_timeout_s} s"
            ) from None
        if first is None or first[0] != "ready":
            await _end(proc, writer)
            cause = first[1] if first is not None and first[0] == "error" else (
                f"exited with code {proc.returncode} before it was ready"
            )  # fmt: skip
            raise StoreError(f"index worker for {self._dir}: {cause}")
        self._last_held = first[1] if len(first) > 1 else -1
        writer.transport.set_write_buffer_limits(high=self._high_water, low=self._high_water // 2)
        self._proc, self._writer = proc, writer
        self._reader = asyncio.get_running_loop().create_task(
            self._read(reader, writer, unpacker, proc), name="store/index-worker"
        )
        log.info("index worker started", pid=proc.pid, dir=str(self._dir))

    async def _read(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        unpacker: msgpack.Unpacker,
        proc: asyncio.subprocess.Process,
    ) -> None:
        """Hand each answer to its call until the worker's end; then, unless stopping, start
        another."""
        try:
            while (message := await _next_message(reader, unpacker)) is not None:
                call = self._calls.pop(message[0], None)
                if call is not None and not call.done():
                    call.set_result(message)
        except (ConnectionError, ValueError):
            log.exception("index worker channel failed")
        if self._stopping:
            return
        self._writer = None
        code = await _end(proc, writer)
        log.error("index worker exited, starting another", code=code, dir=str(self._dir))
        self._fail_calls("index worker exited")
        self._respawn = asyncio.get_running_loop().create_task(
            self._start_again(), name="store/index-worker-respawn"
        )

    async def _start_again(self) -> None:
        while not self._stopping:
            await asyncio.sleep(RESPAWN_DELAY_S)
            try:
                await self._spawn()
            except (StoreError, OSError) as e:
                log.warning("index worker start failed, trying again", error=str(e))
            else:
                if self._on_restart is not None:
                    # No await since the worker came up: nothing was sent to it yet.
                    self._resyncing = True
                    self._on_restart()
                return

    async def stop(self) -> None:
        """Let the worker index what it was sent, flush and close its files, and exit (it is
        killed past the stop deadline). Idempotent."""
        self._stopping = True
        if self._respawn is not None:
            self._respawn.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._respawn
            self._respawn = None
        self._send()
        writer, self._writer = self._writer, None
        proc, self._proc = self._proc, None
        if writer is None or proc is None:
            return
        code = await _end(proc, writer, self._stop_timeout_s)  # its end of file: it stops
        if self._reader is not None:
            await self._reader
            self._reader = None
        self._fail_calls("index worker stopped")
        if code != 0:
            log.error("index worker ended badly", code=code, dir=str(self._dir))

    # -- dispatch (on the loop) -----------------------------------------------------------------

    def dispatch(self, request: DispatchRequest, /) -> None:
        """Index one record (``buildIndex``): sent to the worker."""
        self.dispatch_run((request,))

    def dispatch_run(self, run: tuple[Hint, ...] | list[Hint], /) -> None:
        """Index a dispatch pass's records: one message to the worker."""
        writer = self._writer
        if writer is None or self._resyncing or writer.transport.is_closing():
            if self._on_restart is None:  # nobody dispatches them again
                self._dropped += sum(len(h.properties) if isinstance(h, BatchHint) else 1
                                     for h in run)  # fmt: skip
            return
        message = self._pack(["d", [encode_hint(h) for h in run]])
        self._unsent.append(message)
        self._unsent_bytes += len(message)
        if self._unsent_bytes >= SEND_BYTES:
            self._send()
        elif self._send_timer is None:
            self._send_timer = asyncio.get_running_loop().call_later(SEND_DELAY_S, self._send)

    def _send(self) -> None:
        """Write the dispatch messages waiting (in their order, before any call's)."""
        if self._send_timer is not None:
            self._send_timer.cancel()
            self._send_timer = None
        unsent, self._unsent, self._unsent_bytes = self._unsent, [], 0
        writer = self._writer
        if writer is not None and not writer.transport.is_closing():
            writer.writelines(unsent)
        elif self._on_restart is None:  # rare: counted from the messages, not per dispatch
            self._dropped += dispatched_records(unsent)

    def last_held(self) -> int:
        """The commit-log offset of the last record the worker had indexed when it started
        (-1: none). The broker's buffered dispatches die with it in a kill -9 while the
        consume queues keep theirs: the store's start-up re-dispatch begins here."""
        return self._last_held

    def rewound(self) -> None:
        """The reput went back to the replacement worker's last record: dispatch again."""
        self._resyncing = False

    def backlogged(self) -> bool:
        """More than the high-water mark (:data:`HIGH_WATER`) waits for the worker."""
        writer = self._writer
        return (
            writer is not None
            and writer.transport.get_write_buffer_size() + self._unsent_bytes > self._high_water
        )

    async def drain(self) -> None:
        """Wait until the worker caught up to half the high-water mark (or is gone), saying
        so every :data:`DRAIN_WARN_S` seconds."""
        self._send()
        while (writer := self._writer) is not None and self.backlogged():
            try:
                async with asyncio.timeout(DRAIN_WARN_S):
                    await writer.drain()
                    if self.backlogged():  # not paused yet by the transport: no spinning
                        await asyncio.sleep(0.01)
            except TimeoutError:
                log.warning("index worker is behind, the reput waits",
                            waiting_bytes=writer.transport.get_write_buffer_size())  # fmt: skip
            except ConnectionError:
                return

    # -- calls ---------------------------------------------------------------------------------

    async def _call(self, op: str, *args: Any) -> list[Any]:
        writer = self._writer
        if writer is None:
            raise StoreError(f"index worker for {self._dir} is not running")
        self._next_call += 1
        call_id = self._next_call
        answer: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
        self._calls[call_id] = answer
        try:
            self._send()  # the records dispatched before the call, first
            writer.write(self._pack([op, call_id, *args]))
            async with asyncio.timeout(self._call_timeout_s):
                return await answer
        except TimeoutError:
            raise StoreError(
                f"index worker did not answer {op!r} within {self._call_timeout_s} s"
            ) from None
        finally:
            self._calls.pop(call_id, None)

    def _fail_calls(self, why: str) -> None:
        calls, self._calls = self._calls, {}
        for call in calls.values():
            if not call.done():
                call.set_exception(StoreError(why))

    async def query_offsets(
        self, topic: str, key: str, max_num: int, begin: int, end: int
    ) -> QueryOffsetResult:
        """``IndexService.query_offsets`` in the worker.

        Raises:
            StoreError: no worker runs, or it did not answer in time.
        """
        answer = await self._call("q", topic, key, max_num, begin, end)
        return QueryOffsetResult(
            phy_offsets=tuple(answer[1]),
            index_last_update_timestamp=answer[2],
            index_last_update_phyoffset=answer[3],
        )

    async def delete_expired_files(self, min_phy_offset: int) -> int:
        """``IndexService.delete_expired_files`` in the worker; 0 when none runs (the next
        clean pass tries again)."""
        try:
            answer = await self._call("x", min_phy_offset)
        except StoreError as e:
            log.warning("index files not cleaned", error=str(e))
            return 0
        count: int = answer[1]
        return count

    async def flush(self) -> None:
        """Make the worker's files durable (after every record sent before)."""
        await self._call("f")

    async def statistics(self) -> IndexServiceStatistics:
        """The worker's files, spare, waiting and dropped keys (records dispatched while no
        worker ran count as dropped)."""
        answer = await self._call("s")
        return IndexServiceStatistics(
            file_names=tuple(answer[1]),
            spare_ready=answer[2],
            pending_keys=answer[3],
            dropped_keys=answer[4] + self._dropped,
        )


async def _next_message(
    reader: asyncio.StreamReader, unpacker: msgpack.Unpacker
) -> list[Any] | None:
    """The next whole message from the worker, None at its end."""
    while True:
        for message in unpacker:
            if not isinstance(message, list) or not message:
                raise ValueError(f"unexpected index worker message {message!r}")
            return message
        chunk = await reader.read(_READ_SIZE)
        if not chunk:
            return None
        unpacker.feed(chunk)


async def _end(
    proc: asyncio.subprocess.Process,
    writer: asyncio.StreamWriter | None,
    timeout_s: float = 5.0,
) -> int:
    """Wait for ``proc`` to exit (killed past ``timeout_s``); its exit code."""
    if writer is not None:
        writer.close()
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout_s):
            return await proc.wait()
    log.error("index worker did not exit, killing it", pid=proc.pid)
    proc.kill()
    return await proc.wait()
