"""IndexService: the message-key index over a list of index files; a CommitLog dispatcher.

Owns: the ``index/`` directory, its ordered file list, the spare file prepared ahead of need,
and keys waiting for a file. Must not: create, msync or delete files on the event loop; those run
on the store's executors (allocation/cleanup, and flush), owned by the caller. Mirrors
``store/index/IndexService`` (store.md sections 5 and 9).

Differences from upstream, because :meth:`IndexService.dispatch` runs on the loop and may not
wait for the disk:

* The next file is created (sparse, mapped) on the allocation executor *before* the current one
  fills (etcd's WAL file pipeline; upstream's AllocateMappedFileService for the commit log). When
  the current file is full the spare is switched in on the loop. Its name is its creation time,
  so names still sort in creation order; an unused spare is deleted at stop.
* If the spare is not ready yet, keys wait in a bounded queue (one file's worth) and are written
  as soon as it is; beyond that bound keys are dropped and counted (upstream blocks the reput
  thread, then marks the index as failed). Waiting keys are not visible to queries.
"""

from __future__ import annotations

import asyncio
import os
from collections import deque
from collections.abc import Coroutine, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from datetime import datetime, tzinfo
from itertools import repeat
from pathlib import Path
from typing import Any, Final

import structlog

from rocketpy.common.atomic_file import TEMP_SUFFIX
from rocketpy.common.clock import SYSTEM_CLOCK, Clock
from rocketpy.common.errors import ConfigError, StoreError
from rocketpy.common.message.const import MessageConst
from rocketpy.common.message.properties import NAME_VALUE_SEPARATOR, keys_of, property_value
from rocketpy.store.checkpoint import StoreCheckpoint
from rocketpy.store.dispatch import BatchHint, DispatchRequest, Hint
from rocketpy.store.index import record as r
from rocketpy.store.index.index_file import IndexFile
from rocketpy.store.index.record import index_key_hash, index_key_hashes

log = structlog.get_logger(__name__)

_KEYS_NAME: Final = f"{MessageConst.KEYS}{NAME_VALUE_SEPARATOR}"

# MessageSysFlag: transaction type bits and the rollback value (rolled-back messages are not
# indexed).
_TRANSACTION_MASK: Final = 0x3 << 2
_TRANSACTION_ROLLBACK: Final = 0x3 << 2


@dataclass(frozen=True, slots=True, kw_only=True)
class QueryOffsetResult:
    """``QueryOffsetResult``: matches newest first, plus the index's last update point (the
    QUERY_MESSAGE response headers ``indexLastUpdateTimestamp``/``indexLastUpdatePhyoffset``).
    """

    phy_offsets: tuple[int, ...]
    index_last_update_timestamp: int
    index_last_update_phyoffset: int


@dataclass(frozen=True, slots=True, kw_only=True)
class IndexServiceStatistics:
    """Introspection for tests and metrics."""

    file_names: tuple[str, ...]
    spare_ready: bool
    pending_keys: int
    dropped_keys: int


@dataclass(frozen=True, slots=True)
class _PendingKey:
    key_hash: int
    phy_offset: int
    store_timestamp: int


class IndexService:
    """Hash index of ``topic#key`` -> commit-log offsets (``IndexService``).

    Life cycle: :meth:`load`, :meth:`start`, then :meth:`dispatch` for every record (from the
    reput service) and :meth:`query_offsets` for QUERY_MESSAGE; :meth:`stop` at shutdown.
    """

    def __init__(
        self,
        store_path_index: Path,
        *,
        hash_slot_num: int = 5_000_000,
        index_num: int = 20_000_000,
        max_msgs_num_batch: int = 64,
        checkpoint: StoreCheckpoint | None = None,
        alloc_executor: Executor | None = None,
        flush_executor: Executor | None = None,
        clock: Clock = SYSTEM_CLOCK,
        tz: tzinfo | None = None,
    ) -> None:
        """Configure the service; nothing is read or created until :meth:`load`/:meth:`start`.

        Args:
            store_path_index: the ``index`` directory (``StorePathConfigHelper.getStorePathIndex``).
            hash_slot_num: ``maxHashSlotNum``.
            index_num: ``maxIndexNum``; a file holds ``index_num - 1`` entries.
            max_msgs_num_batch: ``maxMsgsNumBatch``, the cap on one query's results.
            checkpoint: receives ``indexMsgTimestamp`` when a full file has been flushed.
            alloc_executor: where files are created, opened and deleted.
            flush_executor: where files and the checkpoint are msync'ed.
            clock: wall clock for file names.
            tz: time zone of file names (None: local time, as upstream).

        Raises:
            ConfigError: sizes that cannot hold an entry.
        """
        if hash_slot_num < 1:
            raise ConfigError("maxHashSlotNum", hash_slot_num, ">= 1")
        if index_num < 2:
            raise ConfigError("maxIndexNum", index_num, ">= 2 (entry 0 is never used)")
        self._dir = store_path_index
        self._hash_slot_num = hash_slot_num
        self._index_num = index_num
        self._max_msgs_num_batch = max_msgs_num_batch
        self._checkpoint = checkpoint
        self._alloc = alloc_executor
        self._flush = flush_executor
        self._clock = clock
        self._tz = tz
        self._files: list[IndexFile] = []
        self._spare: IndexFile | None = None
        self._spare_task: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._pending: deque[_PendingKey] = deque()
        self._dropped = 0
        self._loaded = False
        self._stopping = False

    # -- life cycle -----------------------------------------------------------------------------

    async def load(self, last_exit_ok: bool) -> None:
        """Open the existing files (``IndexService.load``), off the loop.

        After an abnormal exit, files whose end timestamp is newer than the checkpoint's
        ``indexMsgTimestamp`` are deleted: recovery re-dispatches their records.

        Raises:
            StoreError: a file's size does not match the configured sizes.
        """
        index_ts = self._checkpoint.index_msg_timestamp if self._checkpoint else 0
        loop = asyncio.get_running_loop()
        self._files = await loop.run_in_executor(
            self._alloc, self._load_sync, last_exit_ok, index_ts
        )
        self._loaded = True

    def _load_sync(self, last_exit_ok: bool, index_msg_timestamp: int) -> list[IndexFile]:
        if not self._dir.is_dir():
            return []
        files: list[IndexFile] = []
        try:
            for name in sorted(os.listdir(self._dir)):
                path = self._dir / name
                if name.endswith(TEMP_SUFFIX) and r.is_index_file_name(name[: -len(TEMP_SUFFIX)]):
                    log.info("delete index file a crash left unfinished", file=str(path))
                    path.unlink(missing_ok=True)
                    continue
                if not r.is_index_file_name(name):
                    log.warning("skip non-index file in index dir", file=str(path))
                    continue
                if path.stat().st_size == 0:
                    # Created but never sized (a crash, before files were sized under a
                    # temporary name): it holds no keys.
                    log.warning("delete empty index file a crash left", file=str(path))
                    path.unlink()
                    continue
                f = IndexFile.open(path, self._hash_slot_num, self._index_num)
                if not last_exit_ok and f.header.end_timestamp > index_msg_timestamp:
                    log.info("destroy index file newer than checkpoint", file=f.name)
                    f.destroy()
                    continue
                if f.header.index_count <= 1:
                    # A spare left by a crash: no entries, and its zero begin timestamp would
                    # end every query's walk over the older files.
                    log.info("destroy empty index file", file=f.name)
                    f.destroy()
                    continue
                log.info("load index file OK", file=f.name)
                files.append(f)
        except BaseException:
            for f in files:
                f.close()
            raise
        return files

    async def start(self) -> None:
        """Make sure a writable file exists and a spare is being prepared.

        Raises:
            StoreError: :meth:`load` was not called, or the first file cannot be created.
        """
        if not self._loaded:
            raise StoreError("IndexService.start() before load()")
        if self._needs_file():
            self._ensure_spare()
            if self._spare_task is not None:
                await asyncio.shield(self._spare_task)
            if self._spare is not None and self._needs_file():
                self._activate_spare()
            if self._needs_file():
                raise StoreError(f"cannot create an index file in {self._dir}")
        self._ensure_spare()

    def _needs_file(self) -> bool:
        return not self._files or self._files[-1].is_write_full()

    async def stop(self) -> None:
        """Finish background work, write waiting keys, delete an unused spare, flush and close
        every file (``IndexService.shutdown``). Idempotent."""
        self._stopping = True
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
        loop = asyncio.get_running_loop()
        spare, self._spare = self._spare, None
        if spare is not None:
            await loop.run_in_executor(self._alloc, spare.destroy)
        files, self._files = self._files, []
        for f in files:
            await loop.run_in_executor(self._flush, f.close)
        if self._pending:
            log.error("index keys lost at shutdown", count=len(self._pending))
            self._pending.clear()

    async def destroy(self) -> None:
        """Stop and delete every index file (``IndexService.destroy``)."""
        files = list(self._files)
        await self.stop()
        loop = asyncio.get_running_loop()
        for f in files:
            await loop.run_in_executor(self._alloc, f.destroy)

    async def flush(self) -> None:
        """msync every file (shutdown order: before the checkpoint is written)."""
        loop = asyncio.get_running_loop()
        for f in list(self._files):
            await loop.run_in_executor(self._flush, f.flush)

    # -- dispatch (on the loop) -----------------------------------------------------------------

    def dispatch(self, request: DispatchRequest, /) -> None:
        """Index ``UNIQ_KEY`` and every space-separated ``KEYS`` entry of the request's
        properties as ``topic#key`` (``buildIndex``). Records up to the last indexed one
        (:meth:`last_indexed`: a re-dispatch) and rolled-back transaction records are skipped.
        Never blocks."""
        self.dispatch_run((request,))

    def dispatch_run(self, run: Sequence[Hint], /) -> None:
        """:meth:`dispatch` for each record of a run (consecutive records, ascending offsets:
        a dispatch pass; a hinted batch for its records), the keys written to the current file
        with one call, its header packed once."""
        floor = self.last_indexed()
        items: list[tuple[int, int, int]] = []
        for request in run:
            phy_offset = request.commit_log_offset
            if isinstance(request, BatchHint):
                _batch_keys(request, floor, items)
                continue
            if phy_offset <= floor or (
                request.sys_flag & _TRANSACTION_MASK == _TRANSACTION_ROLLBACK
            ):
                continue
            _add_keys(items, request.topic, request.properties, phy_offset, request.store_timestamp)
        if not items:
            return
        files = self._files
        done = files[-1].put_hashes(items) if files and not self._pending else 0
        for key_hash, phy_offset, timestamp in items[done:]:
            self._put(key_hash, phy_offset, timestamp)

    def last_indexed(self) -> int:
        """The commit-log offset of the last record indexed (its keys are written or waiting
        for a file), -1 before the first. A re-dispatch from it skips it: its keys are in."""
        if self._pending:
            return self._pending[-1].phy_offset
        for f in reversed(self._files):
            if f.header.index_count > 1:  # entry 0 is never used
                return f.header.end_phy_offset
        return -1

    def _put(self, key_hash: int, phy_offset: int, store_timestamp: int) -> None:
        files = self._files
        entry = ((key_hash, phy_offset, store_timestamp),)
        if not self._pending and files and files[-1].put_hashes(entry):
            return
        if len(self._pending) >= self._index_num:
            self._dropped += 1
            if self._dropped == 1 or self._dropped % 10_000 == 0:
                log.error("putKey error, no index file ready", key_hash=key_hash,
                          dropped=self._dropped)  # fmt: skip
            return
        self._pending.append(_PendingKey(key_hash, phy_offset, store_timestamp))
        self._drain_pending()

    def _drain_pending(self) -> None:
        """Write waiting keys, switching in the spare whenever the current file is full."""
        while self._pending:
            current = self._files[-1] if self._files else None
            if current is None or current.is_write_full():
                if self._spare is None:
                    self._ensure_spare()
                    return
                if current is not None:
                    log.warning(
                        "Index file is full, trying to create another one", file=current.name
                    )
                self._activate_spare()
                continue
            head = self._pending[0]
            if current.put_hashes(((head.key_hash, head.phy_offset, head.store_timestamp),)):
                self._pending.popleft()

    def _activate_spare(self) -> None:
        spare, self._spare = self._spare, None
        assert spare is not None  # noqa: S101 - callers checked
        prev = self._files[-1] if self._files else None
        if prev is not None:
            spare.start_after(prev.header.end_phy_offset, prev.header.end_timestamp)
            self._spawn(self._flush_full(prev), f"index/flush-{prev.name}")
        self._files.append(spare)
        self._ensure_spare()

    def _ensure_spare(self) -> None:
        if self._spare is not None or self._spare_task is not None or self._stopping:
            return
        self._spare_task = self._spawn(
            self._prepare_spare(self._next_file_name()), "index/allocate"
        )

    def _spawn(self, coro: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        """Owned background work: :meth:`stop` waits for all of it; failures are logged inside
        the coroutines themselves."""
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _prepare_spare(self, name: str) -> None:
        loop = asyncio.get_running_loop()
        try:
            self._spare = await loop.run_in_executor(
                self._alloc,
                IndexFile.create,
                self._dir / name,
                self._hash_slot_num,
                self._index_num,
            )
        except (OSError, StoreError):
            log.exception("getLastIndexFile exception", file=name)
            return
        finally:
            self._spare_task = None
        self._drain_pending()

    async def _flush_full(self, f: IndexFile) -> None:
        """Flush a file that just filled, then record its end in the checkpoint
        (``IndexService.flush``)."""
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._flush, f.flush)
            if self._checkpoint is not None and f.header.end_timestamp > 0:
                self._checkpoint.index_msg_timestamp = f.header.end_timestamp
                await self._checkpoint.flush_async(self._flush)
        except (OSError, ValueError, StoreError):
            log.exception("flush index file failed", file=f.name)

    def _next_file_name(self) -> str:
        """The creation time as ``yyyyMMddHHmmssSSS``, after every existing name."""
        millis = self._clock.wall_ms()
        name = r.index_file_name(millis, self._tz)
        last = self._files[-1].name if self._files else ""
        if name <= last:
            # Clock went back (or two files in one ms): one ms after the last name.
            parsed = datetime.strptime(last[:14], "%Y%m%d%H%M%S")
            if self._tz is not None:
                parsed = parsed.replace(tzinfo=self._tz)
            millis = int(parsed.timestamp()) * 1000 + int(last[14:]) + 1
            name = r.index_file_name(millis, self._tz)
        return name

    # -- queries and maintenance ----------------------------------------------------------------

    def query_offsets(
        self, topic: str, key: str, max_num: int, begin: int, end: int
    ) -> QueryOffsetResult:
        """Offsets of messages with ``key`` stored in [begin, end] ms, newest first
        (``queryOffset``). At most ``min(max_num, maxMsgsNumBatch)``; hash collisions included.
        """
        max_num = min(max_num, self._max_msgs_num_batch)
        found: list[int] = []
        last_ts = last_phy = 0
        index_key = r.build_key(topic, key)
        for i, f in enumerate(reversed(self._files)):
            if i == 0:
                last_ts, last_phy = f.header.end_timestamp, f.header.end_phy_offset
            if f.is_time_matched(begin, end):
                f.select_phy_offsets(found, index_key, max_num, begin, end)
            if f.header.begin_timestamp < begin or len(found) >= max_num:
                break
        return QueryOffsetResult(
            phy_offsets=tuple(found),
            index_last_update_timestamp=last_ts,
            index_last_update_phyoffset=last_phy,
        )

    async def delete_expired_files(self, min_phy_offset: int) -> int:
        """Delete files that end below ``min_phy_offset`` (never the last one)
        (``deleteExpiredFile``).

        Returns:
            How many files were deleted.
        """
        victims: list[IndexFile] = []
        for f in self._files[:-1]:
            if f.header.end_phy_offset >= min_phy_offset:
                break
            victims.append(f)
        if not victims:
            return 0
        self._files = self._files[len(victims) :]
        loop = asyncio.get_running_loop()
        for f in victims:
            await loop.run_in_executor(self._alloc, f.destroy)
            log.info(
                "delete expired index file", file=f.name, end_phy_offset=f.header.end_phy_offset
            )
        return len(victims)

    def statistics(self) -> IndexServiceStatistics:
        """Current files, spare, waiting and dropped keys."""
        return IndexServiceStatistics(
            file_names=tuple(f.name for f in self._files),
            spare_ready=self._spare is not None,
            pending_keys=len(self._pending),
            dropped_keys=self._dropped,
        )


def _batch_keys(hint: BatchHint, floor: int, items: list[tuple[int, int, int]]) -> None:
    """:meth:`IndexService.dispatch_run`'s keys for a hinted batch, its records up to
    ``floor`` skipped (a batch is never a rolled-back transaction record): the UNIQ_KEYs the
    hint holds and the KEYS of the properties that have some, in record order, hashed in one
    call."""
    topic, timestamp, units, uniqs = hint.topic, hint.store_timestamp, hint.units, hint.uniqs
    if uniqs is None:
        for i, text in enumerate(hint.properties):
            phy_offset = units[3 * i]
            if phy_offset > floor:
                _add_keys(items, topic, text, phy_offset, timestamp)
        return
    keys: list[str] = []
    offsets: list[int] = []
    for i, text in enumerate(hint.properties):
        phy_offset = units[3 * i]
        if phy_offset <= floor:
            continue
        if uniq := uniqs[i]:
            keys.append(uniq)
            offsets.append(phy_offset)
        if _KEYS_NAME in text:
            for k in _key_names(property_value(text, MessageConst.KEYS) or ""):
                keys.append(k)
                offsets.append(phy_offset)
    items += zip(index_key_hashes(topic, keys), offsets, repeat(timestamp, len(keys)), strict=True)


def _add_keys(
    items: list[tuple[int, int, int]], topic: str, text: str, phy_offset: int, timestamp: int
) -> None:
    """Add (key hash, offset, timestamp) for ``UNIQ_KEY`` and each ``KEYS`` entry of a
    record's properties ``text``, as ``topic#key``."""
    keys, uniq = keys_of(text)
    if uniq:  # r.build_key inlined: this runs for every record
        items.append((index_key_hash(f"{topic}#{uniq}"), phy_offset, timestamp))
    if keys:
        for k in _key_names(keys):
            items.append((index_key_hash(f"{topic}#{k}"), phy_offset, timestamp))


def _key_names(keys: str) -> list[str]:
    """The entries of a KEYS value (space-separated; empty ones are not indexed)."""
    return [k for k in keys.split(r.KEY_SEPARATOR) if k]
