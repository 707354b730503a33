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
from collections.abc import Callable
from dataclasses import replace

import structlog

from rocketpy.broker.acting_master import HAAddressSink
from rocketpy.broker.config import BrokerConfig
from rocketpy.broker.outer_api import BrokerIdentity, BrokerOuterAPI
from rocketpy.broker.replicas_manager import ReplicasManager
from rocketpy.broker.topic_config import TopicConfigManager
from rocketpy.common.aio import TaskSet
from rocketpy.ha.config import HAConfig
from rocketpy.remoting.protocol.body.config_shapes import PERM_READ, PERM_WRITE

log = structlog.get_logger(__name__)


class NameServerRegistration:
    """Registers one broker with every NameServer, now or on its schedule."""

    def __init__(
        self,
        *,
        config: Callable[[], BrokerConfig],
        outer: BrokerOuterAPI,
        topics: TopicConfigManager,
        identity: Callable[[], BrokerIdentity],
        is_slave: Callable[[], bool],
        set_master_addr: Callable[[str | None], None],
        isolated: Callable[[], bool],
        replicas: ReplicasManager | None,
        ha_config: HAConfig | None,
        classic_ha: Callable[[], HAAddressSink | None],
        auto_ha: Callable[[], HAAddressSink | None],
        stop: asyncio.Event,
        tasks: TaskSet,
    ) -> None:
        """Nothing is sent until :meth:`register_all` or :meth:`run`.

        Args:
            config: the broker's current settings (UPDATE_BROKER_CONFIG replaces them).
            outer: the NameServer requests.
            topics: the topics registered; order topics the replies name are written back.
            identity: this broker's registration identity, read at each registration.
            is_slave: whether the broker is a slave now.
            set_master_addr: where slave sync learns the master it pulls metadata from.
            isolated: acting-master mode, pre-online still running (nothing is registered).
            replicas: controller mode's role manager (registration is fenced until it knows a
                role), else None.
            ha_config: classic HA settings, if replication is on.
            classic_ha: the classic HA service (follows the replies' ``haServerAddr``).
            auto_ha: controller mode's AutoSwitch HA service, once built.
            stop: set when the broker stops; ends the loop and any pending retry.
            tasks: the broker's tasks, where a delayed retry runs.
        """
        self._config = config
        self._outer = outer
        self._topics = topics
        self._identity = identity
        self._is_slave = is_slave
        self._set_master_addr = set_master_addr
        self._isolated = isolated
        self._replicas = replicas
        self._ha_config = ha_config
        self._classic_ha = classic_ha
        self._auto_ha = auto_ha
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
        config = self._config()
        namesrvs = config.namesrv_addr_list
        replicas = self._replicas
        if not namesrvs or (replicas is not None and not replicas.role_known):
            return  # controller mode: fenced until the controller names a role
        if self._isolated():
            return  # acting-master mode: invisible until pre-online ends
        wrapper = self._topics.wrapper()
        perm = config.broker_permission
        if perm & (PERM_READ | PERM_WRITE) != (PERM_READ | PERM_WRITE):
            wrapper = replace(
                wrapper,
                topic_config_table={
                    k: replace(v, perm=v.perm & perm) for k, v in wrapper.topic_config_table.items()
                },
            )
        who = self._identity()
        if not force and not await self._outer.need_register(namesrvs, who, wrapper):
            return
        results = await self._outer.register_broker_all(
            namesrvs,
            who,
            wrapper,
            heartbeat_timeout_ms=config.broker_not_active_timeout_ms,
            enable_acting_master=config.enable_acting_master,
        )
        for result in results:
            if result.order_topics:
                self._topics.update_order_topics(result.order_topics)
            if replicas is not None:
                self._follow_controller_master(replicas, result.ha_server_addr, result.master_addr)
            else:
                self._learn_master_ha_address(result.ha_server_addr)
            if self._is_slave():
                self._set_master_addr(result.master_addr)

    async def run(self) -> None:
        """Register every ``registerNameServerPeriod``, or as soon as :meth:`want` is called
        (then fully); failures are logged and retried at the next turn."""
        while not self._stop.is_set():
            period = self._config().register_name_server_period_ms / 1000
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(period):
                    await self._wanted.wait()
            if self._stop.is_set():
                return
            forced = self._wanted.is_set()
            self._wanted.clear()
            try:
                await self.register_all(force=forced or self._config().force_register)
            except (OSError, TimeoutError) as e:
                log.warning("register broker all failed", error=repr(e))

    def _learn_master_ha_address(self, ha_server_addr: str | None) -> None:
        """A slave without ``haMasterAddress`` follows the NameServer's ``haServerAddr``
        (``updateMasterHAServerAddrPeriodically``, ha.md section 1)."""
        ha, ha_config = self._classic_ha(), self._ha_config
        if ha is None or ha_config is None or not self._is_slave():
            return
        if ha_config.valid_master_address is None and ha_server_addr:
            ha.update_ha_master_address(ha_server_addr)

    def _follow_controller_master(
        self, replicas: ReplicasManager, ha_server_addr: str | None, master_addr: str | None
    ) -> None:
        """Controller mode, slave: the AutoSwitch client follows the registration reply's
        ``haServerAddr`` (ha.md section 1, ``changeToSlave`` then ``registerBrokerAll``).

        Decided (stricter than upstream): the address is taken only when the reply's
        ``masterAddr`` is the master the controller named, so a NameServer still listing a
        dead master does not redirect the slave; otherwise registration is retried after
        ``brokerHeartbeatInterval`` until the new master has registered.
        """
        ha = self._auto_ha()
        if ha is None or replicas.is_master or not replicas.role_known:
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
            name = f"{self._config().broker_name}/re-register"
            self._tasks.spawn(self._register_later(), name=name)

    async def _register_later(self) -> None:
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._config().broker_heartbeat_interval_ms / 1000):
                    await self._stop.wait()
        finally:
            self._retry_pending = False
        self._wanted.set()
