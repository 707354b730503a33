"""One DLedger 0.3.1.2 member over the CommitLog-mode log (``DLedgerServer``; dledger-commitlog.md
sections 2 and 3).

Owns: start-up (log recovery, ``currterm``), the peer port, the checks every handler makes first
(``remoteId`` != self -> 401, ``group`` mismatch -> 400), the APPEND/GET/METADATA/
LEADERSHIP_TRANSFER answers, the transferee's catch-up wait (section 3.3, the Xiaomi
refinement), the preferred-leader check every second, flushing every ``flushFileInterval``,
the ``checkpoint`` every ``checkPointInterval``, retention (:mod:`.clean_space`), and the API a
broker calls: :meth:`append` / :meth:`append_nowait` / :meth:`append_then` (index, pos;
answered after a quorum),
committed-position listeners, role-change handlers, :meth:`wait_leader_ready` (section 3.4's
first-write wait) and :meth:`shutdown`. Mirrors ``io.openmessaging.storage.dledger.DLedgerServer``.
Must not: know RocketMQ messages beyond passing record bodies to the log (which patches
PHYSICALOFFSET), or wire itself into the broker.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import structlog

from rocketpy.common.aio import TaskSet
from rocketpy.common.clock import Clock, SystemClock
from rocketpy.dledger.commitlog_member.clean_space import CleanSpaceService
from rocketpy.dledger.commitlog_member.config import DLedgerMemberConfig
from rocketpy.dledger.commitlog_member.elector import LeaderElector, RoleChangeHandler
from rocketpy.dledger.commitlog_member.entry_handler import MAX_CONTROL_REQUESTS, EntryHandler
from rocketpy.dledger.commitlog_member.protocol import (
    AppendEntryRequest,
    AppendEntryResponse,
    Base,
    DLedgerResponseCode,
    GetEntriesRequest,
    GetEntriesResponse,
    HeartBeatRequest,
    HeartBeatResponse,
    LeadershipTransferRequest,
    LeadershipTransferResponse,
    MetadataRequest,
    MetadataResponse,
    PushEntryRequest,
    PushEntryResponse,
    VoteRequest,
    VoteResponse,
    VoteResult,
    code_name,
)
from rocketpy.dledger.commitlog_member.pusher import AnswerCallback, LeaderPusher
from rocketpy.dledger.commitlog_member.rpc import PeerRpc
from rocketpy.dledger.commitlog_member.state import MemberState, Role
from rocketpy.store.cleanup import DiskUsage, disk_used_ratio
from rocketpy.store.dledger_log.entry import EntryHeader
from rocketpy.store.dledger_log.store import DLedgerLogStore, DLedgerStoreConfig, DLedgerStoreError

log = structlog.get_logger(__name__)

CommittedListener = Callable[[int, int], None]
_LEADER = Role.LEADER  # once per append: an enum member lookup costs more than the test
PREFERRED_LEADER_CHECK_S = 1.0
TRANSFEREE_POLL_S = 0.01


class DLedgerAppendError(Exception):
    """An append refused or not acknowledged; ``code`` is the DLedgerResponseCode."""

    def __init__(self, code: int, message: str = "") -> None:
        self.code = code
        super().__init__(f"{code_name(code)} ({code}) {message}".strip())


@dataclass(frozen=True, slots=True)
class PendingEntry:
    """An entry appended by the leader: where it lies and the quorum's answer to await."""

    index: int
    pos: int
    future: asyncio.Future[AppendEntryResponse]


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberStatistics:
    """A snapshot of one member (``statistics()``)."""

    self_id: str
    role: str
    term: int
    leader_id: str | None
    ledger_begin_index: int
    ledger_end_index: int
    ledger_end_term: int
    committed_index: int
    committed_pos: int
    #: peer -> watermark in the current term (leader only; empty otherwise)
    water_marks: dict[str, int]
    pending_appends: int
    applied_single_pushes: int
    applied_batch_pushes: int
    throttled_pushes: int
    #: APPEND pushes sent again: lost with their connection / timed out (one at a time)
    lost_pushes_resent: int
    timed_out_pushes_resent: int


def _error(request: Base, kind: type[Base], code: int, leader_id: str | None) -> Base:
    """``copyBaseInfo(request)`` with ``code`` and the known leader."""
    return kind(
        group=request.group,
        remote_id=request.remote_id,
        local_id=request.local_id,
        leader_id=leader_id,
        term=request.term,
        code=code,
    )


class DLedgerMember:
    """A DLedger member serving its peer port; start with :meth:`start`."""

    def __init__(
        self,
        config: DLedgerMemberConfig,
        *,
        clock: Clock | None = None,
        rng: random.Random | None = None,
        disk_usage: DiskUsage = disk_used_ratio,
    ) -> None:
        self.config = config
        self.clock = clock or SystemClock()
        self.state = MemberState(config)
        self.store = DLedgerLogStore(
            DLedgerStoreConfig(
                base_dir=config.base_dir,
                data_file_size=config.data_file_size,
                index_file_size=config.index_file_size,
                data_dir=config.data_dir,
            )
        )
        self.rpc = PeerRpc(
            self_id=config.self_id,
            address=config.self_address,
            peers=config.peer_map,
            rpc_timeout_ms=config.rpc_timeout_ms,
            # A leader keeps up to maxPendingSize APPEND pushes (and their resends) in flight,
            # plus control pushes the handler bounds itself (421): the transport's SYSTEM_BUSY
            # must never answer one. A push answered so is dropped by the leader and resent only
            # after maxPushTimeOutMs, and every push after it waits in the gap: a follower that
            # fell ~1000 pushes behind once stayed there, answering a push a round trip.
            max_inflight_per_connection=2 * config.max_pending_size + MAX_CONTROL_REQUESTS,
        )
        self._executor = ThreadPoolExecutor(1, thread_name_prefix=f"dledger-{config.self_id}-io")
        #: Retention and the disk-full flag; the broker sets ``keep_from`` and listens.
        self.clean = CleanSpaceService(
            config, self.store, executor=self._executor, clock=self.clock, disk_usage=disk_usage
        )
        self.elector = LeaderElector(
            config, self.state, self.rpc, self._ledger_end, clock=self.clock, rng=rng
        )
        self.pusher = LeaderPusher(
            config=config,
            state=self.state,
            store=self.store,
            rpc=self.rpc,
            clock=self.clock,
            on_committed=self._committed_changed,
        )
        self.handler = EntryHandler(
            config=config,
            state=self.state,
            store=self.store,
            clock=self.clock,
            executor=self._executor,
            on_committed=self._committed_changed,
        )
        self.elector.add_role_change_handler(self._on_role_change)
        self._committed_listeners: list[CommittedListener] = []
        self._tasks = TaskSet(f"dledger-{config.self_id}")
        self._started = False
        self._stopped = False

    # -- API -------------------------------------------------------------------------------

    @property
    def role(self) -> Role:
        return self.state.role

    @property
    def term(self) -> int:
        return self.state.curr_term

    @property
    def leader_id(self) -> str | None:
        return self.state.leader_id

    @property
    def port(self) -> int:
        return self.rpc.port

    def add_role_change_handler(self, handler: RoleChangeHandler) -> None:
        """``handler(term, role)`` on every role change, on the loop."""
        self.elector.add_role_change_handler(handler)

    def add_committed_listener(self, listener: CommittedListener) -> None:
        """``listener(committed_index, committed_pos)`` whenever the committed index moves."""
        self._committed_listeners.append(listener)

    def append_nowait(
        self, body: bytes | bytearray, *, queue_offset: int | None = None, patch: bool = True
    ) -> PendingEntry:
        """``handleAppend``'s local half: append as leader now, return where and the future of
        the quorum's answer (200 with pos, 502, 501). ``body`` is one message record whose
        PHYSICALOFFSET (and QUEUEOFFSET when given) the log patches; ``patch=False`` stores a
        body that is no record verbatim.

        Raises:
            DLedgerAppendError: NOT_LEADER, LEADER_TRANSFERRING, LEADER_PENDING_FULL or
                DISK_FULL/DISK_ERROR (nothing appended).
        """
        header = self._append_local(body, queue_offset, patch)
        return PendingEntry(header.index, header.pos, self.pusher.wait_ack(header))

    def append_then(
        self, body: bytes | bytearray, on_answer: AnswerCallback, *, queue_offset: int | None
    ) -> EntryHeader:
        """:meth:`append_nowait` of a message record with no future: ``on_answer(code)`` is
        called once with the quorum's answer (200, 502, 501, 500), from the ack checker (a
        broker's send: one future less per message). Returns the entry's header. A
        ``bytearray`` record is patched in place (PHYSICALOFFSET, QUEUEOFFSET), as written.

        Raises:
            DLedgerAppendError: as :meth:`append_nowait`; ``on_answer`` is then never called.
        """
        header = self._append_local(body, queue_offset, True)
        # A bytearray record was patched in place (append_as_leader): it is the body written.
        self.pusher.wait_ack_then(header, on_answer, body if type(body) is bytearray else None)
        return header

    def _append_local(
        self, body: bytes | bytearray, queue_offset: int | None, patch: bool
    ) -> EntryHeader:
        st = self.state
        if st.role is not _LEADER:
            raise DLedgerAppendError(DLedgerResponseCode.NOT_LEADER, f"leader={st.leader_id}")
        if st.transferee is not None:
            raise DLedgerAppendError(DLedgerResponseCode.LEADER_TRANSFERRING)
        term = st.curr_term
        if self.pusher.is_pending_full(term):
            raise DLedgerAppendError(DLedgerResponseCode.LEADER_PENDING_FULL)
        try:
            return self.store.append_as_leader(body, term, queue_offset=queue_offset, patch=patch)
        except DLedgerStoreError as e:
            code = DLedgerResponseCode.DISK_FULL if e.code == "DISK_FULL" else None
            raise DLedgerAppendError(code or DLedgerResponseCode.DISK_ERROR, str(e)) from e

    async def append(
        self, body: bytes, *, timeout_s: float | None = None, patch: bool = True
    ) -> tuple[int, int]:
        """Append ``body`` and wait for the quorum: (index, pos).

        Raises:
            DLedgerAppendError: refused, or answered 502 (no quorum in ``maxWaitAckTimeMs``),
                501 (the term changed), 500 (the member shut down).
            TimeoutError: no answer within ``timeout_s`` (default: the ack wait + 2 s).
        """
        pending = self.append_nowait(body, patch=patch)
        budget = timeout_s or (self.config.max_wait_ack_time_ms / 1000 + 2.0)
        async with asyncio.timeout(budget):
            response = await asyncio.shield(pending.future)
        if response.code != DLedgerResponseCode.SUCCESS:
            raise DLedgerAppendError(response.code, f"index {pending.index}")
        return response.index, response.pos

    async def wait_leader_ready(self, timeout_s: float) -> bool:
        """Section 3.4: True once this member leads and its log is empty or fully committed
        (``end == committed``); False if it stops leading or ``timeout_s`` passes."""
        try:
            async with asyncio.timeout(timeout_s):
                while self.state.is_leader:
                    end = self.store.ledger_end_index
                    if end in (-1, self.store.committed_index):
                        return True
                    await asyncio.sleep(0.01)
        except TimeoutError:
            pass
        return False

    def statistics(self) -> MemberStatistics:
        """Role, term, ledger counters and replication progress, taken now."""
        st, store = self.state, self.store
        leading = st.is_leader
        return MemberStatistics(
            self_id=st.self_id,
            role=st.role.name,
            term=st.curr_term,
            leader_id=st.leader_id,
            ledger_begin_index=store.ledger_begin_index,
            ledger_end_index=store.ledger_end_index,
            ledger_end_term=store.ledger_end_term,
            committed_index=store.committed_index,
            committed_pos=store.committed_pos,
            water_marks=dict(self.pusher.peer_water_marks_by_term.get(st.curr_term, {}))
            if leading
            else {},
            pending_appends=len(self.pusher.pending_by_term.get(st.curr_term, {})),
            applied_single_pushes=self.handler.applied_single,
            applied_batch_pushes=self.handler.applied_batch,
            throttled_pushes=sum(d.throttled for d in self.pusher.dispatchers.values()),
            lost_pushes_resent=sum(d.lost_resent for d in self.pusher.dispatchers.values()),
            timed_out_pushes_resent=sum(d.probes for d in self.pusher.dispatchers.values()),
        )

    async def transfer_leadership(self, transferee_id: str) -> LeadershipTransferResponse:
        """An operator's LEADERSHIP_TRANSFER to this (leading) member."""
        st = self.state
        request = LeadershipTransferRequest(
            group=st.group,
            remote_id=st.self_id,
            local_id=st.self_id,
            term=st.curr_term,
            transfer_id=st.self_id,
            transferee_id=transferee_id,
        )
        return await self.handle_leadership_transfer(request)

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Recover the log, load ``currterm``, bind the peer port, start the loops."""
        if self._started:
            return
        self._started = True
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._executor, self._load)
        self.rpc.install(self)
        await self.rpc.start()
        self.pusher.start()
        self.handler.start()
        self.elector.start()
        self.clean.start()
        me = self.config.self_id
        self._tasks.spawn(self._flush_loop(), name=f"dledger-{me}/flush")
        self._tasks.spawn(self._checkpoint_loop(), name=f"dledger-{me}/checkpoint")
        self._tasks.spawn(self._preferred_leader_loop(), name=f"dledger-{me}/preferred")
        log.info(
            "dledger member started",
            self_id=me,
            address=self.config.self_address,
            term=self.state.curr_term,
            end=self.store.ledger_end_index,
            committed=self.store.committed_index,
        )

    def _load(self) -> None:
        self.config.base_dir.mkdir(parents=True, exist_ok=True)
        self.store.load()
        self.state.load()

    async def shutdown(self) -> None:
        """Stop the loops and the port, flush, write the checkpoint, close the files."""
        if self._stopped or not self._started:
            return
        self._stopped = True
        await self.elector.stop()
        await self.clean.stop()
        await self._tasks.cancel_all(timeout_s=5.0)
        await self.pusher.stop()
        await self.handler.stop()
        await self.rpc.stop()
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._executor, self.store.close)
        self._executor.shutdown(wait=True)
        log.info("dledger member stopped", self_id=self.config.self_id)

    async def _flush_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(self.config.flush_file_interval_ms / 1000)
            await loop.run_in_executor(self._executor, self.store.flush)

    async def _checkpoint_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(self.config.check_point_interval_ms / 1000)
            values = self.store.checkpoint_values()
            await loop.run_in_executor(self._executor, self.store.persist_checkpoint, values)

    # -- internals ---------------------------------------------------------------------------

    def _ledger_end(self) -> tuple[int, int]:
        return self.store.ledger_end_index, self.store.ledger_end_term

    def _committed_changed(self) -> None:
        index, pos = self.store.committed_index, self.store.committed_pos
        for listener in list(self._committed_listeners):
            try:
                listener(index, pos)
            except Exception:
                log.exception("dledger committed listener failed")

    def _on_role_change(self, term: int, role: Role) -> None:
        if role is Role.LEADER:
            self.pusher.wakeup_dispatchers()
        elif role is Role.FOLLOWER:
            self.handler.wakeup.set()

    def _refusal(self, request: Base) -> int | None:
        if request.remote_id != self.state.self_id:
            return DLedgerResponseCode.UNKNOWN_MEMBER
        if request.group != self.state.group:
            return DLedgerResponseCode.UNKNOWN_GROUP
        return None

    # -- handlers (PeerHandler) -----------------------------------------------------------------

    async def handle_metadata(self, request: MetadataRequest) -> MetadataResponse:
        code = self._refusal(request)
        if code is not None:
            return _error(request, MetadataResponse, code, self.state.leader_id)  # type: ignore[return-value]
        return MetadataResponse(
            group=self.state.group, peers=dict(self.state.peer_map), leader_id=self.state.leader_id
        )

    async def handle_append(self, request: AppendEntryRequest) -> AppendEntryResponse:
        code = self._refusal(request)
        if code is None:
            try:
                pending = self.append_nowait(request.body or b"")
            except DLedgerAppendError as e:
                code = e.code
            else:
                return await pending.future
        return AppendEntryResponse(
            group=request.group,
            remote_id=request.remote_id,
            local_id=request.local_id,
            leader_id=self.state.leader_id,
            term=self.state.curr_term,
            code=code,
        )

    async def handle_get(self, request: GetEntriesRequest) -> GetEntriesResponse:
        code = self._refusal(request)
        if code is None and not self.state.is_leader:
            code = DLedgerResponseCode.NOT_LEADER
        if code is None:
            try:
                entry = self.store.get(
                    request.begin_index if request.begin_index is not None else -1
                )
            except DLedgerStoreError as e:
                code = (
                    DLedgerResponseCode[e.code]
                    if e.code in DLedgerResponseCode.__members__
                    else DLedgerResponseCode.UNKNOWN
                )
            else:
                return GetEntriesResponse(group=self.state.group, entries=(entry,))
        return _error(request, GetEntriesResponse, code, self.state.leader_id)  # type: ignore[return-value]

    async def handle_vote(self, request: VoteRequest) -> VoteResponse:
        code = self._refusal(request)
        if code is not None:
            return VoteResponse(
                group=request.group,
                remote_id=request.remote_id,
                local_id=request.local_id,
                leader_id=self.state.leader_id,
                term=request.term,
                code=code,
                vote_result=VoteResult.UNKNOWN,
            )
        return await self.elector.handle_vote(request)

    async def handle_heart_beat(self, request: HeartBeatRequest) -> HeartBeatResponse:
        code = self._refusal(request)
        if code is not None:
            return _error(request, HeartBeatResponse, code, self.state.leader_id)  # type: ignore[return-value]
        return await self.elector.handle_heart_beat(request)

    def handle_push(self, request: PushEntryRequest) -> asyncio.Future[PushEntryResponse]:
        code = self._refusal(request)
        if code is not None:
            fut: asyncio.Future[PushEntryResponse] = asyncio.get_running_loop().create_future()
            fut.set_result(_error(request, PushEntryResponse, code, self.state.leader_id))  # type: ignore[arg-type]
            return fut
        return self.handler.handle_push(request)

    async def handle_leadership_transfer(
        self, request: LeadershipTransferRequest
    ) -> LeadershipTransferResponse:
        code = self._refusal(request)
        st = self.state
        if code is None and st.self_id == request.transfer_id:
            if not st.is_peer_member(request.transferee_id):
                code = DLedgerResponseCode.UNKNOWN_MEMBER
            elif st.curr_term != request.term:
                code = DLedgerResponseCode.INCONSISTENT_TERM
            elif not st.is_leader:
                code = DLedgerResponseCode.NOT_LEADER
            else:
                assert request.transferee_id is not None  # noqa: S101 - a peer member
                behind = self.store.ledger_end_index - self.pusher.get_peer_water_mark(
                    request.term, request.transferee_id
                )
                if behind >= self.config.max_leadership_transfer_wait_index:
                    code = DLedgerResponseCode.FALL_BEHIND_TOO_MUCH
                else:
                    return await self.elector.handle_leadership_transfer(request)
        elif code is None and st.self_id == request.transferee_id:
            if request.transfer_id != st.leader_id:
                code = DLedgerResponseCode.INCONSISTENT_LEADER
            elif await self._wait_caught_up(request.take_leadership_ledger_index):
                return await self.elector.handle_take_leadership(request)
            else:
                code = DLedgerResponseCode.TAKE_LEADERSHIP_FAILED
        elif code is None:
            return LeadershipTransferResponse(
                term=st.curr_term, code=DLedgerResponseCode.UNEXPECTED_ARGUMENT
            )
        return _error(request, LeadershipTransferResponse, code, st.leader_id)  # type: ignore[return-value]

    async def _wait_caught_up(self, index: int) -> bool:
        """The transferee keeps taking pushes until its end reaches ``index``."""
        deadline = self.clock.monotonic_ms() + self.config.leadership_transfer_wait_timeout_ms
        while index - self.store.ledger_end_index > 0:
            if self.clock.monotonic_ms() > deadline:
                log.warning(
                    "dledger transferee fell behind", need=index, end=self.store.ledger_end_index
                )
                return False
            await asyncio.sleep(TRANSFEREE_POLL_S)
        return True

    async def _preferred_leader_loop(self) -> None:
        while True:
            await asyncio.sleep(PREFERRED_LEADER_CHECK_S)
            try:
                await self._check_preferred_leader()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("dledger preferred leader check failed")

    async def _check_preferred_leader(self) -> None:
        """``checkPreferredLeader``: a non-preferred leader hands over to the least lagging
        live preferred peer less than ``maxLeadershipTransferWaitIndex`` behind."""
        st = self.state
        preferred = self.config.preferred()
        if not st.is_leader or not preferred or st.transferee is not None:
            return
        if st.self_id in preferred:
            return
        end = self.store.ledger_end_index
        best, best_behind = None, None
        for peer in preferred:
            if not st.is_peer_member(peer) or not st.peers_live_table.get(peer, False):
                continue
            behind = end - self.pusher.get_peer_water_mark(st.curr_term, peer)
            if best_behind is None or behind < best_behind:
                best, best_behind = peer, behind
        if best is None or best_behind is None:
            return
        if best_behind < self.config.max_leadership_transfer_wait_index:
            log.info("dledger transfer to preferred leader", transferee=best, behind=best_behind)
            response = await self.elector.handle_leadership_transfer(
                LeadershipTransferRequest(term=st.curr_term, transferee_id=best)
            )
            log.info("dledger transfer done", transferee=best, code=code_name(response.code))
