"""Builders for controller state-machine tests: broker-sets made only through committed events,
and a decide -> commit -> apply helper that also checks that deciding never mutates."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from rocketpy.controller.state.elect_policy import BrokerLiveInfo, LiveBrokers
from rocketpy.controller.state.events import (
    AlterSyncStateSetEvent,
    ApplyBrokerIdEvent,
    ElectMasterEvent,
)
from rocketpy.controller.state.replicas_info import ControllerResult, ReplicasInfoManager
from rocketpy.controller.state.snapshot import encode_state

CLUSTER = "DefaultCluster"
BROKER = "broker-a"
H = TypeVar("H")


def addr(broker_id: int) -> str:
    """The remoting address of replica ``broker_id`` in these tests."""
    return f"10.0.0.{broker_id}:10911"


def code(broker_id: int, millis: int = 1700000000000) -> str:
    """A register check code ``<addr>;<millis>``."""
    return f"{addr(broker_id)};{millis}"


def alive(*ids: int, **facts: tuple[int, int, int]) -> LiveBrokers:
    """Liveness of ``broker-a``: ``ids`` alive; ``facts`` = {"b2": (epoch, maxOffset, prio)}."""
    infos = []
    for i in ids:
        epoch, offset, prio = facts.get(f"b{i}", (-1, -1, 2**31 - 1))
        infos.append(
            BrokerLiveInfo(
                broker_id=i,
                broker_addr=addr(i),
                epoch=epoch,
                max_offset=offset,
                election_priority=prio,
            )
        )
    return LiveBrokers.of(CLUSTER, BROKER, infos)


def group(
    ids: tuple[int, ...] = (1, 2, 3),
    *,
    master: int | None = None,
    sync: frozenset[int] | None = None,
    unclean: bool = False,
) -> ReplicasInfoManager:
    """``broker-a`` with replicas ``ids``; if ``master``: elected (epoch 1), then the
    SyncStateSet altered to ``sync`` (epoch 2) when given."""
    m = ReplicasInfoManager(enable_elect_unclean_master=unclean)
    for i in ids:
        m.apply(
            ApplyBrokerIdEvent(
                cluster_name=CLUSTER,
                broker_name=BROKER,
                broker_address=addr(i),
                register_check_code=code(i),
                new_broker_id=i,
            )
        )
    if master is not None:
        m.apply(
            ElectMasterEvent(
                new_master_elected=True, broker_name=BROKER, new_master_broker_id=master
            )
        )
        if sync is not None:
            m.apply(AlterSyncStateSetEvent(broker_name=BROKER, new_sync_state_set=sync))
    return m


def decide(
    manager: ReplicasInfoManager, request: Callable[[], ControllerResult[H]]
) -> ControllerResult[H]:
    """Run one request method; fail if it changed the state (decide must not mutate)."""
    before = encode_state(manager)
    result = request()
    assert encode_state(manager) == before, "a request method mutated the state"
    return result


def commit(
    manager: ReplicasInfoManager, request: Callable[[], ControllerResult[H]]
) -> ControllerResult[H]:
    """Decide, then apply the result's events (what the leader does after the Raft commit)."""
    result = decide(manager, request)
    manager.apply_all(result.events)
    return result
