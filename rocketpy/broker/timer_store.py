"""TimerMessageStore: delivers 5.x timer messages from ``rmq_sys_wheel_timer`` at their time.

Owns: the enqueue loop (reads queue 0 of the timer topic from its offset; a message already due
is put to its real topic at once, any other becomes a unit in the timer log chained into its
wheel slot, or a roll unit when it lies beyond ``timerRollWindowSlot``), the dequeue loop (reads
each due slot's chain, puts delete units' keys aside, then re-puts every other message: to its
real topic, or back into the timer topic with ``TIMER_ROLL_TIMES`` + 1 for a roll unit), the
flush loop (timer log, wheel, then ``config/timercheck`` and ``config/timermetrics``), the
timer-log retention, start-up recovery from the checkpoint
(:mod:`rocketpy.broker.timer_recovery`) and the pending-message counts per topic
(:mod:`rocketpy.broker.timer_metrics`). The wheel is the scheduler: one loop reads one slot per
``timerPrecisionMs``, so pending messages cost disk, not asyncio timers. Mirrors
``store/timer/TimerMessageStore`` (enqueue, doEnqueue, dequeue, convert, doPut,
prepareTimerCheckPoint, TimerFlushService). Runs its loops on a master only (started and stopped
with the schedule service); the files are opened at broker start and closed at its stop.
Must not: block the loop on the disk (file creation, flush and recovery run on its
``timer-flush`` executor).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Final

import structlog

from rocketpy.broker.store_api import BrokerStore, StoredMessage
from rocketpy.broker.timer_delivery import (
    Reput,
    TimerDelivery,
    build_delete_key,
    convert,
    deleted_keys,
    read_chain,
)
from rocketpy.broker.timer_hook import TIMER_TOPIC
from rocketpy.broker.timer_metrics import TimerMetrics
from rocketpy.broker.timer_recovery import RecoveredState, recover
from rocketpy.common.clock import SYSTEM_CLOCK, Clock
from rocketpy.common.message.const import MessageConst
from rocketpy.remoting.protocol.body.config_shapes import DataVersion
from rocketpy.store.config import MessageStoreConfig
from rocketpy.store.get_types import GetMessageStatus
from rocketpy.store.timer.record import (
    MAGIC_DEFAULT,
    MAGIC_DELETE,
    MAGIC_ROLL,
    NO_POS,
    TimerCheckpointData,
    TimerLogUnit,
    decode_checkpoint,
    format_time_ms,
    java_string_hash,
    roll_target,
    roll_window_slots,
)
from rocketpy.store.timer.timer_checkpoint import TimerCheckpoint
from rocketpy.store.timer.timer_log import TimerLog
from rocketpy.store.timer.timer_wheel import TimerWheel

log = structlog.get_logger(__name__)

_GROUP: Final = "TIMER_CONSUMER"
_BATCH: Final = 32
#: ``TIMER_ENQUEUE_MS`` of a message that was due when read: never in the wheel.
NEVER_ENQUEUED: Final = (1 << 63) - 1
#: Empty slots read in a row before the dequeue loop lets others run (catching up after
#: downtime walks many empty slots).
_EMPTY_SLOTS_PER_TURN: Final = 4096
_CLEAN_INTERVAL_S: Final = 30.0
#: Re-puts of one slot between two turns of the event loop (a put may not suspend at all).
_PUTS_PER_TURN: Final = 64


class TimerMessageStore:
    """The timer wheel of one broker."""

    def __init__(
        self,
        store: BrokerStore,
        config: MessageStoreConfig,
        *,
        reput: Reput,
        clock: Clock = SYSTEM_CLOCK,
        on_failure: Callable[[BaseException], None] | None = None,
    ) -> None:
        """Args: ``store`` reads the timer topic and the messages; ``config`` the timer keys
        and paths; ``reput`` stores a due (or rolled) message and counts it; ``clock`` wall
        time; ``on_failure`` is told when a loop dies of a bug."""
        self._store = store
        self._cfg = config
        self._delivery = TimerDelivery(
            reput,
            retry_until_success=config.timer_enable_retry_until_success,
            pause=lambda: self._pause(500 * config.timer_precision_ms / 1000 / 1000),
        )
        self._clock = clock
        self._on_failure = on_failure
        self.precision_ms = config.timer_precision_ms
        self._window_slots = roll_window_slots(config.timer_roll_window_slot)
        self.timer_log = TimerLog(config.timer_log_dir, config.mapped_file_size_timer_log)
        self.wheel = TimerWheel(config.timer_wheel_path, self.precision_ms)
        self.checkpoint = TimerCheckpoint(config.timer_check_path)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="timer-flush")
        self._idle_s = 100 * self.precision_ms / 1000 / 1000
        #: Next timer-topic offset to read (``currQueueOffset``).
        self.queue_offset = 0
        #: The slot the dequeue reads next (``currReadTimeMs``); earlier slots are delivered.
        self.read_time_ms = 0
        #: Slots before this are due (``currWriteTimeMs``); moved by the enqueue loop only, so
        #: no unit is ever filed under a slot the dequeue has passed.
        self.write_time_ms = 0
        #: ``masterTimerQueueOffset`` and the read time that came with it (the checkpoint, or
        #: the master's through slave sync): a timer-topic message below this offset due
        #: before that time was delivered already (its slot was read, or it was put at once).
        self.synced_offset = 0
        self.synced_read_ms = 0
        self.metrics = TimerMetrics(config.root_dir / "config" / "timermetrics", clock.wall_ms())
        self._data_version = DataVersion(timestamp=clock.wall_ms())
        self._last_commit = (0, 0)
        self._last_checkpoint = TimerCheckpointData()
        self._loaded = False
        self._stop = asyncio.Event()
        self._write_moved = asyncio.Event()
        self._rng = random.Random()  # noqa: S311 - flow-control sampling, not security
        self._tasks: list[asyncio.Task[None]] = []

    # -- life cycle ------------------------------------------------------------------------

    async def load(self) -> None:
        """Open the files and recover from the checkpoint (``load`` + ``recover``)."""
        loop = asyncio.get_running_loop()
        state: RecoveredState = await loop.run_in_executor(
            self._executor,
            recover,
            self.timer_log,
            self.wheel,
            self.checkpoint,
            self._clock.wall_ms(),
        )
        await loop.run_in_executor(self._executor, self.metrics.load)
        self._loaded = True
        self.queue_offset = self._revised_queue_offset(state)
        self.read_time_ms = state.read_time_ms
        self.synced_offset = state.checkpoint.master_timer_queue_offset
        self.synced_read_ms = state.checkpoint.last_read_time_ms
        self._data_version = DataVersion(
            timestamp=state.checkpoint.timestamp,
            counter=state.checkpoint.counter,
            state_version=state.checkpoint.state_version,
        )
        self._last_commit = (self.read_time_ms, self.queue_offset)
        self._move_write_time()
        log.info(
            "Timer recover ok",
            read_time_ms=self.read_time_ms,
            queue_offset=self.queue_offset,
            check_queue_offset=state.checkpoint.last_timer_queue_offset,
            process_offset=state.process_offset,
        )
        await self.flush()  # the first checkpoint: a fresh wheel starts reading from now

    def _revised_queue_offset(self, state: RecoveredState) -> int:
        """``reviseQueueOffset``: resume after the message of the log's last unit (every
        earlier one has its unit), else at the checkpoint's; within the queue's range."""
        offset = state.checkpoint.last_timer_queue_offset
        if state.last_unit is not None:
            msg = self._store.look_message_by_offset(state.last_unit.offset_py)
            if msg is not None and msg.topic == TIMER_TOPIC:
                offset = max(offset, msg.queue_offset + 1)
        low = self._store.min_offset_in_queue(TIMER_TOPIC, 0)
        high = self._store.max_offset_in_queue(TIMER_TOPIC, 0)
        return min(max(offset, low), max(high, low))

    async def start(self) -> None:
        """Start the enqueue, dequeue and flush loops (a master, or becoming one)."""
        if self._tasks or not self._loaded:
            return
        self._stop.clear()
        loop = asyncio.get_running_loop()
        for name, coro in (
            ("enqueue", self._enqueue_loop()),
            ("dequeue", self._dequeue_loop()),
            ("flush", self._flush_loop()),
            ("clean", self._clean_loop()),
        ):
            task = loop.create_task(coro, name=f"broker/timer-{name}")
            task.add_done_callback(self._task_done)
            self._tasks.append(task)
        log.info("Timer start ok", read_time_ms=self.read_time_ms, queue_offset=self.queue_offset)

    async def stop(self) -> None:
        """Stop the loops and write the checkpoint. Idempotent."""
        self._stop.set()
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if tasks:
            await self.flush()

    async def close(self) -> None:
        """Stop, flush and close the files (broker stop). Idempotent."""
        await self.stop()
        if self._loaded:
            self._loaded = False
            await self.flush()
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(self._executor, self._close_files)
        self._executor.shutdown(wait=False)

    def _close_files(self) -> None:
        self.wheel.close()
        self.timer_log.close()

    def _task_done(self, task: asyncio.Task[None]) -> None:
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            log.error("timer task failed", task=task.get_name(), exc_info=exc)
            if self._on_failure is not None:
                self._on_failure(exc)

    async def _pause(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._stop.wait()

    # -- enqueue ---------------------------------------------------------------------------

    def _move_write_time(self) -> None:
        """``maybeMoveWriteTime``."""
        now = format_time_ms(self._clock.wall_ms(), self.precision_ms)
        if now > self.write_time_ms:
            self.write_time_ms = now
            self._write_moved.set()

    def _to_next_slot_s(self) -> float:
        now = self._clock.wall_ms()
        return (format_time_ms(now, self.precision_ms) + self.precision_ms - now + 1) / 1000

    async def _enqueue_loop(self) -> None:
        while not self._stop.is_set():
            try:
                progressed = await self.enqueue()
            except OSError as e:
                log.warning("Timer enqueue failed", error=repr(e))
                progressed = False
            if not progressed:  # wake at the next slot boundary: the write time moves then
                await self._pause(min(self._idle_s, self._to_next_slot_s()))
            else:
                # a backlog of timer messages files without awaiting anything: let requests in
                await asyncio.sleep(0)

    async def enqueue(self) -> bool:
        """Read the next batch of the timer topic into the wheel (``enqueue(0)``).

        Returns:
            Whether anything was read.
        """
        self._move_write_time()
        if self._cfg.timer_stop_enqueue:
            return False
        result = self._store.get_message(
            _GROUP, TIMER_TOPIC, 0, self.queue_offset,
            max_msg_nums=_BATCH, max_total_bytes=4 * 1024 * 1024, tags_codes=None,
        )  # fmt: skip
        if result.status in (
            GetMessageStatus.OFFSET_TOO_SMALL,
            GetMessageStatus.OFFSET_OVERFLOW_BADLY,
        ):
            log.warning(
                "Timer currQueueOffset corrected", old=self.queue_offset,
                new=result.next_begin_offset,
            )  # fmt: skip
            self.queue_offset = result.next_begin_offset
            return True
        if result.status != GetMessageStatus.FOUND or not result.records:
            return False
        for record in result.records:
            msg = self._store.decode_message(record)
            try:
                delayed = int(msg.properties.get(MessageConst.TIMER_OUT_MS, ""))
            except ValueError:
                log.warning("Timer message without TIMER_OUT_MS skipped", offset=msg.queue_offset)
            else:
                if msg.queue_offset < self.synced_offset and delayed < self.synced_read_ms:
                    pass  # the master this broker took over from delivered it
                elif delayed < self.write_time_ms:
                    await self._deliver(msg, NEVER_ENQUEUED, roll=False)
                else:
                    await self._do_enqueue(msg, delayed)
            self.queue_offset = msg.queue_offset + 1
            self._move_write_time()
        return True

    async def _do_enqueue(self, msg: StoredMessage, delayed: int) -> None:
        """``doEnqueue``: file one message under its slot (or its roll slot)."""
        if self.timer_log.needs_segment():
            loop = asyncio.get_running_loop()
            self.timer_log.add(
                await loop.run_in_executor(self._executor, self.timer_log.create_next)
            )
        # nothing below awaits: the write time cannot move past the slot while it is filed
        write = self.write_time_ms
        magic = MAGIC_DEFAULT
        target = roll_target(delayed, write, self._window_slots, self.precision_ms)
        if target is not None:
            magic |= MAGIC_ROLL
            delayed = target
        is_delete = MessageConst.TIMER_DEL_UNIQKEY in msg.properties
        if is_delete:
            magic |= MAGIC_DELETE
        real_topic = msg.properties.get(MessageConst.REAL_TOPIC)
        slot = self.wheel.get_slot(delayed)
        pos = self.timer_log.append(
            TimerLogUnit(
                prev_pos=slot.last_pos, magic=magic, write_time_ms=write,
                delay_ms=delayed - write, offset_py=msg.commit_log_offset, size_py=msg.size,
                topic_hash=java_string_hash(real_topic),
            )
        )  # fmt: skip
        first = pos if slot.first_pos == NO_POS else slot.first_pos
        num = slot.num - 1 if is_delete else slot.num + 1
        self.wheel.put_slot(delayed, first, pos, num, slot.magic)
        self._count(real_topic, -1 if is_delete else 1)

    def _count(self, topic: str | None, delta: int) -> None:
        """``addMetric``: pending messages per real topic."""
        if topic is not None:
            self.metrics.add(topic, delta, self._clock.wall_ms())

    def is_reject(self, slot_ms: int) -> bool:
        """``isReject``: flow control when a slot holds more than ``timerCongestNumEachSlot``
        messages (always at twice that, at random in between)."""
        congest = self._cfg.timer_congest_num_each_slot
        num = self.wheel.get_slot(slot_ms).num
        if num <= congest:
            return False
        if num >= congest * 2:
            return True
        return self._rng.randrange(1000) > 1000 * (num - congest) / (congest + 0.1)

    # -- dequeue ---------------------------------------------------------------------------

    async def _dequeue_loop(self) -> None:
        empty = 0
        while not self._stop.is_set():
            try:
                outcome = await self.dequeue()
            except OSError as e:
                log.warning("Timer dequeue failed", error=repr(e))
                outcome = -1
            if outcome == 0:
                empty += 1
                if empty % _EMPTY_SLOTS_PER_TURN == 0:
                    await asyncio.sleep(0)
                continue
            empty = 0
            if outcome < 0:
                self._write_moved.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self._idle_s):
                        await self._write_moved.wait()

    async def dequeue(self) -> int:
        """Deliver the slot at the read time if it is due (``dequeue``).

        Returns:
            -1 nothing due yet, 0 an empty slot passed, 1 a slot delivered.
        """
        if self._cfg.timer_stop_dequeue or self.read_time_ms >= self.write_time_ms:
            return -1
        slot = self.wheel.get_slot(self.read_time_ms)
        if slot.time_ms == -1:
            self.read_time_ms += self.precision_ms
            return 0
        units = read_chain(self.timer_log, slot.last_pos)
        deleted = deleted_keys(units, self._store.look_message_by_offset)
        for index, unit in enumerate(reversed(units)):  # oldest first
            if index % _PUTS_PER_TURN == _PUTS_PER_TURN - 1:
                await asyncio.sleep(0)  # a crowded slot must not hold the loop
            if unit.is_delete and not unit.is_roll:
                continue
            msg = self._store.look_message_by_offset(unit.offset_py)
            if msg is None:
                log.warning("Timer message not found", offset_py=unit.offset_py)
                continue
            uniq = msg.properties.get(MessageConst.UNIQ_KEY)
            real_topic = msg.properties.get(MessageConst.REAL_TOPIC, "")
            if uniq is not None and build_delete_key(real_topic, uniq) in deleted:
                continue  # its cancel message already took it off the count
            await self._deliver(msg, unit.write_time_ms, roll=unit.is_roll)
        self.read_time_ms += self.precision_ms
        return 1

    async def _deliver(self, msg: StoredMessage, enqueue_ms: int, *, roll: bool) -> None:
        """``convert`` + ``doPut`` with upstream's retries (3, or until stored with
        ``timerEnableRetryUntilSuccess``); a delete message is never delivered, nor one sent
        straight to the timer topic without a real topic."""
        if not roll and MessageConst.TIMER_DEL_UNIQKEY in msg.properties:
            return
        real_topic = msg.properties.get(MessageConst.REAL_TOPIC)
        if enqueue_ms != NEVER_ENQUEUED:
            self._count(real_topic, -1)
        if not real_topic:
            log.warning("Timer message without REAL_TOPIC skipped", offset_py=msg.commit_log_offset)
            return
        await self._delivery.put(convert(msg, enqueue_ms, self._clock.wall_ms(), roll=roll))

    # -- flush and checkpoint --------------------------------------------------------------

    async def _flush_loop(self) -> None:
        interval = self._cfg.timer_flush_interval_ms / 1000
        progress_every = self._cfg.timer_progress_log_interval_ms / 1000
        loop = asyncio.get_running_loop()
        last_progress = loop.time()
        while not self._stop.is_set():
            await self._pause(interval)
            try:
                await self.flush()
            except OSError as e:
                log.warning("Timer flush failed", error=repr(e))
            if loop.time() - last_progress >= progress_every:
                last_progress = loop.time()
                log.info(
                    "Timer progress-check", read_time_ms=self.read_time_ms,
                    write_time_ms=self.write_time_ms, queue_offset=self.queue_offset,
                    offset_behind=self._store.max_offset_in_queue(TIMER_TOPIC, 0)
                    - self.queue_offset,
                )  # fmt: skip

    async def _clean_loop(self) -> None:
        """Every 30 s: delete timer-log segments whose messages retention removed."""
        loop = asyncio.get_running_loop()
        while not self._stop.is_set():
            await self._pause(_CLEAN_INTERVAL_S)
            min_py = self._store.store_offsets().min_phy_offset
            for mf in self.timer_log.expired_segments(min_py):
                log.info("Timer log segment expired", path=str(mf.path), min_phy_offset=min_py)
                try:
                    await loop.run_in_executor(self._executor, mf.destroy)
                except OSError as e:
                    log.warning("Timer log segment delete failed", error=repr(e))

    def prepare_checkpoint(self) -> TimerCheckpointData:
        """``prepareTimerCheckPoint``: what ``timercheck`` records now (a new DataVersion when
        the read time or queue offset moved)."""
        commit = (self.read_time_ms, self.queue_offset)
        if commit != self._last_commit:
            self._last_commit = commit
            self._data_version = self._data_version.next_version(self._clock.wall_ms())
        dv = self._data_version
        read, master_offset = self.read_time_ms, self.queue_offset
        if self.queue_offset < self.synced_offset:
            # still reading what the previous master had read: keep its word for a restart
            read, master_offset = min(read, self.synced_read_ms), self.synced_offset
        self._last_checkpoint = TimerCheckpointData(
            last_read_time_ms=read,
            last_timer_log_flush_pos=self.timer_log.flushed_where,
            last_timer_queue_offset=self.queue_offset,
            master_timer_queue_offset=master_offset,
            state_version=dv.state_version,
            timestamp=dv.timestamp,
            counter=dv.counter,
        )
        return self._last_checkpoint

    async def apply_synced_checkpoint(self, body: bytes) -> None:
        """Slave sync (``syncTimerCheckPoint``): adopt the master's read time, queue offset and
        DataVersion (written to ``timercheck``) while this broker does not run the wheel, so
        that once it does it skips what the master delivered.

        Raises:
            CodecError: ``body`` is not a checkpoint.
        """
        if self._tasks or not self._loaded:
            return
        cp = decode_checkpoint(body)
        self.synced_offset = cp.master_timer_queue_offset
        self.synced_read_ms = cp.last_read_time_ms
        self.read_time_ms = max(self.read_time_ms, cp.last_read_time_ms)
        self._data_version = DataVersion(
            timestamp=cp.timestamp, counter=cp.counter, state_version=cp.state_version
        )
        self._last_commit = (self.read_time_ms, self.queue_offset)
        await self.flush()

    @property
    def last_checkpoint(self) -> TimerCheckpointData:
        """The values last written to ``timercheck`` (GET_TIMER_CHECK_POINT)."""
        return self._last_checkpoint

    async def flush(self) -> None:
        """Timer log, wheel, then the checkpoint prepared before them (TimerFlushService)."""
        if not self._loaded:
            return
        data = self.prepare_checkpoint()
        metrics = self.metrics.changes()
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._executor, self._flush_files, data, metrics)

    def _flush_files(self, data: TimerCheckpointData, metrics: bytes | None) -> None:
        self.timer_log.flush()
        self.wheel.flush()
        self.checkpoint.write(data)
        if metrics is not None:
            self.metrics.write(metrics)
