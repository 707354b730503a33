"""Synthetic metrics dumps (schema version 1) for the tests and the benchmark.

Pure Python, no pyspark. :func:`make_record` builds one record shaped exactly like the broker's
(``rocketpy.broker.metrics.build_dump_record``); :func:`failover_scenario` builds a small cluster
run with a master failure in the middle.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

LATENCY_BOUNDS_MS = [0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0]
LATENCY_BOUNDS_MS += [1000.0, 2000.0, 5000.0, 10000.0]
SLOTS = len(LATENCY_BOUNDS_MS) + 1
_NAMES = ("putMsgs", "putBytes", "getMsgs", "getBytes")
_DELTAS = ("dPutMsgs", "dPutBytes", "dGetMsgs", "dGetBytes")


@dataclass(slots=True)
class BrokerState:
    """Cumulative counters of one synthetic broker process."""

    cluster: str
    broker_name: str
    broker_id: int
    role: str
    boot_ts: int
    master_epoch: int | None = None
    prev_ts: int | None = None
    topics: dict[str, list[int]] = field(default_factory=dict)
    latency: list[int] = field(default_factory=lambda: [0] * SLOTS)
    latency_sum: float = 0.0


def make_record(
    state: BrokerState,
    ts: int,
    *,
    topics: Mapping[str, Sequence[int]],
    latency_counts: Sequence[int] = (),
    latency_max_ms: float = 0.0,
    lags: Sequence[tuple[str, str, int]] = (),
    slaves: Sequence[Mapping[str, Any]] = (),
    events: Sequence[Mapping[str, Any]] = (),
    flush_behind: int = 0,
) -> dict[str, Any]:
    """One record for ``state`` at ``ts``; ``topics`` maps topic -> interval deltas
    ``(dPutMsgs, dPutBytes, dGetMsgs, dGetBytes)``; counters accumulate in ``state``."""
    topic_rows = []
    queue_rows = []
    totals = [0] * 8
    for topic, delta in topics.items():
        cum = state.topics.setdefault(topic, [0, 0, 0, 0])
        for i in range(4):
            cum[i] += delta[i]
        row = dict(zip(_NAMES, cum, strict=True)) | dict(zip(_DELTAS, delta, strict=True))
        topic_rows.append({"topic": topic, **row})
        queue_rows.append({"topic": topic, "queueId": 0, **row})
        for i in range(4):
            totals[i] += cum[i]
            totals[4 + i] += delta[i]
    d_counts = list(latency_counts) or [0] * SLOTS
    for i, c in enumerate(d_counts):
        state.latency[i] += c
    d_sum = sum(c * b for c, b in zip(d_counts, [*LATENCY_BOUNDS_MS, 10000.0], strict=True))
    state.latency_sum += d_sum
    interval = None if state.prev_ts is None else ts - state.prev_ts
    state.prev_ts = ts
    max_phy = sum(v[1] for v in state.topics.values())
    return {
        "version": 1,
        "ts": ts,
        "bootTs": state.boot_ts,
        "node": {
            "type": "broker",
            "cluster": state.cluster,
            "brokerName": state.broker_name,
            "brokerId": state.broker_id,
            "role": state.role,
            "addr": f"127.0.0.1:{10911 + state.broker_id}",
            "masterEpoch": state.master_epoch,
        },
        "intervalMs": interval,
        "totals": dict(zip(_NAMES + _DELTAS, totals, strict=True)),
        "topics": topic_rows,
        "queues": queue_rows,
        "sendLatency": {
            "boundsMs": LATENCY_BOUNDS_MS,
            "counts": list(state.latency),
            "sumMs": state.latency_sum,
            "dCounts": d_counts,
            "dSumMs": d_sum,
            "dMaxMs": latency_max_ms,
        },
        "events": [dict(e) for e in events],
        "store": {
            "maxPhyOffset": max_phy,
            "flushedPhyOffset": max_phy - flush_behind,
            "flushBehindBytes": flush_behind,
            "dispatchBehindBytes": 0,
        },
        "consumerLag": [{"group": g, "topic": t, "lag": lag} for g, t, lag in lags],
        "ha": {
            "slaves": [dict(s) for s in slaves],
            "syncStateSet": None,
            "syncStateSetEpoch": None,
            "confirmOffset": None,
        },
    }


def role_event(ts: int, old: str | None, new: str, epoch: int | None) -> dict[str, Any]:
    """A ROLE_CHANGE event."""
    return {"ts": ts, "type": "ROLE_CHANGE", "fromRole": old, "toRole": new, "masterEpoch": epoch}


def _latency(i: int) -> tuple[list[int], float]:
    counts = [0] * SLOTS
    counts[1] = 80 + i % 7  # (0.5, 1]
    counts[3] = 15  # (2, 5]
    counts[6] = 1 + i % 2  # (20, 50]
    return counts, 21.0 + (i % 10)


def failover_scenario(
    start_ms: int, *, intervals: int = 60, interval_ms: int = 1000, fail_at: int = 30, gap: int = 5
) -> list[dict[str, Any]]:
    """Two broker groups over ``intervals`` records each. broker-b (id 0) puts 100 msgs of
    1 KiB per interval to TopicB all along. broker-a's master (id 0) puts 200 msgs of 512 B to
    TopicA until interval ``fail_at``, then dies; its slave (id 1, reporting 4,096 bytes of
    replication lag while the master lives) becomes master ``gap`` intervals later with a
    ROLE_CHANGE event and epoch 1 -> 2, and puts 200 msgs per interval from then on. Group GA
    consumes TopicA with a lag of 10 x interval index."""
    records: list[dict[str, Any]] = []
    a0 = BrokerState("c1", "broker-a", 0, "SYNC_MASTER", start_ms - 5000, master_epoch=1)
    a1 = BrokerState("c1", "broker-a", 1, "SLAVE", start_ms - 5000, master_epoch=1)
    b0 = BrokerState("c1", "broker-b", 0, "ASYNC_MASTER", start_ms - 5000)
    for i in range(intervals):
        ts = start_ms + (i + 1) * interval_ms
        counts, lat_max = _latency(i)
        records.append(
            make_record(
                b0,
                ts,
                topics={"TopicB": (100, 100 * 1024, 50, 50 * 1100)},
                latency_counts=counts,
                latency_max_ms=lat_max,
            )
        )
        if i < fail_at:
            records.append(
                make_record(
                    a0,
                    ts,
                    topics={"TopicA": (200, 200 * 512, 200, 200 * 600)},
                    latency_counts=counts,
                    latency_max_ms=lat_max,
                    lags=[("GA", "TopicA", 10 * i)],
                    slaves=[
                        {"brokerId": 1, "addr": "127.0.0.1:10912", "ackOffset": 0, "lagBytes": 4096}
                    ],
                )
            )
        events: list[dict[str, Any]] = []
        topics: dict[str, tuple[int, int, int, int]] = {}
        if i == fail_at + gap:
            a1.role, a1.master_epoch = "SYNC_MASTER", 2
            events.append(role_event(ts - interval_ms // 2, "SLAVE", "SYNC_MASTER", 2))
        if i > fail_at + gap:
            topics = {"TopicA": (200, 200 * 512, 0, 0)}
        records.append(make_record(a1, ts, topics=topics, events=events))
    return records
