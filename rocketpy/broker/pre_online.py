"""BrokerPreOnlineService: what a broker of an acting-master set does before it goes online.

Owns: one task that, while the broker is isolated (not registered, no heartbeats), asks a
NameServer for the set's live members (GET_BROKER_MEMBER_GROUP 901) and then
* on the master (brokerId 0): for each live slave in id order, sends it this master's HA address,
  initial max offset and address (EXCHANGE_BROKER_HA_INFO 906), waits until that slave's HA
  connection has reported (handshake done), and pulls the slave's newer metadata back
  (``syncMetadataReverse``: GET_ALL_CONSUMER_OFFSET 43 and GET_ALL_DELAY_OFFSET 45, adopted when
  the slave's DataVersion is not older than ours); after the last slave it starts service
  (registers, runs the schedule service);
* on a slave whose set has a master: asks the master for its HA address (906), follows it and
  waits until its HA client is connected, then starts service;
* otherwise (no master, or nobody else online): starts service at once.
A failed round is retried after one second. Mirrors ``broker/BrokerPreOnlineService`` of
apache/rocketmq 5.x and seed 003 ("pre-online"). Must not: register by itself (the
:class:`~rocketpy.broker.acting_master.ActingMasterService` does, in ``start_service``).

Decided: upstream ``putAll``s the slave's consumer offsets; here each queue keeps the larger of
the two offsets (``ConsumerOffsetManager.merge_newer``) and each delay level the larger progress,
so a returning master's offsets never go backwards (acceptance S-03; stricter than upstream). The
classic HA handshake has no TRANSFER state on the wire: the master counts a slave connection from
the slave's host that has sent its first offset report as "handshake complete", as upstream's
``HAConnectionStateNotificationService`` does for classic connections.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Final

import structlog

from rocketpy.broker.acting_api import ActingMasterAPI
from rocketpy.broker.acting_master import MASTER_ID, ActingMasterService
from rocketpy.broker.config import BrokerConfig
from rocketpy.broker.offsets import ConsumerOffsetManager
from rocketpy.broker.schedule import ScheduleMessageService
from rocketpy.common.aio import wait_until
from rocketpy.common.errors import CodecError, RemoteError, RemotingError
from rocketpy.ha.classic.service import DefaultHAService
from rocketpy.remoting.protocol.bodies.controller import BrokerMemberGroup
from rocketpy.remoting.protocol.headers.broker import ExchangeHAInfoHeader

log = structlog.get_logger(__name__)

_RETRY_S: Final = 1.0


class BrokerPreOnlineService:
    """Brings an isolated broker online once its set is consistent."""

    def __init__(
        self,
        *,
        config: Callable[[], BrokerConfig],
        api: ActingMasterAPI,
        acting: ActingMasterService,
        address: Callable[[], str],
        ha_server_addr: Callable[[], str],
        ha: Callable[[], DefaultHAService | None],
        offsets: ConsumerOffsetManager,
        schedule: ScheduleMessageService,
        init_max_offset: int,
        handshake_timeout_s: float,
    ) -> None:
        """Args: ``config`` current settings; ``api`` requests; ``acting`` the service that
        starts service; ``address``/``ha_server_addr`` this broker's addresses; ``ha`` the
        classic HA service;
        ``offsets``/``schedule`` the metadata synced back; ``init_max_offset`` the commit-log
        max offset at start (``getBrokerInitMaxOffset``); ``handshake_timeout_s`` how long one
        HA handshake may take."""
        self._config = config
        self._api = api
        self._acting = acting
        self._address = address
        self._ha_server_addr = ha_server_addr
        self._ha = ha
        self._offsets = offsets
        self._schedule = schedule
        self._init_max_offset = init_max_offset
        self._handshake_timeout_s = handshake_timeout_s
        self._wait_index = 0
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start the pre-online task."""
        name = f"{self._config().broker_name}/pre-online"
        self._task = asyncio.get_running_loop().create_task(self._run(), name=name)

    async def stop(self) -> None:
        """Stop the task. Idempotent."""
        self._stop.set()
        if self._task is not None:
            task, self._task = self._task, None
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        log.info("BrokerPreOnlineService service started")
        while not self._stop.is_set() and self._acting.isolated:
            try:
                if await self.prepare_for_broker_online():
                    break
            except (RemotingError, RemoteError, CodecError, TimeoutError, OSError) as e:
                log.warning("Broker preOnline error", error=repr(e))
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_RETRY_S):
                    await self._stop.wait()
        log.info("BrokerPreOnlineService service end", isolated=self._acting.isolated)

    async def prepare_for_broker_online(self) -> bool:
        """One round (``prepareForBrokerOnline``); True when the broker is online."""
        cfg = self._config()
        group = await self._api.sync_broker_member_group(
            cfg.namesrv_addr_list, cluster=cfg.broker_cluster_name, broker_name=cfg.broker_name
        )
        others = {k: v for k, v in group.broker_addrs.items() if k != cfg.broker_id}
        if not others:
            log.info("no other broker online, will start service directly")
            await self._acting.start_service(cfg.broker_id, self._address())
            return True
        min_id = min(others)
        if cfg.broker_id == MASTER_ID:
            return await self._prepare_for_master_online(group)
        if min_id == MASTER_ID:
            return await self._prepare_for_slave_online(group, others)
        log.info("no master online, start service directly")
        await self._acting.start_service(min(min_id, cfg.broker_id), others.get(min_id))
        return True

    async def _prepare_for_master_online(self, group: BrokerMemberGroup) -> bool:
        ids = sorted(k for k in group.broker_addrs if k != MASTER_ID)
        while self._wait_index < len(ids):
            addr = group.broker_addrs[ids[self._wait_index]]
            await self._api.exchange_ha_info(
                addr,
                ExchangeHAInfoHeader(
                    master_ha_address=self._ha_server_addr(),
                    master_flush_offset=self._init_max_offset,
                    master_address=self._address(),
                ),
            )
            if not await self._wait_slave_handshake(addr):
                log.error("wait for handshake completion failed, HA connection lost", slave=addr)
                return False
            await self.sync_metadata_reverse(addr)
            self._wait_index += 1
        log.info("master preOnline complete, start service")
        await self._acting.start_service(MASTER_ID, self._address())
        return True

    async def _wait_slave_handshake(self, slave_addr: str) -> bool:
        log.info("wait for handshake completion", slave=slave_addr)
        ha = self._ha()
        if ha is None:
            log.error("HAService is null, maybe broker config is wrong")
            return False
        host = slave_addr.rpartition(":")[0]

        def handshaken() -> bool:
            return any(
                s.address.rpartition(":")[0] == host and s.request_offset >= 0 for s in ha.slaves()
            )

        try:
            await wait_until(handshaken, self._handshake_timeout_s, interval_s=0.05)
        except TimeoutError:
            return False
        return True

    async def _prepare_for_slave_online(
        self, group: BrokerMemberGroup, others: dict[int, str]
    ) -> bool:
        master = others[MASTER_ID]
        info = await self._api.exchange_ha_info(master, ExchangeHAInfoHeader())
        ha = self._ha()
        min_id = min(others)
        if info.master_ha_address is None or ha is None:
            log.info("fetch master ha address return null, start service directly")
            await self._acting.start_service(min_id, others[min_id])
            return True
        ha.update_ha_master_address(info.master_ha_address)
        client = ha.client
        try:
            await wait_until(lambda: client.connected, self._handshake_timeout_s, interval_s=0.05)
        except TimeoutError:
            log.warning("wait for handshake completion failed, HA connection lost", master=master)
            return False
        log.info("slave preOnline complete, start service")
        await self._acting.start_service(min_id, others[min_id])
        return True

    async def sync_metadata_reverse(self, addr: str) -> None:
        """``syncMetadataReverse``: adopt the slave's consumer offsets and delay progress when
        its DataVersion is not older than ours (per queue / level the larger value wins)."""
        log.info("Get metadata reverse", slave=addr)
        offsets = await self._api.get_all_consumer_offset(addr)
        theirs = offsets.data_version
        if theirs is not None and self._offsets.data_version.compare(theirs) <= 0:
            raised = self._offsets.merge_newer(offsets)
            log.info("consumerOffset of the slave is newer, it will be used", slave=addr,
                     queues_raised=raised)  # fmt: skip
            await self._offsets.persist()
        delay = await self._api.get_all_delay_offset(addr)
        theirs_delay = delay.data_version
        if theirs_delay is not None and self._schedule.data_version.compare(theirs_delay) <= 0:
            raised = self._schedule.merge_newer(delay)
            log.info("delayOffset of the slave is newer, it will be used", slave=addr,
                     levels_raised=raised)  # fmt: skip
            await self._schedule.persist()
