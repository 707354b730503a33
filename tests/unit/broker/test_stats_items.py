"""StatsItems: the minute/hour/day views VIEW_BROKER_STATS_DATA (mqadmin statsAll) answers."""

from __future__ import annotations

import pytest

from rocketpy.broker.metrics import BrokerMetrics, stats_item_values
from rocketpy.broker.stats import GROUP_GET_NUMS, TOPIC_PUT_NUMS, StatsItems


def test_stats_items_first_sample_counts_from_the_previous_one() -> None:
    """1. Items start at 0 ms; a sample at 1000 ms sees nothing. 2. At 2000 ms topic T shows 4
    puts (first sight). Expected: every view reports sum 4 over 1 s (tps 4.0); an item never
    seen answers None."""
    items = StatsItems(0)
    items.sample(1000, {})
    items.sample(2000, {(TOPIC_PUT_NUMS, "T"): 4})
    data = items.stats_data(TOPIC_PUT_NUMS, "T")
    assert data == {v: {"sum": 4, "tps": 4.0} for v in ("statsMinute", "statsHour", "statsDay")}
    assert items.stats_data(TOPIC_PUT_NUMS, "other") is None


def test_stats_items_first_sample_after_start_has_a_rate() -> None:
    """1. Items start at 0 ms; the very first sample (at 500 ms) already shows 3 puts.
    Expected: sum 3 over 0.5 s (tps 6.0), not a zero-length window."""
    items = StatsItems(0)
    items.sample(500, {(TOPIC_PUT_NUMS, "T"): 3})
    assert items.stats_data(TOPIC_PUT_NUMS, "T") is not None
    assert items.stats_data(TOPIC_PUT_NUMS, "T")["statsMinute"] == {"sum": 3, "tps": 6.0}


def test_stats_items_minute_view_forgets_after_a_minute_hour_view_keeps() -> None:
    """1. 60 puts at first sight (1 s), then no more for 120 one-second samples.
    Expected: the minute view's sum drops to 0 (its oldest kept sample is newer than the puts);
    the hour and day views still sum 60."""
    items = StatsItems(0)
    for second in range(1, 122):
        items.sample(second * 1000, {(TOPIC_PUT_NUMS, "T"): 60})
    data = items.stats_data(TOPIC_PUT_NUMS, "T")
    assert data is not None
    assert data["statsMinute"]["sum"] == 0
    assert data["statsHour"]["sum"] == data["statsDay"]["sum"] == 60
    assert data["statsHour"]["tps"] == pytest.approx(60 / 121)


def test_stats_item_values_read_the_metrics_counters() -> None:
    """1. BrokerMetrics records 2 puts to T (queues 0 and 1) and 3 messages delivered to G.
    Expected: the sampled values are T -> 2 (TOPIC_PUT_NUMS) and T@G -> 3 (GROUP_GET_NUMS): the
    same counters the dumps and Prometheus read."""
    m = BrokerMetrics()
    m.record_put("T", 0, 10)
    m.record_put("T", 1, 10)
    m.record_get("G", "T", 0, 3, 30)
    assert stats_item_values(m) == {(TOPIC_PUT_NUMS, "T"): 2, (GROUP_GET_NUMS, "T@G"): 3}
