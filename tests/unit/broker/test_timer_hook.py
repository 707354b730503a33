"""The send path's timer hook (``HookUtils.checkIfTimerMessage``/``transformTimerMessage``)."""

from __future__ import annotations

import pytest

from rocketpy.broker.timer_hook import TIMER_TOPIC, TimerHook, TimerRefusal, slot_time_ms
from rocketpy.common.codes import ResponseCode
from rocketpy.common.message.record import TRANSACTION_PREPARED_TYPE
from rocketpy.store.config import MessageStoreConfig

NOW = 1_700_000_000_000


def _hook(**values: object) -> TimerHook:
    return TimerHook(MessageStoreConfig.build({"timerPrecisionMs": 1000, **values}))


@pytest.mark.parametrize(
    ("props", "out_ms"),
    [
        ({"TIMER_DELIVER_MS": str(NOW + 5_500)}, NOW + 5_000),
        ({"TIMER_DELIVER_MS": str(NOW + 5_000)}, NOW + 4_000),  # exact boundary: one slot back
        ({"TIMER_DELAY_SEC": "10"}, NOW + 9_000),
        ({"TIMER_DELAY_MS": "2500"}, NOW + 2_000),
        # TIMER_DELAY_SEC wins over TIMER_DELAY_MS, which wins over TIMER_DELIVER_MS
        ({"TIMER_DELAY_SEC": "3", "TIMER_DELAY_MS": "1", "TIMER_DELIVER_MS": "5"}, NOW + 2_000),
    ],
)
def test_timer_hook_routes_to_wheel_topic(props: dict[str, str], out_ms: int) -> None:
    props = dict(props)
    assert _hook().apply("T", 3, 0, props, NOW) == (TIMER_TOPIC, 0)
    assert props["TIMER_OUT_MS"] == str(out_ms)
    assert (props["REAL_TOPIC"], props["REAL_QID"]) == ("T", "3")


def test_timer_hook_leaves_other_messages() -> None:
    """Plain, due (past or now), delay-level, already-transformed and prepared-transaction
    messages keep their topic; a delay level drops the timer properties."""
    hook = _hook()
    for props in (
        {},
        {"TIMER_DELIVER_MS": str(NOW - 1)},
        {"TIMER_DELIVER_MS": str(NOW)},
        {"TIMER_DELAY_SEC": "0"},
        {"TIMER_OUT_MS": "5", "TIMER_DELIVER_MS": str(NOW + 9000)},
    ):
        before = dict(props)
        assert hook.apply("T", 1, 0, props, NOW) == ("T", 1)
        assert props == before
    delayed = {"DELAY": "2", "TIMER_DELIVER_MS": str(NOW + 9000), "TIMER_DELAY_SEC": "9"}
    assert hook.apply("T", 1, 0, delayed, NOW) == ("T", 1)
    assert delayed == {"DELAY": "2"}
    prepared = {"TIMER_DELIVER_MS": str(NOW + 9000)}
    assert hook.apply("T", 1, TRANSACTION_PREPARED_TYPE, prepared, NOW) == ("T", 1)
    assert hook.apply(TIMER_TOPIC, 0, 0, {"TIMER_DELAY_SEC": "5"}, NOW) == (TIMER_TOPIC, 0)


def test_timer_hook_refusals() -> None:
    """Beyond timerMaxDelaySec, an unparsable time, a cancel for a past time -> MESSAGE_ILLEGAL
    with upstream's remark; timerWheelEnable=false -> SYSTEM_ERROR."""
    hook = _hook(timerMaxDelaySec=60)
    remark = (
        "timer message illegal, the delay time should not be bigger than the max delay 60000ms; "
        "or if set del msg, the delay time should be bigger than the current time"
    )
    illegal = TimerRefusal(ResponseCode.MESSAGE_ILLEGAL, remark)
    assert hook.apply("T", 0, 0, {"TIMER_DELAY_SEC": "61"}, NOW) == illegal
    assert hook.apply("T", 0, 0, {"TIMER_DELAY_SEC": "60"}, NOW) == (TIMER_TOPIC, 0)
    assert hook.apply("T", 0, 0, {"TIMER_DELIVER_MS": "soon"}, NOW) == illegal
    cancel = {"TIMER_DELIVER_MS": str(NOW - 5), "TIMER_DEL_UNIQKEY": "T+U1"}
    assert hook.apply("T", 0, 0, cancel, NOW) == illegal
    off = _hook(timerWheelEnable=False).apply("T", 0, 0, {"TIMER_DELAY_SEC": "5"}, NOW)
    assert off == TimerRefusal(
        ResponseCode.SYSTEM_ERROR,
        "accurate timer message is not enabled, timerWheelEnable is false",
    )


def test_timer_slot_time() -> None:
    assert slot_time_ms(10_050, 100) == 10_000
    assert slot_time_ms(10_000, 100) == 9_900
    assert slot_time_ms(1, 1000) == 0
