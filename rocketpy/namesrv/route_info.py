"""The NameServer's route tables and every rule that changes them.

Owns: ``topicQueueTable``, ``brokerAddrTable``, ``clusterAddrTable``, ``brokerLiveTable`` and
``filterServerTable`` (namesrv.md section 2), registration (section 3), liveness and unregistration
(section 4), route pickup with acting master (section 5) and the other table operations of
section 7. Mirrors ``RouteInfoManager``. Pure: time comes in as ``now_ms``, channels are opaque
objects the caller compares by identity, and effects on the network (closing an expired channel,
notifying brokers of a min-id change) are returned, not performed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Final

from rocketpy.remoting.protocol.body.config_shapes import DataVersion, TopicConfig

PERM_READ: Final = 4
PERM_WRITE: Final = 2
MASTER_ID: Final = 0
DEFAULT_BROKER_CHANNEL_EXPIRED_TIME_MS: Final = 120_000
FLAG_UNIT: Final = 0x1
FLAG_UNIT_SUB: Final = 0x2
SYNC_BROKER_MEMBER_PREFIX: Final = "rmq_sys_SYNC_BROKER_MEMBER_"


@dataclass(slots=True)
class QueueData:
    """One broker-set's queues of a topic."""

    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0


@dataclass(slots=True)
class BrokerData:
    """A broker-set: its cluster and brokerId -> address."""

    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)
    zone_name: str | None = None
    enable_acting_master: bool = False

    def copy(self) -> BrokerData:
        """A copy whose address map can be changed freely."""
        return replace(self, broker_addrs=dict(self.broker_addrs))


@dataclass(slots=True)
class BrokerLiveInfo:
    """Liveness of one registered broker address."""

    last_update_ms: int
    heartbeat_timeout_ms: int
    data_version: DataVersion
    channel: object
    ha_server_addr: str


@dataclass(frozen=True, slots=True)
class TopicRouteData:
    """What GET_ROUTEINFO_BY_TOPIC returns."""

    queue_datas: tuple[QueueData, ...]
    broker_datas: tuple[BrokerData, ...]
    filter_server_table: Mapping[str, tuple[str, ...]]
    order_topic_conf: str | None = None


@dataclass(frozen=True, slots=True)
class BrokerKey:
    """``(clusterName, brokerAddr)``: the key of the live and filter-server tables."""

    cluster: str
    addr: str


@dataclass(frozen=True, slots=True)
class UnregisterTarget:
    """A broker to unregister: ``(cluster, addr, brokerName, brokerId)``."""

    cluster: str
    addr: str
    broker_name: str
    broker_id: int


@dataclass(frozen=True, slots=True)
class MinIdChange:
    """NOTIFY_MIN_BROKER_ID_CHANGE to send: channels of the set's live members and the header."""

    broker_name: str
    min_broker_id: int
    min_broker_addr: str
    offline_broker_addr: str | None
    ha_broker_addr: str | None
    channels: tuple[object, ...]


@dataclass(frozen=True, slots=True)
class RegisterRequest:
    """A REGISTER_BROKER request, decoded."""

    cluster: str
    broker_addr: str
    broker_name: str
    broker_id: int
    ha_server_addr: str
    topic_configs: Mapping[str, TopicConfig]
    data_version: DataVersion
    filter_servers: tuple[str, ...] = ()
    zone_name: str | None = None
    heartbeat_timeout_ms: int | None = None
    enable_acting_master: bool = False


@dataclass(frozen=True, slots=True)
class RegisterResult:
    """What REGISTER_BROKER answers, and what the caller must do afterwards."""

    ha_server_addr: str | None = None
    master_addr: str | None = None
    min_id_change: MinIdChange | None = None


class RegisterRejected(Exception):
    """Registration refused: upstream answers SYSTEM_ERROR "register broker failed"."""


class RouteInfoManager:
    """All route tables of one NameServer."""

    def __init__(
        self,
        *,
        notify_min_broker_id_changed: bool = False,
        delete_topic_with_registration: bool = False,
    ) -> None:
        self.topic_queue_table: dict[str, dict[str, QueueData]] = {}
        self.broker_addr_table: dict[str, BrokerData] = {}
        self.cluster_addr_table: dict[str, set[str]] = {}
        self.broker_live_table: dict[BrokerKey, BrokerLiveInfo] = {}
        self.filter_server_table: dict[BrokerKey, tuple[str, ...]] = {}
        #: bumped by every change that can alter a route; readers cache encoded routes by it.
        self.generation = 0
        self._notify_min_id = notify_min_broker_id_changed
        self._delete_topic_with_registration = delete_topic_with_registration

    # -- registration (namesrv.md section 3) ----------------------------------------------------

    def register_broker(self, req: RegisterRequest, channel: object, now_ms: int) -> RegisterResult:
        """Apply one REGISTER_BROKER.

        Raises:
            RegisterRejected: a single-topic incremental registration before any full one (step 4).
        """
        self.generation += 1
        names = self.cluster_addr_table.setdefault(req.cluster, set())
        names.add(req.broker_name)
        data = self.broker_addr_table.get(req.broker_name)
        register_first = data is None
        if data is None:
            data = BrokerData(req.cluster, req.broker_name)
            self.broker_addr_table[req.broker_name] = data
        data.enable_acting_master = req.enable_acting_master
        data.zone_name = req.zone_name
        key = BrokerKey(req.cluster, req.broker_addr)
        old_min = min(data.broker_addrs) if data.broker_addrs else None
        for bid in [b for b, a in data.broker_addrs.items() if a == req.broker_addr]:
            if bid != req.broker_id:
                del data.broker_addrs[bid]
        old_addr = data.broker_addrs.get(req.broker_id)
        if old_addr is not None and old_addr != req.broker_addr:
            old_live = self.broker_live_table.get(BrokerKey(req.cluster, old_addr))
            if old_live is not None and (
                old_live.data_version.state_version > req.data_version.state_version
            ):
                # Step 3: a stale master must not steal the id from a newer epoch's broker.
                self.broker_live_table.pop(key, None)
                return RegisterResult()
        if req.broker_id not in data.broker_addrs and len(req.topic_configs) == 1:
            raise RegisterRejected("register broker failed")
        data.broker_addrs[req.broker_id] = req.broker_addr
        register_first = register_first or old_addr is None
        self._register_topics(req, data, register_first)
        self.broker_live_table[key] = BrokerLiveInfo(
            now_ms,
            req.heartbeat_timeout_ms or DEFAULT_BROKER_CHANNEL_EXPIRED_TIME_MS,
            req.data_version,
            channel,
            req.ha_server_addr,
        )
        if req.filter_servers:
            self.filter_server_table[key] = req.filter_servers
        else:
            self.filter_server_table.pop(key, None)
        result = RegisterResult()
        if req.broker_id != MASTER_ID:
            master = data.broker_addrs.get(MASTER_ID)
            live = self.broker_live_table.get(BrokerKey(req.cluster, master)) if master else None
            if master is not None and live is not None:
                result = RegisterResult(ha_server_addr=live.ha_server_addr, master_addr=master)
        new_min = min(data.broker_addrs)
        if self._notify_min_id and (old_min is None or new_min < old_min):
            result = replace(result, min_id_change=self._min_id_change(data, None))
        return result

    def _register_topics(self, req: RegisterRequest, data: BrokerData, first: bool) -> None:
        is_master = req.broker_id == MASTER_ID
        is_prime_slave = (
            not is_master and data.enable_acting_master and min(data.broker_addrs) == req.broker_id
        )
        if not (is_master or is_prime_slave):
            return
        key = BrokerKey(req.cluster, req.broker_addr)
        live = self.broker_live_table.get(key)
        changed = first or live is None or live.data_version != req.data_version
        for topic, cfg in req.topic_configs.items():
            queues = self.topic_queue_table.get(topic)
            if changed or queues is None or req.broker_name not in queues:
                perm = cfg.perm & ~PERM_WRITE if is_prime_slave else cfg.perm
                self.topic_queue_table.setdefault(topic, {})[req.broker_name] = QueueData(
                    req.broker_name,
                    cfg.read_queue_nums,
                    cfg.write_queue_nums,
                    perm,
                    cfg.topic_sys_flag,
                )
        if self._delete_topic_with_registration and changed:
            for topic in [t for t in self.topic_queue_table if t not in req.topic_configs]:
                self._remove_queue(topic, req.broker_name)

    def _remove_queue(self, topic: str, broker_name: str) -> None:
        queues = self.topic_queue_table.get(topic)
        if queues is not None:
            queues.pop(broker_name, None)
            if not queues:
                del self.topic_queue_table[topic]

    # -- liveness and unregistration (section 4) ------------------------------------------------

    def update_live(self, cluster: str, addr: str, now_ms: int) -> bool:
        """Refresh a broker's last-update time; False if it is not registered."""
        live = self.broker_live_table.get(BrokerKey(cluster, addr))
        if live is None:
            return False
        live.last_update_ms = now_ms
        return True

    def data_version_of(self, cluster: str, addr: str) -> DataVersion | None:
        """The DataVersion a broker last registered with."""
        live = self.broker_live_table.get(BrokerKey(cluster, addr))
        return None if live is None else live.data_version

    def expired(self, now_ms: int) -> list[tuple[UnregisterTarget, object]]:
        """Brokers whose heartbeat timed out, with their channels (to close)."""
        out: list[tuple[UnregisterTarget, object]] = []
        for key, live in self.broker_live_table.items():
            if live.last_update_ms + live.heartbeat_timeout_ms < now_ms:
                out.extend((t, live.channel) for t in self._targets_for(key))
        return out

    def targets_for_channel(self, channel: object) -> list[UnregisterTarget]:
        """Brokers registered over ``channel`` (closed, failed or idle)."""
        out: list[UnregisterTarget] = []
        for key, live in list(self.broker_live_table.items()):
            if live.channel is channel:
                out.extend(self._targets_for(key))
        return out

    def _targets_for(self, key: BrokerKey) -> list[UnregisterTarget]:
        found = [
            UnregisterTarget(key.cluster, key.addr, data.broker_name, bid)
            for data in self.broker_addr_table.values()
            if data.cluster == key.cluster
            for bid, addr in data.broker_addrs.items()
            if addr == key.addr
        ]
        return found or [UnregisterTarget(key.cluster, key.addr, "", -1)]

    def unregister_broker(self, target: UnregisterTarget) -> MinIdChange | None:
        """Remove one broker; returns the min-id notification to send, if any."""
        self.generation += 1
        key = BrokerKey(target.cluster, target.addr)
        self.broker_live_table.pop(key, None)
        self.filter_server_table.pop(key, None)
        data = self.broker_addr_table.get(target.broker_name)
        if data is None:
            return None
        old_min = min(data.broker_addrs) if data.broker_addrs else None
        for bid in [b for b, a in data.broker_addrs.items() if a == target.addr]:
            del data.broker_addrs[bid]
        if not data.broker_addrs:
            del self.broker_addr_table[target.broker_name]
            names = self.cluster_addr_table.get(data.cluster)
            if names is not None:
                names.discard(target.broker_name)
                if not names:
                    del self.cluster_addr_table[data.cluster]
            for topic in list(self.topic_queue_table):
                self._remove_queue(topic, target.broker_name)
            return None
        if data.enable_acting_master and MASTER_ID not in data.broker_addrs:
            for queues in self.topic_queue_table.values():
                queue = queues.get(target.broker_name)
                if queue is not None:
                    queue.perm &= ~PERM_WRITE
        if self._notify_min_id and old_min == target.broker_id:
            return self._min_id_change(data, target.addr)
        return None

    def _min_id_change(self, data: BrokerData, offline_addr: str | None) -> MinIdChange:
        min_id = min(data.broker_addrs)
        master = data.broker_addrs.get(MASTER_ID)
        ha = None
        if master is not None:
            live = self.broker_live_table.get(BrokerKey(data.cluster, master))
            ha = None if live is None else live.ha_server_addr
        channels = tuple(
            live.channel
            for addr in data.broker_addrs.values()
            if (live := self.broker_live_table.get(BrokerKey(data.cluster, addr))) is not None
        )
        return MinIdChange(
            data.broker_name, min_id, data.broker_addrs[min_id], offline_addr, ha, channels
        )

    # -- routes (section 5) ---------------------------------------------------------------------

    def pickup_topic_route(
        self, topic: str, *, support_acting_master: bool
    ) -> TopicRouteData | None:
        """The route of ``topic``, or None when it has no queue or no broker data."""
        queues = self.topic_queue_table.get(topic)
        if not queues:
            return None
        broker_datas = [
            self.broker_addr_table[name].copy() for name in queues if name in self.broker_addr_table
        ]
        if not broker_datas:
            return None
        filters: dict[str, tuple[str, ...]] = {}
        for data in broker_datas:
            for addr in data.broker_addrs.values():
                servers = self.filter_server_table.get(BrokerKey(data.cluster, addr))
                if servers:
                    filters[addr] = servers
        if support_acting_master and not topic.startswith(SYNC_BROKER_MEMBER_PREFIX):
            for data in broker_datas:
                queue = queues.get(data.broker_name)
                writable = queue is not None and queue.perm & PERM_WRITE
                if (
                    data.enable_acting_master
                    and data.broker_addrs
                    and not writable
                    and MASTER_ID not in data.broker_addrs
                ):
                    min_id = min(data.broker_addrs)
                    data.broker_addrs[MASTER_ID] = data.broker_addrs.pop(min_id)
        return TopicRouteData(
            queue_datas=tuple(replace(q) for q in queues.values()),
            broker_datas=tuple(broker_datas),
            filter_server_table=filters,
        )

    # -- other table operations (section 7) -----------------------------------------------------

    def all_topics(self) -> list[str]:
        """Every topic with a route."""
        return list(self.topic_queue_table)

    def topics_by_cluster(self, cluster: str) -> list[str]:
        """Topics with a queue on any broker-set of ``cluster``."""
        names = self.cluster_addr_table.get(cluster, set())
        return [t for t, queues in self.topic_queue_table.items() if names & queues.keys()]

    def system_topics(self) -> tuple[list[str], str | None]:
        """Every cluster and broker name, and the address of one registered broker."""
        topics = list(self.cluster_addr_table)
        for names in self.cluster_addr_table.values():
            topics.extend(names)
        addr = next(
            (a for d in self.broker_addr_table.values() for a in d.broker_addrs.values()), None
        )
        return topics, addr

    def topics_with_flags(self, *, unit: bool | None, unit_sub: bool | None) -> list[str]:
        """Topics whose sys flags match (None = either), for the unit topic lists."""
        out = []
        for topic, queues in self.topic_queue_table.items():
            flags = next(iter(queues.values())).topic_sys_flag if queues else 0
            if unit is not None and bool(flags & FLAG_UNIT) != unit:
                continue
            if unit_sub is not None and bool(flags & FLAG_UNIT_SUB) != unit_sub:
                continue
            out.append(topic)
        return out

    def delete_topic(self, topic: str, cluster: str | None) -> None:
        """Delete the topic, or only its queues on ``cluster``'s broker-sets."""
        self.generation += 1
        if not cluster:
            self.topic_queue_table.pop(topic, None)
            return
        for name in self.cluster_addr_table.get(cluster, set()):
            self._remove_queue(topic, name)

    def register_topic(self, topic: str, queue_datas: Iterable[QueueData]) -> None:
        """Add or replace queue data for known broker-sets."""
        self.generation += 1
        for queue in queue_datas:
            if queue.broker_name in self.broker_addr_table:
                self.topic_queue_table.setdefault(topic, {})[queue.broker_name] = queue

    def change_write_perm(self, broker_name: str, *, add: bool) -> int:
        """Clear PERM_WRITE (wipe) or set READ|WRITE (add) on the set's queues; return the count."""
        self.generation += 1
        count = 0
        for queues in self.topic_queue_table.values():
            queue = queues.get(broker_name)
            if queue is not None:
                queue.perm = PERM_READ | PERM_WRITE if add else queue.perm & ~PERM_WRITE
                count += 1
        return count

    def member_group(self, cluster: str, broker_name: str) -> dict[int, str]:
        """The set's brokerId -> address (empty when unknown)."""
        data = self.broker_addr_table.get(broker_name)
        if data is None or data.cluster != cluster:
            return {}
        return dict(data.broker_addrs)
