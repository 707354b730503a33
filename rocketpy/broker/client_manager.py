"""Producer and consumer registrations per client channel (from HEART_BEAT), with expiry.

Owns: :class:`ProducerManager` (group -> channel -> client) and :class:`ConsumerManager` (group
-> channels, subscriptions, consume type/model/from-where), channel-close and idle-scan clean-up,
and the "consumer ids changed" events. Mirrors ``broker/client/{ProducerManager,ConsumerManager,
ConsumerGroupInfo,ClientChannelInfo,ClientHousekeepingService}`` (client-flows.md section 3).
Must not: write to channels itself: ids-changed events go to ``on_ids_changed(group,
channels)``, which the service turns into oneway NOTIFY_CONSUMER_IDS_CHANGED requests; expired
channels are closed through ``Channel.close``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import structlog

from rocketpy.common.clock import SYSTEM_CLOCK, Clock
from rocketpy.remoting.protocol.body.heartbeat import BROADCASTING, SubscriptionData
from rocketpy.remoting.transport.dispatch import Channel

log = structlog.get_logger(__name__)

IdsChanged = Callable[[str, Sequence[Channel]], None]


def _ignore(group: str, channels: Sequence[Channel]) -> None:
    return None


@dataclass(slots=True, eq=False)
class ClientChannelInfo:
    """``ClientChannelInfo``: who is on a channel and when we last heard from it."""

    channel: Channel
    client_id: str
    language: int
    version: int
    last_update_ms: int = 0


@dataclass(slots=True, eq=False)
class ConsumerGroupInfo:
    """``ConsumerGroupInfo``: one consumer group's channels and subscriptions."""

    group_name: str
    consume_type: str
    message_model: str
    consume_from_where: str
    channels: dict[Channel, ClientChannelInfo] = field(default_factory=dict)
    subscriptions: dict[str, SubscriptionData] = field(default_factory=dict)
    last_update_ms: int = 0

    def client_ids(self) -> list[str]:
        """``getAllClientId``."""
        return [info.client_id for info in self.channels.values()]

    def all_channels(self) -> list[Channel]:
        """``getAllChannel``."""
        return list(self.channels)

    def update_channel(self, info: ClientChannelInfo, now_ms: int) -> bool:
        """``updateChannel``: True when the channel is new to the group."""
        old = self.channels.get(info.channel)
        added = False
        if old is None:
            self.channels[info.channel] = info
            log.info("new consumer connected", group=self.group_name, client_id=info.client_id)
            old = info
            added = True
        elif old.client_id != info.client_id:
            log.error(
                "consumer channel exists in broker, but clientId is not equal",
                group=self.group_name,
                old=old.client_id,
                new=info.client_id,
            )
            self.channels[info.channel] = info
            old = info
        self.last_update_ms = now_ms
        old.last_update_ms = now_ms
        return added

    def update_subscription(self, subs: Iterable[SubscriptionData], now_ms: int) -> bool:
        """``updateSubscription``: True when a topic was added or removed (a newer
        ``subVersion`` replaces a subscription without counting as a change)."""
        changed = False
        topics: set[str] = set()
        for sub in subs:
            old = self.subscriptions.get(sub.topic)
            if old is None:
                self.subscriptions[sub.topic] = sub
                changed = True
                log.info(
                    "subscription changed, add new topic", group=self.group_name, topic=sub.topic
                )
            elif sub.sub_version > old.sub_version:
                self.subscriptions[sub.topic] = sub
                log.info("subscription changed", group=self.group_name, topic=sub.topic)
            topics.add(sub.topic)
        for topic in [t for t in self.subscriptions if t not in topics]:
            del self.subscriptions[topic]
            changed = True
            log.warning("subscription changed, remove topic", group=self.group_name, topic=topic)
        self.last_update_ms = now_ms
        return changed


class ConsumerManager:
    """``ConsumerManager``: consumer groups by name."""

    def __init__(
        self,
        *,
        channel_expired_timeout_ms: int = 120_000,
        clock: Clock = SYSTEM_CLOCK,
        on_ids_changed: IdsChanged = _ignore,
    ) -> None:
        """Args: ``channel_expired_timeout_ms`` idle time after which a channel is dropped;
        ``clock`` monotonic time; ``on_ids_changed`` receives (group, channels to notify)."""
        self._expired_ms = channel_expired_timeout_ms
        self._clock = clock
        self._on_ids_changed = on_ids_changed
        self._table: dict[str, ConsumerGroupInfo] = {}

    def group(self, group: str) -> ConsumerGroupInfo | None:
        """``getConsumerGroupInfo``."""
        return self._table.get(group)

    @property
    def groups(self) -> dict[str, ConsumerGroupInfo]:
        """All groups (do not mutate)."""
        return self._table

    def find_subscription(self, group: str, topic: str) -> SubscriptionData | None:
        """``findSubscriptionData``."""
        info = self._table.get(group)
        return None if info is None else info.subscriptions.get(topic)

    def register_consumer(
        self,
        group: str,
        info: ClientChannelInfo,
        *,
        consume_type: str,
        message_model: str,
        consume_from_where: str,
        subscriptions: Sequence[SubscriptionData],
        notify: bool,
        update_subscription: bool = True,
    ) -> bool:
        """``registerConsumer``: add/refresh the channel and the subscriptions.

        Returns:
            True when the group's channels or subscribed topics changed (then, with ``notify``,
            every channel of the group is told to rebalance).
        """
        now = self._clock.monotonic_ms()
        info.last_update_ms = now
        group_info = self._table.get(group)
        if group_info is None:
            group_info = ConsumerGroupInfo(group, consume_type, message_model, consume_from_where)
            self._table[group] = group_info
        group_info.consume_type = consume_type
        group_info.message_model = message_model
        group_info.consume_from_where = consume_from_where
        added = group_info.update_channel(info, now)
        changed = update_subscription and group_info.update_subscription(subscriptions, now)
        if (added or changed) and notify:
            self._on_ids_changed(group, group_info.all_channels())
        return added or changed

    def unregister_consumer(self, group: str, channel: Channel, *, notify: bool) -> None:
        """``unregisterConsumer`` (UNREGISTER_CLIENT)."""
        group_info = self._table.get(group)
        if group_info is None:
            return
        removed = group_info.channels.pop(channel, None)
        if removed is not None:
            log.info("unregister consumer ok", group=group, client_id=removed.client_id)
        if not group_info.channels:
            del self._table[group]
            log.info(
                "unregister consumer ok, no any connection, and remove consumer group", group=group
            )
        if notify:
            self._on_ids_changed(group, group_info.all_channels())

    def on_channel_closed(self, channel: Channel) -> None:
        """``doChannelCloseEvent``: drop the channel from every group, notify the others."""
        for group, group_info in list(self._table.items()):
            removed = group_info.channels.pop(channel, None)
            if removed is None:
                continue
            log.info("close channel, remove consumer", group=group, client_id=removed.client_id)
            if not group_info.channels:
                del self._table[group]
                log.info(
                    "unregister consumer ok, no any connection, and remove consumer group",
                    group=group,
                )
            if group_info.message_model != BROADCASTING:
                self._on_ids_changed(group, group_info.all_channels())

    def scan_not_active_channels(self) -> list[Channel]:
        """``scanNotActiveChannel``: drop channels idle longer than the timeout.

        Returns:
            The expired channels; the caller closes them (their close event then notifies).
        """
        now = self._clock.monotonic_ms()
        expired: list[Channel] = []
        for group, group_info in list(self._table.items()):
            for channel, info in list(group_info.channels.items()):
                if now - info.last_update_ms > self._expired_ms:
                    log.warning(
                        "SCAN: remove expired channel from ConsumerManager consumerTable",
                        group=group,
                        client_id=info.client_id,
                        peer=channel.peer,
                    )
                    del group_info.channels[channel]
                    expired.append(channel)
            if not group_info.channels:
                del self._table[group]
                log.warning(
                    "SCAN: remove expired channel from ConsumerManager consumerTable, all clear",
                    group=group,
                )
        return expired

    def query_topic_consume_by_who(self, topic: str) -> set[str]:
        """``queryTopicConsumeByWho``: groups subscribed to ``topic``."""
        return {g for g, info in self._table.items() if topic in info.subscriptions}


class ProducerManager:
    """``ProducerManager``: producer groups by name."""

    def __init__(
        self, *, channel_expired_timeout_ms: int = 120_000, clock: Clock = SYSTEM_CLOCK
    ) -> None:
        """Args: ``channel_expired_timeout_ms`` idle time after which a channel is dropped;
        ``clock`` monotonic time."""
        self._expired_ms = channel_expired_timeout_ms
        self._clock = clock
        self._table: dict[str, dict[Channel, ClientChannelInfo]] = {}

    @property
    def groups(self) -> dict[str, dict[Channel, ClientChannelInfo]]:
        """All groups (do not mutate)."""
        return self._table

    def register_producer(self, group: str, info: ClientChannelInfo) -> None:
        """``registerProducer``: add or refresh the channel."""
        channels = self._table.setdefault(group, {})
        info.last_update_ms = self._clock.monotonic_ms()
        old = channels.get(info.channel)
        if old is None:
            channels[info.channel] = info
            log.info("new producer connected", group=group, client_id=info.client_id)
        else:
            old.last_update_ms = info.last_update_ms

    def unregister_producer(self, group: str, channel: Channel) -> None:
        """``unregisterProducer``."""
        channels = self._table.get(group)
        if channels is None:
            return
        removed = channels.pop(channel, None)
        if removed is not None:
            log.info("unregister a producer from table", group=group, client_id=removed.client_id)
        if not channels:
            del self._table[group]

    def on_channel_closed(self, channel: Channel) -> None:
        """``doChannelCloseEvent``."""
        for group in list(self._table):
            self.unregister_producer(group, channel)

    def scan_not_active_channels(self) -> list[Channel]:
        """``scanNotActiveChannel``: the expired channels, removed; the caller closes them."""
        now = self._clock.monotonic_ms()
        expired: list[Channel] = []
        for group, channels in list(self._table.items()):
            for channel, info in list(channels.items()):
                if now - info.last_update_ms > self._expired_ms:
                    log.warning(
                        "ProducerManager#scanNotActiveChannel: remove expired channel",
                        group=group,
                        client_id=info.client_id,
                    )
                    del channels[channel]
                    expired.append(channel)
            if not channels:
                del self._table[group]
        return expired
