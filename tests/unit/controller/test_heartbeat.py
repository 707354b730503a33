"""BrokerHeartbeatManager: defaults, monotonic facts, per-broker timeouts, expiry scan, channel
close, start-up grace (controller.md section 7, scenario C-14), driven by a ManualClock."""

from __future__ import annotations

from rocketpy.common.clock import ManualClock
from rocketpy.controller.heartbeat import DEFAULT_HEARTBEAT_TIMEOUT_MS, BrokerHeartbeatManager
from rocketpy.controller.state.elect_policy import DEFAULT_ELECTION_PRIORITY, DefaultElectPolicy
from rocketpy.remoting.protocol.headers.controller import BrokerHeartbeatRequestHeader

C, B = "DefaultCluster", "broker-a"


def _beat(broker_id: int | None, **kw: int) -> BrokerHeartbeatRequestHeader:
    return BrokerHeartbeatRequestHeader(
        cluster_name=C, broker_addr=f"h{broker_id}", broker_name=B, broker_id=broker_id, **kw
    )


def test_heartbeat_first_record_uses_upstream_defaults() -> None:
    """1. heartbeat without optional fields. Expected: epoch/offsets -1, priority MAX, timeout
    10 s; alive until exactly 10 s later, dead 1 ms after."""
    clock = ManualClock()
    hb = BrokerHeartbeatManager(clock)
    rec = hb.on_broker_heartbeat(_beat(1))
    assert (rec.info.epoch, rec.info.max_offset, rec.info.confirm_offset) == (-1, -1, -1)
    assert rec.info.election_priority == DEFAULT_ELECTION_PRIORITY
    assert rec.timeout_ms == DEFAULT_HEARTBEAT_TIMEOUT_MS
    clock.advance(DEFAULT_HEARTBEAT_TIMEOUT_MS)
    assert hb.is_alive(C, B, 1)
    clock.advance(1)
    assert not hb.is_alive(C, B, 1)


def test_heartbeat_facts_never_go_backwards() -> None:
    """controller.md 7: 1. (epoch 2, offset 100); 2. (epoch 1, offset 500) -> kept 2/100;
    3. (epoch 2, offset 50) -> kept; 4. (epoch 2, offset 150) -> taken; priority always taken."""
    hb = BrokerHeartbeatManager(ManualClock())
    hb.on_broker_heartbeat(_beat(1, epoch=2, max_offset=100, election_priority=5))
    hb.on_broker_heartbeat(_beat(1, epoch=1, max_offset=500, election_priority=4))
    info = hb.live_info(C, B, 1)
    assert info is not None
    assert (info.epoch, info.max_offset, info.election_priority) == (2, 100, 4)
    assert hb.on_broker_heartbeat(_beat(1, epoch=2, max_offset=50)).info.max_offset == 100
    assert hb.on_broker_heartbeat(_beat(1, epoch=2, max_offset=150)).info.max_offset == 150


def test_heartbeat_scan_removes_only_expired_per_broker_timeout() -> None:
    """1. broker 1 with a 3 s timeout, broker 2 with 10 s; 2. 5 s pass. Expected: the scan
    returns broker 1 only and removes it; broker 2 stays alive."""
    clock = ManualClock()
    hb = BrokerHeartbeatManager(clock)
    hb.on_broker_heartbeat(_beat(1, heartbeat_timeout_mills=3000), channel="ch1")
    hb.on_broker_heartbeat(_beat(2))
    clock.advance(5000)
    expired = hb.scan_not_active()
    assert [(r.info.broker_id, r.channel) for r in expired] == [(1, "ch1")]
    assert hb.live_info(C, B, 1) is None
    assert hb.is_alive(C, B, 2)


def test_heartbeat_channel_close_drops_the_latest_channel_owner() -> None:
    """1. broker 1 heart-beats on ch-a, then reconnects on ch-b; 2. ch-a closes -> nothing;
    3. ch-b closes -> broker 1 removed and returned."""
    hb = BrokerHeartbeatManager(ManualClock())
    hb.on_broker_heartbeat(_beat(1), channel="ch-a")
    hb.on_broker_heartbeat(_beat(1), channel="ch-b")
    assert hb.on_channel_closed("ch-a") is None
    gone = hb.on_channel_closed("ch-b")
    assert gone is not None
    assert gone.key == (C, B, 1)
    assert not hb.is_alive(C, B, 1)


def test_heartbeat_startup_grace() -> None:
    """C-14: a freshly started table is not warmed up until the grace period has passed."""
    clock = ManualClock()
    hb = BrokerHeartbeatManager(clock, startup_grace_ms=2000)
    assert not hb.is_warmed_up()
    clock.advance(2000)
    assert hb.is_warmed_up()


def test_heartbeat_hold_off_after_leadership() -> None:
    """A node that becomes leader distrusts its table for the longest heartbeat timeout it has
    seen: 1. no heartbeat yet, hold off; 2. brokers beat with timeouts 1.5 s and 3 s, all
    expire, hold off again.
    Expected: 1. warmed up at once (nothing stale: the start-up grace alone applies); 2. not
    warmed up until 3 s later."""
    clock = ManualClock()
    hb = BrokerHeartbeatManager(clock)
    hb.hold_off()
    assert hb.is_warmed_up()
    hb.on_broker_heartbeat(_beat(1, heartbeat_timeout_mills=1500))
    hb.on_broker_heartbeat(_beat(2, heartbeat_timeout_mills=3000))
    clock.advance(5000)
    assert {r.key for r in hb.scan_not_active()} == {(C, B, 1), (C, B, 2)}
    hb.hold_off()
    clock.advance(2999)
    assert not hb.is_warmed_up()
    clock.advance(1)
    assert hb.is_warmed_up()


def test_heartbeat_table_drives_the_election_policy() -> None:
    """The table is the liveness of DefaultElectPolicy: 1. brokers 2 and 3 beat with epochs 1
    and 2, broker 1 never; 2. elect from {1,2,3}. Expected: 3."""
    hb = BrokerHeartbeatManager(ManualClock())
    hb.on_broker_heartbeat(_beat(2, epoch=1, max_offset=9))
    hb.on_broker_heartbeat(_beat(3, epoch=2, max_offset=1))
    got = DefaultElectPolicy().elect(
        C,
        B,
        sync_state_brokers={1, 2, 3},
        all_replica_brokers=None,
        old_master=1,
        prefer_broker_id=None,
        liveness=hb,
    )
    assert got == 3
