"""Prometheus exposition of the broker's metrics (``metricsExporterType=PROM``).

Owns: :class:`BrokerCollector` (a ``prometheus_client`` collector that reads
:class:`~rocketpy.broker.metrics.BrokerMetrics`, the store offsets and consumer lag at scrape
time, so the send path pays nothing for Prometheus); the HTTP side is
:class:`~rocketpy.common.prom_exporter.PromExporter`. Must not: count anything.

Names and labels follow apache/rocketmq 5.x ``BrokerMetricsConstant``: common labels
``cluster``, ``node_type`` (``broker``), ``node_id`` (the broker name, as upstream's
BrokerMetricsManager sets it); ``topic`` and ``consumer_group`` where upstream has them.
``rocketmq_rpc_latency`` is in milliseconds with upstream's ``protocol_type``/``request_code``
labels; rocketpy only measures the send family (``request_code="send_message"``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Final

import structlog
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from rocketpy.broker.metrics import BrokerMetrics, ConsumerLag, NodeIdentity
from rocketpy.broker.store_api import StoreOffsets
from rocketpy.common.histogram import prom_buckets

log = structlog.get_logger(__name__)

_COMMON: Final = ("cluster", "node_type", "node_id")


class BrokerCollector:
    """Builds the metric families from the live counters at each scrape."""

    def __init__(
        self,
        metrics: BrokerMetrics,
        *,
        node: Callable[[], NodeIdentity],
        store: Callable[[], StoreOffsets],
        lags: Callable[[], list[ConsumerLag]],
    ) -> None:
        """Args: the counters and the callables giving identity, store offsets and lag now."""
        self._metrics = metrics
        self._node = node
        self._store = store
        self._lags = lags

    def collect(self) -> Iterator[Metric]:
        """The families, as ``prometheus_client`` asks for them."""
        node = self._node()
        common = [node.cluster, "broker", node.broker_name]
        yield from self._messages(common)
        size = HistogramMetricFamily(
            "rocketmq_message_size",
            "The size of stored messages in bytes.",
            labels=[*_COMMON, "topic"],
        )
        for topic, hist in sorted(self._metrics.message_size.items()):
            size.add_metric([*common, topic], prom_buckets(hist), hist.sum)
        yield size
        latency = HistogramMetricFamily(
            "rocketmq_rpc_latency",
            "Send request latency in milliseconds.",
            labels=[*_COMMON, "protocol_type", "request_code"],
        )
        hist = self._metrics.send_latency
        latency.add_metric([*common, "remoting", "send_message"], prom_buckets(hist), hist.sum)
        yield latency
        lag = GaugeMetricFamily(
            "rocketmq_consumer_lag_messages",
            "Messages not yet consumed by a group.",
            labels=[*_COMMON, "topic", "consumer_group"],
        )
        for item in self._lags():
            lag.add_metric([*common, item.topic, item.group], float(item.lag_messages))
        yield lag
        offsets = self._store()
        for name, value, text in (
            ("rocketmq_storage_flush_behind_bytes", offsets.flush_behind_bytes, "not flushed"),
            (
                "rocketmq_storage_dispatch_behind_bytes",
                offsets.dispatch_behind_bytes,
                "not dispatched",
            ),
        ):
            gauge = GaugeMetricFamily(name, f"Commit-log bytes {text}.", labels=list(_COMMON))
            gauge.add_metric(common, float(value))
            yield gauge
        role = GaugeMetricFamily(
            "rocketpy_broker_master_epoch",
            "Controller-mode master epoch (-1 without a controller).",
            labels=[*_COMMON, "role"],
        )
        epoch = -1 if node.master_epoch is None else node.master_epoch
        role.add_metric([*common, node.role], float(epoch))
        yield role

    def _messages(self, common: list[str]) -> Iterator[Metric]:
        labels_in = [*_COMMON, "topic"]
        labels_out = [*_COMMON, "topic", "consumer_group"]
        msgs_in = CounterMetricFamily(
            "rocketmq_messages_in_total", "Messages stored.", labels=labels_in
        )
        bytes_in = CounterMetricFamily(
            "rocketmq_throughput_in_total", "Message body bytes stored.", labels=labels_in
        )
        for topic, row in sorted(self._metrics.topic_totals().items()):
            msgs_in.add_metric([*common, topic], float(row[0]))
            bytes_in.add_metric([*common, topic], float(row[1]))
        msgs_out = CounterMetricFamily(
            "rocketmq_messages_out_total", "Messages delivered.", labels=labels_out
        )
        bytes_out = CounterMetricFamily(
            "rocketmq_throughput_out_total", "Record bytes delivered.", labels=labels_out
        )
        for (group, topic), grow in sorted(self._metrics.group_gets.items()):
            msgs_out.add_metric([*common, topic, group], float(grow[0]))
            bytes_out.add_metric([*common, topic, group], float(grow[1]))
        yield from (msgs_in, bytes_in, msgs_out, bytes_out)
