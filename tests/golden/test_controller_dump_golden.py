"""The controller's metrics-dump record layout (version 1), pinned by a golden JSON file.

``metrics_dump/controller_record_v1.json`` was produced by the scenario below and reviewed field
by field against analytics/README.md ("Controller records"); a change to it is a schema change
(bump ``CONTROLLER_DUMP_VERSION``, update the README and the analytics job).
"""

from __future__ import annotations

import json
from pathlib import Path

from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.controller.metrics import (
    CONTROLLER_DUMP_VERSION,
    ControllerIdentity,
    ControllerMetrics,
    broker_sets,
    build_controller_dump_record,
)
from rocketpy.controller.state.sync_state import BrokerReplicaInfo, SyncStateInfo

GOLDEN = Path(__file__).parent / "metrics_dump" / "controller_record_v1.json"


def _record() -> dict[str, object]:
    m = ControllerMetrics()
    m.record_role_change(1_700_000_000_100, None, "follower", 0)
    m.record_request(RequestCode.BROKER_HEARTBEAT)
    m.snapshot(1_700_000_000_000)
    m.record_role_change(1_700_000_001_000, "follower", "leader", 3)
    for _ in range(3):
        m.record_request(RequestCode.BROKER_HEARTBEAT)
    m.record_request(RequestCode.CONTROLLER_ELECT_MASTER)
    m.record_election(
        1_700_000_002_000,
        cluster="DefaultCluster",
        broker_name="broker-a",
        trigger_broker_id=1,
        code=ResponseCode.SUCCESS,
        master_broker_id=1,
        master_epoch=1,
    )
    m.record_election(
        1_700_000_003_000,
        cluster=None,
        broker_name="broker-x",
        trigger_broker_id=None,
        code=ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
        master_broker_id=None,
        master_epoch=None,
    )
    replicas = BrokerReplicaInfo("DefaultCluster", "broker-a")
    replicas.add_broker(1, "127.0.0.1:10911", "127.0.0.1:10911;1")
    replicas.add_broker(2, "127.0.0.1:10921", "127.0.0.1:10921;1")
    state = SyncStateInfo("DefaultCluster", "broker-a")
    state.update_master_info(1)
    state.update_sync_state_set_info(frozenset({1, 2}))
    return build_controller_dump_record(
        ts_ms=1_700_000_010_000,
        boot_ts_ms=1_699_999_990_000,
        node=ControllerIdentity(
            controller_id="n0",
            group="group1",
            addr="127.0.0.1:9878",
            role="leader",
            term=3,
            leader_id="n0",
        ),
        snapshot=m.snapshot(1_700_000_010_000),
        sets=broker_sets([state], {"broker-a": replicas}),
    )


def test_controller_dump_record_matches_golden() -> None:
    """1. Build a controller record from a fixed scenario (two intervals: heartbeats, a role
    change to leader, one successful and one refused election, one broker-set of two).
    Expected: it equals the golden JSON exactly and carries version 1; the deltas count only the
    second interval (3 heartbeats of 4)."""
    record = json.loads(json.dumps(_record()))
    assert record == json.loads(GOLDEN.read_text())
    assert record["version"] == CONTROLLER_DUMP_VERSION == 1
