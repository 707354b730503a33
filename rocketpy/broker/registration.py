"""NameServerRegistration: one broker's ``registerBrokerAll`` and when it runs.

Owns: the registration request built from the broker's topics and identity (permissions
narrowed by ``brokerPermission``), the light ``need_register`` check, what the replies teach
(order topics, the master's HA address for a classic slave, the controller's master for a
controller-mode slave, the master address slave sync pulls from), the periodic loop
(``registerNameServerPeriod``, sooner when something asks) and the delayed retry of controller
mode. ``service.py`` creates one per broker. Mirrors ``BrokerController.registerBrokerAll`` and
``doRegisterBrokerAll``. Must not: unregister (the service does it first thing at stop) or
own the components it reads.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import replace
from typing import TYPE_CHECKING

import structlog

from rocketpy.common.aio import TaskSet
from rocketpy.store.config_shapes import PERM_READ, PERM_WRITE

if TYPE_CHECKING:
    from rocketpy.broker.service import BrokerService

log = structlog.get_logger(__name__)


class NameServerRegistration:
    """Registers ``svc`` with every NameServer, now or on its schedule."""

    def __init__(self, svc: BrokerService, stop: asyncio.Event, tasks: TaskSet) -> None:
        """Nothing is sent until :meth:`register_all` or :meth:`run`.

        Args:
            svc: the broker whose components are read at each registration (its controller
                and acting-master parts may be built after this object).
            stop: set when the broker stops; ends the loop and any pending retry.
            tasks: the broker's tasks, where a delayed retry runs.
        """
        self._svc = svc
        self._stop = stop
        self._tasks = tasks
        self._wanted = asyncio.Event()
        self._retry_pending = False

    def want(self) -> None:
        """Register at the loop's next turn, fully (not only when the NameServers say the
        topics changed): topics changed, a role changed, the config was updated."""
        self._wanted.set()

    async def register_all(self, *, force: bool) -> None:
        """``registerBrokerAll``: full registration with every NameServer (light path first
        when ``force`` is False)."""
        svc = self._svc
        config = svc.config
        namesrvs = config.namesrv_addr_list
        if not namesrvs or (svc.replicas is not None and not svc.replicas.role_known):
            return  # controller mode: fenced until the controller names a role
        if svc.acting is not None and svc.acting.isolated:
            return  # acting-master mode: invisible until pre-online ends
        wrapper = svc.topics.wrapper()
        perm = config.broker_permission
        if perm & (PERM_READ | PERM_WRITE) != (PERM_READ | PERM_WRITE):
            wrapper = replace(
                wrapper,
                topic_config_table={
                    k: replace(v, perm=v.perm & perm) for k, v in wrapper.topic_config_table.items()
                },
            )
        who = svc.identity()
        if not force and not await svc.outer.need_register(namesrvs, who, wrapper):
            return
        results = await svc.outer.register_broker_all(
            namesrvs,
            who,
            wrapper,
            heartbeat_timeout_ms=config.broker_not_active_timeout_ms,
            enable_acting_master=config.enable_acting_master,
        )
        for result in results:
            if result.order_topics:
                svc.topics.update_order_topics(result.order_topics)
            if svc.replicas is not None:
                self._follow_controller_master(result.ha_server_addr, result.master_addr)
            else:
                self._learn_master_ha_address(result.ha_server_addr)
            if svc.runtime.is_slave:
                svc.slave_sync.set_master_addr(result.master_addr)

    async def run(self) -> None:
        """Register every ``registerNameServerPeriod``, or as soon as :meth:`want` is called
        (then fully); failures are logged and retried at the next turn."""
        while not self._stop.is_set():
            period = self._svc.config.register_name_server_period_ms / 1000
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(period):
                    await self._wanted.wait()
            if self._stop.is_set():
                return
            forced = self._wanted.is_set()
            self._wanted.clear()
            try:
                await self.register_all(force=forced or self._svc.config.force_register)
            except (OSError, TimeoutError) as e:
                log.warning("register broker all failed", error=repr(e))

    def _learn_master_ha_address(self, ha_server_addr: str | None) -> None:
        """A slave without ``haMasterAddress`` follows the NameServer's ``haServerAddr``
        (``updateMasterHAServerAddrPeriodically``, ha.md section 1)."""
        svc = self._svc
        ha, ha_config = svc.ha, svc.ha_config
        if ha is None or ha_config is None or not svc.runtime.is_slave:
            return
        if ha_config.valid_master_address is None and ha_server_addr:
            ha.update_ha_master_address(ha_server_addr)

    def _follow_controller_master(
        self, ha_server_addr: str | None, master_addr: str | None
    ) -> None:
        """Controller mode, slave: the AutoSwitch client follows the registration reply's
        ``haServerAddr`` (ha.md section 1, ``changeToSlave`` then ``registerBrokerAll``).

        Decided (stricter than upstream): the address is taken only when the reply's
        ``masterAddr`` is the master the controller named, so a NameServer still listing a
        dead master does not redirect the slave; otherwise registration is retried after
        ``brokerHeartbeatInterval`` until the new master has registered.
        """
        svc = self._svc
        replicas, ha = svc.replicas, svc.auto_ha
        if replicas is None or ha is None or replicas.is_master or not replicas.role_known:
            return
        if ha_server_addr and master_addr == replicas.role.master_address:
            ha.update_ha_master_address(ha_server_addr)
            return
        log.info(
            "name server does not list the controller's master yet, registering again",
            listed=master_addr,
            master=replicas.role.master_address,
        )
        if not self._retry_pending:
            self._retry_pending = True
            self._tasks.spawn(self._register_later(), name=f"{svc.config.broker_name}/re-register")

    async def _register_later(self) -> None:
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._svc.config.broker_heartbeat_interval_ms / 1000):
                    await self._stop.wait()
        finally:
            self._retry_pending = False
        self._wanted.set()
