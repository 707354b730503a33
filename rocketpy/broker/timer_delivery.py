"""How the timer store hands a due message back to the store.

Owns: :func:`convert` (``TimerMessageStore.convert``/``convertMessage``: the message to store
for a due unit -- its real topic and queue, or the timer topic again for a roll unit, with
``TIMER_ENQUEUE_MS``/``TIMER_DEQUEUE_MS``/``TIMER_ROLL_TIMES``), :func:`read_chain` (a slot's
units, newest first), :func:`build_delete_key` and :class:`TimerDelivery` (``doPut`` with
upstream's retry rule). Must not: move the read time or touch the wheel (the timer store does).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Final

import structlog

from rocketpy.broker.store_api import StoredMessage
from rocketpy.common.message.const import MessageConst
from rocketpy.store.commit_log.put_types import MessageToStore, PutMessageStatus, PutResult
from rocketpy.store.timer.record import NO_POS, TimerLogUnit
from rocketpy.store.timer.timer_log import TimerLog

log = structlog.get_logger(__name__)

Reput = Callable[[MessageToStore], Awaitable[PutResult]]

_NO_RETRY: Final = frozenset(
    {PutMessageStatus.MESSAGE_ILLEGAL, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED}
)
_ATTEMPTS: Final = 3


def build_delete_key(real_topic: str, uniq_key: str) -> str:
    """``buildDeleteKey``: what ``TIMER_DEL_UNIQKEY`` holds to cancel a message."""
    return f"{real_topic}+{uniq_key}"


def read_chain(timer_log: TimerLog, last_pos: int) -> list[TimerLogUnit]:
    """The units of one slot from its newest back along ``prev_pos`` (stops at a unit the log
    no longer holds)."""
    units: list[TimerLogUnit] = []
    pos = last_pos
    while pos != NO_POS:
        unit = timer_log.read_unit(pos)
        if unit is None:
            break
        units.append(unit)
        pos = unit.prev_pos
    return units


def deleted_keys(
    units: list[TimerLogUnit], look: Callable[[int], StoredMessage | None]
) -> set[str]:
    """The ``TIMER_DEL_UNIQKEY`` values of a slot's delete units."""
    keys: set[str] = set()
    for unit in units:
        if unit.is_delete and not unit.is_roll:
            msg = look(unit.offset_py)
            key = msg.properties.get(MessageConst.TIMER_DEL_UNIQKEY) if msg else None
            if key is not None:
                keys.add(key)
    return keys


def convert(msg: StoredMessage, enqueue_ms: int, now_ms: int, *, roll: bool) -> MessageToStore:
    """``convert``/``convertMessage``: the message to store for a due unit."""
    props = dict(msg.properties)
    props[MessageConst.TIMER_ENQUEUE_MS] = str(enqueue_ms)
    if roll:
        times = int(props.get(MessageConst.TIMER_ROLL_TIMES, "0") or "0")
        props[MessageConst.TIMER_ROLL_TIMES] = str(times + 1)
    props[MessageConst.TIMER_DEQUEUE_MS] = str(now_ms)
    props[MessageConst.WAIT] = "false"
    if roll:
        topic, queue_id = msg.topic, msg.queue_id
    else:
        topic = props.pop(MessageConst.REAL_TOPIC, "")
        try:
            queue_id = int(props.pop(MessageConst.REAL_QID, "0"))
        except ValueError:
            queue_id = 0
    return msg.restored(
        topic=topic, queue_id=queue_id, properties=props, reconsume_times=msg.reconsume_times
    )


class TimerDelivery:
    """``doPut`` for the timer store."""

    def __init__(
        self,
        reput: Reput,
        *,
        retry_until_success: bool,
        pause: Callable[[], Awaitable[None]],
    ) -> None:
        """Args: ``reput`` stores a message; ``retry_until_success``
        ``timerEnableRetryUntilSuccess``; ``pause`` waits between attempts (returns early on
        stop)."""
        self._reput = reput
        self._retry_until_success = retry_until_success
        self._pause = pause

    async def put(self, to_store: MessageToStore) -> bool:
        """Store ``to_store``: retried after a pause while the store refuses for a passing
        reason, up to 3 attempts unless ``timerEnableRetryUntilSuccess``; never for an illegal
        message. Returns whether it was stored."""
        attempts = 0
        while True:
            put = await self._reput(to_store)
            if put.stored:
                return True
            attempts += 1
            if put.status in _NO_RETRY:
                log.warning("Timer message skipped", status=put.status.value, topic=to_store.topic)
                return False
            if attempts >= _ATTEMPTS and not self._retry_until_success:
                log.error("Timer message put failed after retries", status=put.status.value,
                          topic=to_store.topic, attempts=attempts)  # fmt: skip
                return False
            await self._pause()
