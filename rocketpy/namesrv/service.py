"""NamesrvService: one NameServer -- its tables, KV store, remoting server and housekeeping.

Owns: start-up (load the KV file, bind), the scan that unregisters brokers whose heartbeat timed
out, unregistering brokers whose channel closed (``BrokerHousekeepingService``), sending
NOTIFY_MIN_BROKER_ID_CHANGE, config updates, and the stop sequence. Mirrors ``NamesrvController``.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import cast

import structlog

from rocketpy.common.aio import TaskSet, periodic
from rocketpy.common.atomic_file import write_atomic_async
from rocketpy.common.clock import SYSTEM_CLOCK, Clock
from rocketpy.common.codes import RequestCode
from rocketpy.common.properties import render_properties
from rocketpy.namesrv.config import NamesrvConfig
from rocketpy.namesrv.kv_config import KVConfigManager
from rocketpy.namesrv.processors import DefaultRequestProcessor
from rocketpy.namesrv.route_info import MinIdChange, RouteInfoManager
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.protocol.frame import FrameLimits
from rocketpy.remoting.protocol.headers.base import to_ext
from rocketpy.remoting.protocol.headers.namesrv import NotifyMinBrokerIdChangeRequestHeader
from rocketpy.remoting.transport.dispatch import Channel, ProcessorRegistry
from rocketpy.remoting.transport.server import RemotingServer

log = structlog.get_logger(__name__)


class NamesrvService:
    """A NameServer; ``start()`` returns when it listens, ``stop()`` is idempotent."""

    def __init__(self, config: NamesrvConfig, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self._config = config
        self._clock = clock
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="namesrv-io")
        self.routes = RouteInfoManager(
            notify_min_broker_id_changed=config.notify_min_broker_id_changed,
            delete_topic_with_registration=config.delete_topic_with_broker_registration,
        )
        self.kv = KVConfigManager(Path(config.kv_config_path), self._executor)
        self.registry = ProcessorRegistry()
        self._processor = DefaultRequestProcessor(
            config=lambda: self._config,
            update_config=self._update_config,
            routes=self.routes,
            kv=self.kv,
            clock=clock,
            started_ms=clock.monotonic_ms(),
            notify_min_id=self._notify_min_id,
        )
        self._processor.register(self.registry)
        self.server = RemotingServer(
            self.registry,
            host=config.bind_address,
            port=config.listen_port,
            limits=FrameLimits(config.server_frame_max_length),
            idle_timeout_s=float(config.server_channel_max_idle_time_seconds),
            on_channel_closed=self._on_channel_closed,
            name="namesrv",
        )
        self._tasks = TaskSet("namesrv")
        self._stop = asyncio.Event()
        self._started = False

    @property
    def config(self) -> NamesrvConfig:
        """The effective configuration (replaced by UPDATE_NAMESRV_CONFIG)."""
        return self._config

    @property
    def address(self) -> str:
        """``host:port`` actually bound."""
        return self.server.address

    async def start(self) -> None:
        """Load the KV store, bind, start the broker scan."""
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._executor, self.kv.load)
        await self.server.start()
        interval = self._config.scan_not_active_broker_interval_ms / 1000
        self._tasks.spawn(
            periodic(interval, self._scan, stop=self._stop, name="namesrv/scan-not-active"),
            name="namesrv/scan-not-active",
        )
        self._started = True
        log.info("name server started", address=self.address)

    async def stop(self) -> None:
        """Stop accepting, close channels, stop housekeeping, release the executor."""
        if not self._started:
            self._executor.shutdown(wait=False)
            return
        self._started = False
        self._stop.set()
        await self.server.stop()
        await self._tasks.cancel_all()
        self._executor.shutdown(wait=True)
        log.info("name server stopped")

    async def _scan(self) -> None:
        now = self._clock.monotonic_ms()
        for target, channel in self.routes.expired(now):
            log.warning(
                "The broker channel expired",
                cluster=target.cluster,
                addr=target.addr,
                broker=target.broker_name,
            )
            change = self.routes.unregister_broker(target)
            if change is not None:
                self._notify_min_id(change)
            # Route tables hold channels opaquely; the ones stored here are always our Channels.
            cast(Channel, channel).close()

    def _on_channel_closed(self, channel: Channel) -> None:
        for target in self.routes.targets_for_channel(channel):
            log.info(
                "the broker's channel destroyed, clean it's data structure",
                addr=target.addr,
                broker=target.broker_name,
                peer=channel.peer,
            )
            change = self.routes.unregister_broker(target)
            if change is not None:
                self._notify_min_id(change)

    def _notify_min_id(self, change: MinIdChange) -> None:
        header = NotifyMinBrokerIdChangeRequestHeader(
            min_broker_id=change.min_broker_id,
            broker_name=change.broker_name,
            min_broker_addr=change.min_broker_addr,
            offline_broker_addr=change.offline_broker_addr,
            ha_broker_addr=change.ha_broker_addr,
        )
        for stored in change.channels:
            channel = cast(Channel, stored)
            if not channel.is_closed:
                request = RemotingCommand.request(
                    RequestCode.NOTIFY_MIN_BROKER_ID_CHANGE, to_ext(header), oneway=True
                )
                channel.invoke_oneway(request)

    async def _update_config(self, values: dict[str, str]) -> None:
        self._config = self._config.with_updates(values)
        text = render_properties(self._config.to_properties())
        path = Path(self._config.config_store_path)
        await write_atomic_async(self._executor, path, text.encode("utf-8"))
