"""The send path's timer hook: a message with ``TIMER_DELIVER_MS``/``TIMER_DELAY_SEC``/
``TIMER_DELAY_MS`` is stored in ``rmq_sys_wheel_timer`` queue 0 until its time.

Owns: :class:`TimerHook` (``HookUtils.checkIfTimerMessage`` + ``transformTimerMessage``: the
delivery time from the three properties, the ``timerMaxDelaySec`` refusal, the
``timerPrecisionMs`` rounding, ``TIMER_OUT_MS``/``REAL_TOPIC``/``REAL_QID``) and the remarks of
upstream's refusals (``WHEEL_TIMER_MSG_ILLEGAL``, ``WHEEL_TIMER_NOT_ENABLE`` in
``SendMessageProcessor.handlePutMessageResult``). Mirrors ``broker/util/HookUtils``. Must not:
store anything or read files; ``send.py`` calls :meth:`TimerHook.apply` on its decoding path
only (the fast path sends every property text holding ``TIMER_DEL`` there, one substring test).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from rocketpy.common.codes import ResponseCode
from rocketpy.common.message.const import MessageConst
from rocketpy.common.message.record import is_prepared_or_rollback
from rocketpy.store.config import MessageStoreConfig

TIMER_TOPIC: Final = "rmq_sys_wheel_timer"  # TimerMessageStore.TIMER_TOPIC
#: The substring that sends a property text down the decoding path (``TIMER_DELIVER_MS``,
#: ``TIMER_DELAY_SEC``, ``TIMER_DELAY_MS``, ``TIMER_DEL_UNIQKEY``).
TIMER_NEEDLE: Final = "TIMER_DEL"
_TIME_KEYS: Final = (
    MessageConst.TIMER_DELIVER_MS,
    MessageConst.TIMER_DELAY_SEC,
    MessageConst.TIMER_DELAY_MS,
)


@dataclass(frozen=True, slots=True)
class TimerRefusal:
    """A timer message the broker does not store: the response code and remark."""

    code: int
    remark: str


class TimerHook:
    """``HookUtils.handleScheduleMessage``'s timer part for one broker."""

    def __init__(
        self, config: MessageStoreConfig, *, is_reject: Callable[[int], bool] | None = None
    ) -> None:
        """Args: ``config`` the store settings (``timerWheelEnable``, ``timerMaxDelaySec``,
        ``timerPrecisionMs``, ``timerCongestNumEachSlot``); ``is_reject`` the timer store's
        flow control for a slot time (``isReject``)."""
        self._enabled = config.timer_wheel_enable
        self._max_delay_ms = config.timer_max_delay_sec * 1000
        self._precision_ms = config.timer_precision_ms
        self._congest = config.timer_congest_num_each_slot
        self._is_reject = is_reject

    def illegal_remark(self) -> str:
        """The MESSAGE_ILLEGAL remark of ``WHEEL_TIMER_MSG_ILLEGAL``."""
        return (
            "timer message illegal, the delay time should not be bigger than the max delay "
            f"{self._max_delay_ms}ms; or if set del msg, the delay time should be bigger than "
            "the current time"
        )

    def apply(
        self, topic: str, queue_id: int, sys_flag: int, props: dict[str, str], now_ms: int
    ) -> tuple[str, int] | TimerRefusal:
        """Where a decoded message goes.

        Returns:
            ``(topic, queue_id)`` unchanged: not a timer message, or one already due (stored as
            sent, so delivered at once). ``(TIMER_TOPIC, 0)``: a timer message, ``props`` given
            ``TIMER_OUT_MS``, ``REAL_TOPIC``, ``REAL_QID``. A refusal, as upstream's.
        """
        if is_prepared_or_rollback(sys_flag) or topic == TIMER_TOPIC:
            return topic, queue_id
        if not _is_timer_message(props):
            return topic, queue_id
        if not self._enabled:
            return TimerRefusal(
                ResponseCode.SYSTEM_ERROR,
                "accurate timer message is not enabled, timerWheelEnable is false",
            )
        return self._transform(topic, queue_id, props, now_ms)

    def _transform(
        self, topic: str, queue_id: int, props: dict[str, str], now_ms: int
    ) -> tuple[str, int] | TimerRefusal:
        """``transformTimerMessage``."""
        try:
            deliver_ms = self._deliver_ms(props, now_ms)
        except ValueError:
            return TimerRefusal(ResponseCode.MESSAGE_ILLEGAL, self.illegal_remark())
        if deliver_ms <= now_ms:
            if MessageConst.TIMER_DEL_UNIQKEY in props:
                return TimerRefusal(ResponseCode.MESSAGE_ILLEGAL, self.illegal_remark())
            return topic, queue_id  # due: delivered at once, as sent
        if deliver_ms - now_ms > self._max_delay_ms:
            return TimerRefusal(ResponseCode.MESSAGE_ILLEGAL, self.illegal_remark())
        slot_ms = slot_time_ms(deliver_ms, self._precision_ms)
        if self._is_reject is not None and self._is_reject(slot_ms):
            congest = self._congest
            return TimerRefusal(
                ResponseCode.SYSTEM_ERROR,
                f"timer message is under flow control, max num limit is {congest * 2} or the "
                f"current value is greater than {congest} and less than {congest * 2}, trigger "
                "random flow control",
            )
        props[MessageConst.TIMER_OUT_MS] = str(slot_ms)
        props[MessageConst.REAL_TOPIC] = topic
        props[MessageConst.REAL_QID] = str(queue_id)
        return TIMER_TOPIC, 0

    @staticmethod
    def _deliver_ms(props: dict[str, str], now_ms: int) -> int:
        if MessageConst.TIMER_DELAY_SEC in props:
            return now_ms + int(props[MessageConst.TIMER_DELAY_SEC]) * 1000
        if MessageConst.TIMER_DELAY_MS in props:
            return now_ms + int(props[MessageConst.TIMER_DELAY_MS])
        return int(props[MessageConst.TIMER_DELIVER_MS])


def _is_timer_message(props: dict[str, str]) -> bool:
    """``checkIfTimerMessage``: a delay level wins (the timer properties are dropped); a message
    already carrying ``TIMER_OUT_MS`` is not transformed again."""
    if _delay_level(props) > 0:
        for key in _TIME_KEYS:
            props.pop(key, None)
        return False
    if MessageConst.TIMER_OUT_MS in props:
        return False
    return any(key in props for key in _TIME_KEYS)


def _delay_level(props: dict[str, str]) -> int:
    try:
        return int(props.get(MessageConst.DELAY, "0"))
    except ValueError:
        return 0


def slot_time_ms(deliver_ms: int, precision_ms: int) -> int:
    """The slot a delivery time is filed under: the precision boundary below it (an exact
    boundary goes one slot earlier), so the slot is read at or after ``deliver_ms``."""
    if deliver_ms % precision_ms == 0:
        return deliver_ms - precision_ms
    return deliver_ms // precision_ms * precision_ms
