"""DLedger 0.3.1.2's leader election (dledger-commitlog.md sections 3.1-3.3).

Owns: the state maintainer (every 10 ms: leader heartbeats, follower silence check, candidate
votes), the VOTE and HEART_BEAT answers, the leader's side of LEADERSHIP_TRANSFER and the
transferee's take-leadership task. Mirrors ``DLedgerLeaderElector``. Must not: touch the log
(it reads the ledger end through ``ledger_end``) or push entries (:mod:`.pusher`).

Why not :mod:`rocketpy.dledger.election`/:mod:`rocketpy.dledger.core`: the controller's core is
etcd-style (randomized election timeout, pre-vote free, log-up-to-date check by last term/index,
commit index in heartbeats, leader appends a NOOP); 0.3.1.2's rules differ in order and outcome
(ledger end checked before the term, a larger term answers REJECT_TERM_NOT_READY and makes the
voter a candidate at its old term, the candidate's outcomes WAIT_TO_REVOTE /
REVOTE_IMMEDIATELY / WAIT_TO_VOTE_NEXT, heartbeats with base fields only and answers 416/409,
nothing appended on election), and a Java peer sees the difference on the wire.

One deviation: a leader steps down when a heartbeat is answered with a higher term, even with
a quorum of 200s (upstream only without one; see :meth:`LeaderElector._higher_term_seen`).
Nothing on the wire changes; a Java member answers the same and is stepped down the same way.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from enum import Enum

import structlog

from rocketpy.common.aio import TaskSet
from rocketpy.common.clock import Clock, SystemClock
from rocketpy.dledger.commitlog_member.config import DLedgerMemberConfig
from rocketpy.dledger.commitlog_member.protocol import (
    DLedgerResponseCode,
    HeartBeatRequest,
    HeartBeatResponse,
    LeadershipTransferRequest,
    LeadershipTransferResponse,
    VoteRequest,
    VoteResponse,
    VoteResult,
)
from rocketpy.dledger.commitlog_member.rpc import PeerRpc
from rocketpy.dledger.commitlog_member.state import MemberState, Role
from rocketpy.dledger.transport import DLedgerRequestCode

log = structlog.get_logger(__name__)

RoleChangeHandler = Callable[[int, Role], None]
MAINTAIN_INTERVAL_S = 0.01


class ParseResult(Enum):
    """``VoteResponse.ParseResult``."""

    WAIT_TO_REVOTE = "WAIT_TO_REVOTE"
    REVOTE_IMMEDIATELY = "REVOTE_IMMEDIATELY"
    PASSED = "PASSED"
    WAIT_TO_VOTE_NEXT = "WAIT_TO_VOTE_NEXT"


def _vote(request: VoteRequest, term: int, result: VoteResult) -> VoteResponse:
    """``new VoteResponse(request).term(term).voteResult(result)``."""
    return VoteResponse(
        group=request.group,
        remote_id=request.remote_id,
        local_id=request.local_id,
        leader_id=request.leader_id,
        term=term,
        code=request.code,
        vote_result=result,
    )


def _beat(term: int = -1, code: int = DLedgerResponseCode.SUCCESS) -> HeartBeatResponse:
    return HeartBeatResponse(term=term, code=code)


def _transfer(term: int, code: int) -> LeadershipTransferResponse:
    return LeadershipTransferResponse(term=term, code=code)


class LeaderElector:
    """Election of one member."""

    def __init__(
        self,
        config: DLedgerMemberConfig,
        state: MemberState,
        rpc: PeerRpc,
        ledger_end: Callable[[], tuple[int, int]],
        *,
        clock: Clock | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self._config = config
        self._state = state
        self._rpc = rpc
        self._ledger_end = ledger_end  # () -> (ledgerEndIndex, ledgerEndTerm)
        self._clock = clock or SystemClock()
        self._random = rng or random.Random()  # noqa: S311 - timing jitter, not crypto
        self._handlers: list[RoleChangeHandler] = []
        self.last_leader_heart_beat_time = -1
        self._last_send_heart_beat_time = -1
        self._last_succ_heart_beat_time = -1
        self._next_time_to_request_vote = -1
        self._need_increase_term_immediately = False
        self._last_parse_result = ParseResult.WAIT_TO_REVOTE
        self._take_future: asyncio.Future[LeadershipTransferResponse] | None = None
        self._task: asyncio.Task[None] | None = None
        self._rpc_tasks = TaskSet(f"dledger-{state.self_id}/elector-rpc")

    def add_role_change_handler(self, handler: RoleChangeHandler) -> None:
        if handler not in self._handlers:
            self._handlers.append(handler)

    def _now(self) -> int:
        return self._clock.monotonic_ms()

    def _elapsed(self, since: int) -> int:
        return self._now() - since

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(
            self._maintain(), name=f"dledger-{self._state.self_id}/state-maintainer"
        )

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.wait([task], timeout=5.0)
        if self._take_future is not None and not self._take_future.done():
            self._take_future.cancel()
        await self._rpc_tasks.cancel_all(timeout_s=5.0)

    async def _maintain(self) -> None:
        while True:
            try:
                if self._state.is_leader:
                    await self._maintain_as_leader()
                elif self._state.is_follower:
                    self._maintain_as_follower()
                else:
                    await self._maintain_as_candidate()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("dledger state maintainer failed", self_id=self._state.self_id)
            await asyncio.sleep(MAINTAIN_INTERVAL_S)

    # -- role changes --------------------------------------------------------------------

    def change_role_to_leader(self, term: int) -> None:
        if self._state.curr_term == term:
            self._state.change_to_leader(term)
            self._last_send_heart_beat_time = -1
            self._handle_role_change(term, Role.LEADER)

    def change_role_to_candidate(self, term: int) -> None:
        if term >= self._state.curr_term:
            self._state.change_to_candidate(term)
            self._handle_role_change(term, Role.CANDIDATE)

    def change_role_to_follower(self, term: int, leader_id: str) -> None:
        self._last_parse_result = ParseResult.WAIT_TO_REVOTE
        self._state.change_to_follower(term, leader_id)
        self.last_leader_heart_beat_time = self._now()
        self._handle_role_change(term, Role.FOLLOWER)

    def _handle_role_change(self, term: int, role: Role) -> None:
        log.info("dledger role change", self_id=self._state.self_id, term=term, role=role.name)
        self._check_take_leadership(term, role)
        for handler in list(self._handlers):
            try:
                handler(term, role)
            except Exception:
                log.exception("dledger role change handler failed")

    # -- heartbeats ----------------------------------------------------------------------

    async def handle_heart_beat(  # noqa: PLR0911 - one answer per rule of section 3.2
        self, request: HeartBeatRequest
    ) -> HeartBeatResponse:
        """``handleHeartBeat`` (the caller checked remoteId and group)."""
        st = self._state
        if not st.is_peer_member(request.leader_id):
            return _beat(st.curr_term, DLedgerResponseCode.UNKNOWN_MEMBER)
        if st.self_id == request.leader_id:
            return _beat(st.curr_term, DLedgerResponseCode.UNEXPECTED_MEMBER)
        if request.term < st.curr_term:
            return _beat(st.curr_term, DLedgerResponseCode.EXPIRED_TERM)
        if request.term == st.curr_term and request.leader_id == st.leader_id:
            self.last_leader_heart_beat_time = self._now()
            return _beat()
        # The abnormal case under the state lock: a term being raised (and persisted) by the
        # candidate loop is settled before this beat is judged.
        async with st.lock:
            if request.term < st.curr_term:
                return _beat(st.curr_term, DLedgerResponseCode.EXPIRED_TERM)
            if request.term == st.curr_term:
                if st.leader_id is None:
                    assert request.leader_id is not None  # noqa: S101 - checked as a peer above
                    self.change_role_to_follower(request.term, request.leader_id)
                    return _beat()
                if request.leader_id == st.leader_id:
                    self.last_leader_heart_beat_time = self._now()
                    return _beat()
                return _beat(code=DLedgerResponseCode.INCONSISTENT_LEADER)
            self.change_role_to_candidate(request.term)
            self._need_increase_term_immediately = True
            return _beat(code=DLedgerResponseCode.TERM_NOT_READY)

    async def _send_heartbeats(self, term: int, leader_id: str) -> None:  # noqa: C901 - upstream's sendHeartbeats
        st = self._state
        succ, not_ready, max_term, inconsistent = 1, 0, -1, False
        done = asyncio.Event()
        answered = 1

        async def beat(peer: str) -> None:
            nonlocal succ, not_ready, max_term, inconsistent, answered
            req = HeartBeatRequest(
                group=st.group, local_id=st.self_id, remote_id=peer, leader_id=leader_id, term=term
            )
            try:
                resp = await self._rpc.invoke(DLedgerRequestCode.HEART_BEAT, req, HeartBeatResponse)
                if resp is None or resp.code == DLedgerResponseCode.NETWORK_ERROR:
                    st.peers_live_table[peer] = False
                    return
                if resp.code == DLedgerResponseCode.SUCCESS:
                    succ += 1
                elif resp.code == DLedgerResponseCode.EXPIRED_TERM:
                    max_term = max(max_term, resp.term)
                    if done.is_set():  # the round was judged without this answer
                        self._higher_term_seen(resp.term)
                elif resp.code == DLedgerResponseCode.INCONSISTENT_LEADER:
                    inconsistent = True
                elif resp.code == DLedgerResponseCode.TERM_NOT_READY:
                    not_ready += 1
                st.peers_live_table[peer] = True
                if st.is_quorum(succ) or st.is_quorum(succ + not_ready):
                    done.set()
            finally:
                answered += 1
                if answered == st.peer_size:
                    done.set()

        for p in st.peer_map:
            if p != st.self_id:
                self._rpc_tasks.spawn(beat(p), name=f"heartbeat-{p}")
        try:
            async with asyncio.timeout(self._config.heart_beat_time_interval_ms / 1000):
                await done.wait()
        except TimeoutError:
            pass
        if max_term > term:
            self._higher_term_seen(max_term)
        elif st.is_quorum(succ):
            self._last_succ_heart_beat_time = self._now()
        elif st.is_quorum(succ + not_ready):
            self._last_send_heart_beat_time = -1
        elif inconsistent or (
            self._elapsed(self._last_succ_heart_beat_time)
            > self._config.max_heart_beat_leak * self._config.heart_beat_time_interval_ms
        ):
            self.change_role_to_candidate(term)
        # Stragglers run on to their rpc deadline and still update the live table.

    def _higher_term_seen(self, term: int) -> None:
        """A peer answered a heartbeat with ``term``, above this leader's: step down to it
        (Raft's rule), even when a quorum answered 200. Upstream 0.3.1.2 steps down only
        without a quorum, so a member whose term rose while its ledger fell behind (a pause
        or a cut past its heartbeat timeout) can never win -- both others refuse its shorter
        ledger -- and never follows a leader of a lower term: it stayed a candidate, its
        copy out of date, until the leader changed for another reason. Stepping down costs
        one election, which the members with the longest ledger win."""
        if term > self._state.curr_term and self._state.is_leader:
            log.info("dledger heartbeat answered with a higher term: stepping down",
                     self_id=self._state.self_id, term=self._state.curr_term,
                     higher=term)  # fmt: skip
            self.change_role_to_candidate(term)

    async def _maintain_as_leader(self) -> None:
        if (
            self._elapsed(self._last_send_heart_beat_time)
            > self._config.heart_beat_time_interval_ms
        ):
            if not self._state.is_leader:
                return
            term, leader_id = self._state.curr_term, self._state.leader_id
            self._last_send_heart_beat_time = self._now()
            assert leader_id is not None  # noqa: S101 - a leader knows itself
            await self._send_heartbeats(term, leader_id)

    def _maintain_as_follower(self) -> None:
        interval = self._config.heart_beat_time_interval_ms
        silent = self._elapsed(self.last_leader_heart_beat_time)
        # Checked after 2 intervals, acted on after maxHeartBeatLeak intervals.
        if (
            silent > 2 * interval
            and self._state.is_follower
            and silent > self._config.max_heart_beat_leak * interval
        ):
            self.change_role_to_candidate(self._state.curr_term)

    # -- votes ---------------------------------------------------------------------------

    async def handle_vote(  # noqa: PLR0911 - one answer per rule of section 3.1
        self, request: VoteRequest, *, self_vote: bool = False
    ) -> VoteResponse:
        """``handleVote``: the checks of section 3.1 in upstream's order."""
        st = self._state
        async with st.lock:
            end_index, end_term = self._ledger_end()
            if not st.is_peer_member(request.leader_id):
                return _vote(request, st.curr_term, VoteResult.REJECT_UNKNOWN_LEADER)
            if not self_vote and st.self_id == request.leader_id:
                return _vote(request, st.curr_term, VoteResult.REJECT_UNEXPECTED_LEADER)
            if request.ledger_end_term < end_term:
                return _vote(request, st.curr_term, VoteResult.REJECT_EXPIRED_LEDGER_TERM)
            if request.ledger_end_term == end_term and request.ledger_end_index < end_index:
                return _vote(request, st.curr_term, VoteResult.REJECT_SMALL_LEDGER_END_INDEX)
            if request.term < st.curr_term:
                return _vote(request, st.curr_term, VoteResult.REJECT_EXPIRED_VOTE_TERM)
            if request.term == st.curr_term:
                if st.curr_vote_for is not None and st.curr_vote_for != request.leader_id:
                    if st.leader_id is not None:
                        return _vote(request, st.curr_term, VoteResult.REJECT_ALREADY_HAS_LEADER)
                    return _vote(request, st.curr_term, VoteResult.REJECT_ALREADY_VOTED)
            else:
                self.change_role_to_candidate(request.term)
                self._need_increase_term_immediately = True
                return _vote(request, st.curr_term, VoteResult.REJECT_TERM_NOT_READY)
            if request.term < end_term:
                return _vote(request, end_term, VoteResult.REJECT_TERM_SMALL_THAN_LEDGER)
            if (
                not self_vote
                and self._is_taking_leadership()
                and request.ledger_end_term == end_term
                and end_index >= request.ledger_end_index
            ):
                return _vote(request, st.curr_term, VoteResult.REJECT_TAKING_LEADERSHIP)
            await st.set_curr_vote_for(request.leader_id)
            return _vote(request, st.curr_term, VoteResult.ACCEPT)

    def _is_taking_leadership(self) -> bool:
        preferred = self._config.preferred()
        return (
            bool(preferred)
            and self._state.term_to_take_leadership == self._state.curr_term
            and self._state.self_id in preferred
        )

    def _compute_next_vote_time(self) -> int:
        c = self._config
        if self._is_taking_leadership():
            lo, hi = c.min_take_leadership_vote_interval_ms, c.max_take_leadership_vote_interval_ms
        else:
            lo, hi = c.min_vote_interval_ms, c.max_vote_interval_ms
        return self._now() + lo + self._random.randrange(max(1, hi - lo))

    async def _maintain_as_candidate(self) -> None:
        st = self._state
        if (
            self._now() < self._next_time_to_request_vote
            and not self._need_increase_term_immediately
        ):
            return
        if not st.is_candidate:
            return
        async with st.lock:
            if not st.is_candidate:
                return
            if (
                self._last_parse_result is ParseResult.WAIT_TO_VOTE_NEXT
                or self._need_increase_term_immediately
            ):
                term = await st.next_term()
                self._last_parse_result = ParseResult.WAIT_TO_REVOTE
            else:
                term = st.curr_term
            end_index, end_term = self._ledger_end()
        if self._need_increase_term_immediately:
            self._next_time_to_request_vote = self._compute_next_vote_time()
            self._need_increase_term_immediately = False
            return
        await self._request_votes(term, end_index, end_term)

    async def _request_votes(  # noqa: C901, PLR0915 - upstream's maintainAsCandidate tail
        self, term: int, end_index: int, end_term: int
    ) -> None:
        st = self._state
        known_max = term
        valid = accepted = not_ready = bigger_ledger = answered = 0
        already_has_leader = False
        done = asyncio.Event()

        async def ask(peer: str) -> None:
            nonlocal known_max, valid, accepted, not_ready, bigger_ledger, answered
            nonlocal already_has_leader
            req = VoteRequest(
                group=st.group,
                ledger_end_index=end_index,
                ledger_end_term=end_term,
                leader_id=st.self_id,
                term=term,
                remote_id=peer,
                local_id=st.self_id,
            )
            try:
                if peer == st.self_id:
                    resp: VoteResponse | None = await self.handle_vote(req, self_vote=True)
                else:
                    resp = await self._rpc.invoke(DLedgerRequestCode.VOTE, req, VoteResponse)
                result = resp.vote_result if resp is not None else VoteResult.UNKNOWN
                if result is not VoteResult.UNKNOWN:
                    valid += 1
                if result is VoteResult.ACCEPT:
                    accepted += 1
                elif result is VoteResult.REJECT_ALREADY_HAS_LEADER:
                    already_has_leader = True
                elif result in (
                    VoteResult.REJECT_TERM_SMALL_THAN_LEDGER,
                    VoteResult.REJECT_EXPIRED_VOTE_TERM,
                ):
                    assert resp is not None  # noqa: S101 - a result came with it
                    known_max = max(known_max, resp.term)
                elif result in (
                    VoteResult.REJECT_EXPIRED_LEDGER_TERM,
                    VoteResult.REJECT_SMALL_LEDGER_END_INDEX,
                ):
                    bigger_ledger += 1
                elif result is VoteResult.REJECT_TERM_NOT_READY:
                    not_ready += 1
                if (
                    already_has_leader
                    or st.is_quorum(accepted)
                    or st.is_quorum(accepted + not_ready)
                ):
                    done.set()
            finally:
                answered += 1
                if answered == st.peer_size:
                    done.set()

        for p in st.peer_map:
            self._rpc_tasks.spawn(ask(p), name=f"vote-{p}")
        wait_ms = self._config.vote_wait_base_ms + self._random.randrange(
            self._config.max_vote_interval_ms
        )
        try:
            async with asyncio.timeout(wait_ms / 1000):
                await done.wait()
        except TimeoutError:
            pass
        c = self._config
        if known_max > term:
            result = ParseResult.WAIT_TO_VOTE_NEXT
            self._next_time_to_request_vote = self._compute_next_vote_time()
            self.change_role_to_candidate(known_max)
        elif already_has_leader:
            result = ParseResult.WAIT_TO_REVOTE
            self._next_time_to_request_vote = (
                self._compute_next_vote_time()
                + c.heart_beat_time_interval_ms * c.max_heart_beat_leak
            )
        elif not st.is_quorum(valid):
            result = ParseResult.WAIT_TO_REVOTE
            self._next_time_to_request_vote = self._compute_next_vote_time()
        elif not st.is_quorum(valid - bigger_ledger):
            result = ParseResult.WAIT_TO_REVOTE
            self._next_time_to_request_vote = (
                self._compute_next_vote_time() + c.max_vote_interval_ms
            )
        elif st.is_quorum(accepted):
            result = ParseResult.PASSED
        elif st.is_quorum(accepted + not_ready):
            result = ParseResult.REVOTE_IMMEDIATELY
        else:
            result = ParseResult.WAIT_TO_VOTE_NEXT
            self._next_time_to_request_vote = self._compute_next_vote_time()
        self._last_parse_result = result
        log.info(
            "dledger vote",
            self_id=st.self_id,
            term=term,
            accepted=accepted,
            valid=valid,
            not_ready=not_ready,
            bigger_ledger=bigger_ledger,
            result=result.name,
        )
        if result is ParseResult.PASSED and st.is_candidate:
            self.change_role_to_leader(term)

    # -- leadership transfer -------------------------------------------------------------

    async def handle_leadership_transfer(
        self, request: LeadershipTransferRequest
    ) -> LeadershipTransferResponse:
        """The leader's side: mark the transferee and tell it to take leadership."""
        st = self._state
        async with st.lock:
            if st.curr_term != request.term:
                return _transfer(st.curr_term, DLedgerResponseCode.INCONSISTENT_TERM)
            if not st.is_leader:
                return _transfer(st.curr_term, DLedgerResponseCode.NOT_LEADER)
            if st.transferee is not None:
                return _transfer(st.curr_term, DLedgerResponseCode.LEADER_TRANSFERRING)
            st.transferee = request.transferee_id
        end_index, _ = self._ledger_end()
        take = LeadershipTransferRequest(
            group=st.group,
            leader_id=st.leader_id,
            local_id=st.self_id,
            remote_id=request.transferee_id,
            term=request.term,
            take_leadership_ledger_index=end_index,
            transfer_id=st.self_id,
            transferee_id=request.transferee_id,
        )
        # The transferee answers once it leads, fails or times out: give it room.
        timeout_s = (
            self._config.rpc_timeout_ms
            + self._config.leadership_transfer_wait_timeout_ms
            + self._config.vote_wait_base_ms
            + self._config.max_vote_interval_ms
        ) / 1000
        response = await self._rpc.invoke(
            DLedgerRequestCode.LEADERSHIP_TRANSFER, take, LeadershipTransferResponse, timeout_s
        )
        if response is None:
            response = _transfer(st.curr_term, DLedgerResponseCode.NETWORK_ERROR)
        if response.code != DLedgerResponseCode.SUCCESS or (
            st.curr_term == request.term and st.transferee is not None
        ):
            st.transferee = None
        return response

    async def handle_take_leadership(
        self, request: LeadershipTransferRequest
    ) -> LeadershipTransferResponse:
        """The transferee's side after its catch-up: campaign at term + 1; answered on the
        outcome (LEADER 200, FOLLOWER 418, a later term 403)."""
        st = self._state
        async with st.lock:
            if st.curr_term != request.term:
                return _transfer(st.curr_term, DLedgerResponseCode.INCONSISTENT_TERM)
            target = request.term + 1
            st.term_to_take_leadership = target
            if self._take_future is not None and not self._take_future.done():
                self._take_future.cancel()
            loop = asyncio.get_running_loop()
            fut: asyncio.Future[LeadershipTransferResponse] = loop.create_future()
            self._take_future = fut
            self.change_role_to_candidate(target)
            # Upstream flags needIncreaseTermImmediately and lets the maintainer raise the term;
            # a heartbeat of the old term arriving in between makes the transferee follow the
            # old leader again (418). Raising it here, as the maintainer would, closes that gap.
            await st.next_term()
            self._last_parse_result = ParseResult.WAIT_TO_REVOTE
            self._need_increase_term_immediately = False
            self._next_time_to_request_vote = self._compute_next_vote_time()
        return await fut

    def _check_take_leadership(self, term: int, role: Role) -> None:
        """``TakeLeadershipTask.check``."""
        target, fut = self._state.term_to_take_leadership, self._take_future
        if target == -1 or fut is None:
            return
        if term > target:
            response = _transfer(term, DLedgerResponseCode.EXPIRED_TERM)
        elif term == target:
            if role is Role.LEADER:
                response = _transfer(term, DLedgerResponseCode.SUCCESS)
            elif role is Role.FOLLOWER:
                response = _transfer(term, DLedgerResponseCode.TAKE_LEADERSHIP_FAILED)
            else:
                return
        elif role is Role.FOLLOWER:
            response = _transfer(term, DLedgerResponseCode.TAKE_LEADERSHIP_FAILED)
        else:
            response = _transfer(term, DLedgerResponseCode.INTERNAL_ERROR)
        if not fut.done():
            fut.set_result(response)
        self._state.term_to_take_leadership = -1
        self._take_future = None
