"""BrokerMetrics: per-topic and per-queue put/get counters, send-latency and message-size
histograms, and role-change events; :func:`build_dump_record` turns them into one metrics-dump
record (schema version :data:`DUMP_VERSION`, documented in ``analytics/README.md``).

Owns: the counters the send and pull processors bump (cheap: a dict lookup, a few integer adds
and a ``bisect`` into a fixed bound tuple per message; no allocation after a queue's first
message) and the "previous snapshot" used for interval deltas. Must not: do I/O (the dump service
writes, the Prometheus collector reads). Mirrors the counters of upstream's
``BrokerMetricsManager`` (``rocketmq_messages_in_total``, ``rocketmq_throughput_in_total``,
``rocketmq_message_size``, ``rocketmq_rpc_latency``) and ``BrokerStatsManager``'s per-topic and
per-queue put/get stats.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Final

from rocketpy.broker.stats import GROUP_GET_NUMS, TOPIC_PUT_NUMS
from rocketpy.broker.store_api import StoreOffsets
from rocketpy.common.histogram import Histogram

#: Version of the dump record layout; bump on any incompatible change.
DUMP_VERSION: Final = 1

#: Send-latency histogram upper bounds in milliseconds (``le``); one more bucket counts the rest.
LATENCY_BOUNDS_MS: Final[tuple[float, ...]] = (
    0.5,
    1.0,
    2.0,
    5.0,
    10.0,
    20.0,
    50.0,
    100.0,
    200.0,
    500.0,
    1000.0,
    2000.0,
    5000.0,
    10000.0,
)

#: Message-size histogram upper bounds in bytes: upstream's ``rocketmq_message_size`` buckets
#: (1 KiB, 4 KiB, 512 KiB, 1 MiB, 2 MiB, 4 MiB).
SIZE_BOUNDS_BYTES: Final[tuple[int, ...]] = (
    1024,
    4 * 1024,
    512 * 1024,
    1024 * 1024,
    2 * 1024 * 1024,
    4 * 1024 * 1024,
)

# Indexes into a counter row (a list, so bumping it allocates nothing).
_PUT_MSGS, _PUT_BYTES, _GET_MSGS, _GET_BYTES = range(4)
_COUNTER_NAMES: Final = ("putMsgs", "putBytes", "getMsgs", "getBytes")


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeIdentity:
    """Who wrote a record."""

    cluster: str
    broker_name: str
    broker_id: int
    role: str
    addr: str
    master_epoch: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerLag:
    """Messages a group has not consumed from a topic (sum over queues)."""

    group: str
    topic: str
    lag_messages: int


class BrokerMetrics:
    """The broker's metric counters (event-loop owned; read by the dump and Prometheus code)."""

    def __init__(self) -> None:
        """Empty counters."""
        #: (topic, queue id) -> [putMsgs, putBytes, getMsgs, getBytes], cumulative since boot.
        self.queues: dict[tuple[str, int], list[int]] = {}
        #: (group, topic) -> [getMsgs, getBytes], cumulative since boot.
        self.group_gets: dict[tuple[str, str], list[int]] = {}
        #: Send latency over the broker's life.
        self.send_latency = Histogram(LATENCY_BOUNDS_MS)
        #: Stored message sizes per topic.
        self.message_size: dict[str, Histogram] = {}
        self._events: list[dict[str, Any]] = []
        self._prev_queues: dict[tuple[str, int], tuple[int, ...]] = {}
        self._prev_latency: tuple[int, ...] = (0,) * (len(LATENCY_BOUNDS_MS) + 1)
        self._prev_latency_sum = 0.0
        self._interval_latency_max = 0.0
        self._prev_ts: int | None = None

    def _row(self, topic: str, queue_id: int) -> list[int]:
        row = self.queues.get((topic, queue_id))
        if row is None:
            row = self.queues[(topic, queue_id)] = [0, 0, 0, 0]
        return row

    def _size_histogram(self, topic: str) -> Histogram:
        hist = self.message_size.get(topic)
        if hist is None:
            hist = self.message_size[topic] = Histogram(tuple(map(float, SIZE_BOUNDS_BYTES)))
        return hist

    def record_put(self, topic: str, queue_id: int, nbytes: int) -> None:
        """One message of ``nbytes`` body bytes was stored in a queue."""
        row = self.queues.get((topic, queue_id))  # per message: the lookup without a call
        if row is None:
            row = self._row(topic, queue_id)
        row[_PUT_MSGS] += 1
        row[_PUT_BYTES] += nbytes
        hist = self.message_size.get(topic)
        if hist is None:
            hist = self._size_histogram(topic)
        hist.observe(nbytes)

    def record_puts(self, topic: str, queue_id: int, sizes: list[int]) -> None:
        """Messages of body sizes ``sizes`` (a batch, or the send lane's run) were stored in
        one queue: as many :meth:`record_put` calls, with one row update and one observation
        per distinct size."""
        if not sizes:
            return
        row = self._row(topic, queue_id)
        row[_PUT_MSGS] += len(sizes)
        row[_PUT_BYTES] += sum(sizes)
        hist = self._size_histogram(topic)
        if min(sizes) == max(sizes):  # one size (a producer's usual run): no Counter
            hist.observe(sizes[0], len(sizes))
            return
        for size, count in Counter(sizes).items():
            hist.observe(size, count)

    def record_send_latency(self, latency_ms: float, count: int = 1) -> None:
        """``count`` send requests (one read's, answered together) each took ``latency_ms``
        from decode to store result."""
        self.send_latency.observe(latency_ms, count)
        if latency_ms > self._interval_latency_max:  # noqa: PLR1730 - not max(): per send
            self._interval_latency_max = latency_ms

    def record_get(self, group: str, topic: str, queue_id: int, count: int, nbytes: int) -> None:
        """``count`` messages (``nbytes`` record bytes) were delivered to ``group``."""
        row = self._row(topic, queue_id)
        row[_GET_MSGS] += count
        row[_GET_BYTES] += nbytes
        grow = self.group_gets.get((group, topic))
        if grow is None:
            grow = self.group_gets[(group, topic)] = [0, 0]
        grow[0] += count
        grow[1] += nbytes

    def record_role_change(
        self, ts_ms: int, old_role: str | None, new_role: str, master_epoch: int | None
    ) -> None:
        """A role change (``old_role`` None: the role the broker booted with)."""
        self._events.append(
            {
                "ts": ts_ms,
                "type": "ROLE_CHANGE",
                "fromRole": old_role,
                "toRole": new_role,
                "masterEpoch": master_epoch,
            }
        )

    def topic_totals(self) -> dict[str, list[int]]:
        """topic -> [putMsgs, putBytes, getMsgs, getBytes], cumulative."""
        out: dict[str, list[int]] = {}
        for (topic, _), row in self.queues.items():
            acc = out.get(topic)
            if acc is None:
                out[topic] = list(row)
            else:
                for i in range(4):
                    acc[i] += row[i]
        return out

    def snapshot(self, ts_ms: int) -> dict[str, Any]:
        """Counters, deltas since the previous snapshot, latency and pending events; resets the
        interval state. Event-loop side of :func:`build_dump_record`."""
        queues: list[dict[str, Any]] = []
        topics: dict[str, list[int]] = {}
        for (topic, qid), row in self.queues.items():
            prev = self._prev_queues.get((topic, qid), (0, 0, 0, 0))
            delta = [row[i] - prev[i] for i in range(4)]
            self._prev_queues[(topic, qid)] = tuple(row)
            entry: dict[str, Any] = {"topic": topic, "queueId": qid}
            entry.update(zip(_COUNTER_NAMES, row, strict=True))
            entry.update(zip(_delta_names(), delta, strict=True))
            queues.append(entry)
            acc = topics.setdefault(topic, [0] * 8)
            for i in range(4):
                acc[i] += row[i]
                acc[4 + i] += delta[i]
        hist = self.send_latency
        d_counts = [c - p for c, p in zip(hist.counts, self._prev_latency, strict=True)]
        latency = {
            "boundsMs": list(hist.bounds),
            "counts": list(hist.counts),
            "sumMs": round(hist.sum, 3),
            "dCounts": d_counts,
            "dSumMs": round(hist.sum - self._prev_latency_sum, 3),
            "dMaxMs": round(self._interval_latency_max, 3),
        }
        self._prev_latency = tuple(hist.counts)
        self._prev_latency_sum = hist.sum
        self._interval_latency_max = 0.0
        interval = None if self._prev_ts is None else ts_ms - self._prev_ts
        self._prev_ts = ts_ms
        events, self._events = self._events, []
        totals = [sum(v[i] for v in topics.values()) for i in range(8)]
        names = (*_COUNTER_NAMES, *_delta_names())
        return {
            "intervalMs": interval,
            "totals": dict(zip(names, totals, strict=True)),
            "topics": [
                {"topic": t, **dict(zip(names, v, strict=True))} for t, v in sorted(topics.items())
            ],
            "queues": queues,
            "sendLatency": latency,
            "events": events,
        }


def _delta_names() -> tuple[str, ...]:
    return ("dPutMsgs", "dPutBytes", "dGetMsgs", "dGetBytes")


def build_dump_record(
    *,
    ts_ms: int,
    boot_ts_ms: int,
    node: NodeIdentity,
    snapshot: dict[str, Any],
    store: StoreOffsets,
    consumer_lag: list[ConsumerLag],
) -> dict[str, Any]:
    """One metrics-dump record (``analytics/README.md``, schema version :data:`DUMP_VERSION`).

    HA fields are null/empty until controller mode reports slaves and the SyncStateSet.
    """
    return {
        "version": DUMP_VERSION,
        "ts": ts_ms,
        "bootTs": boot_ts_ms,
        "node": {
            "type": "broker",
            "cluster": node.cluster,
            "brokerName": node.broker_name,
            "brokerId": node.broker_id,
            "role": node.role,
            "addr": node.addr,
            "masterEpoch": node.master_epoch,
        },
        **snapshot,
        "store": {
            "maxPhyOffset": store.max_phy_offset,
            "flushedPhyOffset": store.flushed_phy_offset,
            "flushBehindBytes": store.flush_behind_bytes,
            "dispatchBehindBytes": store.dispatch_behind_bytes,
        },
        "consumerLag": [
            {"group": c.group, "topic": c.topic, "lag": c.lag_messages} for c in consumer_lag
        ],
        "ha": {
            "slaves": [],
            "syncStateSet": None,
            "syncStateSetEpoch": None,
            "confirmOffset": None,
        },
    }


def stats_item_values(metrics: BrokerMetrics) -> dict[tuple[str, str], int]:
    """The counters ``StatsItems`` samples: messages put per topic (``TOPIC_PUT_NUMS``) and
    messages delivered per ``topic@group`` (``GROUP_GET_NUMS``), cumulative."""
    values = {(TOPIC_PUT_NUMS, t): row[0] for t, row in metrics.topic_totals().items()}
    for (group, topic), row in metrics.group_gets.items():
        values[(GROUP_GET_NUMS, f"{topic}@{group}")] = row[0]
    return values
