"""BrokerMetricsManager: starts and stops the broker's metric outputs -- the metrics dumps and,
with ``metricsExporterType=PROM``, the Prometheus endpoint -- and builds the dump record.

Owns: the dump service and the exporter, the node identity and role-change events, and the
consumer-lag computation both outputs share. Must not: count anything itself (the processors
bump :class:`~rocketpy.broker.metrics.BrokerMetrics`). Mirrors ``BrokerMetricsManager`` of
apache/rocketmq 5.x (which exporter to start, the common labels).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog

from rocketpy.broker.config import MetricsExporterType
from rocketpy.broker.metrics import ConsumerLag, NodeIdentity, build_dump_record
from rocketpy.broker.metrics_prom import BrokerCollector
from rocketpy.broker.runtime import BrokerRuntime
from rocketpy.common.metrics_dump import MetricsDumpService
from rocketpy.common.prom_exporter import PromExporter
from rocketpy.remoting.protocol.body.config_shapes import TOPIC_GROUP_SEPARATOR

log = structlog.get_logger(__name__)


def consumer_lags(rt: BrokerRuntime) -> list[ConsumerLag]:
    """Per (group, topic): the sum over queues of ``maxOffset - committed offset`` (>= 0)."""
    out: list[ConsumerLag] = []
    for key, queues in rt.offsets.offset_table.items():
        topic, _, group = key.rpartition(TOPIC_GROUP_SEPARATOR)
        lag = sum(
            max(0, rt.store.max_offset_in_queue(topic, qid) - off) for qid, off in queues.items()
        )
        out.append(ConsumerLag(group=group, topic=topic, lag_messages=lag))
    return out


class BrokerMetricsManager:
    """The broker's metrics dumps and Prometheus exporter."""

    def __init__(self, rt: BrokerRuntime, *, store_root: Path, addr: Callable[[], str]) -> None:
        """Args: ``rt`` the broker state; ``store_root`` for the default dump directory;
        ``addr`` this broker's ``ip:port`` once bound.

        Raises:
            ConfigError: a bad dump bound.
        """
        self._rt = rt
        self._addr = addr
        self.master_epoch: int | None = None
        cfg = rt.config
        self.dump: MetricsDumpService | None = None
        if cfg.metrics_dump_interval_ms > 0:
            directory = (
                Path(cfg.metrics_dump_dir) if cfg.metrics_dump_dir else store_root / "metrics"
            )
            self.dump = MetricsDumpService(
                self.dump_record,
                directory=directory,
                prefix=f"broker-{cfg.broker_name}-{cfg.broker_id}",
                interval_ms=cfg.metrics_dump_interval_ms,
                max_file_bytes=cfg.metrics_dump_file_max_bytes,
                max_files=cfg.metrics_dump_file_max_count,
                name=cfg.broker_name,
            )
        self.prom: PromExporter | None = None
        if cfg.metrics_exporter_type == MetricsExporterType.PROM:
            collector = BrokerCollector(
                rt.metrics,
                node=self.node,
                store=rt.store.store_offsets,
                lags=lambda: consumer_lags(rt),
            )
            self.prom = PromExporter(
                collector,
                host=cfg.metrics_prom_exporter_host or cfg.broker_ip1,
                port=cfg.metrics_prom_exporter_port,
            )

    @property
    def role(self) -> str:
        """The broker's role name as records and labels carry it."""
        return str(self._rt.config.broker_role)

    def node(self) -> NodeIdentity:
        """Who this broker is, now."""
        cfg = self._rt.config
        return NodeIdentity(
            cluster=cfg.broker_cluster_name,
            broker_name=cfg.broker_name,
            broker_id=cfg.broker_id,
            role=self.role,
            addr=self._addr(),
            master_epoch=self.master_epoch,
        )

    def dump_record(self) -> dict[str, Any]:
        """One dump record built now (event loop)."""
        rt = self._rt
        now = rt.clock.wall_ms()
        return build_dump_record(
            ts_ms=now,
            boot_ts_ms=rt.stats.boot_timestamp,
            node=self.node(),
            snapshot=rt.metrics.snapshot(now),
            store=rt.store.store_offsets(),
            consumer_lag=consumer_lags(rt),
        )

    async def start(self) -> None:
        """Record the boot role and start the configured outputs."""
        self._rt.metrics.record_role_change(self._rt.clock.wall_ms(), None, self.role, None)
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
