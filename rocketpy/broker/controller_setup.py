"""ControllerModeSetup: wires controller mode (``enableControllerMode``) into one broker.

Owns: building the :class:`ReplicasManager` (persistent broker id, epoch file, role changes
from the controller), registering its two requests (NOTIFY_BROKER_ROLE_CHANGED,
GET_BROKER_EPOCH_CACHE), building the AutoSwitch HA service once the epoch file is open, and
what a role change does to the broker (writes on or off, the master services, a new
DataVersion, an immediate registration). ``service.py`` creates one when controller mode is on
and keeps the manager and HA service as ``replicas``/``auto_ha``. Mirrors the controller-mode
branches of ``BrokerController.initialize`` and ``ReplicasManager.changeToMaster/Slave``'s
callbacks. Must not: hold state of its own beyond the objects it built.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from concurrent.futures import Executor
from pathlib import Path

import structlog

from rocketpy.broker.acting_master import SpecialService
from rocketpy.broker.config import BrokerConfig
from rocketpy.broker.processors.role_change import RoleChangeProcessor
from rocketpy.broker.replicas_manager import ReplicasManager, build_replicas_manager
from rocketpy.broker.role_handler import RoleHandler
from rocketpy.broker.runtime import BrokerRuntime
from rocketpy.broker.store_adapter import MessageStoreAdapter
from rocketpy.broker.store_api import BrokerStore
from rocketpy.common.clock import Clock
from rocketpy.ha.autoswitch.service import AutoSwitchHAService
from rocketpy.ha.config import HAConfig
from rocketpy.remoting.transport.client import RemotingClient
from rocketpy.remoting.transport.dispatch import ProcessorRegistry
from rocketpy.store.config import MessageStoreConfig
from rocketpy.store.epoch_cache import EpochFileCache


class ControllerModeSetup:
    """The controller-mode pieces of one broker."""

    def __init__(
        self,
        config: BrokerConfig,
        *,
        client: RemotingClient,
        registry: ProcessorRegistry,
        store: BrokerStore,
        runtime: BrokerRuntime,
        ha_config: HAConfig | None,
        master_services: SpecialService,
        address: Callable[[], str],
        bump_data_version: Callable[[], None],
        register: Callable[[], Awaitable[None]],
        on_auto_ha: Callable[[AutoSwitchHAService], None],
        on_ready: Callable[[], None],
        store_root: Path,
        store_config: MessageStoreConfig,
        executor: Executor,
        clock: Clock,
        on_fatal: Callable[[BaseException], None],
    ) -> None:
        """Build the replicas manager; register its requests in ``registry``.

        Args:
            config: the broker's settings at start (cluster, name, configured id, controllers).
            client: its outbound remoting client (controller requests go through it).
            registry: where the broker's request processors are registered.
            store: the message store (its max physical offset is reported to controllers).
            runtime: the shared broker state; a role change sets ``is_slave``.
            ha_config: HA settings; with the default store they turn on AutoSwitch HA.
            master_services: what runs on a master only (schedule and transaction check).
            address: this broker's ``ip:port`` (the real port once bound).
            bump_data_version: a role change registers topics under a new DataVersion.
            register: a forced ``registerBrokerAll``.
            on_auto_ha: the AutoSwitch HA service was built (the broker starts and stops it).
            on_ready: the broker has its first role (idempotent).
            store_root: ``storePathRootDir``.
            store_config: where the identity and epoch files live.
            executor: where the identity and epoch files are read and written.
            clock: time source.
            on_fatal: a critical controller-mode loop died of a bug.
        """
        self._store = store
        self._runtime = runtime
        self._ha_config = ha_config
        self._master_services = master_services
        self._bump_data_version = bump_data_version
        self._register = register
        self._on_auto_ha = on_auto_ha
        self._on_ready = on_ready
        self._local_broker_id = config.broker_id
        self._clock = clock

        def max_offset() -> int:
            return store.store_offsets().max_phy_offset

        self.replicas: ReplicasManager = build_replicas_manager(
            config,
            store_root,
            client,
            address=address,
            max_offset=max_offset,
            on_role_changed=self._on_role_changed,
            on_fatal=on_fatal,
            handler_factory=self._auto_switch_factory(),
            executor=executor,
            clock=clock,
            identity_path=store_config.broker_identity_path,
            epoch_path=store_config.epoch_file_path,
        )
        processor = RoleChangeProcessor(self.replicas, max_offset)
        for code, handler in processor.handlers().items():
            registry.register(code, handler)

    def _auto_switch_factory(self) -> Callable[[EpochFileCache], RoleHandler] | None:
        """Builds the AutoSwitch HA service over the opened epoch file (default store with HA
        settings only; otherwise the epoch-only handler replicates nothing)."""
        store, ha_config = self._store, self._ha_config
        if not isinstance(store, MessageStoreAdapter) or ha_config is None:
            return None

        def report(members: frozenset[int]) -> None:
            self.replicas.report_sync_state_set_nowait(members)

        def build(epochs: EpochFileCache) -> RoleHandler:
            service = AutoSwitchHAService(
                store.store,
                epochs,
                ha_config,
                # ReplicasManager replaces it (set_local_broker_id) as soon as it has the
                # controller-assigned id, before any role change
                local_broker_id=self._local_broker_id,
                clock=self._clock,
                on_sync_state_set_changed=report,
            )
            store.auto_ha = service
            self._on_auto_ha(service)
            return service

        return build

    async def _on_role_changed(self) -> None:
        """After a controller role change: writes on or off, master-only services, a new
        DataVersion with ``stateVersion = masterEpoch`` and an immediate NameServer
        registration under the new broker id (controller.md section 10)."""
        runtime, replicas = self._runtime, self.replicas
        was_slave = runtime.is_slave
        runtime.is_slave = not replicas.is_master
        structlog.contextvars.bind_contextvars(broker_id=replicas.route_broker_id)
        if was_slave and replicas.is_master:
            await self._master_services.start()
        elif not was_slave and not replicas.is_master:
            await self._master_services.stop()
        self._bump_data_version()
        await self._register()
        self._on_ready()  # the first role: the boot line (idempotent)
