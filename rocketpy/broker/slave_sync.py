"""SlaveSynchronize: a slave copies its master's metadata over remoting (ha.md section 2.5).

Owns: the master's remoting address as the NameServer registration reply names it
(``masterAddr``), the requests GET_ALL_TOPIC_CONFIG (21), GET_ALL_CONSUMER_OFFSET (43),
GET_ALL_DELAY_OFFSET (45), GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201), GET_TIMER_CHECK_POINT (60, with
a timer store; upstream runs it on its own 3 s schedule), applying their answers to this
broker's managers, and the schedule that runs them. Must not: replicate CommitLog bytes (the HA
stream does) or decide the broker's role (the service tells it through ``is_slave``). Mirrors
``broker/slave/SlaveSynchronize`` and ``BrokerController.handleSlaveSynchronize`` of
apache/rocketmq 5.x.

Decided (5.x rules, read from upstream):
* topics and subscription groups are applied only when the master's DataVersion differs from
  ours; then the table becomes the master's (entries the master no longer has are removed) and
  our DataVersion becomes the master's;
* consumer offsets are merged (``offsetTable.putAll``): a slave keeps commits for keys the master
  does not know (5.x stores UPDATE_CONSUMER_OFFSET sent to a slave locally,
  ``ConsumerManageProcessor``) and the master's value wins for the keys it has;
* delay progress replaces ours (``delayOffset.json`` rewritten, ``loadWhenSyncDelayOffset``).
* Schedule: upstream checks every 3 s and syncs when 10 s have passed since the last sync; we
  check every ``min(3 s, slaveSynchronizeIntervalMs)`` and also sync at once when the master
  address changes (a new master or a restart), so a fresh slave serves the master's topics and
  offsets right after its first registration.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import structlog

from rocketpy.broker.offsets import ConsumerOffsetManager
from rocketpy.broker.subscription_group import SubscriptionGroupManager
from rocketpy.broker.topic_config import TopicConfigManager
from rocketpy.common.clock import SYSTEM_CLOCK, Clock
from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.common.errors import CodecError, RemoteError, RemotingError
from rocketpy.remoting.protocol.body.config_shapes import (
    DelayOffsetTable,
    decode_consumer_offsets,
    decode_delay_offsets,
    decode_subscription_groups,
    decode_topics,
)
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.transport.client import RemotingClient

log = structlog.get_logger(__name__)

#: ``handleSlaveSynchronize``: the scheduled check runs every 3 s.
CHECK_INTERVAL_MS = 3000


class SyncAbandoned(Exception):
    """The broker stopped being a slave of the master a sync was fetching from."""


class TimerCheckpointSink(Protocol):
    """Where the master's timer checkpoint goes (the TimerMessageStore)."""

    async def apply_synced_checkpoint(self, body: bytes) -> None:
        """Adopt the master's GET_TIMER_CHECK_POINT answer."""
        ...


class DelayOffsetSink(Protocol):
    """Where synced delay progress goes (the ScheduleMessageService)."""

    async def apply_synced(self, table: DelayOffsetTable) -> None:
        """Replace the delay progress with the master's and persist it."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class SyncStatistics:
    """What the synchronizer has done so far."""

    master_addr: str | None
    syncs: int
    failures: int
    last_sync_ms: int | None


class SlaveSynchronize:
    """Pulls topics, offsets, delay progress and groups from the master."""

    def __init__(
        self,
        client: RemotingClient,
        *,
        topics: TopicConfigManager,
        groups: SubscriptionGroupManager,
        offsets: ConsumerOffsetManager,
        delay_offsets: DelayOffsetSink,
        self_addr: Callable[[], str],
        is_slave: Callable[[], bool],
        timeout_ms: int = 3000,
        clock: Clock = SYSTEM_CLOCK,
        timer_checkpoint: TimerCheckpointSink | None = None,
    ) -> None:
        """Args: ``client`` the broker's outbound remoting client; the four managers receive
        what the master has; ``self_addr`` this broker's address (never sync from ourselves);
        ``is_slave`` whether the broker is a slave now (checked again before anything fetched
        is applied); ``timeout_ms`` the deadline of each request; ``clock`` monotonic time for
        the schedule; ``timer_checkpoint`` the timer store (GET_TIMER_CHECK_POINT, 5.x), if
        any."""
        self._client = client
        self._timer = timer_checkpoint
        self._topics = topics
        self._groups = groups
        self._offsets = offsets
        self._delay = delay_offsets
        self._self_addr = self_addr
        self._is_slave = is_slave
        self._timeout_s = timeout_ms / 1000
        self._clock = clock
        self._master_addr: str | None = None
        self._addr_changed = asyncio.Event()
        self._syncs = 0
        self._failures = 0
        self._last_sync_ms: int | None = None

    @property
    def master_addr(self) -> str | None:
        """The master's remoting address, when known."""
        return self._master_addr

    def set_master_addr(self, addr: str | None) -> None:
        """``setMasterAddr``: follow ``addr`` from now on (a change triggers a sync)."""
        addr = addr or None
        if addr == self._master_addr:
            return
        log.info("slave synchronize master address changed", old=self._master_addr, new=addr)
        self._master_addr = addr
        if addr is not None:
            self._addr_changed.set()

    def statistics(self) -> SyncStatistics:
        """Master address, sync counts and the monotonic time of the last full sync."""
        return SyncStatistics(master_addr=self._master_addr, syncs=self._syncs,
                              failures=self._failures,
                              last_sync_ms=self._last_sync_ms)  # fmt: skip

    # -- the schedule ----------------------------------------------------------------------

    async def run(self, stop: asyncio.Event, interval_ms: int) -> None:
        """Sync every ``interval_ms`` while the broker is a slave, and at once on a new master
        address.

        Runs until ``stop`` is set or the task is cancelled. Failures are logged and retried
        at the next check.
        """
        check_s = min(CHECK_INTERVAL_MS, interval_ms) / 1000
        while not stop.is_set():
            wanted = self._addr_changed.is_set()
            self._addr_changed.clear()
            last = self._last_sync_ms
            due = last is None or self._clock.monotonic_ms() - last >= interval_ms
            if self._is_slave() and (due or wanted):
                await self.sync_all()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(check_s):
                    await self._addr_changed.wait()

    async def sync_all(self) -> bool:
        """``syncAll``: topics, consumer offsets, delay offsets, subscription groups.

        Returns:
            True when every part was fetched and applied; False when there is no master
            address or a request failed (logged; the next check retries).
        """
        addr = self._master_addr
        if addr is None or addr == self._self_addr():
            return False
        ok = True
        parts = [
            self._sync_topic_config,
            self._sync_consumer_offset,
            self._sync_delay_offset,
            self._sync_subscription_group_config,
        ]
        if self._timer is not None:
            parts.append(self._sync_timer_check_point)
        for part in parts:
            try:
                await part(addr)
            except SyncAbandoned:
                log.info("slave synchronize abandoned: role or master changed", master=addr)
                return False
            except (RemotingError, CodecError, OSError) as e:
                ok = False
                log.warning("slave synchronize failed", part=part.__name__, master=addr,
                            error=repr(e))  # fmt: skip
        self._last_sync_ms = self._clock.monotonic_ms()
        if ok:
            self._syncs += 1
        else:
            self._failures += 1
        return ok

    # -- the four parts --------------------------------------------------------------------

    async def _fetch(self, addr: str, code: int) -> bytes:
        """The master's table; raises :class:`SyncAbandoned` when, by the time it arrived, this
        broker is no longer a slave of ``addr``. A sync in flight across a role change must not
        apply the old master's tables (and DataVersion) to the new master: with the old
        master's stateVersion, the new master's next registration lost brokerId 0 at the
        NameServer to the returning old master."""
        request = RemotingCommand.request(code, {})
        response = await self._client.invoke(addr, request, self._timeout_s)
        if response.code != ResponseCode.SUCCESS:
            raise RemoteError.for_code(response.code, response.remark or "")
        if not self._is_slave() or self._master_addr != addr:
            raise SyncAbandoned(f"no longer a slave of {addr}")
        return response.body or b"{}"

    async def _sync_topic_config(self, addr: str) -> None:
        wrapper = decode_topics(await self._fetch(addr, RequestCode.GET_ALL_TOPIC_CONFIG))
        if wrapper.data_version == self._topics.data_version:
            return
        self._topics.replace_from_master(wrapper)
        await self._topics.persist()
        log.info("Update slave topic config from master", master=addr,
                 topics=len(wrapper.topic_config_table))  # fmt: skip

    async def _sync_consumer_offset(self, addr: str) -> None:
        body = await self._fetch(addr, RequestCode.GET_ALL_CONSUMER_OFFSET)
        self._offsets.merge_from_master(decode_consumer_offsets(body))
        await self._offsets.persist()
        log.debug("Update slave consumer offset from master", master=addr)

    async def _sync_delay_offset(self, addr: str) -> None:
        body = await self._fetch(addr, RequestCode.GET_ALL_DELAY_OFFSET)
        await self._delay.apply_synced(decode_delay_offsets(body))
        log.debug("Update slave delay offset from master", master=addr)

    async def _sync_timer_check_point(self, addr: str) -> None:
        if self._timer is not None:
            body = await self._fetch(addr, RequestCode.GET_TIMER_CHECK_POINT)
            await self._timer.apply_synced_checkpoint(body)
            log.debug("Update slave timer checkpoint from master", master=addr)

    async def _sync_subscription_group_config(self, addr: str) -> None:
        body = await self._fetch(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        table = decode_subscription_groups(body)
        if table.data_version == self._groups.snapshot().data_version:
            return
        self._groups.replace_from_master(table)
        await self._groups.persist()
        log.info("Update slave Subscription Group from master", master=addr,
                 groups=len(table.subscription_group_table))  # fmt: skip
