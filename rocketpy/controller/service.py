"""ControllerService: one controller node -- Raft node, remoting port, heartbeats, elections.

Owns: wiring (state machine -> Raft node -> pipeline -> processors on one remoting server bound to
this node's peer address, shared with the node's peer RPC codes), the expiry scan of broker
heartbeats and the leader-only scan for dead masters (both trigger controller elections, retried
``electMasterMaxRetryCount`` times), role-change notifications, config updates, the metrics
dumps (``metricsDumpInterval``) and the ordered start/stop. Must not: decide requests
(``controller.state``) or implement Raft (``rocketpy.dledger``). Mirrors ``ControllerManager``
+ the DLedger wiring of ``DLedgerController``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import cast

import structlog

from rocketpy.common.aio import TaskSet, periodic
from rocketpy.common.atomic_file import LatestWinsWriter
from rocketpy.common.clock import SYSTEM_CLOCK, Clock
from rocketpy.common.codes import ResponseCode
from rocketpy.common.metrics_dump import MetricsDumpService
from rocketpy.common.properties import render_properties
from rocketpy.controller.config import ControllerConfig
from rocketpy.controller.heartbeat import BrokerHeartbeatManager, HeartbeatRecord
from rocketpy.controller.metrics import (
    FOLLOWER,
    LEADER,
    ControllerIdentity,
    ControllerMetrics,
    broker_sets,
    build_controller_dump_record,
)
from rocketpy.controller.notifier import RoleChangeNotifier
from rocketpy.controller.pipeline import ControllerPipeline, RaftNodeApi
from rocketpy.controller.processors import ControllerRequestProcessor
from rocketpy.controller.state.replicas_info import ReplicasInfoManager
from rocketpy.controller.state_machine import ControllerStateMachine
from rocketpy.remoting.protocol.frame import FrameLimits
from rocketpy.remoting.protocol.headers.controller import (
    ElectMasterRequestHeader,
    ElectMasterResponseHeader,
    GetMetaDataResponseHeader,
)
from rocketpy.remoting.transport.client import split_address
from rocketpy.remoting.transport.dispatch import Channel, ProcessorRegistry
from rocketpy.remoting.transport.server import RemotingServer

log = structlog.get_logger(__name__)

#: Upstream waits 2 s before the first heartbeat-expiry scan.
FIRST_SCAN_DELAY_MS = 2000
#: Codes after which a controller-triggered election is tried again.
_RETRY_CODES = frozenset({ResponseCode.SYSTEM_ERROR, ResponseCode.SYSTEM_BUSY})

#: Builds this node's Raft member from the config around the state machine
#: (``rocketpy.controller.raft_node.make_raft_node`` in production).
NodeFactory = Callable[[ControllerConfig, ControllerStateMachine], RaftNodeApi]


class ControllerService:
    """A controller node; ``start()`` returns when it listens and its Raft node runs.

    Args:
        config: the validated configuration.
        node_factory: builds the Raft node around the state machine.
        clock: time source of the heartbeat table.
        bind_host: listen on this host instead of the peer entry's host (``0.0.0.0``).
    """

    def __init__(
        self,
        config: ControllerConfig,
        *,
        node_factory: NodeFactory,
        clock: Clock = SYSTEM_CLOCK,
        bind_host: str | None = None,
    ) -> None:
        self._config = config
        # configStorePath is black-listed from updates: one writer serves the daemon's life.
        self._config_writer = LatestWinsWriter(Path(config.config_store_path), None)
        self._clock = clock
        self._boot_ms = clock.wall_ms()
        self.metrics = ControllerMetrics()
        self.manager = ReplicasInfoManager(
            enable_elect_unclean_master=config.enable_elect_unclean_master
        )
        self.state_machine = ControllerStateMachine(self.manager)
        self.heartbeats = BrokerHeartbeatManager(clock, startup_grace_ms=config.grace_ms())
        self.node = node_factory(config, self.state_machine)
        self.pipeline = ControllerPipeline(
            self.node, process_read_event=config.is_process_read_event, on_serving=self._serving
        )
        self.node.add_role_listener(self.pipeline.on_role_change)
        self.node.add_role_listener(self._record_role)
        self.notifier = RoleChangeNotifier()
        self.registry = ProcessorRegistry()
        self.node.register(self.registry)
        self.processor = ControllerRequestProcessor(
            pipeline=self.pipeline,
            manager=self.manager,
            heartbeats=self.heartbeats,
            metadata=self.metadata,
            config=lambda: self._config,
            update_config=self._update_config,
            on_elected=self._on_elected,
            metrics=self.metrics,
            wall_ms=clock.wall_ms,
        )
        self.processor.register(self.registry)
        host, port = split_address(config.self_address())
        self.server = RemotingServer(
            self.registry,
            host=bind_host or host,
            port=port,
            limits=FrameLimits(config.server_frame_max_length),
            idle_timeout_s=float(config.server_channel_max_idle_time_seconds),
            on_channel_closed=self._on_channel_closed,
            name="controller",
        )
        self._tasks = TaskSet("controller")
        self._elections = TaskSet("controller/elect")
        self._electing: set[str] = set()
        self._stop = asyncio.Event()
        self._started = False
        self.dump: MetricsDumpService | None = None
        if config.metrics_dump_interval_ms > 0:
            self.dump = MetricsDumpService(
                self.dump_record,
                directory=config.metrics_dump_path(),
                prefix=f"controller-{config.group()}-{config.controller_dleger_self_id}",
                interval_ms=config.metrics_dump_interval_ms,
                max_file_bytes=config.metrics_dump_file_max_bytes,
                max_files=config.metrics_dump_file_max_count,
                name="controller",
            )

    @property
    def config(self) -> ControllerConfig:
        """The effective configuration (replaced by UPDATE_CONTROLLER_CONFIG)."""
        return self._config

    @property
    def address(self) -> str:
        """``host:port`` this node serves on (its peer address)."""
        return self.server.address

    async def start(self) -> None:
        """Bind the port, start the Raft node, start the scans."""
        await self.server.start()
        await self.node.start()
        scan_ms = self._config.scan_not_active_broker_interval_ms
        first_ms = min(FIRST_SCAN_DELAY_MS, scan_ms)
        master_ms = self._config.scan_inactive_master_interval_ms
        self._tasks.spawn(
            periodic(
                scan_ms / 1000,
                self._scan_not_active,
                stop=self._stop,
                name="controller/scan-not-active",
                initial_delay_s=first_ms / 1000,
            ),
            name="controller/scan-not-active",
        )
        self._tasks.spawn(
            periodic(
                master_ms / 1000,
                self._scan_inactive_master,
                stop=self._stop,
                name="controller/scan-inactive-master",
            ),
            name="controller/scan-inactive-master",
        )
        self.metrics.record_role_change(self._clock.wall_ms(), None, self._role(), self.node.term)
        if self.dump is not None:
            await self.dump.start()
        self._started = True
        log.info(
            "controller started",
            address=self.address,
            node_id=self._config.controller_dleger_self_id,
            group=self._config.group(),
        )

    async def stop(self) -> None:
        """Stop scans and elections, then the Raft node, then the port (idempotent)."""
        if not self._started:
            await self.server.stop()
            return
        self._started = False
        self._stop.set()
        log.info("controller stopping: scans and elections")
        await self._tasks.cancel_all()
        await self._elections.cancel_all()
        if self.dump is not None:
            await self.dump.stop()
        await self.pipeline.close()
        log.info("controller stopping: raft node")
        await self.node.stop()
        log.info("controller stopping: remoting server")
        await self.server.stop()
        await self.notifier.close()
        log.info("controller stopped")

    # -- views ----------------------------------------------------------------------------------

    def metadata(self) -> GetMetaDataResponseHeader:
        """CONTROLLER_GET_METADATA_INFO of this node."""
        peers = "".join(f"{i}:{a};" for i, a in self._config.peers().items())
        return GetMetaDataResponseHeader(
            group=self._config.group(),
            controller_leader_id=self.node.leader_id,
            controller_leader_address=self.node.leader_address,
            is_leader=self.pipeline.serving,
            peers=peers,
        )

    def _role(self) -> str:
        return LEADER if self.node.is_leader else FOLLOWER

    def _record_role(self, is_leader: bool) -> None:
        to_role = LEADER if is_leader else FOLLOWER
        from_role = FOLLOWER if is_leader else LEADER
        self.metrics.record_role_change(self._clock.wall_ms(), from_role, to_role, self.node.term)

    def dump_record(self) -> dict[str, object]:
        """One metrics-dump record of this node, built now."""
        now = self._clock.wall_ms()
        node = ControllerIdentity(
            controller_id=self._config.controller_dleger_self_id,
            group=self._config.group(),
            addr=self.address,
            role=self._role(),
            term=self.node.term,
            leader_id=self.node.leader_id,
        )
        sets = broker_sets(
            self.manager.sync_state_set_info_table.values(), self.manager.replica_info_table
        )
        return build_controller_dump_record(
            ts_ms=now,
            boot_ts_ms=self._boot_ms,
            node=node,
            snapshot=self.metrics.snapshot(now),
            sets=sets,
        )

    # -- liveness -------------------------------------------------------------------------------

    def _serving(self, serving: bool) -> None:
        log.info("controller leader state changed", serving=serving, term=self.node.term)
        if serving:
            self.heartbeats.hold_off()

    async def _scan_not_active(self) -> None:
        for record in self.heartbeats.scan_not_active():
            log.warning(
                "The broker channel expired",
                cluster=record.cluster_name,
                broker=record.broker_name,
                broker_id=record.info.broker_id,
                addr=record.info.broker_addr,
            )
            if record.channel is not None:
                # The table stores the Channel the heartbeat arrived on.
                cast(Channel, record.channel).close()
            self._on_broker_inactive(record)

    def _on_channel_closed(self, channel: Channel) -> None:
        record = self.heartbeats.on_channel_closed(cast(Hashable, channel))
        if record is not None:
            self._on_broker_inactive(record)

    def _on_broker_inactive(self, record: HeartbeatRecord) -> None:
        """``onBrokerInactive``: the leader re-elects if the dead broker was the master."""
        name = record.broker_name
        log.info(
            "broker inactive",
            cluster=record.cluster_name,
            broker=name,
            broker_id=record.info.broker_id,
        )
        if not self.pipeline.serving or not self.heartbeats.is_warmed_up():
            return  # a fresh leader's table may be stale: its inactive-master scan decides
        info = self.manager.sync_state_set_info_table.get(name)
        if info is not None and info.master_broker_id == record.info.broker_id:
            self.trigger_election(name)

    async def _scan_inactive_master(self) -> None:
        if not self.pipeline.serving or not self.heartbeats.is_warmed_up():
            return
        for name in self.manager.scan_need_reelect_broker_sets(self.heartbeats):
            log.warning("The master of the broker-set is inactive, re-elect", broker=name)
            self.trigger_election(name)

    def trigger_election(self, broker_name: str) -> None:
        """Start a controller-triggered election for ``broker_name`` unless one runs."""
        if broker_name in self._electing:
            return
        self._electing.add(broker_name)
        self._elections.spawn(self._elect_with_retry(broker_name), name=f"elect/{broker_name}")

    async def _elect_with_retry(self, broker_name: str) -> None:
        # Decided: retry only when the attempt itself failed (not committed, queue full); a
        # decision (SUCCESS, 2004 master cleared, 2011, 2012, not leader) ends the loop, so a
        # broker-set with nobody alive gets one masterEpoch bump, not one per retry.
        header = ElectMasterRequestHeader.of_controller_trigger(broker_name)
        try:
            for attempt in range(self._config.elect_master_max_retry_count):
                result = await self.processor.elect(header)
                log.info(
                    "controller triggered election",
                    broker=broker_name,
                    attempt=attempt + 1,
                    code=int(result.code),
                    remark=result.remark,
                )
                if result.code not in _RETRY_CODES:
                    return
        finally:
            self._electing.discard(broker_name)

    def _on_elected(self, header: ElectMasterResponseHeader, body: bytes | None) -> None:
        if self._config.notify_broker_role_changed:
            self.notifier.notify(header, body, self.heartbeats.is_alive)

    # -- config ---------------------------------------------------------------------------------

    async def _update_config(self, values: dict[str, str]) -> None:
        self._config = self._config.with_updates(values)
        self.manager.enable_elect_unclean_master = self._config.enable_elect_unclean_master
        self.pipeline.process_read_event = self._config.is_process_read_event
        text = render_properties(self._config.to_properties())
        # Concurrent updates render in order on the loop but write on executor threads: a
        # plain write per update could land an older rendering last (the stored file then
        # disagreed with GET_CONTROLLER_CONFIG after 200 concurrent updates).
        await self._config_writer.write(text.encode("utf-8"))
