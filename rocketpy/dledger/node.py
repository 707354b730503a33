"""The asyncio driver that makes a :class:`RaftCore` a running DLedger group member.

Owns: :class:`RaftNode`: the durable log (:class:`DLedgerLog`, written on one writer thread),
the tick task (core ticks by monotonic time), the driver task (one Ready at a time, in the
order of :mod:`rocketpy.dledger.core`'s contract), proposal futures, role listeners and
snapshots/compaction; plus the :class:`StateMachine` contract. Must not: parse peer traffic
(:mod:`rocketpy.dledger.transport`) or decide anything Raft decides (the core).

Mirrors openmessaging/dledger ``DLedgerServer`` (start/shutdown, ``handleAppend`` returning
after commit, ``handleLeadershipTransfer``, role-change handlers) with the loop of etcd-io/raft
``node.go``. The owner (controller service, broker, a test) creates the ``RemotingServer`` on
this member's peer port, calls :meth:`RaftNode.register` on its registry, then
:meth:`RaftNode.start`; peer traffic and the owner's requests share that port.

State machine contract (hashicorp/raft ``fsm.go``): ``apply`` runs on the event loop for every
committed NORMAL entry, in index order, exactly once per start (a restart restores the last
snapshot and re-applies the committed entries after it); it must be deterministic and must not
block. ``snapshot`` returns the whole state as bytes as of the last applied entry; ``restore``
replaces the state with such bytes (at start, and when the leader sends a snapshot).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final, Protocol, TypeVar

import structlog

from rocketpy.common.clock import SYSTEM_CLOCK, Clock
from rocketpy.common.errors import RequestTimeout
from rocketpy.common.types import LogIndex, Term
from rocketpy.dledger.core import NotLeader, RaftCore, Ready, Role, SoftState, Status
from rocketpy.dledger.log import DLedgerLog, RecoveryReport
from rocketpy.dledger.messages import EntryKind, HardState, Message, ParseResult
from rocketpy.dledger.node_config import NodeConfig, parse_peers, raft_timing, render_peers
from rocketpy.dledger.transport import PeerTransport
from rocketpy.remoting.transport.dispatch import ProcessorRegistry

__all__ = ["NodeConfig", "NotLeader", "RaftNode", "StateMachine", "Status", "parse_peers"]

log = structlog.get_logger(__name__)
_T = TypeVar("_T")

#: Ticks made up at once after the loop stalled; more would fire elections nobody missed.
MAX_CATCHUP_TICKS: Final = 3


class StateMachine(Protocol):
    """What a :class:`RaftNode` replicates (see the module docstring for the contract)."""

    def apply(self, index: LogIndex, data: bytes) -> object:
        """Apply one committed entry; the result goes to ``propose()``'s caller."""
        ...

    def snapshot(self) -> bytes:
        """The whole state as of the last applied entry."""
        ...

    def restore(self, data: bytes) -> None:
        """Replace the whole state with a :meth:`snapshot` result."""
        ...


class RaftNode:
    """One running member of a DLedger group.

    Args:
        config: the member's identity, peers, store and timings.
        state_machine: what committed entries are applied to.
        clock: monotonic time for ticking (tests may pass a ``ManualClock``).
        seed: seeds the randomized vote intervals (None: random).
    """

    def __init__(
        self,
        config: NodeConfig,
        state_machine: StateMachine,
        *,
        clock: Clock | None = None,
        seed: int | None = None,
    ) -> None:
        self.config = config
        self._sm = state_machine
        self._clock = clock or SYSTEM_CLOCK
        self._rng = random.Random(seed)  # noqa: S311 - vote jitter, not cryptography
        self._raft_config, self._tick_ms = raft_timing(config)
        self._name = f"dledger-{config.group}-{config.self_id}"
        self._transport = PeerTransport(
            group=config.group,
            self_id=config.self_id,
            peers=config.peers,
            on_message=self._on_message,
            retry_backoff_s=min(1.0, config.heartbeat_interval_ms / 2000),
        )
        self._core: RaftCore | None = None
        self._log: DLedgerLog | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._kick = asyncio.Event()
        self._soft_event = asyncio.Event()
        self._waiters: dict[LogIndex, tuple[Term, asyncio.Future[object]]] = {}
        self._listeners: list[Callable[[bool], None]] = []
        self._announced_leader = False
        self._soft: SoftState | None = None
        self._campaign: tuple[Term, int] | None = None  # (term, ticks left) of a due campaign
        self._unsynced_hard: HardState | None = None
        self._last_hard_write_ms = 0
        self._started = False
        self._stopped = False

    # -- identity and state ------------------------------------------------------------------

    @property
    def self_id(self) -> str:
        """This member's id."""
        return self.config.self_id

    @property
    def peers(self) -> dict[str, str]:
        """Every member id -> ``host:port``."""
        return dict(self.config.peers)

    @property
    def is_leader(self) -> bool:
        """Is this member the leader now (its NOOP may not be committed yet)?"""
        return self._core is not None and not self._stopped and self._core.role is Role.LEADER

    @property
    def leader_id(self) -> str | None:
        """The leader this member knows of."""
        return None if self._core is None or self._stopped else self._core.leader_id

    @property
    def leader_address(self) -> str | None:
        """The known leader's ``host:port``."""
        leader = self.leader_id
        return None if leader is None else self.config.peers.get(leader)

    @property
    def term(self) -> int:
        """The current term (0 before start)."""
        return 0 if self._core is None else int(self._core.term)

    @property
    def snapshot_index(self) -> int:
        """Index of the last snapshot on disk (0: none)."""
        return 0 if self._log is None else int(self._log.snapshot().meta.index)

    @property
    def first_index(self) -> int:
        """Index of the first entry still in the log (compaction point + 1)."""
        return 1 if self._log is None else int(self._log.first_index())

    @property
    def recovery(self) -> RecoveryReport | None:
        """What the log's recovery found and repaired at :meth:`start` (None before)."""
        return None if self._log is None else self._log.recovery

    def status(self) -> Status:
        """The core's status (a blank candidate status before start)."""
        if self._core is not None:
            return self._core.status()
        return Status(
            node_id=self.self_id,
            role=Role.CANDIDATE,
            term=Term(0),
            vote=None,
            leader_id=None,
            commit_index=LogIndex(0),
            applied_index=LogIndex(0),
            last_index=LogIndex(0),
            last_term=Term(0),
            term_start_index=LogIndex(0),
            transferee=None,
            last_parse_result=ParseResult.WAIT_TO_REVOTE,
        )

    def add_role_listener(self, cb: Callable[[bool], None]) -> None:
        """Call ``cb(True)`` once this member leads and its NOOP is applied, ``cb(False)`` when
        it stops leading (role change or :meth:`stop`). Runs on the loop; must not block."""
        self._listeners.append(cb)

    def register(self, registry: ProcessorRegistry) -> None:
        """Install the peer request codes on the owner's server registry."""
        self._transport.register(registry)

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Open and recover the log, restore the snapshot, re-apply the committed entries,
        then start ticking and talking to peers.

        Raises:
            StoreError: the log directory is damaged beyond a torn tail.
        """
        if self._started:
            return
        self._started = True
        cfg = self.config
        self._executor = ThreadPoolExecutor(1, thread_name_prefix=f"{self._name}-log")
        store = await self._on_writer(
            DLedgerLog.open, cfg.store_path, segment_bytes=cfg.log_segment_bytes
        )
        self._log = store
        snapshot = store.snapshot()
        if snapshot.meta.index > 0:
            self._sm.restore(snapshot.data)
        self._core = RaftCore(cfg.self_id, list(cfg.peers), store, self._rng, self._raft_config)
        self._last_hard_write_ms = self._clock.monotonic_ms()
        self._transport.start()
        while self._core.has_ready():  # replay the committed prefix before serving
            await self._handle_ready(self._core.ready())
        loop = asyncio.get_running_loop()
        for coro, what in ((self._drive(), "driver"), (self._tick(), "tick")):
            task = loop.create_task(coro, name=f"{self._name}/{what}")
            task.add_done_callback(self._task_done)
            self._tasks.append(task)
        log.info(
            "dledger server started",
            group=cfg.group,
            self_id=cfg.self_id,
            peers=render_peers(cfg.peers),
            tick_ms=self._tick_ms,
            snapshot_index=snapshot.meta.index,
            last_index=store.last_index(),
            applied_index=self._core.log.applied,
        )

    async def stop(self) -> None:
        """Stop ticking and sending, fail waiting proposals, flush the hard state, close the log.

        Idempotent. Proposals still waiting get :class:`NotLeader`: their outcome is unknown.
        """
        if not self._started or self._stopped:
            return
        self._stopped = True
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=5.0)
        await self._transport.stop()
        self._fail_waiters(lambda _index: True)
        if self._announced_leader:
            self._announce(False)
        try:
            if self._log is not None and self._unsynced_hard is not None:
                await self._on_writer(self._log.set_hard_state, self._unsynced_hard)
                self._unsynced_hard = None
        finally:
            if self._log is not None:
                self._log.close()
            if self._executor is not None:
                self._executor.shutdown(wait=False)
        log.info("dledger server stopped", group=self.config.group, self_id=self.self_id)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            # A bug or a dead disk: this member can no longer take part safely.
            log.error("dledger task failed", task=task.get_name(), exc_info=exc)
            self._stopped = True
            self._fail_waiters(lambda _index: True)

    async def _on_writer(self, fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        """Run a blocking log operation on the single writer thread."""
        executor = self._executor
        if executor is None:
            raise RuntimeError(f"{self._name} is not started")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(executor, lambda: fn(*args, **kwargs))

    def _running(self) -> tuple[RaftCore, DLedgerLog]:
        if self._core is None or self._log is None:
            raise RuntimeError(f"{self._name} is not started")
        return self._core, self._log

    # -- proposals and transfers -------------------------------------------------------------

    async def propose(self, data: bytes, timeout_s: float = 3.0) -> object:
        """Replicate ``data``; return what ``state_machine.apply`` returned for it here.

        Returns after the entry is committed *and* applied on this member.

        Raises:
            NotLeader: this member is not the leader (``leader_id`` names the one it knows of),
                is transferring leadership, lost the entry to another leader's log, or stopped
                leading while the entry was in flight (its outcome is then unknown: it may
                still commit under the next leader).
            RequestTimeout: not committed within ``timeout_s`` (e.g. no quorum); the entry may
                still commit later.
        """
        core = self._core
        if core is None or self._stopped:
            raise NotLeader(self.self_id, None)
        index = core.propose(data)
        fut: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        earlier = self._waiters.get(index)
        if earlier is not None and not earlier[1].done():
            # An entry of an earlier term of ours was lost at this index.
            earlier[1].set_exception(NotLeader(self.self_id, self.leader_id))
        self._waiters[index] = (core.term, fut)
        self._kick.set()
        try:
            async with asyncio.timeout(timeout_s):
                return await fut
        except TimeoutError as e:
            raise RequestTimeout(
                f"entry {index} not committed within {timeout_s * 1000:.0f}ms"
            ) from e
        finally:
            waiter = self._waiters.get(index)
            if waiter is not None and waiter[1] is fut:
                del self._waiters[index]

    async def transfer_leadership(self, target: str, timeout_s: float = 3.0) -> None:
        """Hand leadership to ``target`` and wait until this member sees it lead.

        Raises:
            NotLeader: this member is not the leader.
            ValueError: ``target`` is not a member.
            RequestTimeout: ``target`` did not take over within ``timeout_s``.
        """
        core = self._core
        if core is None or self._stopped:
            raise NotLeader(self.self_id, None)
        if target == self.self_id and core.role is Role.LEADER:
            return
        core.transfer_leadership(target)
        self._kick.set()
        try:
            async with asyncio.timeout(timeout_s):
                while core.leader_id != target:
                    if self._stopped:
                        raise NotLeader(self.self_id, None)
                    await self._soft_event.wait()
        except TimeoutError as e:
            raise RequestTimeout(f"leadership transfer to {target} timed out") from e

    # -- driver ------------------------------------------------------------------------------

    def _on_message(self, message: Message) -> None:
        if self._core is None or self._stopped:
            return
        self._core.step(message)
        if self._campaign is not None and self._campaign[1] <= 0:
            self._maybe_campaign(self._core)  # a vote response may be the awaited evidence
        self._kick.set()

    async def _tick(self) -> None:
        """Step ``core.tick()`` once per elapsed tick of monotonic time."""
        core, _store = self._running()
        tick_ms = self._tick_ms
        last = self._clock.monotonic_ms()
        while True:
            await asyncio.sleep(tick_ms / 1000)
            now = self._clock.monotonic_ms()
            due = (now - last) // tick_ms
            if due <= 0:
                continue
            last = now if due > MAX_CATCHUP_TICKS else last + due * tick_ms
            for _ in range(min(due, MAX_CATCHUP_TICKS)):
                core.tick()
                self._tick_campaign(core)
            self._kick.set()

    def _tick_campaign(self, core: RaftCore) -> None:
        if self._campaign is None:
            return
        term, left = self._campaign
        self._campaign = (term, left - 1)
        if left <= 1:
            self._maybe_campaign(core)

    def _maybe_campaign(self, core: RaftCore) -> None:
        """Campaign in the next term once this candidate's own rounds in its term show a
        quorum without a leader (``RaftCore.leaderless_quorum``); until then the due campaign
        waits, re-checked at each tick and vote response."""
        if self._campaign is None:
            return
        if core.role is not Role.CANDIDATE or core.term != self._campaign[0]:
            self._campaign = None  # a leader appeared or the term moved on: not needed
        elif core.leaderless_quorum():
            self._campaign = None
            core.campaign()

    async def _drive(self) -> None:
        """Handle every Ready in order; take a snapshot when enough entries were applied."""
        core, _store = self._running()
        while True:
            await self._kick.wait()
            self._kick.clear()
            while core.has_ready():
                await self._handle_ready(core.ready())
            await self._maybe_snapshot()

    async def _handle_ready(self, rd: Ready) -> None:
        """Persist, restore, send, apply, advance (the core's driver contract)."""
        core, store = self._running()
        if rd.hard_state is not None:
            self._unsynced_hard = rd.hard_state
        hard = self._hard_state_to_write(store.hard_state())
        if rd.snapshot is not None or rd.entries or hard is not None:
            await self._on_writer(store.persist, rd.snapshot, rd.entries, hard)
            if hard is not None:
                self._last_hard_write_ms = self._clock.monotonic_ms()
        if rd.snapshot is not None:
            self._sm.restore(rd.snapshot.data)
            index = rd.snapshot.meta.index
            self._fail_waiters(lambda i: i <= index)
            log.info("dledger snapshot installed", self_id=self.self_id, index=index)
        for message in rd.messages:
            self._transport.send(message)
        for entry in rd.committed_entries:
            result: object = None
            error: Exception | None = None
            if entry.kind is EntryKind.NORMAL:
                try:
                    result = self._sm.apply(entry.index, entry.data)
                except Exception as e:
                    log.exception("dledger apply failed", self_id=self.self_id, index=entry.index)
                    error = e
            self._resolve(entry.index, entry.term, result, error)
        core.advance(rd)
        if rd.soft_state is not None:
            self._on_soft_state(rd.soft_state)
        self._maybe_announce()

    def _hard_state_to_write(self, on_disk: HardState) -> HardState | None:
        """The hard state to persist with this Ready, if any (then it is no longer pending).

        A new term or vote is written at once (it must be durable before the vote or append it
        answers leaves). A commit-only change waits up to one heartbeat interval and is written
        with a later Ready or at stop: a lower commit index on disk is safe (a restarted member
        re-applies less and learns the rest from the leader) and it saves an atomic file
        replacement (two fsyncs) per Ready, which is most of the cost of a write.
        """
        pending = self._unsynced_hard
        if pending is None:
            return None
        vote_changed = pending.term != on_disk.term or pending.vote != on_disk.vote
        elapsed = self._clock.monotonic_ms() - self._last_hard_write_ms
        if not vote_changed and elapsed < self.config.heartbeat_interval_ms:
            return None
        self._unsynced_hard = None
        return pending

    def _resolve(
        self, index: LogIndex, term: Term, result: object, error: Exception | None
    ) -> None:
        waiter = self._waiters.pop(index, None)
        if waiter is None or waiter[1].done():
            return
        want_term, fut = waiter
        if want_term != term:
            fut.set_exception(NotLeader(self.self_id, self.leader_id))
        elif error is not None:
            fut.set_exception(error)
        else:
            fut.set_result(result)

    def _fail_waiters(self, which: Callable[[LogIndex], bool]) -> None:
        for index in [i for i in self._waiters if which(i)]:
            _term, fut = self._waiters.pop(index)
            if not fut.done():
                fut.set_exception(NotLeader(self.self_id, self.leader_id))

    def _on_soft_state(self, soft: SoftState) -> None:
        prev, self._soft = self._soft, soft
        if (
            prev is not None
            and prev.role is Role.FOLLOWER
            and soft.role is Role.CANDIDATE
            and soft.term == prev.term
            and self._core is not None
        ):
            self._campaign = (soft.term, self._campaign_delay(prev.leader_id))
        log.info(
            "dledger role changed",
            self_id=self.self_id,
            role=soft.role.value,
            term=soft.term,
            leader_id=soft.leader_id,
        )
        if prev is not None and prev.role is Role.LEADER and soft.role is not Role.LEADER:
            # hashicorp/raft ErrLeadershipLost: the callers learn at once; their entries may
            # still commit under the next leader (they are applied then, with nobody waiting).
            self._fail_waiters(lambda _index: True)
        if soft.role is not Role.LEADER and self._announced_leader:
            self._announce(False)
        event, self._soft_event = self._soft_event, asyncio.Event()
        event.set()

    def _campaign_delay(self, lost_leader: str | None) -> int:
        """Ticks until a follower that lost its leader campaigns in the next term.

        Deviation from DLedger (``maintainAsFollower`` -> ``maintainAsCandidate``): DLedger
        first re-votes in the current term, where every peer that followed the same leader
        answers ALREADY_HAS_LEADER or ALREADY_VOTED, and backs off a whole leader lease or a
        vote wait. Here the survivors campaign in the next term (always safe, Raft 5.2),
        staggered by their rank among the members other than the lost leader (half a beat per
        rank, plus one tick of jitter): the first one's vote request moves the others to its
        term before their own turn, so the vote is not split and failover takes about one
        election timeout. A survivor campaigns only once its round in the current term heard
        from a quorum with no live leader among them (:meth:`_maybe_campaign`): a member cut
        off alone keeps its term and does not unseat a healthy leader when it is healed.
        """
        ranked = [m for m in sorted(self.config.peers) if m != lost_leader]
        rank = ranked.index(self.self_id) if self.self_id in ranked else 0
        half_beat = self._raft_config.heartbeat_interval_ticks // 2
        return 1 + rank * half_beat + self._rng.randrange(2)

    def _maybe_announce(self) -> None:
        """Announce leadership once the NOOP of this term is applied (``DLedgerController``
        serves only after its start-of-term entry commits)."""
        core = self._core
        if core is None or self._announced_leader or core.role is not Role.LEADER:
            return
        status = core.status()
        if status.applied_index >= status.term_start_index > 0:
            self._announce(True)

    def _announce(self, is_leader: bool) -> None:
        self._announced_leader = is_leader
        log.info(
            "dledger leadership announced" if is_leader else "dledger leadership lost",
            self_id=self.self_id,
            term=self.term,
        )
        for cb in list(self._listeners):
            try:
                cb(is_leader)
            except Exception:
                log.exception("dledger role listener failed", self_id=self.self_id)

    async def _maybe_snapshot(self) -> None:
        """Snapshot and compact once ``snapshot_threshold`` entries were applied since the last
        snapshot; keep half a threshold of entries so slightly lagging followers need none."""
        core, store = self._running()
        applied = core.log.applied
        threshold = self.config.snapshot_threshold
        if applied - store.snapshot().meta.index <= threshold:
            return
        data = self._sm.snapshot()
        keep_from = LogIndex(max(store.first_index() - 1, applied - threshold // 2))

        def write() -> None:
            store.create_snapshot(applied, data)
            if keep_from > store.first_index() - 1:
                store.compact(keep_from)

        await self._on_writer(write)
        log.info(
            "dledger snapshot taken",
            self_id=self.self_id,
            index=applied,
            bytes=len(data),
            compacted_to=keep_from,
        )
