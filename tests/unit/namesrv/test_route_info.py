"""RouteInfoManager rules (namesrv.md sections 3-5, 7), stepped by hand with explicit times."""

from __future__ import annotations

import pytest

from rocketpy.namesrv.route_info import (
    PERM_WRITE,
    RegisterRejected,
    RegisterRequest,
    RouteInfoManager,
    UnregisterTarget,
)
from rocketpy.remoting.protocol.body.config_shapes import DataVersion, TopicConfig

CH_MASTER = object()
CH_SLAVE = object()


def _req(
    broker_id: int,
    addr: str,
    *,
    topics: tuple[str, ...] = ("T", "U"),
    counter: int = 1,
    acting: bool = False,
    state: int = 0,
    timeout_ms: int | None = None,
) -> RegisterRequest:
    return RegisterRequest(
        cluster="C",
        broker_addr=addr,
        broker_name="broker-a",
        broker_id=broker_id,
        ha_server_addr=addr.replace(":10911", ":10912"),
        topic_configs={
            t: TopicConfig(topic_name=t, read_queue_nums=4, write_queue_nums=4) for t in topics
        },
        data_version=DataVersion(timestamp=1, counter=counter, state_version=state),
        enable_acting_master=acting,
        heartbeat_timeout_ms=timeout_ms,
    )


def test_route_info_register_master_and_slave() -> None:
    """1. Master registers topics. 2. Slave registers. 3. Slave gets master's HA address;
    routes come from the master only."""
    routes = RouteInfoManager()
    assert routes.register_broker(_req(0, "m:10911"), CH_MASTER, 0).master_addr is None
    result = routes.register_broker(
        _req(1, "s:10911", topics=("T", "U", "SLAVE_ONLY")), CH_SLAVE, 0
    )
    assert (result.master_addr, result.ha_server_addr) == ("m:10911", "m:10912")
    route = routes.pickup_topic_route("T", support_acting_master=False)
    assert route is not None
    assert route.broker_datas[0].broker_addrs == {0: "m:10911", 1: "s:10911"}
    assert routes.pickup_topic_route("SLAVE_ONLY", support_acting_master=False) is None


def test_route_info_unknown_topic_is_none() -> None:
    """A topic no broker registered has no route."""
    assert RouteInfoManager().pickup_topic_route("X", support_acting_master=False) is None


def test_route_info_single_topic_first_registration_rejected() -> None:
    """Step 4: a one-topic registration of an unknown broker id is refused."""
    with pytest.raises(RegisterRejected):
        RouteInfoManager().register_broker(_req(0, "m:10911", topics=("T",)), CH_MASTER, 0)


def test_route_info_promoted_slave_replaces_old_id() -> None:
    """Step 2: a slave re-registering as id 0 with the same address drops its old id."""
    routes = RouteInfoManager()
    routes.register_broker(_req(1, "s:10911"), CH_SLAVE, 0)
    routes.register_broker(_req(0, "s:10911"), CH_SLAVE, 0)
    assert routes.broker_addr_table["broker-a"].broker_addrs == {0: "s:10911"}


def test_n_stale_master_cannot_steal_id_zero() -> None:
    """Step 3: a broker with a lower stateVersion cannot take id 0 from a newer master."""
    routes = RouteInfoManager()
    routes.register_broker(_req(0, "new:10911", state=5), CH_MASTER, 0)
    result = routes.register_broker(_req(0, "old:10911", state=3), CH_SLAVE, 0)
    assert result.master_addr is None
    assert routes.broker_addr_table["broker-a"].broker_addrs == {0: "new:10911"}


def test_route_info_expiry_uses_broker_timeout() -> None:
    """Section 4: an entry expires after its heartbeat timeout unless refreshed."""
    routes = RouteInfoManager()
    routes.register_broker(_req(0, "m:10911", timeout_ms=1000), CH_MASTER, 0)
    assert routes.expired(1000) == []
    assert routes.update_live("C", "m:10911", 900)
    expired = routes.expired(2000)
    assert [t.addr for t, _ in expired] == ["m:10911"]
    assert expired[0][1] is CH_MASTER
    routes.unregister_broker(expired[0][0])
    assert routes.pickup_topic_route("T", support_acting_master=False) is None
    assert routes.cluster_addr_table == {}


def test_route_info_channel_close_targets() -> None:
    """A closed channel maps back to the broker registered on it."""
    routes = RouteInfoManager()
    routes.register_broker(_req(0, "m:10911"), CH_MASTER, 0)
    assert routes.targets_for_channel(CH_MASTER) == [
        UnregisterTarget("C", "m:10911", "broker-a", 0)
    ]
    assert routes.targets_for_channel(CH_SLAVE) == []


def test_n_acting_master_route_presents_min_slave_read_only() -> None:
    """Section 5 step 4: master gone, acting master on -> the min-id slave shows as id 0,
    and the queues lost PERM_WRITE."""
    routes = RouteInfoManager(notify_min_broker_id_changed=True)
    routes.register_broker(_req(0, "m:10911", acting=True), CH_MASTER, 0)
    routes.register_broker(_req(1, "s1:10911", acting=True), CH_SLAVE, 0)
    routes.register_broker(_req(2, "s2:10911", acting=True), object(), 0)
    change = routes.unregister_broker(UnregisterTarget("C", "m:10911", "broker-a", 0))
    assert change is not None
    assert (change.min_broker_id, change.min_broker_addr, change.offline_broker_addr) == (
        1,
        "s1:10911",
        "m:10911",
    )
    route = routes.pickup_topic_route("T", support_acting_master=True)
    assert route is not None
    assert route.broker_datas[0].broker_addrs == {0: "s1:10911", 2: "s2:10911"}
    assert route.queue_datas[0].perm & PERM_WRITE == 0
    plain = routes.pickup_topic_route("T", support_acting_master=False)
    assert plain is not None
    assert plain.broker_datas[0].broker_addrs == {1: "s1:10911", 2: "s2:10911"}


def test_route_info_topic_operations() -> None:
    """Section 7: lists by cluster, perm wipe/add, delete with and without cluster."""
    routes = RouteInfoManager()
    routes.register_broker(_req(0, "m:10911"), CH_MASTER, 0)
    assert sorted(routes.topics_by_cluster("C")) == ["T", "U"]
    assert routes.topics_by_cluster("other") == []
    assert routes.change_write_perm("broker-a", add=False) == 2
    assert all(q.perm & PERM_WRITE == 0 for q in routes.topic_queue_table["T"].values())
    assert routes.change_write_perm("broker-a", add=True) == 2
    routes.delete_topic("T", "C")
    assert "T" not in routes.topic_queue_table
    routes.delete_topic("U", None)
    assert routes.all_topics() == []
    topics, addr = routes.system_topics()
    assert (sorted(topics), addr) == (["C", "broker-a"], "m:10911")
