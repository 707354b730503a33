"""Controller events (msgpack), state snapshots (C-18), the election policy table, the typed
controller headers (extFields names) and the JSON bodies (fastjson shapes)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketpy.common.errors import CodecError
from rocketpy.controller.state.elect_policy import (
    NOBODY_ALIVE,
    BrokerLiveInfo,
    DefaultElectPolicy,
    LiveBrokers,
)
from rocketpy.controller.state.events import (
    AlterSyncStateSetEvent,
    ApplyBrokerIdEvent,
    CleanBrokerDataEvent,
    ElectMasterEvent,
    Event,
    ReadEvent,
    UpdateBrokerAddressEvent,
    decode_events,
    encode_events,
)
from rocketpy.controller.state.replicas_info import ReplicasInfoManager
from rocketpy.controller.state.snapshot import encode_state, restore_state
from rocketpy.remoting.protocol.bodies.controller import (
    BrokerMemberGroup,
    BrokerReplicasInfo,
    ElectMasterResponseBody,
    ReplicaIdentity,
    ReplicasInfo,
    SyncStateSet,
    decode_broker_names,
    decode_broker_replicas_info,
    decode_elect_master_body,
    decode_sync_state_set,
    encode_body,
    encode_broker_names,
)
from rocketpy.remoting.protocol.headers.base import MissingHeaderField, from_ext, to_ext
from rocketpy.remoting.protocol.headers.controller import (
    AlterSyncStateSetRequestHeader,
    BrokerHeartbeatRequestHeader,
    CleanControllerBrokerDataRequestHeader,
    ElectMasterRequestHeader,
    GetMetaDataResponseHeader,
    RegisterBrokerToControllerResponseHeader,
)
from tests.helpers.controller_state import BROKER, CLUSTER, addr, code

# -- events ------------------------------------------------------------------------------------

_ids = st.frozensets(st.integers(min_value=0, max_value=2**40), max_size=5)
_names = st.sampled_from(["broker-a", "broker-b", "b-\u00e9"])
_events = st.one_of(
    st.builds(AlterSyncStateSetEvent, broker_name=_names, new_sync_state_set=_ids),
    st.builds(
        ApplyBrokerIdEvent,
        cluster_name=_names,
        broker_name=_names,
        broker_address=st.text(max_size=20),
        register_check_code=st.text(max_size=30),
        new_broker_id=st.integers(min_value=1, max_value=2**40),
    ),
    st.builds(
        ElectMasterEvent,
        new_master_elected=st.booleans(),
        broker_name=_names,
        new_master_broker_id=st.none() | st.integers(min_value=1, max_value=99),
    ),
    st.builds(ReadEvent),
    st.builds(CleanBrokerDataEvent, broker_name=_names, broker_id_set_to_clean=st.none() | _ids),
    st.builds(
        UpdateBrokerAddressEvent,
        cluster_name=_names,
        broker_name=_names,
        broker_address=st.text(max_size=20),
        broker_id=st.integers(min_value=1, max_value=99),
    ),
)


@given(st.lists(_events, max_size=5))
def test_events_round_trip(events: list[Event]) -> None:
    """Any batch of events survives encode -> decode, and equal batches give equal bytes."""
    data = encode_events(events)
    assert decode_events(data) == events
    assert encode_events(decode_events(data)) == data


@pytest.mark.parametrize(
    ("data", "field"),
    [
        (b"\x92\x02\x90", "events.version"),  # [2, []]
        (b"\x92\x01\x91\x91\x63", "events[0]"),  # unknown type 99
        (b"\x92\x01\x91\x93\x01\xa1a\xc0", "AlterSyncStateSetEvent.new_sync_state_set"),
        (b"\x92\x01\x91\x92\x01\xa1a", "events[0]"),  # missing field
        (b"\xc1", "events"),
    ],
)
def test_events_decode_errors_name_the_field(data: bytes, field: str) -> None:
    """A malformed batch raises CodecError naming where it broke."""
    with pytest.raises(CodecError) as info:
        decode_events(data)
    assert info.value.field == field


# -- snapshots (C-18) --------------------------------------------------------------------------


def _random_events(seed: int, n: int = 60) -> list[Event]:
    rng = random.Random(seed)
    out: list[Event] = []
    for _ in range(n):
        name = rng.choice(["broker-a", "broker-b"])
        i = rng.randrange(1, 6)
        choices: list[Event] = [
            ApplyBrokerIdEvent(
                cluster_name=CLUSTER,
                broker_name=name,
                broker_address=addr(i),
                register_check_code=code(i),
                new_broker_id=i,
            ),
            ElectMasterEvent(
                new_master_elected=rng.random() < 0.8,
                broker_name=name,
                new_master_broker_id=i,
            ),
            AlterSyncStateSetEvent(
                broker_name=name, new_sync_state_set=frozenset(rng.sample(range(1, 6), 2))
            ),
            UpdateBrokerAddressEvent(
                cluster_name=CLUSTER, broker_name=name, broker_address=f"h:{i}", broker_id=i
            ),
            CleanBrokerDataEvent(broker_name=name, broker_id_set_to_clean=frozenset({i})),
        ]
        out.append(rng.choice(choices))
    return out


@pytest.mark.parametrize("seed", range(5))
def test_c18_snapshot_restore_and_replay_give_identical_state(seed: int) -> None:
    """C-18: 1. two managers apply the same random events -> identical snapshot bytes;
    2. a third restores a snapshot taken halfway and replays the rest of the log.
    Expected: identical state (ids, addresses, codes, next id, master, epochs, set)."""
    events = _random_events(seed)
    a, b = ReplicasInfoManager(), ReplicasInfoManager()
    a.apply_all(events)
    b.apply_all(events)
    assert encode_state(a) == encode_state(b)
    half = ReplicasInfoManager()
    half.apply_all(events[:30])
    c = ReplicasInfoManager()
    restore_state(c, encode_state(half))
    c.apply_all(events[30:])
    assert encode_state(c) == encode_state(a)
    assert c.replica_info_table == a.replica_info_table
    assert c.sync_state_set_info_table == a.sync_state_set_info_table


def test_snapshot_rejects_garbage_and_keeps_state() -> None:
    """restore_state of non-snapshot bytes raises CodecError and leaves the manager as it was."""
    m = ReplicasInfoManager()
    m.apply_all(_random_events(1, 10))
    before = encode_state(m)
    for bad in (b"\xc1", b"\x93\x02\x90\x90", b"\x93\x01\x91\x01\x90"):
        with pytest.raises(CodecError):
            restore_state(m, bad)
    assert encode_state(m) == before


# -- DefaultElectPolicy ------------------------------------------------------------------------


def _live(*infos: BrokerLiveInfo) -> LiveBrokers:
    return LiveBrokers.of(CLUSTER, BROKER, infos)


@pytest.mark.parametrize(
    ("sync", "all_", "old", "prefer", "alive", "expected"),
    [
        ({1, 2}, None, 1, None, [1, 2], 1),  # old master alive: kept
        ({1, 2}, None, 1, 2, [1, 2], 2),  # admin prefers 2
        ({1, 2}, None, 1, 3, [1, 2, 3], None),  # preferred not in the set: nobody
        ({1, 2}, None, 1, None, [], None),  # nobody alive
        ({1}, {1, 2, 3}, 1, None, [3], 3),  # unclean: falls back to all replicas
        ({1}, None, 1, None, [3], None),  # clean only: nobody
        ({1, 2, 3}, None, None, None, [2, 3], 2),  # no live info: lowest id
    ],
)
def test_elect_policy_table(  # noqa: PLR0917 - pytest parameters
    sync: set[int],
    all_: set[int] | None,
    old: int | None,
    prefer: int | None,
    alive: list[int],
    expected: int | None,
) -> None:
    """controller.md 6: SyncStateSet first, then all replicas (unclean), old master kept unless
    overridden, a preferred id or nobody."""
    liveness = LiveBrokers({(CLUSTER, BROKER, i): BrokerLiveInfo(broker_id=i) for i in alive})
    got = DefaultElectPolicy().elect(
        CLUSTER,
        BROKER,
        sync_state_brokers=sync,
        all_replica_brokers=all_,
        old_master=old,
        prefer_broker_id=prefer,
        liveness=liveness,
    )
    assert got == expected


def test_elect_policy_prefers_epoch_then_offset_then_priority() -> None:
    """controller.md 6 step e, including offsets 2^31+ apart (upstream's int cast bug)."""
    policy = DefaultElectPolicy()
    infos = _live(
        BrokerLiveInfo(broker_id=1, epoch=3, max_offset=10, election_priority=1),
        BrokerLiveInfo(broker_id=2, epoch=4, max_offset=5, election_priority=9),
        BrokerLiveInfo(broker_id=3, epoch=4, max_offset=5 + 2**32, election_priority=9),
        BrokerLiveInfo(broker_id=4, epoch=4, max_offset=5 + 2**32, election_priority=2),
    )
    got = policy.elect(
        CLUSTER,
        BROKER,
        sync_state_brokers={1, 2, 3, 4},
        all_replica_brokers=None,
        old_master=None,
        prefer_broker_id=None,
        liveness=infos,
    )
    assert got == 4
    assert NOBODY_ALIVE.is_alive(CLUSTER, BROKER, 1) is False


# -- headers -----------------------------------------------------------------------------------


def test_controller_headers_use_upstream_ext_names() -> None:
    """codes.md 3: extFields keys are the Java field names, None fields are absent, primitives
    always present."""
    assert to_ext(
        AlterSyncStateSetRequestHeader(broker_name="b", master_broker_id=1, master_epoch=2)
    ) == {
        "brokerName": "b",
        "masterBrokerId": "1",
        "masterEpoch": "2",
    }
    assert to_ext(ElectMasterRequestHeader.of_controller_trigger("b")) == {
        "clusterName": "",
        "brokerName": "b",
        "brokerId": "-1",
        "designateElect": "false",
    }
    assert to_ext(GetMetaDataResponseHeader(group="g", peers="n0:h:1;")) == {
        "group": "g",
        "isLeader": "false",
        "peers": "n0:h:1;",
    }
    assert to_ext(RegisterBrokerToControllerResponseHeader(cluster_name="c", broker_name="b")) == {
        "clusterName": "c",
        "brokerName": "b",
    }
    clean = from_ext(
        CleanControllerBrokerDataRequestHeader,
        {"brokerName": "b", "brokerControllerIdsToClean": "1;2", "isCleanLivingBroker": "true"},
    )
    assert (clean.broker_controller_ids_to_clean, clean.is_clean_living_broker) == ("1;2", True)
    beat = from_ext(
        BrokerHeartbeatRequestHeader,
        {"clusterName": "c", "brokerAddr": "a", "brokerName": "b", "heartbeatTimeoutMills": "3000"},
    )
    assert (beat.broker_id, beat.heartbeat_timeout_mills, beat.epoch) == (None, 3000, None)


def test_controller_header_missing_mandatory_field() -> None:
    """A missing @CFNotNull field (designateElect) raises MissingHeaderField naming it."""
    with pytest.raises(MissingHeaderField, match="designateElect"):
        from_ext(ElectMasterRequestHeader, {"clusterName": "", "brokerName": "b", "brokerId": "1"})


# -- bodies ------------------------------------------------------------------------------------


def test_bodies_encode_as_fastjson() -> None:
    """codes.md 5: keys sorted, Map<Long,String> keys unquoted, null fields left out."""
    sss = SyncStateSet(sync_state_set=frozenset({2, 1}), sync_state_set_epoch=2)
    assert encode_body(sss) == b'{"syncStateSet":[1,2],"syncStateSetEpoch":2}'
    group = BrokerMemberGroup(
        cluster="DefaultCluster", broker_name="broker-a", broker_addrs={2: "h2", 1: "h1"}
    )
    body = ElectMasterResponseBody(broker_member_group=group, sync_state_set=frozenset({1}))
    assert encode_body(body) == (
        b'{"brokerMemberGroup":{"brokerAddrs":{1:"h1",2:"h2"},"brokerName":"broker-a",'
        b'"cluster":"DefaultCluster"},"syncStateSet":[1]}'
    )
    assert (
        encode_body(ElectMasterResponseBody(sync_state_set=frozenset({3})))
        == b'{"syncStateSet":[3]}'
    )
    info = BrokerReplicasInfo(
        replicas_info_table={
            "broker-a": ReplicasInfo(
                master_broker_id=None,
                master_address=None,
                master_epoch=2,
                sync_state_set_epoch=3,
                in_sync_replicas=(
                    ReplicaIdentity(
                        broker_name="broker-a", broker_id=1, broker_address="h1", alive=False
                    ),
                ),
            )
        }
    )
    assert encode_body(info) == (
        b'{"replicasInfoTable":{"broker-a":{"inSyncReplicas":[{"alive":false,"brokerAddress":"h1",'
        b'"brokerId":1,"brokerName":"broker-a"}],"masterEpoch":2,"notInSyncReplicas":[],'
        b'"syncStateSetEpoch":3}}}'
    )


def test_bodies_decode_java_output() -> None:
    """Bodies as Java writes them (unquoted integer keys, numeric strings) decode back."""
    body = decode_elect_master_body(
        b'{"brokerMemberGroup":{"brokerAddrs":{1:"h1",2:"h2"},"brokerName":"broker-a",'
        b'"cluster":"c"},"syncStateSet":[1]}'
    )
    assert body.broker_member_group is not None
    assert dict(body.broker_member_group.broker_addrs) == {1: "h1", 2: "h2"}
    assert decode_sync_state_set(
        b'{"syncStateSet":["1",2],"syncStateSetEpoch":"4"}'
    ) == SyncStateSet(sync_state_set=frozenset({1, 2}), sync_state_set_epoch=4)
    table = decode_broker_replicas_info(b'{"replicasInfoTable":{}}').replicas_info_table
    assert dict(table) == {}
    assert decode_broker_names(encode_broker_names(["a", "b"])) == ["a", "b"]
    with pytest.raises(CodecError):
        decode_broker_names(b'{"a":1}')
    with pytest.raises(CodecError):
        decode_sync_state_set(b'{"syncStateSet":[true]}')
