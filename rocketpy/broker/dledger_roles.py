"""DLedger CommitLog mode's role changes and settings check (dledger-commitlog.md sections 3.4
and 4).

Owns: :func:`check_dledger_config` (contradictory or malformed DLedger keys -> ConfigError,
which the CLI turns into one line and exit 2) and :class:`DLedgerRoles`, which follows the
member's role: LEADER -> once the log is fully committed and dispatched, the queue offsets are
rebuilt from the consume queues and the broker becomes master (brokerId 0, writable, master-only
services on); FOLLOWER, or CANDIDATE after being master -> slave (brokerId = selfNum + 1, sends
refused, master-only services off). Every change bumps the DataVersion and re-registers with the
NameServers. Changes are applied one at a time, the latest role winning, and only once the
broker has started. Mirrors ``DLedgerRoleChangeHandler`` and the DLedger checks of
``BrokerStartup``. Must not: append, elect or touch the store's files.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable
from typing import Protocol

import structlog

from rocketpy.broker.config import BrokerConfig
from rocketpy.broker.dledger_store import DLedgerStoreAdapter
from rocketpy.broker.master_services import MasterServices
from rocketpy.broker.runtime import BrokerRuntime
from rocketpy.broker.topic_config import TopicConfigManager
from rocketpy.common.errors import ConfigError
from rocketpy.dledger.commitlog_member.config import parse_peers
from rocketpy.dledger.commitlog_member.state import Role
from rocketpy.store.config import MessageStoreConfig

log = structlog.get_logger(__name__)

_SELF_ID = re.compile(r"n\d+")
#: Section 3.4's poll of the new leader's commit and dispatch.
_LEADER_POLL_S = 0.1


def check_dledger_config(broker: BrokerConfig, store: MessageStoreConfig) -> None:
    """Refuse DLedger settings that cannot work (nothing when the mode is off).

    Raises:
        ConfigError: DLedger together with controller mode, ``dLegerPeers`` malformed,
            ``dLegerSelfId`` not ``n<digits>`` or not among the peers, a ``preferredLeaderId``
            that is no peer.
    """
    if not store.enable_dleger_commit_log:
        return
    if broker.enable_controller_mode:
        raise ConfigError(
            "enableDLegerCommitLog", True, "DLedger CommitLog mode and enableControllerMode=true "
            "exclude each other; choose one"
        )  # fmt: skip
    try:
        peers = parse_peers(store.dleger_peers or "")
    except ValueError as e:
        raise ConfigError("dLegerPeers", store.dleger_peers, f"{e}; expected "
                          "n0-host:port;n1-host:port;...") from e  # fmt: skip
    self_id = store.dleger_self_id
    if not self_id or not _SELF_ID.fullmatch(self_id):
        raise ConfigError("dLegerSelfId", self_id, "expected n<digits>, e.g. n0")
    if self_id not in peers:
        raise ConfigError("dLegerSelfId", self_id, f"not among dLegerPeers ids {sorted(peers)}")
    for peer_id in peers:
        if not _SELF_ID.fullmatch(peer_id):
            raise ConfigError("dLegerPeers", store.dleger_peers, f"peer id {peer_id!r} is not "
                              "n<digits>")  # fmt: skip
    for preferred in (store.preferred_leader_id or "").split(";"):
        if preferred and preferred not in peers:
            raise ConfigError("preferredLeaderId", store.preferred_leader_id,
                              f"not among dLegerPeers ids {sorted(peers)}")  # fmt: skip


def slave_broker_id(self_id: str) -> int:
    """A follower's brokerId: ``int(selfId[1:]) + 1`` (n0 -> 1, n1 -> 2, n2 -> 3)."""
    return int(self_id[1:]) + 1


class DLedgerHost(Protocol):
    """What :class:`DLedgerRoles` needs of the broker (``BrokerService``)."""

    @property
    def config(self) -> BrokerConfig: ...

    @property
    def store(self) -> object: ...

    runtime: BrokerRuntime
    master_services: MasterServices
    topics: TopicConfigManager
    ready: asyncio.Event

    def apply_config(self, config: BrokerConfig) -> None: ...

    def register_broker_all(self, *, force: bool) -> Awaitable[None]: ...


class DLedgerRoles:
    """Turns the member's role changes into the broker's (``DLedgerRoleChangeHandler``)."""

    def __init__(self, host: DLedgerHost, store: DLedgerStoreAdapter) -> None:
        self._host = host
        self._store = store
        self.member = store.member
        self.slave_id = slave_broker_id(self.member.config.self_id)
        self.is_master = False
        self._master_term = -1
        #: Role changes applied so far (tests and statistics).
        self.changes = 0
        self._wanted: tuple[int, Role] | None = None
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.member.add_role_change_handler(self._on_role)

    @classmethod
    def attach(cls, host: DLedgerHost, store_config: MessageStoreConfig) -> DLedgerRoles | None:
        """For a broker in DLedger mode: check the keys, start it fenced as a slave with its
        slave id, follow the member's roles. None in any other mode.

        Raises:
            ConfigError: see :func:`check_dledger_config`.
        """
        store = host.store
        if not isinstance(store, DLedgerStoreAdapter):
            return None
        check_dledger_config(host.config, store_config)
        roles = cls(host, store)
        host.runtime.is_slave = True
        host.runtime.reject_slave_pulls = True
        host.apply_config(host.config.model_copy(update={"broker_id": roles.slave_id}))
        return roles

    def start(self) -> None:
        """Apply role changes from now on (the broker serves and is registered)."""
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"dledger-{self.member.config.self_id}/roles"
        )
        self._on_role(self.member.term, self.member.role)

    async def stop(self) -> None:
        """Stop applying role changes (before the broker unregisters)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    def _on_role(self, term: int, role: Role) -> None:
        self._wanted = (term, role)
        self._changed.set()

    async def _run(self) -> None:
        await self._host.ready.wait()
        while True:
            await self._changed.wait()
            self._changed.clear()
            if self._wanted is None:
                continue
            term, role = self._wanted
            try:
                await self._apply(term, role)
            except Exception:
                log.exception("dledger role change failed", term=term, role=role.name)

    async def _apply(self, term: int, role: Role) -> None:
        if role is Role.LEADER:
            if self.is_master and self._master_term == term:
                return
            if self.is_master:
                # Leading again in a later term, the changes between coalesced: the log may
                # have been truncated and appended to as a follower meanwhile, so writes wait
                # for the queue table to be rebuilt from the new term's dispatched log.
                self._host.runtime.is_slave = True
            if await self._leader_ready(term):
                await self._change(master=True, term=term)
        elif role is Role.FOLLOWER or self.is_master:
            await self._change(master=False, term=term)

    async def _leader_ready(self, term: int) -> bool:
        """Section 3.4: wait while still leader of ``term`` and no newer change is queued
        until the log is empty or fully committed and the reput dispatched it all."""
        member, store = self.member, self._store.store
        while member.term == term and member.role is Role.LEADER and not self._changed.is_set():
            if await member.wait_leader_ready(_LEADER_POLL_S) and store.reput.behind() == 0:
                return member.term == term and member.role is Role.LEADER
            await asyncio.sleep(_LEADER_POLL_S)
        return False

    async def _change(self, *, master: bool, term: int) -> None:
        host = self._host
        was_master, self.is_master = self.is_master, master
        broker_id = 0 if master else self.slave_id
        if master:
            # recoverTopicQueueTable: continue every queue where the dispatched log ends
            self._store.store.recover_topic_queue_table()
        else:
            host.runtime.is_slave = True
        host.runtime.reject_slave_pulls = True
        host.apply_config(host.config.model_copy(update={"broker_id": broker_id}))
        structlog.contextvars.bind_contextvars(broker_id=broker_id)
        if master:
            self._master_term = term
            if not was_master:
                await host.master_services.start()
            host.runtime.is_slave = False
        elif was_master:
            await host.master_services.stop()
        self.changes += 1
        log.info("dledger role applied", role="master" if master else "slave", term=term,
                 broker_id=broker_id)  # fmt: skip
        host.topics.bump_data_version()
        await host.register_broker_all(force=True)
