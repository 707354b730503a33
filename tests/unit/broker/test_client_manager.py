"""ConsumerManager / ProducerManager: registration, ids-changed events, close and expiry."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rocketpy.broker.client_manager import ClientChannelInfo, ConsumerManager, ProducerManager
from rocketpy.common.clock import ManualClock
from rocketpy.remoting.protocol.body.heartbeat import SubscriptionData
from rocketpy.remoting.transport.dispatch import Channel

MakeChannel = Callable[[str], Channel]


def _info(ch: Channel, client_id: str) -> ClientChannelInfo:
    return ClientChannelInfo(channel=ch, client_id=client_id, language=0, version=479)


def _register(
    mgr: ConsumerManager, ch: Channel, client_id: str, *topics: str, version: int = 1
) -> bool:
    return mgr.register_consumer(
        "g",
        _info(ch, client_id),
        consume_type="CONSUME_PASSIVELY",
        message_model="CLUSTERING",
        consume_from_where="CONSUME_FROM_LAST_OFFSET",
        subscriptions=[SubscriptionData(topic=t, sub_version=version) for t in topics],
        notify=True,
    )


def test_consumer_manager_ids_changed_on_join_leave_and_topic_change(
    make_channel: MakeChannel,
) -> None:
    """1. c1 joins (T). 2. c1 heartbeats again. 3. c2 joins. 4. c2 drops topic T2 it had added.
    5. c1's channel closes.
    Expected: notifications for 1, 3, 4 and 5 only; each goes to every channel then in the group
    (after close: only c2); a newer subVersion replaces a subscription without notifying."""
    events: list[tuple[str, list[str]]] = []

    def on_changed(group: str, channels: Sequence[Channel]) -> None:
        events.append((group, sorted(c.peer for c in channels)))

    mgr = ConsumerManager(clock=ManualClock(), on_ids_changed=on_changed)
    a, b = make_channel("a:1"), make_channel("b:1")
    assert _register(mgr, a, "c1", "T")
    assert not _register(mgr, a, "c1", "T", version=2)
    sub = mgr.find_subscription("g", "T")
    assert sub is not None
    assert sub.sub_version == 2
    assert _register(mgr, b, "c2", "T", "T2")
    assert _register(mgr, b, "c2", "T")
    mgr.on_channel_closed(a)
    assert events == [
        ("g", ["a:1"]),
        ("g", ["a:1", "b:1"]),
        ("g", ["a:1", "b:1"]),
        ("g", ["b:1"]),
    ]
    group = mgr.group("g")
    assert group is not None
    assert group.client_ids() == ["c2"]
    mgr.unregister_consumer("g", b, notify=True)
    assert mgr.group("g") is None


def test_consumer_and_producer_expiry_scan(make_channel: MakeChannel) -> None:
    """1. A consumer and a producer register. 2. 121 s pass with no heartbeat.
    Expected: both scans return the channel (the caller closes it) and the groups are gone;
    a heartbeat within the window keeps a channel."""
    clock = ManualClock()
    cm = ConsumerManager(channel_expired_timeout_ms=120_000, clock=clock)
    pm = ProducerManager(channel_expired_timeout_ms=120_000, clock=clock)
    ch, live = make_channel("a:1"), make_channel("b:1")
    _register(cm, ch, "c1", "T")
    pm.register_producer("p", _info(ch, "c1"))
    pm.register_producer("p", _info(live, "c2"))
    clock.advance(100_000)
    pm.register_producer("p", _info(live, "c2"))
    clock.advance(21_000)
    assert cm.scan_not_active_channels() == [ch]
    assert pm.scan_not_active_channels() == [ch]
    assert cm.group("g") is None
    assert list(pm.groups["p"]) == [live]
    pm.on_channel_closed(live)
    assert pm.groups == {}
