"""ReplicasManager: the broker side of controller mode (controller.md sections 8-10).

Owns: the start-up states (INITIAL -> FIRST_TIME_SYNC_CONTROLLER_METADATA_DONE ->
REGISTER_TO_CONTROLLER_DONE -> RUNNING), finding the controller leader, the persistent broker id
(through :class:`~rocketpy.broker.broker_id.BrokerIdAllocator`), registering with the controller,
self-election, heartbeats to every controller, the periodic controller-metadata and replica-info
syncs that catch missed notifications, role changes (to master / to slave, guarded by the master
epoch) and SyncStateSet reports (CONTROLLER_ALTER_SYNC_STATE_SET). Must not: replicate data (the
:class:`~rocketpy.broker.role_handler.RoleHandler` does) or register with NameServers (it calls
``on_role_changed`` and the broker re-registers). Mirrors ``broker/controller/ReplicasManager``
of apache/rocketmq 5.1.1+.

Every role change goes through :class:`~rocketpy.broker.replica_role.ReplicaRole`, which applies
it under one lock and only when its master epoch is newer, so a NOTIFY_BROKER_ROLE_CHANGED, an
election answer and a metadata sync that carry the same news apply it once. Controller requests
go to the leader found by :class:`~rocketpy.broker.controller_api.ControllerLeader`.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from rocketpy.broker.broker_id import BrokerIdAllocator, BrokerIdentityMismatch
from rocketpy.broker.config import BrokerConfig
from rocketpy.broker.controller_api import BrokerControllerAPI, ControllerLeader, MasterInfo
from rocketpy.broker.replica_role import ReplicaRole
from rocketpy.broker.role_handler import EpochOnlyRoleHandler, RoleHandler
from rocketpy.common.aio import TaskSet, periodic
from rocketpy.common.clock import SYSTEM_CLOCK, Clock
from rocketpy.common.codes import ResponseCode
from rocketpy.common.errors import RemoteError, RemotingError, StoreError
from rocketpy.remoting.protocol.bodies.controller import SyncStateSet
from rocketpy.remoting.protocol.headers.controller import BrokerHeartbeatRequestHeader
from rocketpy.remoting.transport.client import RemotingClient
from rocketpy.store.broker_identity import (
    broker_identity_path,
    broker_metadata_file,
    temp_broker_identity_path,
    temp_broker_metadata_file,
)
from rocketpy.store.epoch_cache import EPOCH_FILE_NAME, EpochFileCache

log = structlog.get_logger(__name__)


#: ``ReplicasManager`` retries the whole start sequence every 5 s until it succeeds.
START_RETRY_S = 5.0
#: The first replica-info sync runs 3 s after start (``scheduleAtFixedRate(..., 3000, ...)``).
FIRST_SYNC_DELAY_S = 3.0


class State(enum.IntEnum):
    """``ReplicasManager.State``."""

    INITIAL = 0
    FIRST_TIME_SYNC_CONTROLLER_METADATA_DONE = 1
    REGISTER_TO_CONTROLLER_DONE = 2
    RUNNING = 3


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicasStatistics:
    """A snapshot for logs, tests and admin output."""

    state: State
    broker_controller_id: int | None
    is_master: bool
    master_broker_id: int | None
    master_address: str | None
    master_epoch: int
    sync_state_set: frozenset[int]
    sync_state_set_epoch: int
    controller_leader: str | None


class ReplicasManager:
    """Controller-mode membership of one broker; ``start()`` returns after one start attempt."""

    def __init__(
        self,
        config: BrokerConfig,
        api: BrokerControllerAPI,
        ids: BrokerIdAllocator,
        epochs_path: Path,
        *,
        handler_factory: Callable[[EpochFileCache], RoleHandler] | None = None,
        address: Callable[[], str],
        max_offset: Callable[[], int],
        on_role_changed: Callable[[], Awaitable[None]],
        on_fatal: Callable[[BaseException], None] = lambda e: None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        """Build the manager; nothing is sent until :meth:`start`.

        Args:
            config: broker settings (names, controller addresses, periods).
            api: controller requests.
            ids: the persistent broker id flow.
            epochs_path: this broker's epoch file (``epochFileCheckpoint``), opened by
                :meth:`open`.
            handler_factory: builds the replication side of role changes over the opened
                epoch file (e.g. ``AutoSwitchHAService``); default
                :class:`~rocketpy.broker.role_handler.EpochOnlyRoleHandler`.
            address: this broker's remoting ``ip:port`` (known once bound).
            max_offset: the commit log's max physical offset.
            on_role_changed: awaited after every applied role change; the broker updates its
                role, bumps its DataVersion (``stateVersion = master_epoch``) and re-registers.
            on_fatal: called when a background loop dies of a bug.
            clock: wall clock for check codes and invoke times.
        """
        self.config = config
        self._epochs_path = epochs_path
        self._handler_factory = handler_factory or (
            lambda epochs: EpochOnlyRoleHandler(epochs, max_offset)
        )
        #: The role; its epoch file is memory-only and empty until :meth:`open` reads it.
        self.role = ReplicaRole(
            EpochFileCache(),
            EpochOnlyRoleHandler(EpochFileCache(), max_offset),
            address=address,
            on_changed=on_role_changed,
        )
        self._api = api
        self._ids = ids
        self._address = address
        self._max_offset = max_offset
        self._on_fatal = on_fatal
        self._clock = clock
        self._tasks = TaskSet(f"{config.broker_name}/replicas")
        self._stop = asyncio.Event()
        self._state = State.INITIAL
        #: Set when an identity file names another broker: registration stops for good.
        self._identity_mismatch = False
        self._leader = ControllerLeader(api, config.controller_addr_list)

    # -- introspection ---------------------------------------------------------------------

    @property
    def epochs(self) -> EpochFileCache:
        """This broker's epoch file (memory-only and empty before :meth:`open`)."""
        return self.role.epochs

    @property
    def handler(self) -> RoleHandler:
        """The replication side of role changes."""
        return self.role.handler

    @property
    def is_master(self) -> bool:
        """True once this broker is the master of the current epoch."""
        return self.role.is_master

    @property
    def master_epoch(self) -> int:
        """The master epoch of the last applied role change (0 before any)."""
        return self.role.master_epoch

    @property
    def broker_controller_id(self) -> int | None:
        """The controller-assigned id, once obtained."""
        return self.role.controller_id

    @property
    def route_broker_id(self) -> int:
        """The id to register with NameServers: 0 as master, else the controller id."""
        if self.role.is_master:
            return 0
        own = self.role.controller_id
        return own if own is not None else self.config.broker_id

    @property
    def role_known(self) -> bool:
        """True once a master is known (NameServer registration is skipped before)."""
        return self.role.master_id is not None

    def statistics(self) -> ReplicasStatistics:
        """The current state."""
        role = self.role
        return ReplicasStatistics(
            state=self._state,
            broker_controller_id=role.controller_id,
            is_master=role.is_master,
            master_broker_id=role.master_id,
            master_address=role.master_address,
            master_epoch=role.master_epoch,
            sync_state_set=role.sync_state_set,
            sync_state_set_epoch=role.sync_state_set_epoch,
            controller_leader=self._leader.address,
        )

    # -- life cycle ------------------------------------------------------------------------

    async def open(self) -> None:
        """Read the epoch file and build the role handler (after the store recovered).

        Raises:
            StoreError: the epoch file and its backup are both damaged.
        """
        epochs = await EpochFileCache.open(self._epochs_path)
        self.role.epochs = epochs
        self.role.handler = self._handler_factory(epochs)

    async def start(self) -> None:
        """Try the start sequence once, then keep the loops running (call :meth:`open`
        first)."""
        cfg = self.config
        if await self._start_attempt():
            self._start_sync_loops()
        else:
            self._spawn(self._start_loop(), "start")
        self._spawn(
            periodic(
                cfg.broker_heartbeat_interval_ms / 1000,
                self._send_heartbeats,
                stop=self._stop,
                name="controller-heartbeat",
            ),
            "heartbeat",
        )
        self._spawn(
            periodic(
                cfg.sync_controller_metadata_period_ms / 1000,
                self._guarded(self._leader.find),
                stop=self._stop,
                name="sync-controller-metadata",
            ),
            "sync-controller-metadata",
        )

    async def stop(self) -> None:
        """Stop every loop. Idempotent."""
        self._stop.set()
        await self._tasks.cancel_all()

    def _spawn(self, coro: Coroutine[Any, Any, None], what: str) -> None:
        task = self._tasks.spawn(coro, name=f"{self.config.broker_name}/replicas-{what}")
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[object]) -> None:
        if task.cancelled():
            if not self._stop.is_set():
                # A loop cancelled by something other than stop() would end unseen, and the
                # broker would stop heartbeating or syncing its role for good.
                self._on_fatal(RuntimeError(f"{task.get_name()} was cancelled while running"))
            return
        if task.exception() is not None:
            self._on_fatal(task.exception() or RuntimeError(task.get_name()))

    def _guarded(
        self, fn: Callable[[], Awaitable[object]]
    ) -> Callable[[], Coroutine[Any, Any, None]]:
        """``fn`` with expected controller failures logged instead of raised."""

        async def run() -> None:
            try:
                await fn()
            except RemotingError as e:
                log.warning("controller request failed", task=fn.__name__, error=str(e))

        run.__name__ = fn.__name__
        return run

    async def _start_loop(self) -> None:
        delay = min(START_RETRY_S, self.config.sync_broker_metadata_period_ms / 1000)
        while not self._stop.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self._stop.wait()
            if self._stop.is_set():
                return
            if await self._start_attempt():
                self._start_sync_loops()
                return
            if self._identity_mismatch:
                return

    def _start_sync_loops(self) -> None:
        cfg = self.config
        period = cfg.sync_broker_metadata_period_ms / 1000
        self._spawn(
            periodic(
                period,
                self._guarded(self._sync_broker_metadata),
                stop=self._stop,
                name="sync-broker-metadata",
                initial_delay_s=min(FIRST_SYNC_DELAY_S, period),
            ),
            "sync-broker-metadata",
        )
        self._spawn(
            periodic(
                cfg.check_sync_state_set_period_ms / 1000,
                self._check_sync_state_set,
                stop=self._stop,
                name="check-sync-state-set",
            ),
            "check-sync-state-set",
        )

    async def _start_attempt(self) -> bool:
        """``startBasicService`` once; False (logged) when it must be retried."""
        try:
            return await self._start_sequence()
        except BrokerIdentityMismatch as e:
            log.error(  # noqa: TRY400 - an operator error, not a bug: no traceback
                "broker identity does not match the config, registration stopped", error=str(e)
            )
            self._identity_mismatch = True
        except (RemotingError, StoreError, OSError) as e:
            log.warning("start controller-mode broker failed, will retry", error=str(e))
        return False

    async def _start_sequence(self) -> bool:
        if self._state is State.INITIAL:
            await self._leader.find()
            self._state = State.FIRST_TIME_SYNC_CONTROLLER_METADATA_DONE
        if self.role.controller_id is None:
            self.role.controller_id = await self._leader.call(
                lambda leader: self._ids.obtain(leader, self._address(), self._clock.wall_ms())
            )
            structlog.contextvars.bind_contextvars(broker_controller_id=self.role.controller_id)
            self.handler.set_local_broker_id(self.role.controller_id)
        info = await self._register()
        self._state = max(self._state, State.REGISTER_TO_CONTROLLER_DONE)
        await self._send_heartbeats()
        if info.master_broker_id is not None:
            await self.change_broker_role(info)
        else:
            await self._try_elect_self()
        if self.role.master_id is None:
            log.info("no master in the broker-set yet, will retry", broker=self.config.broker_name)
            return False
        self._state = State.RUNNING
        log.info(
            "controller-mode broker running",
            broker_controller_id=self.role.controller_id,
            master=self.role.master_id,
            master_epoch=self.role.master_epoch,
        )
        return True

    # -- controller requests ---------------------------------------------------------------

    async def _register(self) -> MasterInfo:
        cfg = self.config
        broker_id = self.role.controller_id
        if broker_id is None:
            raise RemoteError(ResponseCode.SYSTEM_ERROR, "no broker id yet")
        return await self._leader.call(
            lambda leader: self._api.register_broker(
                leader,
                cfg.broker_cluster_name,
                cfg.broker_name,
                broker_id=broker_id,
                address=self._address(),
                now_ms=self._clock.wall_ms(),
            )
        )

    async def _try_elect_self(self) -> None:
        cfg = self.config
        me = self.role.controller_id
        if me is None:
            return
        try:
            info = await self._leader.call(
                lambda leader: self._api.elect_master(
                    leader, cfg.broker_cluster_name, cfg.broker_name, me
                )
            )
        except RemoteError as e:
            log.info("elect self as master failed", code=e.code, remark=e.remark)
            return
        if info.master_broker_id is not None:
            await self.change_broker_role(info)

    async def _send_heartbeats(self) -> None:
        """BROKER_HEARTBEAT to every controller (``sendHeartbeatToController``)."""
        if self.role.controller_id is None:
            return
        cfg = self.config
        header = BrokerHeartbeatRequestHeader(
            cluster_name=cfg.broker_cluster_name,
            broker_addr=self._address(),
            broker_name=cfg.broker_name,
            broker_id=self.role.controller_id,
            epoch=self.epochs.last_epoch(),
            max_offset=self._max_offset(),
            confirm_offset=self.handler.confirm_offset(),
            heartbeat_timeout_mills=cfg.controller_heartbeat_timeout_ms,
            election_priority=cfg.broker_election_priority,
        )
        await asyncio.gather(*(self._heartbeat(a, header) for a in cfg.controller_addr_list))

    async def _heartbeat(self, addr: str, header: BrokerHeartbeatRequestHeader) -> None:
        try:
            async with asyncio.timeout(self.config.broker_heartbeat_interval_ms / 1000):
                await self._api.send_heartbeat(addr, header)
        except (RemotingError, TimeoutError) as e:
            log.debug("send heartbeat to controller failed", controller=addr, error=repr(e))

    async def _sync_broker_metadata(self) -> None:
        """Catch up with the controller's view (``schedulingSyncBrokerMetadata``)."""
        if self.role.controller_id is None:
            return
        try:
            info = await self._leader.call(
                lambda leader: self._api.get_replica_info(leader, self.config.broker_name)
            )
        except RemoteError as e:
            if e.code != ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST:
                raise
            log.warning("broker metadata not in controller, registering again")
            await self._register()
            return
        if info.master_broker_id is None:
            await self._try_elect_self()
        elif info.master_epoch > self.role.master_epoch:
            log.info("missed a role change, applying it", master_epoch=info.master_epoch)
            await self.change_broker_role(info)
        elif info.master_epoch == self.role.master_epoch and self.role.is_master:
            self.role.adopt_sync_state_set(info.sync_state_set, info.sync_state_set_epoch)
        elif info.master_epoch == self.role.master_epoch:
            await self.role.follow_moved_master(info)

    async def _check_sync_state_set(self) -> None:
        """Every ``checkSyncStateSetPeriod`` (master): the HA layer proposes a shrunk set
        through :meth:`report_sync_state_set_nowait` when a slave lags."""
        if self.role.is_master:
            self.handler.shrink_sync_state_set()

    # -- role changes ----------------------------------------------------------------------

    async def on_notify_role_changed(self, info: MasterInfo) -> None:
        """NOTIFY_BROKER_ROLE_CHANGED (1008): apply it if its master epoch is newer."""
        log.info(
            "receive notify broker role changed",
            master=info.master_broker_id,
            master_epoch=info.master_epoch,
        )
        await self.change_broker_role(info)

    async def change_broker_role(self, info: MasterInfo) -> bool:
        """``changeBrokerRole`` (see :meth:`ReplicaRole.change`)."""
        return await self.role.change(info)

    # -- SyncStateSet reporting (for the HA layer) -----------------------------------------

    async def alter_sync_state_set(self, new_set: frozenset[int] | set[int]) -> SyncStateSet:
        """Report a new SyncStateSet (``doReportSyncStateSetChanged``); as master only.

        The master's own id is always added. On success the committed set and epoch are
        adopted locally and handed to the role handler.

        Returns:
            The set the controller committed, with its new epoch.

        Raises:
            RemoteError: the controller refused (2000 fenced epoch, 2013 unchanged, ...), or
                this broker is not the master (CONTROLLER_INVALID_MASTER, nothing sent).
            RemotingError: no controller leader could be reached.
        """
        me = self.role.controller_id
        if not self.role.is_master or me is None:
            raise RemoteError(ResponseCode.CONTROLLER_INVALID_MASTER, "this broker is not master")
        members = frozenset(new_set) | {me}
        epoch, sss_epoch = self.role.master_epoch, self.role.sync_state_set_epoch
        committed = await self._leader.call(
            lambda leader: self._api.alter_sync_state_set(
                leader,
                self.config.broker_name,
                master_broker_id=me,
                master_epoch=epoch,
                new_set=members,
                sync_state_set_epoch=sss_epoch,
            )
        )
        log.info(
            "alter sync state set success",
            sync_state_set=sorted(committed.sync_state_set),
            epoch=committed.sync_state_set_epoch,
        )
        self.role.adopt_sync_state_set(committed.sync_state_set, committed.sync_state_set_epoch)
        return committed

    def report_sync_state_set_nowait(self, new_set: frozenset[int]) -> None:
        """:meth:`alter_sync_state_set` in a background task (for synchronous HA callbacks such
        as ``AutoSwitchHAService(on_sync_state_set_changed=...)``); failures are logged."""
        self._tasks.spawn(
            self._guarded(lambda: self.alter_sync_state_set(new_set))(),
            name=f"{self.config.broker_name}/replicas-alter-sync-state-set",
        )


def build_replicas_manager(
    config: BrokerConfig,
    store_root: Path,
    client: RemotingClient,
    *,
    address: Callable[[], str],
    max_offset: Callable[[], int],
    on_role_changed: Callable[[], Awaitable[None]],
    on_fatal: Callable[[BaseException], None] = lambda e: None,
    handler_factory: Callable[[EpochFileCache], RoleHandler] | None = None,
    executor: Executor | None = None,
    clock: Clock = SYSTEM_CLOCK,
    identity_path: Path | None = None,
    epoch_path: Path | None = None,
) -> ReplicasManager:
    """A :class:`ReplicasManager` with its files at ``identity_path`` (+ ``-temp``) and
    ``epoch_path``, by default upstream's places ``<storePathRootDir>/brokerIdentity`` and
    ``<storePathRootDir>/epochFileCheckpoint`` (controller.md section 9, ha.md section 4.2;
    ``storePathBrokerIdentity`` / ``storePathEpochFile`` override them, B-07)."""
    api = BrokerControllerAPI(client)
    identity_path = identity_path or broker_identity_path(store_root)
    ids = BrokerIdAllocator(
        api,
        broker_metadata_file(identity_path, executor),
        temp_broker_metadata_file(temp_broker_identity_path(identity_path), executor),
        cluster=config.broker_cluster_name,
        broker=config.broker_name,
    )
    return ReplicasManager(
        config,
        api,
        ids,
        epoch_path or store_root / EPOCH_FILE_NAME,
        handler_factory=handler_factory,
        address=address,
        max_offset=max_offset,
        on_role_changed=on_role_changed,
        on_fatal=on_fatal,
        clock=clock,
    )
