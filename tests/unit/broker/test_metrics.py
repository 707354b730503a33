"""BrokerMetrics: histogram bucketing, per-queue counters and interval deltas, events."""

from __future__ import annotations

from rocketpy.broker.metrics import LATENCY_BOUNDS_MS, BrokerMetrics, Histogram


def test_histogram_buckets_use_le_bounds() -> None:
    """1. Bounds (1, 5, 10). 2. Observe 0.2, 1.0, 1.01, 5, 9.9, 10, 11, 500.
    Expected: counts [2, 2, 2, 2] (values equal to a bound fall in that bound's bucket); sum and
    max exact."""
    hist = Histogram((1.0, 5.0, 10.0))
    for v in (0.2, 1.0, 1.01, 5.0, 9.9, 10.0, 11.0, 500.0):
        hist.observe(v)
    assert hist.counts == [2, 2, 2, 2]
    assert hist.max == 500.0
    assert abs(hist.sum - 538.11) < 1e-9


def test_metrics_snapshot_counts_and_deltas() -> None:
    """1. Put 3 messages of 10 B in T/0 and 1 of 100 B in T/1; get 2 (50 B) from T/0 by G.
    2. Snapshot at t=1000. 3. Put 1 more of 10 B in T/0. 4. Snapshot at t=3000.
    Expected: first snapshot has cumulative = delta, intervalMs None; second has T/0 putMsgs 4,
    dPutMsgs 1, getMsgs 2, dGetMsgs 0, topic T putBytes 140, dPutBytes 10, intervalMs 2000."""
    m = BrokerMetrics()
    for _ in range(3):
        m.record_put("T", 0, 10)
    m.record_put("T", 1, 100)
    m.record_get("G", "T", 0, 2, 50)
    first = m.snapshot(1000)
    assert first["intervalMs"] is None
    q0 = next(q for q in first["queues"] if q["queueId"] == 0)
    assert (q0["putMsgs"], q0["dPutMsgs"], q0["getBytes"], q0["dGetBytes"]) == (3, 3, 50, 50)
    m.record_put("T", 0, 10)
    second = m.snapshot(3000)
    assert second["intervalMs"] == 2000
    q0 = next(q for q in second["queues"] if q["queueId"] == 0)
    assert (q0["putMsgs"], q0["dPutMsgs"], q0["getMsgs"], q0["dGetMsgs"]) == (4, 1, 2, 0)
    (topic,) = second["topics"]
    assert (topic["topic"], topic["putBytes"], topic["dPutBytes"]) == ("T", 140, 10)
    assert second["totals"]["putMsgs"] == 5
    assert second["totals"]["dPutMsgs"] == 1
    assert m.group_gets[("G", "T")] == [2, 50]


def test_metrics_snapshot_latency_deltas_and_interval_max() -> None:
    """1. Record latencies 0.3, 3, 30 ms. 2. Snapshot. 3. Record 7 ms. 4. Snapshot.
    Expected: second snapshot's dCounts has a single 1 in the (5, 10] bucket, counts totals 4,
    dMaxMs 7 (the interval's max, not the all-time 30), dSumMs 7."""
    m = BrokerMetrics()
    for v in (0.3, 3.0, 30.0):
        m.record_send_latency(v)
    first = m.snapshot(1)
    assert first["sendLatency"]["dMaxMs"] == 30.0
    m.record_send_latency(7.0)
    lat = m.snapshot(2)["sendLatency"]
    expected = [0] * (len(LATENCY_BOUNDS_MS) + 1)
    expected[LATENCY_BOUNDS_MS.index(10.0)] = 1
    assert lat["dCounts"] == expected
    assert sum(lat["counts"]) == 4
    assert lat["dMaxMs"] == 7.0
    assert lat["dSumMs"] == 7.0


def test_metrics_role_change_events_drained_once() -> None:
    """1. Record a boot role and a change to SLAVE with epoch 3. 2. Snapshot twice.
    Expected: the first snapshot carries both events in order; the second none."""
    m = BrokerMetrics()
    m.record_role_change(10, None, "SYNC_MASTER", None)
    m.record_role_change(20, "SYNC_MASTER", "SLAVE", 3)
    events = m.snapshot(30)["events"]
    assert [(e["fromRole"], e["toRole"], e["masterEpoch"]) for e in events] == [
        (None, "SYNC_MASTER", None),
        ("SYNC_MASTER", "SLAVE", 3),
    ]
    assert m.snapshot(40)["events"] == []


def test_record_puts_equals_one_record_put_per_message() -> None:
    """1. Record a batch of sizes (10, 10, 300, 10, 70000) in T/2 with record_puts on one
    metrics object and with five record_put calls on another.
    Expected: the same queue row and the same message-size histogram (counts, sum, max)."""
    sizes = [10, 10, 300, 10, 70000]
    batched, single = BrokerMetrics(), BrokerMetrics()
    batched.record_puts("T", 2, sizes)
    for size in sizes:
        single.record_put("T", 2, size)
    assert batched.queues == single.queues == {("T", 2): [5, sum(sizes), 0, 0]}
    b, s = batched.message_size["T"], single.message_size["T"]
    assert (b.counts, b.sum, b.max) == (s.counts, s.sum, s.max)
