"""ControllerService in-process (one-member group): liveness-driven re-election, role-change
notifications to the brokers, channel close (controller.md sections 7-8, scenario C-14)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from rocketpy.common.aio import wait_until
from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.controller.config import ControllerConfig
from rocketpy.controller.service import ControllerService
from rocketpy.controller.state_machine import ControllerStateMachine
from rocketpy.remoting.protocol.bodies.controller import decode_sync_state_set
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.transport.client import RemotingClient
from rocketpy.remoting.transport.dispatch import ProcessorRegistry, RequestContext
from rocketpy.remoting.transport.server import RemotingServer
from tests.helpers.controller_client import FakeBroker
from tests.helpers.controller_node import SoloNode

pytestmark = pytest.mark.integration


def _solo(config: ControllerConfig, sm: ControllerStateMachine) -> SoloNode:
    return SoloNode(sm)


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[ControllerService]:
    config = ControllerConfig.build(
        {
            "controllerDLegerPeers": "n0-127.0.0.1:0",
            "controllerDLegerSelfId": "n0",
            "controllerStorePath": str(tmp_path / "raft"),
            "configStorePath": str(tmp_path / "controller.properties"),
            "scanNotActiveBrokerInterval": 100,
            "scanInactiveMasterInterval": 100,
            "controllerStartupGraceMs": 0,
        }
    )
    svc = ControllerService(config, node_factory=_solo)
    await svc.start()
    await wait_until(lambda: svc.pipeline.serving, 2)
    yield svc
    await svc.stop()


class BrokerPort:
    """A fake broker's own remoting port, recording NOTIFY_BROKER_ROLE_CHANGED."""

    def __init__(self) -> None:
        self.notified: list[RemotingCommand] = []
        registry = ProcessorRegistry()
        registry.register(RequestCode.NOTIFY_BROKER_ROLE_CHANGED, self._on_notify)
        self.server = RemotingServer(registry, port=0, name="fake-broker")

    async def _on_notify(self, ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
        self.notified.append(req)
        return req.make_response()


@pytest.fixture
async def ports() -> AsyncIterator[list[BrokerPort]]:
    out = [BrokerPort() for _ in range(2)]
    for p in out:
        await p.server.start()
    yield out
    for p in out:
        await p.server.stop()


async def test_c14_master_heartbeat_stops_then_replica_elected_and_notified(
    service: ControllerService, ports: list[BrokerPort]
) -> None:
    """C-14: 1. brokers 1 and 2 (each with its own port) join, heart-beat with a 1 s timeout on
    connections that stay open; 1 is elected and the set becomes {1,2}; 2. broker 1 stops
    heart-beating, broker 2 continues. Expected: within 3 s the controller elects 2
    (masterEpoch 2) by itself and sends NOTIFY_BROKER_ROLE_CHANGED (masterBrokerId 2, epoch 2,
    SyncStateSet {2}) to broker 2's port; broker 1 is not notified (it is not alive)."""
    c1, c2 = RemotingClient(name="b1"), RemotingClient(name="b2")
    try:
        b1 = FakeBroker(c1, 1, ports[0].server.address)
        b2 = FakeBroker(c2, 2, ports[1].server.address)
        await b1.join(service.address)
        await b2.join(service.address)
        await wait_until(lambda: len(service.heartbeats.records()) == 2, 2)
        assert (await b1.elect_me(service.address)).code == ResponseCode.SUCCESS
        assert (await b1.alter(service.address, {1, 2}, 1, 1)).code == ResponseCode.SUCCESS
        await wait_until(lambda: len(ports[0].notified) == 1, 2)  # the first election
        info = service.manager.sync_state_set_info_table["broker-a"]
        started = time.monotonic()
        async with asyncio.TaskGroup() as tg:
            beating = tg.create_task(_keep_beating(b2, service.address))
            await wait_until(lambda: info.master_broker_id == 2, 3.0)
            beating.cancel()
        assert time.monotonic() - started < 3.0
        assert info.master_epoch == 2
        await wait_until(lambda: len(ports[1].notified) == 2, 2)
        note = ports[1].notified[-1]
        assert (note.ext("masterBrokerId"), note.ext("masterEpoch")) == ("2", "2")
        assert decode_sync_state_set(note.body or b"").sync_state_set == {2}
        assert len(ports[0].notified) == 1
    finally:
        await c1.close()
        await c2.close()


async def _keep_beating(broker: FakeBroker, controller: str) -> None:
    """Broker 2's heartbeat sender: every 100 ms until cancelled."""
    while True:
        await broker.heartbeat(controller)
        with contextlib.suppress(TimeoutError):
            await wait_until(lambda: False, 0.1)


async def test_controller_master_channel_close_triggers_election(
    service: ControllerService, ports: list[BrokerPort]
) -> None:
    """1. Brokers 1 and 2 join (10 s heartbeat timeout), 1 is master of {1,2}; 2. broker 1's
    connection closes. Expected: the channel-close event marks 1 inactive at once and 2 is
    elected without waiting for a timeout."""
    c1, c2 = RemotingClient(name="b1"), RemotingClient(name="b2")
    try:
        b1 = FakeBroker(c1, 1, ports[0].server.address)
        b2 = FakeBroker(c2, 2, ports[1].server.address)
        for b in (b1, b2):
            await b.join(service.address)
            await b.heartbeat(service.address, timeout_ms=10_000)
        await wait_until(lambda: len(service.heartbeats.records()) == 2, 2)
        assert (await b1.elect_me(service.address)).code == ResponseCode.SUCCESS
        assert (await b1.alter(service.address, {1, 2}, 1, 1)).code == ResponseCode.SUCCESS
        await c1.close()
        info = service.manager.sync_state_set_info_table["broker-a"]
        await wait_until(lambda: info.master_broker_id == 2, 2)
    finally:
        await c1.close()
        await c2.close()
