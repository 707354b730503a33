"""ActingMasterService: slave-acting-master mode of one broker (``enableSlaveActingMaster``).

Owns: the isolation flag (an isolated broker neither registers nor heartbeats), the lightweight
heartbeat (BROKER_HEARTBEAT 904 to every NameServer each ``brokerHeartbeatInterval``, so the
NameServer expires a dead broker after ``brokerNotActiveTimeoutMillis``), the member-group sync
(GET_BROKER_MEMBER_GROUP 901 each ``syncBrokerMemberGroupPeriod``), the minimum broker id of the
set (from that sync or from NOTIFY_MIN_BROKER_ID_CHANGE 905), and the "special services" that only
the set's minimum-id broker runs: the schedule (delay) service, whose due messages a slave puts on
another set's master through the :class:`~rocketpy.broker.escape_bridge.EscapeBridge`. Mirrors
``BrokerController`` (start, sendHeartbeat, syncBrokerMemberGroup, startService,
startServiceWithoutCondition, updateMinBroker, onMinBrokerChange, onMasterOffline,
onMasterOnline, changeSpecialServiceStatus, isSpecialServiceRunning) of apache/rocketmq 5.x and
seed 003. Must not: write the store; decide routes (the NameServer presents the acting slave as
brokerId 0 with PERM_WRITE cleared).

Decided:
* rocketpy has no POP revive service, so the special services are the schedule service and the
  transaction check; on an acting slave the check skips its rounds (upstream escapes the half
  messages to another set's master), so they wait for the master's return.
* When a slave becomes the acting master it moves its consumer-offset DataVersion to the next
  version (stricter than upstream): the offsets it serves from then on are the set's newest, so a
  returning master's pre-online (:mod:`rocketpy.broker.pre_online`) always adopts them.
* On becoming acting master the slave registers again at once (upstream waits for its next
  period), so its topic routes converge without waiting ``registerNameServerPeriod``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Final, Protocol

import structlog

from rocketpy.broker.acting_api import ActingMasterAPI
from rocketpy.broker.config import BrokerConfig
from rocketpy.common.aio import TaskSet, periodic
from rocketpy.common.errors import RemotingError
from rocketpy.remoting.protocol.bodies.controller import BrokerMemberGroup
from rocketpy.remoting.protocol.headers.broker import ExchangeHAInfoHeader

log = structlog.get_logger(__name__)

MASTER_ID: Final = 0


class SpecialService(Protocol):
    """A service only the set's minimum-id broker runs (``ScheduleMessageService``)."""

    async def start(self) -> None:
        """Start it."""
        ...

    async def stop(self) -> None:
        """Stop it (idempotent)."""
        ...


class HAAddressSink(Protocol):
    """Where a slave's HA client takes the master's HA address from."""

    def update_ha_master_address(self, address: str | None) -> None:
        """Connect to ``address`` from now on (None: stop connecting)."""
        ...


class ActingMasterService:
    """Heartbeats, member group, minimum broker id and special services of one broker."""

    def __init__(
        self,
        *,
        config: Callable[[], BrokerConfig],
        api: ActingMasterAPI,
        address: Callable[[], str],
        total_replicas: int,
        special: SpecialService,
        register: Callable[[], Awaitable[None]],
        ha: Callable[[], HAAddressSink | None],
        on_acting: Callable[[], None],
    ) -> None:
        """Args:
        ``config`` the broker's current settings; ``api`` sends the requests; ``address`` this
        broker's ``ip:port``; ``total_replicas`` ``totalReplicas`` (a set of more than one starts
        isolated until pre-online ends); ``special`` the schedule service; ``register`` a forced
        ``registerBrokerAll``; ``ha`` the classic HA service if any; ``on_acting`` is called when
        a slave becomes the set's minimum-id broker.
        """
        self._config = config
        self._api = api
        self._address = address
        self._special = special
        self._register = register
        self._ha = ha
        self._on_acting = on_acting
        cfg = config()
        #: Neither registers nor heartbeats (``isIsolated``); pre-online clears it.
        self.isolated = total_replicas > 1
        self.min_broker_id = cfg.broker_id
        self.min_broker_addr: str | None = None
        self.member_group = BrokerMemberGroup(
            cluster=cfg.broker_cluster_name, broker_name=cfg.broker_name
        )
        #: The master's address as a slave last saw it (``slaveSynchronize.masterAddr``).
        self.master_addr: str | None = None
        self._special_running = False
        self._lock = asyncio.Lock()
        self._stop = asyncio.Event()
        self._tasks = TaskSet(f"{cfg.broker_name}/acting-master")

    @property
    def acting(self) -> bool:
        """True on a slave that is currently the set's minimum-id broker."""
        return self._config().broker_id != MASTER_ID and self._special_running

    async def start(self) -> None:
        """``BrokerController.start`` (acting part): go online unless isolated, then run the
        heartbeat and member-group loops."""
        cfg = self._config()
        if cfg.skip_pre_online:
            self.isolated = False
        if not self.isolated:
            await self.change_special_service_status(cfg.broker_id == MASTER_ID)
            await self._register()
        self._tasks.spawn(
            periodic(
                cfg.broker_heartbeat_interval_ms / 1000,
                self.send_heartbeat,
                stop=self._stop,
                name="broker-heartbeat",
            ),
            name=f"{cfg.broker_name}/broker-heartbeat",
        )
        self._tasks.spawn(
            periodic(
                cfg.sync_broker_member_group_period_ms / 1000,
                self.sync_broker_member_group,
                stop=self._stop,
                name="sync-member-group",
            ),
            name=f"{cfg.broker_name}/sync-member-group",
        )

    async def stop(self) -> None:
        """Stop the loops and the special services. Idempotent."""
        self._stop.set()
        await self._tasks.cancel_all()
        await self.change_special_service_status(False)

    # -- heartbeat and member group ----------------------------------------------------------

    async def send_heartbeat(self) -> None:
        """``sendHeartbeat`` (skipped while isolated)."""
        if self.isolated:
            return
        cfg = self._config()
        await self._api.send_heartbeat(
            cfg.namesrv_addr_list,
            cluster=cfg.broker_cluster_name,
            broker_addr=self._address(),
            broker_name=cfg.broker_name,
        )

    async def sync_broker_member_group(self) -> None:
        """``syncBrokerMemberGroup``: refresh the member group; a live broker also follows the
        group's minimum id."""
        cfg = self._config()
        try:
            group = await self._api.sync_broker_member_group(
                cfg.namesrv_addr_list, cluster=cfg.broker_cluster_name, broker_name=cfg.broker_name
            )
        except RemotingError as e:
            log.warning("syncBrokerMemberGroup from namesrv failed", error=str(e))
            return
        if not group.broker_addrs:
            log.warning("Couldn't find any broker member from namesrv", broker=cfg.broker_name)
            return
        self.member_group = group
        if MASTER_ID in group.broker_addrs:
            self.master_addr = group.broker_addrs[MASTER_ID]
        if not self.isolated:
            min_id = min(group.broker_addrs)
            await self.update_min_broker(min_id, group.broker_addrs[min_id], wait=False)

    # -- minimum broker id -------------------------------------------------------------------

    async def update_min_broker(
        self,
        min_id: int,
        min_addr: str | None,
        offline_addr: str | None = None,
        ha_addr: str | None = None,
        *,
        wait: bool = True,
    ) -> None:
        """``updateMinBroker``: act on a new minimum id of the set (slaves only).

        Args:
            min_id: the set's minimum live broker id.
            min_addr: that broker's address.
            offline_addr: the broker that went away, if known (905 carries it; a sync infers
                the previous minimum when the id grew).
            ha_addr: the new minimum broker's HA address (905 from the NameServer).
            wait: block for the lock (905) or give up when another update runs (periodic sync,
                upstream's ``tryLock``).
        """
        if self._config().broker_id == MASTER_ID:
            return
        if not wait and self._lock.locked():
            return
        async with self._lock:
            if min_id == self.min_broker_id:
                return
            if offline_addr is None and not wait and min_id > self.min_broker_id:
                offline_addr = self.min_broker_addr
            await self._on_min_broker_change(min_id, min_addr, offline_addr, ha_addr)

    async def _on_min_broker_change(
        self, min_id: int, min_addr: str | None, offline_addr: str | None, ha_addr: str | None
    ) -> None:
        cfg = self._config()
        log.info(
            "Min broker changed",
            old_id=self.min_broker_id,
            old_addr=self.min_broker_addr,
            new_id=min_id,
            new_addr=min_addr,
        )
        self.min_broker_id = min_id
        self.min_broker_addr = min_addr
        becomes_acting = cfg.broker_id == min_id and not self._special_running
        await self.change_special_service_status(cfg.broker_id == min_id)
        if offline_addr is not None and offline_addr == self.master_addr:
            self._on_master_offline()
        if min_id == MASTER_ID and min_addr is not None:
            await self._on_master_online(min_addr, ha_addr)
        if becomes_acting:
            self._on_acting()
            await self._register()

    def _on_master_offline(self) -> None:
        log.info("master offline, stop syncing from it", master=self.master_addr)
        self.master_addr = None
        ha = self._ha()
        if ha is not None:
            ha.update_ha_master_address(None)

    async def _on_master_online(self, master_addr: str, ha_addr: str | None) -> None:
        self.master_addr = master_addr
        if ha_addr is None:
            try:
                info = await self._api.exchange_ha_info(master_addr, ExchangeHAInfoHeader())
            except RemotingError as e:
                log.warning("retrieve master ha info exception", master=master_addr, error=str(e))
                return
            ha_addr = info.master_ha_address
        ha = self._ha()
        if ha is not None and ha_addr:
            ha.update_ha_master_address(ha_addr)

    # -- services ----------------------------------------------------------------------------

    async def change_special_service_status(self, should_start: bool) -> None:
        """``changeSpecialServiceStatus``: start or stop the schedule service."""
        if should_start == self._special_running:
            return
        log.info("ScheduleServiceStatus changed", running=should_start)
        self._special_running = should_start
        if should_start:
            await self._special.start()
        else:
            await self._special.stop()

    async def start_service(self, min_id: int, min_addr: str | None) -> None:
        """``startService``: end isolation after pre-online and register."""
        log.info("start service", min_broker_id=min_id, min_broker_addr=min_addr)
        self.min_broker_id = min_id
        self.min_broker_addr = min_addr
        await self.change_special_service_status(self._config().broker_id == min_id)
        self.isolated = False
        await self._register()
