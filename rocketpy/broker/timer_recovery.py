"""Start-up recovery of the timer store, from ``config/timercheck`` (runs on an executor).

Owns: :func:`recover` (``TimerMessageStore.recover``): map the wheel and the timer log, scan the
log only from one segment before the checkpoint's flushed position (revising each unit's slot
and cutting a torn tail), re-revise from the first live slot that points past the log's end
(``checkPhyPos``), and choose the read time: the checkpoint's, but no earlier than the wheel
can hold; a wheel without a checkpoint and without units starts at now. Work is bounded by one
timer-log segment plus one pass over the wheel, never by history. Must not: touch the message
store (the caller revises the queue offset from :attr:`RecoveredState.last_unit`).
"""

from __future__ import annotations

from dataclasses import dataclass

import structlog

from rocketpy.store.timer.record import (
    TIMER_BLANK_SLOTS,
    UNIT_SIZE,
    TimerCheckpointData,
    TimerLogUnit,
    format_time_ms,
)
from rocketpy.store.timer.timer_checkpoint import TimerCheckpoint
from rocketpy.store.timer.timer_log import TimerLog
from rocketpy.store.timer.timer_wheel import IGNORE, TimerWheel

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class RecoveredState:
    """What recovery found."""

    checkpoint: TimerCheckpointData
    process_offset: int
    read_time_ms: int
    last_unit: TimerLogUnit | None


def recover(
    timer_log: TimerLog, wheel: TimerWheel, checkpoint: TimerCheckpoint, now_ms: int
) -> RecoveredState:
    """Open and recover the timer files. Blocks.

    Raises:
        ValueError: a wheel or log segment of the wrong size.
    """
    cp = checkpoint.load()
    wheel.open()
    timer_log.load()

    def revise(delayed_ms: int, position: int) -> None:
        wheel.revise_slot(delayed_ms, IGNORE, position, force=True)

    begin = cp.last_timer_log_flush_pos
    if timer_log.queue.last is not None:
        begin -= timer_log.file_size
    process = timer_log.recover(max(begin, 0), revise)
    precision = wheel.precision_ms
    if not checkpoint.existed and process == 0:
        read_time = format_time_ms(now_ms, precision)  # a new wheel: nothing is pending
    else:
        oldest = (
            format_time_ms(now_ms, precision)
            - wheel.slots_total * precision
            + TIMER_BLANK_SLOTS * precision
        )
        read_time = max(cp.last_read_time_ms, oldest)
    min_first = wheel.check_phy_pos(read_time, process)
    if min_first < process:
        log.warning("Timer recheck because of minFirst", min_first=min_first, process=process)
        timer_log.recover(min_first, revise)
    last_unit = timer_log.read_unit(process - UNIT_SIZE) if process >= UNIT_SIZE else None
    return RecoveredState(
        checkpoint=cp, process_offset=process, read_time_ms=read_time, last_unit=last_unit
    )
