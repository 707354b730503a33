"""Prometheus exposition of the broker's metrics (``metricsExporterType=PROM``).

Owns: :class:`BrokerCollector` (a ``prometheus_client`` collector that reads
:class:`~rocketpy.broker.metrics.BrokerMetrics`, the store offsets and consumer lag at scrape
time, so the send path pays nothing for Prometheus) and :class:`PromExporter`, a minimal HTTP/1.1
server on the event loop answering ``GET /metrics`` (any path) with the text format. Serving on
the loop means a scrape reads the counters between two loop steps, with no thread racing the
processors. Must not: count anything.

Names and labels follow apache/rocketmq 5.x ``BrokerMetricsConstant``: common labels
``cluster``, ``node_type`` (``broker``), ``node_id`` (the broker name, as upstream's
BrokerMetricsManager sets it); ``topic`` and ``consumer_group`` where upstream has them.
``rocketmq_rpc_latency`` is in milliseconds with upstream's ``protocol_type``/``request_code``
labels; rocketpy only measures the send family (``request_code="send_message"``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator
from typing import Final

import structlog
from prometheus_client.core import (
    CollectorRegistry,
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import generate_latest

from rocketpy.broker.metrics import BrokerMetrics, ConsumerLag, Histogram, NodeIdentity
from rocketpy.broker.store_api import StoreOffsets

log = structlog.get_logger(__name__)

_COMMON: Final = ("cluster", "node_type", "node_id")
_HEAD_LIMIT: Final = 8192
_READ_TIMEOUT_S: Final = 5.0
#: The classic text format every Prometheus version scrapes (our names need no escaping).
CONTENT_TYPE: Final = b"text/plain; version=0.0.4; charset=utf-8"


def _buckets(hist: Histogram) -> list[tuple[str, float]]:
    out: list[tuple[str, float]] = []
    acc = 0
    for bound, count in zip(hist.bounds, hist.counts, strict=False):
        acc += count
        out.append((repr(float(bound)), float(acc)))
    out.append(("+Inf", float(acc + hist.counts[-1])))
    return out


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
            size.add_metric([*common, topic], _buckets(hist), hist.sum)
        yield size
        latency = HistogramMetricFamily(
            "rocketmq_rpc_latency",
            "Send request latency in milliseconds.",
            labels=[*_COMMON, "protocol_type", "request_code"],
        )
        hist = self._metrics.send_latency
        latency.add_metric([*common, "remoting", "send_message"], _buckets(hist), hist.sum)
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


class PromExporter:
    """``GET /metrics`` over HTTP/1.1 on the event loop; one response per connection."""

    def __init__(self, collector: BrokerCollector, *, host: str, port: int) -> None:
        """Args: ``collector`` to expose; ``host``/``port`` to bind (0: any free port)."""
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(collector)
        self._host = host
        self._port = port
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def port(self) -> int:
        """The bound port (the configured one before :meth:`start`)."""
        if self._server is None or not self._server.sockets:
            return self._port
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self) -> None:
        """Bind and serve.

        Raises:
            OSError: the address cannot be bound.
        """
        self._server = await asyncio.start_server(
            self._handle, self._host, self._port, limit=_HEAD_LIMIT
        )
        log.info("metrics prometheus exporter started", host=self._host, port=self.port)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            async with asyncio.timeout(_READ_TIMEOUT_S):
                head = await reader.readuntil(b"\r\n\r\n")
                method = head.split(b" ", 1)[0]
                if method in (b"GET", b"HEAD"):
                    body = generate_latest(self.registry)
                    status = b"200 OK"
                    ctype = CONTENT_TYPE
                else:
                    body, status, ctype = (
                        b"method not allowed\n",
                        b"405 Method Not Allowed",
                        b"text/plain",
                    )
                writer.write(
                    b"HTTP/1.1 "
                    + status
                    + b"\r\nContent-Type: "
                    + ctype
                    + b"\r\nContent-Length: "
                    + str(len(body)).encode()
                    + b"\r\nConnection: close\r\n\r\n"
                    + (body if method != b"HEAD" else b"")
                )
                await writer.drain()
        except (TimeoutError, OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass  # a slow, broken or oversized request: just close the connection
        finally:
            self._writers.discard(writer)
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    async def stop(self) -> None:
        """Stop listening and close open connections. Idempotent."""
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        for writer in list(self._writers):
            writer.close()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(5.0):
                await server.wait_closed()
