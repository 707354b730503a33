"""ScheduleMessageService: delivers delayed messages from ``SCHEDULE_TOPIC_XXXX`` when due.

Owns: one loop per delay level reading queue ``level-1`` of ``SCHEDULE_TOPIC_XXXX`` from its
offset in ``config/delayOffset.json``; a record whose time has come (store time + the level's
delay) is re-stored under ``REAL_TOPIC``/``REAL_QID`` with ``DELAY`` cleared and ``WAIT=false``
(``messageTimeup``); progress is persisted every ``flushDelayOffsetInterval`` and at stop.
Mirrors ``broker/schedule/ScheduleMessageService`` (client-flows.md section 6.3). Runs on the
master only. A failed re-put is retried after a pause and never skipped.

Due times come from each record's store timestamp, so the store need not put delivery times in
the consume queue's tags code (upstream does; the result is the same).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import structlog

from rocketpy.broker import topic_validator as tv
from rocketpy.broker.config_files import ConfigFile, delay_offset_file
from rocketpy.broker.store_api import BrokerStore, StoredMessage
from rocketpy.common.aio import periodic
from rocketpy.common.clock import SYSTEM_CLOCK, Clock
from rocketpy.common.errors import ConfigError
from rocketpy.common.message.const import MessageConst
from rocketpy.remoting.protocol.body.config_shapes import DataVersion, DelayOffsetTable
from rocketpy.store.commit_log.put_types import MessageToStore, PutResult
from rocketpy.store.get_types import GetMessageStatus

log = structlog.get_logger(__name__)

_UNITS: Final = {"s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_LEVEL: Final = re.compile(r"([0-9]+)([smhd])")
_BATCH: Final = 32
_SCHEDULE_GROUP: Final = "SCHEDULE_CONSUMER"
_RETRY_AFTER_FAILURE_MS: Final = 1_000

Reput = Callable[[MessageToStore], Awaitable[PutResult]]


def parse_delay_levels(text: str) -> dict[int, int]:
    """``parseDelayLevel``: ``"1s 5s 10s 30s 1m ..."`` -> level (1-based) -> delay ms.

    Raises:
        ConfigError: an entry that is not ``<number><s|m|h|d>``.
    """
    levels: dict[int, int] = {}
    for i, item in enumerate(text.split(), start=1):
        m = _LEVEL.fullmatch(item)
        if m is None:
            raise ConfigError("messageDelayLevel", text, "space-separated <number><s|m|h|d>")
        levels[i] = int(m.group(1)) * _UNITS[m.group(2)]
    if not levels:
        raise ConfigError("messageDelayLevel", text, "at least one level")
    return levels


def message_timeup(msg: StoredMessage) -> MessageToStore:
    """``messageTimeup``: the real message to store for a due delayed record."""
    props = dict(msg.properties)
    props[MessageConst.WAIT] = "false"
    props.pop(MessageConst.DELAY, None)
    topic = props.get(MessageConst.REAL_TOPIC, "")
    try:
        queue_id = int(props.get(MessageConst.REAL_QID, "0"))
    except ValueError:
        queue_id = 0
    return msg.restored(
        topic=topic,
        queue_id=queue_id,
        properties=props,
        reconsume_times=msg.reconsume_times,
    )


@dataclass(slots=True)
class _Held:
    """A level's batch held between rounds: ``records[0]`` (decoded: ``head``) is the first
    not yet due; valid while the level's offset is still ``offset``."""

    offset: int
    head: StoredMessage
    records: list[bytes]


class ScheduleMessageService:
    """Delayed delivery by level."""

    def __init__(
        self,
        store: BrokerStore,
        levels: Mapping[int, int],
        store_root: Path,
        *,
        reput: Reput,
        executor: Executor | None = None,
        scan_interval_ms: int = 100,
        persist_interval_ms: int = 10_000,
        clock: Clock = SYSTEM_CLOCK,
        on_failure: Callable[[BaseException], None] | None = None,
    ) -> None:
        """Args: ``store`` reads the schedule queues; ``levels`` from
        :func:`parse_delay_levels`; ``store_root`` holds ``config/delayOffset.json``; ``reput``
        stores a due message (and counts it); ``executor`` for file work; ``scan_interval_ms``
        the longest sleep of a level loop; ``persist_interval_ms`` ``flushDelayOffsetInterval``;
        ``clock`` wall time (store timestamps are wall-clock); ``on_failure`` is told when a
        loop dies of a bug."""
        self._store = store
        self._levels = dict(levels)
        self._file: ConfigFile[DelayOffsetTable] = delay_offset_file(store_root, executor)
        self._reput = reput
        self._scan_s = scan_interval_ms / 1000
        self._persist_s = persist_interval_ms / 1000
        self._clock = clock
        self._offsets: dict[int, int] = {}
        #: level -> the rest of the batch last read, from its first record not yet due: while
        #: the level's offset stays where it stopped, the next rounds go on from it instead of
        #: re-reading (and re-decoding) a batch of up to 32 records per delivered message
        self._held: dict[int, _Held] = {}
        self._data_version = DataVersion(timestamp=clock.wall_ms())
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._on_failure = on_failure

    @property
    def max_delay_level(self) -> int:
        """The highest configured level."""
        return max(self._levels)

    def snapshot(self) -> DelayOffsetTable:
        """``delayOffset.json`` content (also the GET_ALL_DELAY_OFFSET body)."""
        return DelayOffsetTable(offset_table=dict(self._offsets), data_version=self._data_version)

    async def load(self) -> None:
        """Read ``delayOffset.json`` (or its ``.bak``)."""
        loaded = await self._file.load()
        if loaded is not None:
            self._offsets.update(loaded.value.offset_table)

    async def persist(self) -> None:
        """Write ``delayOffset.json``."""
        await self._file.persist(self.snapshot())

    async def apply_synced(self, table: DelayOffsetTable) -> None:
        """Slave metadata sync (``syncDelayOffset`` + ``loadWhenSyncDelayOffset``): the
        master's progress replaces ours and is written to ``delayOffset.json``."""
        self._offsets = dict(table.offset_table)
        self._held.clear()
        if table.data_version is not None:
            self._data_version = table.data_version
        await self.persist()

    async def start(self) -> None:
        """Start one delivery loop per level and the periodic persist."""
        self._stop.clear()
        loop = asyncio.get_running_loop()
        for level in sorted(self._levels):
            self._tasks.append(
                loop.create_task(self._level_loop(level), name=f"broker/schedule-level-{level}")
            )
        self._tasks.append(
            loop.create_task(
                periodic(self._persist_s, self.persist, stop=self._stop, name="schedule-persist"),
                name="broker/schedule-persist",
            )
        )
        for task in self._tasks:
            task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            log.error("schedule task failed", task=task.get_name(), exc_info=exc)
            if self._on_failure is not None:
                self._on_failure(exc)

    async def stop(self) -> None:
        """Stop the loops and persist progress. Idempotent."""
        self._stop.set()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._tasks:
            await self.persist()
        self._tasks.clear()

    async def _level_loop(self, level: int) -> None:
        while not self._stop.is_set():
            try:
                wait_ms = await self.deliver_level(level)
            except (OSError, TimeoutError) as e:
                log.warning("ScheduleMessageService, deliver failed", level=level, error=repr(e))
                wait_ms = _RETRY_AFTER_FAILURE_MS
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(self._scan_s, max(wait_ms, 0) / 1000)):
                    await self._stop.wait()

    async def deliver_level(self, level: int) -> int:
        """Deliver the due messages of one level.

        Returns:
            Milliseconds until the next record of the level is due (the scan interval when the
            queue is drained), or the retry pause after a failed re-put.
        """
        offset = self._offsets.get(level, 0)
        held = self._held.pop(level, None)
        if held is not None and held.offset == offset:
            head: StoredMessage | None = held.head
            records = held.records
        else:
            read = self._read(level, offset)
            if isinstance(read, int):
                return read
            head, records = None, read
        delay_ms = self._levels[level]
        for i, record in enumerate(records):
            msg = head if head is not None and i == 0 else self._store.decode_message(record)
            now = self._clock.wall_ms()
            due = min(msg.store_timestamp + delay_ms, now + delay_ms)
            if due > now:
                self._held[level] = _Held(self._offsets.get(level, 0), msg, records[i:])
                return due - now
            put = await self._reput(message_timeup(msg))
            if not put.stored:
                log.error(
                    "ScheduleMessageService, a message time up, but reput it failed",
                    topic=msg.properties.get(MessageConst.REAL_TOPIC),
                    status=put.status.value,
                )
                return _RETRY_AFTER_FAILURE_MS
            self._set_offset(level, msg.queue_offset + 1)
        return 0

    def _read(self, level: int, offset: int) -> list[bytes] | int:
        """Up to a batch of the level's records from ``offset``, or how long to wait (no
        records, or the offset was corrected)."""
        result = self._store.get_message(
            _SCHEDULE_GROUP,
            tv.RMQ_SYS_SCHEDULE_TOPIC,
            level - 1,
            offset,
            max_msg_nums=_BATCH,
            max_total_bytes=4 * 1024 * 1024,
            tags_codes=None,
        )
        if result.status in (
            GetMessageStatus.OFFSET_TOO_SMALL,
            GetMessageStatus.OFFSET_OVERFLOW_BADLY,
        ):
            log.warning(
                "schedule offset corrected", level=level, old=offset, new=result.next_begin_offset
            )
            self._set_offset(level, result.next_begin_offset)
            return 0
        if result.status != GetMessageStatus.FOUND:
            return int(self._scan_s * 1000)
        return list(result.records)

    def _set_offset(self, level: int, offset: int) -> None:
        self._offsets[level] = offset
        self._data_version = self._data_version.next_version(self._clock.wall_ms())

    # -- reverse sync (slave acting master, seed 003)

    @property
    def data_version(self) -> DataVersion:
        """DataVersion of the delay progress (moves on every delivered message)."""
        return self._data_version

    def merge_newer(self, table: DelayOffsetTable) -> int:
        """Pre-online reverse sync: per level keep the larger progress and adopt ``table``'s
        DataVersion if it is newer.

        Returns:
            How many levels moved forward.
        """
        raised = 0
        self._held.clear()
        for level, offset in table.offset_table.items():
            if offset > self._offsets.get(level, -1):
                self._offsets[level] = offset
                raised += 1
        if table.data_version is not None and self._data_version.compare(table.data_version) < 0:
            self._data_version = table.data_version
        return raised
