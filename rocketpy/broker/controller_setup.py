"""ControllerModeSetup: wires controller mode (``enableControllerMode``) into one BrokerService.

Owns: building the :class:`ReplicasManager` (persistent broker id, epoch file, role changes
from the controller), registering its two requests (NOTIFY_BROKER_ROLE_CHANGED,
GET_BROKER_EPOCH_CACHE), building the AutoSwitch HA service once the epoch file is open, and
what a role change does to the broker (writes on or off, the schedule service, a new
DataVersion, an immediate registration). ``service.py`` creates one when controller mode is on
and keeps the manager and HA service as ``replicas``/``auto_ha``. Mirrors the controller-mode
branches of ``BrokerController.initialize`` and ``ReplicasManager.changeToMaster/Slave``'s
callbacks. Must not: hold state of its own beyond the objects it built.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor
from pathlib import Path
from typing import TYPE_CHECKING

import structlog

from rocketpy.broker.processors.role_change import RoleChangeProcessor
from rocketpy.broker.replicas_manager import ReplicasManager, build_replicas_manager
from rocketpy.broker.role_handler import RoleHandler
from rocketpy.broker.store_adapter import MessageStoreAdapter
from rocketpy.common.clock import Clock
from rocketpy.ha.autoswitch.service import AutoSwitchHAService
from rocketpy.remoting.transport.client import RemotingClient
from rocketpy.store.config import MessageStoreConfig
from rocketpy.store.epoch_cache import EpochFileCache

if TYPE_CHECKING:
    from rocketpy.broker.service import BrokerService


class ControllerModeSetup:
    """The controller-mode pieces of one broker."""

    def __init__(
        self,
        svc: BrokerService,
        *,
        client: RemotingClient,
        store_root: Path,
        store_config: MessageStoreConfig,
        executor: Executor,
        clock: Clock,
        on_fatal: Callable[[BaseException], None],
    ) -> None:
        """Build the replicas manager; register its requests in ``svc.registry``.

        Args:
            svc: the broker (built, not started).
            client: its outbound remoting client (controller requests go through it).
            store_root: ``storePathRootDir``.
            store_config: where the identity and epoch files live.
            executor: where the identity and epoch files are read and written.
            clock: time source.
            on_fatal: a critical controller-mode loop died of a bug.
        """
        self._svc = svc
        self._clock = clock
        self.replicas: ReplicasManager = build_replicas_manager(
            svc.config,
            store_root,
            client,
            address=lambda: svc.address,
            max_offset=lambda: svc.store.store_offsets().max_phy_offset,
            on_role_changed=self._on_role_changed,
            on_fatal=on_fatal,
            handler_factory=self._auto_switch_factory(),
            executor=executor,
            clock=clock,
            identity_path=store_config.broker_identity_path,
            epoch_path=store_config.epoch_file_path,
        )
        processor = RoleChangeProcessor(
            self.replicas, lambda: svc.store.store_offsets().max_phy_offset
        )
        for code, handler in processor.handlers().items():
            svc.registry.register(code, handler)

    def _auto_switch_factory(self) -> Callable[[EpochFileCache], RoleHandler] | None:
        """Builds the AutoSwitch HA service over the opened epoch file (default store with HA
        settings only; otherwise the epoch-only handler replicates nothing)."""
        svc = self._svc
        store, ha_config = svc.store, svc.ha_config
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
                local_broker_id=svc.config.broker_id,
                clock=self._clock,
                on_sync_state_set_changed=report,
            )
            svc.auto_ha = store.auto_ha = service
            return service

        return build

    async def _on_role_changed(self) -> None:
        """After a controller role change: writes on or off, master-only services, a new
        DataVersion with ``stateVersion = masterEpoch`` and an immediate NameServer
        registration under the new broker id (controller.md section 10)."""
        svc, replicas = self._svc, self.replicas
        was_slave = svc.runtime.is_slave
        svc.runtime.is_slave = not replicas.is_master
        structlog.contextvars.bind_contextvars(broker_id=replicas.route_broker_id)
        if was_slave and replicas.is_master:
            await svc.schedule.start()
        elif not was_slave and not replicas.is_master:
            await svc.schedule.stop()
        svc.topics.bump_data_version()
        await svc.register_broker_all(force=True)
        svc.mark_ready()  # the first role: the boot line (idempotent)
