"""The proxy's metrics: per-RPC counts and latencies, the metrics dumps and Prometheus.

Owns: :class:`ProxyMetrics` (one latency histogram per (RPC method, response code), bumped by
the gRPC server after each call: a dict lookup, a ``bisect`` and three adds), the dump record
(:func:`build_dump_record`, schema :data:`DUMP_VERSION`), :class:`ProxyCollector` (the
Prometheus families, read at scrape time) and :class:`ProxyMetricsManager` (starts the dump
service when ``metricsDumpInterval`` > 0 and, with ``metricsExporterType=PROM``, the endpoint on
``metricsPromExporterHost:metricsPromExporterPort``). Must not: import the broker, or do I/O on
the call path. Mirrors upstream's ``ProxyMetricsManager``/``ProxyMetricsConstant``
(``rocketmq_proxy_up`` with ``proxy_mode``; common labels ``cluster``, ``node_type=proxy``,
``node_id``) and the ``rocketmq_rpc_latency`` histogram (milliseconds, ``protocol_type=grpc``,
``rpc_method``, ``response_code``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final

from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric

from rocketpy.common.histogram import Histogram, prom_buckets
from rocketpy.common.metrics_dump import MetricsDumpService
from rocketpy.common.prom_exporter import PromExporter
from rocketpy.proxy.config import ProxyConfig

#: Version of the proxy dump record layout; bump on any incompatible change.
DUMP_VERSION: Final = 1
#: RPC latency upper bounds in milliseconds (``le``), the broker's send-latency bounds.
RPC_LATENCY_BOUNDS_MS: Final[tuple[float, ...]] = (
    0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0, 5000.0, 10000.0,
)  # fmt: skip
_COMMON: Final = ("cluster", "node_type", "node_id")
PROTOCOL_GRPC: Final = "grpc"


class ProxyMetrics:
    """Per-RPC latency histograms (event-loop owned)."""

    def __init__(self) -> None:
        """Empty counters."""
        #: (rpc method, response code name) -> latency histogram since boot.
        self.rpcs: dict[tuple[str, str], Histogram] = {}

    def observe(self, method: str, code: str, elapsed_ms: float) -> None:
        """Count one finished call of ``method`` answered with ``code``."""
        key = (method, code)
        hist = self.rpcs.get(key)
        if hist is None:
            hist = self.rpcs[key] = Histogram(RPC_LATENCY_BOUNDS_MS)
        hist.observe(elapsed_ms)


def build_dump_record(
    *, ts_ms: int, boot_ts_ms: int, config: ProxyConfig, address: str, metrics: ProxyMetrics
) -> dict[str, Any]:
    """One dump record: who the proxy is and, per (method, code), the cumulative call count,
    the latency sum and max and the histogram bucket counts (``le`` bounds in ms)."""
    return {
        "v": DUMP_VERSION,
        "ts": ts_ms,
        "kind": "proxy",
        "node": {
            "cluster": config.proxy_cluster_name,
            "proxyName": config.proxy_name,
            "proxyMode": config.proxy_mode.lower(),
            "addr": address,
            "bootTs": boot_ts_ms,
        },
        "rpcLatencyBoundsMs": list(RPC_LATENCY_BOUNDS_MS),
        "rpc": [
            {
                "protocol": PROTOCOL_GRPC,
                "method": method,
                "code": code,
                "count": sum(hist.counts),
                "sumMs": round(hist.sum, 3),
                "maxMs": round(hist.max, 3),
                "buckets": list(hist.counts),
            }
            for (method, code), hist in sorted(metrics.rpcs.items())
        ],
    }


class ProxyCollector:
    """``rocketmq_proxy_up`` and ``rocketmq_rpc_latency`` built from the live counters."""

    def __init__(self, config: ProxyConfig, metrics: ProxyMetrics) -> None:
        """Args: the proxy's settings (labels) and its counters."""
        self._config = config
        self._metrics = metrics

    def collect(self) -> Iterator[Metric]:
        """The families, as ``prometheus_client`` asks for them."""
        cfg = self._config
        common = [cfg.proxy_cluster_name, "proxy", cfg.proxy_name]
        up = GaugeMetricFamily("rocketmq_proxy_up", "proxy status", labels=[*_COMMON, "proxy_mode"])
        up.add_metric([*common, cfg.proxy_mode.lower()], 1)
        yield up
        latency = HistogramMetricFamily(
            "rocketmq_rpc_latency",
            "The rpc latency in milliseconds, per gRPC method and response code.",
            labels=[*_COMMON, "protocol_type", "rpc_method", "response_code"],
        )
        for (method, code), hist in sorted(self._metrics.rpcs.items()):
            latency.add_metric([*common, PROTOCOL_GRPC, method, code], prom_buckets(hist), hist.sum)
        yield latency


class ProxyMetricsManager:
    """The proxy's metrics dumps and Prometheus exporter (``start``/``stop`` like a service)."""

    def __init__(
        self,
        config: ProxyConfig,
        metrics: ProxyMetrics,
        *,
        address: Callable[[], str],
        default_dump_dir: Path,
    ) -> None:
        """Args: settings; counters; ``address`` the bound gRPC ``host:port``;
        ``default_dump_dir`` when ``metricsDumpDir`` is blank.

        Raises:
            ConfigError: a bad dump bound.
        """
        self._config = config
        self._metrics = metrics
        self._address = address
        self._boot_ts_ms = int(time.time() * 1000)
        self.dump: MetricsDumpService | None = None
        if config.metrics_dump_interval_ms > 0:
            directory = Path(config.metrics_dump_dir) if config.metrics_dump_dir else None
            self.dump = MetricsDumpService(
                self.dump_record,
                directory=directory or default_dump_dir,
                prefix=f"proxy-{config.proxy_name}-{config.proxy_mode.lower()}",
                interval_ms=config.metrics_dump_interval_ms,
                max_file_bytes=config.metrics_dump_file_max_bytes,
                max_files=config.metrics_dump_file_max_count,
                name="proxy",
            )
        self.prom: PromExporter | None = None
        if config.metrics_exporter_type.upper() == "PROM":
            self.prom = PromExporter(
                ProxyCollector(config, metrics),
                host=config.metrics_prom_exporter_host or config.bind_address,
                port=config.metrics_prom_exporter_port,
            )

    def dump_record(self) -> dict[str, Any]:
        """One dump record built now (event loop)."""
        return build_dump_record(
            ts_ms=int(time.time() * 1000), boot_ts_ms=self._boot_ts_ms, config=self._config,
            address=self._address(), metrics=self._metrics,
        )  # fmt: skip

    async def start(self) -> None:
        """Start the configured outputs.

        Raises:
            OSError: the Prometheus port cannot be bound.
        """
        if self.dump is not None:
            await self.dump.start()
        if self.prom is not None:
            await self.prom.start()

    async def stop(self) -> None:
        """Stop the outputs (the dump writes a last record). Idempotent."""
        if self.prom is not None:
            await self.prom.stop()
        if self.dump is not None:
            await self.dump.stop()
