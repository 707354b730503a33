"""An unclean election is recorded as such (scenario C-08), through the controller's processor."""

from __future__ import annotations

import asyncio

import structlog

from rocketpy.common.aio import wait_until
from rocketpy.common.clock import ManualClock
from rocketpy.common.codes import ResponseCode
from rocketpy.controller.config import ControllerConfig
from rocketpy.controller.heartbeat import BrokerHeartbeatManager
from rocketpy.controller.pipeline import ControllerPipeline
from rocketpy.controller.processors import ControllerRequestProcessor
from rocketpy.controller.state_machine import ControllerStateMachine
from rocketpy.remoting.protocol.headers.controller import (
    BrokerHeartbeatRequestHeader,
    ElectMasterRequestHeader,
    GetMetaDataResponseHeader,
)
from tests.helpers.controller_node import SoloNode
from tests.helpers.controller_state import BROKER, CLUSTER, addr, group


async def _elect_after_master_death(
    *, unclean: bool
) -> tuple[int, int | None, list[dict[str, object]]]:
    """Master 1 of {1, 2, 3} with SyncStateSet {1} is dead (no heartbeat); 2 and 3 heart-beat
    (3 has the larger maxOffset). Run one controller-triggered election through the processor
    and return its code, the new master and the captured log events."""
    manager = group(master=1, unclean=unclean)
    node = SoloNode(ControllerStateMachine(manager))
    pipeline = ControllerPipeline(node)
    node.add_role_listener(pipeline.on_role_change)
    await node.start()
    heartbeats = BrokerHeartbeatManager(ManualClock())
    for broker_id, max_offset in ((2, 50), (3, 80)):
        heartbeats.on_broker_heartbeat(
            BrokerHeartbeatRequestHeader(
                cluster_name=CLUSTER,
                broker_addr=addr(broker_id),
                broker_name=BROKER,
                broker_id=broker_id,
                epoch=1,
                max_offset=max_offset,
            )
        )
    processor = ControllerRequestProcessor(
        pipeline=pipeline,
        manager=manager,
        heartbeats=heartbeats,
        metadata=lambda: GetMetaDataResponseHeader(group="g", is_leader=True),
        config=lambda: ControllerConfig.build({}),
        update_config=lambda values: asyncio.sleep(0),
        on_elected=lambda hdr, body: None,
    )
    try:
        async with asyncio.timeout(5):
            await wait_until(lambda: pipeline.serving, 5)
        with structlog.testing.capture_logs() as logs:
            async with asyncio.timeout(5):
                result = await processor.elect(
                    ElectMasterRequestHeader.of_controller_trigger(BROKER)
                )
    finally:
        await pipeline.close()
    master = result.response.master_broker_id if result.response is not None else None
    return int(result.code), master, list(logs)


async def test_unclean_election_logs_a_data_loss_warning() -> None:
    """C-08: 1. enableElectUncleanMaster; master 1 dead, SyncStateSet {1}, brokers 2 and 3
    alive (3 ahead). 2. Controller-triggered election. Expected: SUCCESS with master 3 and one
    warning that names the election unclean, the broker-set, the new master, the SyncStateSet
    it was not in, and that data may have been lost."""
    code, master, logs = await _elect_after_master_death(unclean=True)
    assert (code, master) == (ResponseCode.SUCCESS, 3)
    warnings = [e for e in logs if e["log_level"] == "warning" and "unclean" in str(e["event"])]
    assert len(warnings) == 1, logs
    w = warnings[0]
    assert "data may have been lost" in str(w["event"])
    assert (w["broker"], w["new_master"], w["sync_state_set"]) == (BROKER, 3, [1])


async def test_clean_election_logs_no_unclean_warning() -> None:
    """C-08 counterpart (C-07): 1. the same deaths with unclean election off: only dead 1 is in
    the SyncStateSet, so nobody qualifies. Expected: 2004, no master, no "unclean" log line."""
    code, master, logs = await _elect_after_master_death(unclean=False)
    assert (code, master) == (ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE, None)
    assert not [e for e in logs if "unclean" in str(e["event"])], logs
