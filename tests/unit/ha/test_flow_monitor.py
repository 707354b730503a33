"""FlowMonitor: per-second byte allowance of one slave connection (ha.md section 2.2)."""

from __future__ import annotations

from rocketpy.common.clock import ManualClock
from rocketpy.ha.classic.master import FlowMonitor
from rocketpy.ha.config import HAConfig


def test_flow_monitor_window_resets_each_second() -> None:
    """1. Enabled monitor with 10 B/s at the start of a second; send 3, then 7.
    2. Advance the clock into the next second.
    Expected: allowance 10 -> 7 -> 0, then 10 again."""
    clock = ManualClock(start_ms=1_000_000)
    config = HAConfig.build({"haFlowControlEnable": True, "maxHaTransferByteInSecond": 10})
    flow = FlowMonitor(config, clock)
    assert flow.allowance() == 10
    flow.record(3)
    assert flow.allowance() == 7
    flow.record(7)
    assert flow.allowance() == 0
    clock.advance(400)
    assert flow.allowance() == 0
    assert abs(flow.seconds_to_next_window() - 0.6) < 1e-9
    clock.advance(600)
    assert flow.allowance() == 10


def test_flow_monitor_disabled_is_unlimited() -> None:
    """1. Default config (haFlowControlEnable=false); record a huge count.
    Expected: the allowance stays far above any batch size."""
    flow = FlowMonitor(HAConfig.build({}), ManualClock())
    flow.record(1 << 40)
    assert flow.allowance() > 1 << 40
