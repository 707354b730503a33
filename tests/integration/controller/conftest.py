"""Fixtures: the controller's processors on a loopback port over a one-member Raft stand-in."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from rocketpy.common.clock import SYSTEM_CLOCK
from rocketpy.controller.config import ControllerConfig
from rocketpy.controller.heartbeat import BrokerHeartbeatManager
from rocketpy.controller.pipeline import ControllerPipeline
from rocketpy.controller.processors import ControllerRequestProcessor
from rocketpy.controller.state.replicas_info import ReplicasInfoManager
from rocketpy.controller.state_machine import ControllerStateMachine
from rocketpy.remoting.protocol.headers.controller import (
    ElectMasterResponseHeader,
    GetMetaDataResponseHeader,
)
from rocketpy.remoting.transport.client import RemotingClient
from rocketpy.remoting.transport.dispatch import ProcessorRegistry
from rocketpy.remoting.transport.server import RemotingServer
from tests.helpers.controller_node import SoloNode

PEERS = "n0-127.0.0.1:9877"


@dataclass
class Solo:
    """Processors + pipeline + SoloNode behind a real server."""

    node: SoloNode
    manager: ReplicasInfoManager
    heartbeats: BrokerHeartbeatManager
    server: RemotingServer
    config: ControllerConfig
    elected: list[ElectMasterResponseHeader] = field(default_factory=list)

    @property
    def addr(self) -> str:
        return self.server.address


@pytest.fixture
async def solo() -> AsyncIterator[Solo]:
    config = ControllerConfig.build(
        {"controllerDLegerPeers": PEERS, "controllerDLegerSelfId": "n0"}
    )
    manager = ReplicasInfoManager()
    node = SoloNode(ControllerStateMachine(manager))
    heartbeats = BrokerHeartbeatManager(SYSTEM_CLOCK)
    pipeline = ControllerPipeline(node)
    node.add_role_listener(pipeline.on_role_change)
    registry = ProcessorRegistry()
    server = RemotingServer(registry, port=0, name="controller-test")
    holder = Solo(node, manager, heartbeats, server, config)

    async def update(values: dict[str, str]) -> None:
        holder.config = holder.config.with_updates(values)

    ControllerRequestProcessor(
        pipeline=pipeline,
        manager=manager,
        heartbeats=heartbeats,
        metadata=lambda: GetMetaDataResponseHeader(
            group="g",
            controller_leader_id=node.leader_id,
            controller_leader_address=server.address if node.is_leader else None,
            is_leader=pipeline.serving,
            peers=f"n0:{server.address};",
        ),
        config=lambda: holder.config,
        update_config=update,
        on_elected=lambda hdr, body: holder.elected.append(hdr),
    ).register(registry)
    await server.start()
    yield holder
    await pipeline.close()
    await server.stop()


@pytest.fixture
async def client() -> AsyncIterator[RemotingClient]:
    c = RemotingClient(name="fake-broker")
    yield c
    await c.close()
