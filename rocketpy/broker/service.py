"""BrokerService: wires one broker -- store, metadata managers, processors, remoting server,
NameServer registration (``registration.py``), controller or acting-master mode
(``controller_setup.py``, ``acting_setup.py``) and the background services -- and runs its
start/stop sequence.

Owns: start-up (open and recover the store, load ``topics.json``/``subscriptionGroup.json``/
``consumerOffset.json``/``delayOffset.json``, bind the listener, start long polling, delayed
delivery, housekeeping, register with every NameServer) and the ordered stop of STYLE.md section 5:
unregister from the NameServers, stop accepting and finish in-flight requests (parked pulls are
answered), stop background services, persist metadata, then the store flushes, writes its
checkpoint and closes its files. Mirrors ``broker/BrokerController`` (initialize, start,
shutdown, registerBrokerAll). Must not: parse command lines (``cli/broker.py``).

Decided: the remoting server has one ``stop`` (stop accepting + drain + close), so unregistration
runs first, as upstream's ``shutdownBasicService`` does; between the two a new connection can still
be accepted and is drained like the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import structlog

from rocketpy.broker.acting_setup import ActingMasterSetup
from rocketpy.broker.broker2client import notify_consumer_ids_changed
from rocketpy.broker.config import BrokerConfig, BrokerRole
from rocketpy.broker.config_access import ServiceConfigAccess
from rocketpy.broker.controller_setup import ControllerModeSetup
from rocketpy.broker.dledger_roles import DLedgerRoles
from rocketpy.broker.long_polling import PullRequestHoldService
from rocketpy.broker.managed_store import ManagedStore, StoreFactory, default_store_factory
from rocketpy.broker.master_services import MasterReput, MasterServices, build_timer
from rocketpy.broker.metrics_manager import BrokerMetricsManager
from rocketpy.broker.outer_api import BrokerIdentity, BrokerOuterAPI
from rocketpy.broker.pop_setup import PopSetup
from rocketpy.broker.processors import build_registry
from rocketpy.broker.processors.pull import PullMessageProcessor
from rocketpy.broker.processors.send import SendMessageProcessor
from rocketpy.broker.registration import NameServerRegistration
from rocketpy.broker.replicas_manager import ReplicasManager
from rocketpy.broker.runtime_setup import RuntimeHooks, build_runtime
from rocketpy.broker.schedule import ScheduleMessageService, parse_delay_levels
from rocketpy.broker.slave_sync import SlaveSynchronize
from rocketpy.broker.store_adapter import MessageStoreAdapter
from rocketpy.broker.transaction.setup import TransactionSetup
from rocketpy.common.aio import TaskSet, periodic
from rocketpy.common.clock import SYSTEM_CLOCK, Clock
from rocketpy.common.message.client_id import UniqIdGenerator
from rocketpy.ha.autoswitch.service import AutoSwitchHAService
from rocketpy.ha.classic.service import DefaultHAService
from rocketpy.ha.config import HAConfig
from rocketpy.remoting.protocol.body.config_shapes import DataVersion
from rocketpy.remoting.protocol.frame import FrameLimits
from rocketpy.remoting.transport.client import RemotingClient
from rocketpy.remoting.transport.dispatch import Channel
from rocketpy.remoting.transport.server import RemotingServer
from rocketpy.store.config import MessageStoreConfig

log = structlog.get_logger(__name__)


class BrokerService:
    """One broker; ``start()`` returns when it serves and is registered, ``stop()`` is
    idempotent and bounded."""

    def __init__(
        self,
        config: BrokerConfig,
        store_config: MessageStoreConfig,
        *,
        store_factory: StoreFactory | None = None,
        on_fatal: Callable[[], None] = lambda: None,
        clock: Clock = SYSTEM_CLOCK,
        ha_config: HAConfig | None = None,
    ) -> None:
        """Build every component; nothing is opened or bound until :meth:`start`.

        Args:
            config: broker settings.
            store_config: message store settings (``storePathRootDir`` also holds the broker's
                ``config/*.json``).
            store_factory: opens the message store; default: ``rocketpy.store``'s MessageStore
                through :class:`~rocketpy.broker.store_adapter.MessageStoreAdapter`.
            on_fatal: called when a critical background loop dies of a bug (the CLI stops the
                process and exits non-zero; :attr:`failed` is set too).
            clock: time source.
            ha_config: classic HA settings (``haListenPort`` resolved); None: no replication.

        Raises:
            ConfigError: a bad ``messageDelayLevel``.
        """
        if store_factory is None:
            store_factory = default_store_factory(config, store_config, clock, ha_config)
        self._ha_config = ha_config
        store_root = store_config.root_dir
        max_message_size = store_config.max_message_size
        # controller mode starts fenced: no writes until the controller names a role
        is_slave = config.broker_role == BrokerRole.SLAVE or config.enable_controller_mode
        self._store_config = store_config
        self._on_fatal = on_fatal
        self._config = config
        self._clock = clock
        self._store_root = store_root
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="broker-meta")
        self._store = store_factory()
        self._levels = parse_delay_levels(config.message_delay_level)
        self._config_version = DataVersion(timestamp=clock.wall_ms())
        self._tasks = TaskSet(f"{config.broker_name}/broker")
        self._stop = asyncio.Event()
        self._meta_dirty = asyncio.Event()
        #: Set when a critical background loop died of a bug; the CLI then exits non-zero.
        self.failed = asyncio.Event()
        #: Set once the broker has a role: at start, or in controller mode once the controllers
        #: gave it one; ``on_ready`` (the CLI's boot line) is called then, once.
        self.ready = asyncio.Event()
        self.on_ready: Callable[[], None] | None = None
        self._started = False
        self._store_started = False
        self._meta_loaded = False
        self._serving = False
        #: Controller-mode membership (``enableControllerMode``), else None.
        self.replicas: ReplicasManager | None = None
        #: Controller-mode replication, built when the epoch file is opened (ha.md section 3).
        self.auto_ha: AutoSwitchHAService | None = None
        #: Slave-acting-master mode (``enableSlaveActingMaster``), else None.
        self.acting: ActingMasterSetup | None = None
        self._build(config, max_message_size, is_slave)
        if config.enable_controller_mode:
            self.replicas = ControllerModeSetup(
                config,
                client=self._client,
                registry=self.registry,
                store=self._store,
                runtime=self.runtime,
                ha_config=self._ha_config,
                master_services=self.master_services,
                address=lambda: self.address,
                bump_data_version=self.topics.bump_data_version,
                register=lambda: self.register_broker_all(force=True),
                on_auto_ha=self._attach_auto_ha,
                on_ready=self.mark_ready,
                store_root=self._store_root,
                store_config=self._store_config,
                executor=self._executor,
                clock=self._clock,
                on_fatal=self._critical_failed,
            ).replicas
        elif config.enable_acting_master:
            self.acting = ActingMasterSetup(
                config=lambda: self._config,
                client=self._client,
                registry=self.registry,
                ha_config=self._ha_config,
                ha=lambda: self.ha,
                schedule=self.schedule,
                special=self.master_services,
                offsets=self.offsets,
                address=lambda: self.address,
                ha_server_addr=lambda: self.identity().ha_server_addr,
                max_phy_offset=lambda: self._store.store_offsets().max_phy_offset,
                register=lambda: self.register_broker_all(force=True),
            )
            self.runtime.escape = self.acting.escape_put
            self.runtime.lock_on_replicas = self.acting.lock_on_replicas
            self.runtime.total_replicas = self.ha_config.total_replicas if self.ha_config else 1
        self.registration = NameServerRegistration(
            config=lambda: self._config,
            outer=self.outer,
            topics=self.topics,
            identity=self.identity,
            is_slave=lambda: self.runtime.is_slave,
            set_master_addr=self.slave_sync.set_master_addr,
            isolated=lambda: self.acting is not None and self.acting.isolated,
            replicas=self.replicas,
            ha_config=self._ha_config,
            classic_ha=lambda: self.ha,
            auto_ha=lambda: self.auto_ha,
            stop=self._stop,
            tasks=self._tasks,
        )
        self.dledger = DLedgerRoles.attach(self, store_config)  # DLedger CommitLog mode, else None

    def _attach_auto_ha(self, service: AutoSwitchHAService) -> None:
        """Controller mode: the AutoSwitch HA service, built once the epoch file is open."""
        self.auto_ha = service

    def _build(self, config: BrokerConfig, max_message_size: int, is_slave: bool) -> None:
        clock = self._clock
        self.runtime = build_runtime(
            config, self._store, self._store_root, executor=self._executor, clock=clock,
            limits=(max_message_size, max(self._levels)), is_slave=is_slave,
            hooks=RuntimeHooks(
                state_version=lambda: self.replicas.master_epoch if self.replicas else 0,
                topics_changed=self._topics_changed, groups_changed=self._meta_changed,
                ids_changed=self._notify_ids_changed, register_now=self._register_soon,
            ),
        )  # fmt: skip
        rt = self.runtime
        self.topics, self.groups, self.offsets = rt.topics, rt.groups, rt.offsets
        self.consumers, self.producers = rt.consumers, rt.producers
        self._send = SendMessageProcessor(self.runtime)
        self._pull = PullMessageProcessor(self.runtime)
        self.hold = PullRequestHoldService(
            max_offset=self._store.max_offset_in_queue,
            wake_up=self._pull.wake_up,
            check_interval_ms=(
                config.long_polling_check_interval_ms
                if config.long_polling_enable
                else config.short_polling_time_mills
            ),
            clock=clock,
            name=f"{config.broker_name}/pull-hold",
            on_failure=self._critical_failed,
        )
        self._pull.attach(self.hold)
        self._reput = MasterReput(
            self.runtime, self._store, lambda: self.acting.escape_put if self.acting else None
        )
        self.schedule = ScheduleMessageService(
            self._store,
            self._levels,
            self._store_root,
            reput=self._reput,
            executor=self._executor,
            scan_interval_ms=config.schedule_scan_interval_ms,
            persist_interval_ms=config.flush_delay_offset_interval_ms,
            clock=clock,
            on_failure=self._critical_failed,
        )
        self.registry = build_registry(
            self.runtime,
            send=self._send,
            pull=self._pull,
            delay_offsets=self.schedule.snapshot,
            config_access=ServiceConfigAccess(
                config=lambda: self._config,
                store_properties=self._store_config.to_properties,
                version=lambda: self._config_version,
                apply=self.apply_config,
            ),
        )
        self.pop = PopSetup(self.runtime, self._store_root, executor=self._executor)
        self.pop.register(self.registry)
        self.transaction = TransactionSetup(  # transactional messages, master services
            self.runtime, self.registry, self.schedule, self._send, self._reput, self._store_config
        )
        self.transaction.check.on_failure = self._critical_failed
        self.timer = build_timer(
            self._store_config, rt=self.runtime, store=self._store, reput=self._reput,
            send=self._send, registry=self.registry, clock=clock, on_failure=self._critical_failed,
        )  # fmt: skip
        self.master_services = MasterServices(self.schedule, self.transaction.master, self.timer)
        self.server = RemotingServer(
            self.registry,
            host=config.bind_address,
            port=config.listen_port,
            limits=FrameLimits(),
            idle_timeout_s=float(config.server_channel_max_idle_time_seconds),
            max_inflight_per_connection=config.max_inflight_per_connection,
            on_channel_closed=self._on_channel_closed,
            name=config.broker_name,
        )
        self.metrics = BrokerMetricsManager(
            self.runtime, store_root=self._store_root, addr=lambda: self.address
        )
        # dispatches into the registry: a NameServer's oneway 905 arrives on this connection
        self._client = RemotingClient(registry=self.registry, name=f"{config.broker_name}/outer")
        self.outer = BrokerOuterAPI(self._client, timeout_ms=config.register_broker_timeout_ms)
        self.slave_sync = SlaveSynchronize(
            self._client,
            topics=self.topics,
            groups=self.groups,
            offsets=self.offsets,
            delay_offsets=self.schedule,
            timer_checkpoint=self.timer,
            self_addr=lambda: self.address,
            is_slave=lambda: self.runtime.is_slave,
            clock=clock,
        )

    # -- properties ------------------------------------------------------------------------

    @property
    def config(self) -> BrokerConfig:
        """The effective configuration (UPDATE_BROKER_CONFIG replaces it)."""
        return self._config

    @property
    def store(self) -> ManagedStore:
        """The message store."""
        return self._store

    @property
    def ha_config(self) -> HAConfig | None:
        """Classic HA settings, if replication is on."""
        return self._ha_config

    @property
    def ha(self) -> DefaultHAService | None:
        """The classic HA service, when the default store runs with ``ha_config``."""
        return self._store.ha if isinstance(self._store, MessageStoreAdapter) else None

    @property
    def address(self) -> str:
        """``brokerIP1:port`` as registered (the real port once started)."""
        return f"{self._config.broker_ip1}:{self.server.port}"

    def identity(self) -> BrokerIdentity:
        """This broker's registration identity."""
        cfg = self._config
        ha_host = cfg.broker_ip2 or cfg.broker_ip1
        return BrokerIdentity(
            cluster_name=cfg.broker_cluster_name,
            broker_name=cfg.broker_name,
            broker_addr=self.address,
            broker_id=self.replicas.route_broker_id if self.replicas else cfg.broker_id,
            ha_server_addr=f"{ha_host}:{self._ha_port()}",
        )

    def _ha_port(self) -> int:
        if self.auto_ha is not None:
            return self.auto_ha.port
        return self.ha.port if self.ha else self.server.port + 1

    # -- life cycle ------------------------------------------------------------------------

    async def start(self) -> None:
        """Recover the store, load metadata, bind, start services, register.

        A failure part-way stops what was started (store closed, port released) and re-raises;
        metadata files are not rewritten unless they were loaded.
        """
        try:
            await self._start()
        except BaseException:
            log.exception("broker start failed, releasing what was started")
            await self.stop()
            raise

    async def _start(self) -> None:
        structlog.contextvars.bind_contextvars(
            cluster=self._config.broker_cluster_name,
            broker_name=self._config.broker_name,
            broker_id=self._config.broker_id,
        )
        self._started = True
        await self._store.start()
        self._store_started = True
        if self.replicas is not None:
            await self.replicas.open()
        if self.auto_ha is not None and self._ha_config is not None:
            await self.auto_ha.start(self._config.bind_address, self._ha_config.ha_listen_port)
        await self.topics.load()
        await self.groups.load()
        await self.offsets.load()
        await self.master_services.load()
        self._meta_loaded = True
        self._store.add_arrival_listener(self.hold.notify_message_arriving)
        await self.pop.start()
        await self.server.start()
        self._serving = True
        self.runtime.store_host = (self._config.broker_ip1, self.server.port)
        self._store.set_store_host(self.runtime.store_host)
        self.runtime.uniq_ids = UniqIdGenerator(
            self._config.broker_ip1,
            os.getpid(),
            self.runtime.rng.getrandbits(32),
            now_ms=self.runtime.clock.wall_ms(),
        )
        await self.hold.start()
        if not self.runtime.is_slave and self.acting is None:
            await self.master_services.start()
        self._start_loops()
        await self.metrics.start()
        if self.replicas is not None:
            await self.replicas.start()
        if self.dledger is not None:
            self.dledger.start()
        if self.acting is not None:
            await self.acting.start()  # registers now, or after pre-online
        else:
            await self.register_broker_all(force=True)
        log.info("broker started", address=self.address, namesrv=self._config.namesrv_addr)
        if self.replicas is None or self.replicas.role_known:
            self.mark_ready()

    def mark_ready(self) -> None:
        """The broker has a role: set :attr:`ready` and call ``on_ready`` (first time only).
        In controller mode the role change that gives it one calls this."""
        if not self.ready.is_set():
            self.ready.set()
            if self.on_ready is not None:
                self.on_ready()

    def _critical_failed(self, exc: BaseException) -> None:
        log.error("critical broker task failed, the broker must stop", error=repr(exc))
        self.failed.set()
        self._on_fatal()

    def _critical(self, task: asyncio.Task[object]) -> None:
        if not task.cancelled() and task.exception() is not None:
            self._critical_failed(task.exception() or RuntimeError(task.get_name()))

    def _start_loops(self) -> None:
        cfg = self._config
        name = cfg.broker_name
        for task in (
            self._tasks.spawn(self.registration.run(), name=f"{name}/register"),
            self._tasks.spawn(self._meta_loop(), name=f"{name}/persist-meta"),
            self._tasks.spawn(
                self.slave_sync.run(self._stop, cfg.slave_synchronize_interval_ms),
                name=f"{name}/slave-sync",
            ),
        ):
            task.add_done_callback(self._critical)
        self._tasks.spawn(
            periodic(
                cfg.flush_consumer_offset_interval_ms / 1000,
                self.offsets.persist_if_dirty,
                stop=self._stop,
                name="persist-offsets",
            ),
            name=f"{name}/persist-offsets",
        )
        self._tasks.spawn(
            periodic(
                cfg.client_scan_interval_ms / 1000,
                self._scan_clients,
                stop=self._stop,
                name="client-scan",
            ),
            name=f"{name}/client-scan",
        )
        self._tasks.spawn(
            periodic(1.0, self.runtime.sample_stats, stop=self._stop, name="stats"),
            name=f"{name}/stats",
        )

    async def stop(self) -> None:
        """Unregister, drain and close connections, stop services, persist, close the store.

        Idempotent; after a failed start it undoes only what was done.
        """
        if not self._started:
            return
        self._started = False
        budget = self._config.shutdown_timeout_ms / 1000
        if self.replicas is not None:
            await self.replicas.stop()
        if self.dledger is not None:
            await self.dledger.stop()
        if self._serving:
            log.info("broker shutdown: unregister from name servers")
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(budget / 3):
                    await self.outer.unregister_broker_all(
                        self._config.namesrv_addr_list, self.identity()
                    )
            log.info("broker shutdown: stop accepting, finish in-flight requests")
            self.hold.wake_all()
            self.pop.wake_all()
            await self.hold.wait_woken(budget / 6)
            await self.server.stop(timeout_s=budget / 3)
            self._serving = False
        self._stop.set()
        await self.hold.stop()
        await self.pop.stop()
        if self.acting is not None:
            await self.acting.stop()
        await self.master_services.close()
        await self._tasks.cancel_all()
        await self.metrics.stop()
        await self._client.close()
        if self._meta_loaded:
            log.info("broker shutdown: persist metadata")
            await self._persist_all()
        await self._close_store_and_executor()
        structlog.contextvars.unbind_contextvars("cluster", "broker_name", "broker_id")
        log.info("broker shutdown: done")

    async def _close_store_and_executor(self) -> None:
        if self.auto_ha is not None:
            log.info("broker shutdown: stop HA")
            await self.auto_ha.stop()
        if self._store_started:
            self._store_started = False
            log.info("broker shutdown: flush commit log and queues, write checkpoint, close files")
            await self._store.stop()
        # every write was awaited above, so nothing is queued: no need to block the loop
        self._executor.shutdown(wait=False)

    async def _persist_all(self) -> None:
        for persist in (self.topics.persist, self.groups.persist, self.offsets.persist):
            try:
                await persist()
            except OSError:
                log.exception("persist metadata failed")

    # -- registration ----------------------------------------------------------------------

    async def register_broker_all(self, *, force: bool) -> None:
        """``registerBrokerAll`` with every NameServer (:class:`NameServerRegistration`)."""
        await self.registration.register_all(force=force)

    def _register_soon(self) -> None:
        # not ``self.registration.want`` itself: the registration is built after the runtime
        self.registration.want()

    def _topics_changed(self) -> None:
        self._meta_dirty.set()
        self.registration.want()

    def _meta_changed(self) -> None:
        self._meta_dirty.set()

    async def _meta_loop(self) -> None:
        while not self._stop.is_set():
            await self._meta_dirty.wait()
            self._meta_dirty.clear()
            try:
                await self.topics.persist()
                await self.groups.persist()
            except OSError:
                log.exception("persist topics/groups failed; retrying")
                self._meta_dirty.set()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(1.0):
                        await self._stop.wait()

    # -- clients ---------------------------------------------------------------------------

    def _on_channel_closed(self, channel: Channel) -> None:
        self.producers.on_channel_closed(channel)
        self.consumers.on_channel_closed(channel)

    async def _scan_clients(self) -> None:
        for channel in (
            self.producers.scan_not_active_channels() + self.consumers.scan_not_active_channels()
        ):
            channel.close()

    def _notify_ids_changed(self, group: str, channels: Sequence[Channel]) -> None:
        if self._config.notify_consumer_ids_changed_enable:
            notify_consumer_ids_changed(group, channels)

    # -- live config -----------------------------------------------------------------------

    def apply_config(self, config: BrokerConfig) -> None:
        """Swap in an updated configuration (UPDATE_BROKER_CONFIG)."""
        self._config = config
        self.runtime.config = config
        self.topics.config = config
        self.groups.config = config
        self._config_version = self._config_version.next_version(self._clock.wall_ms())
        self.registration.want()
