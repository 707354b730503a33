"""The leader's side of DLedger 0.3.1.2's ``DLedgerEntryPusher`` (dledger-commitlog.md section 2.3).

Owns: the per-term peer watermarks, the pending appends (each answered through its future or,
for a broker's send, a callback), one :class:`EntryDispatcher` per
follower (COMPARE -> TRUNCATE -> APPEND, pipelined up to ``maxPendingSize`` pushes, resend from
watermark + 1 after ``maxPushTimeOutMs``, bare COMMIT pushes after 1 s idle, optional batch
push) and the :class:`QuorumAckChecker` (committed index = median of the sorted watermarks,
pending appends completed with 200 + pos, 502 after ``maxWaitAckTimeMs``, 501 for an older
term). Mirrors ``DLedgerEntryPusher.EntryDispatcher`` and ``QuorumAckChecker``. Must not: vote
or apply pushes as a follower (:mod:`.entry_handler`).

Why not :mod:`rocketpy.dledger.replication`: that one matches logs with etcd's prev index/term
and a hint, batches always and installs snapshots; 0.3.1.2 compares whole entries at the
leader's end, truncates the follower to an entry, and sends a lagging follower TRUNCATE at the
leader's first index. Upstream's threads are tasks here, woken by events (with upstream's 1 ms
waits stretched to a few ms: nothing here waits on a clock finer than that).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

import structlog

from rocketpy.common.aio import TaskSet
from rocketpy.common.clock import Clock
from rocketpy.dledger.commitlog_member.config import DLedgerMemberConfig
from rocketpy.dledger.commitlog_member.protocol import (
    AppendEntryResponse,
    DLedgerResponseCode,
    PushEntryRequest,
    PushEntryResponse,
    PushType,
)
from rocketpy.dledger.commitlog_member.push_codec import PushFragments, encode_append
from rocketpy.dledger.commitlog_member.rpc import PeerRpc
from rocketpy.dledger.commitlog_member.state import MemberState
from rocketpy.dledger.commitlog_member.wakeup import Wakeup
from rocketpy.dledger.transport import DLedgerRequestCode
from rocketpy.store.dledger_log.entry import DLedgerEntry, EntryHeader
from rocketpy.store.dledger_log.store import DLedgerLogStore, DLedgerStoreError

log = structlog.get_logger(__name__)

IDLE_WAIT_S = 0.005
COMMIT_PUSH_INTERVAL_MS = 1000
LEAK_CHECK_INTERVAL_MS = 1000


#: Told the answer's code (200, 502, 501, 500) in place of a future (a broker's send).
AnswerCallback = Callable[[int], None]


@dataclass(slots=True)
class PendingAppend:
    """``AppendFuture``: an entry waiting for its quorum, answered through ``future`` or,
    with no future made, ``on_answer``."""

    index: int
    pos: int
    created_ms: int
    future: asyncio.Future[AppendEntryResponse] | None
    on_answer: AnswerCallback | None = None


class LeaderPusher:
    """Watermarks, pending appends, the dispatchers and the ack checker of a (possible) leader."""

    def __init__(
        self,
        *,
        config: DLedgerMemberConfig,
        state: MemberState,
        store: DLedgerLogStore,
        rpc: PeerRpc,
        clock: Clock,
        on_committed: Callable[[], None],
    ) -> None:
        self.config = config
        self.state = state
        self.store = store
        self.rpc = rpc
        self.clock = clock
        self._on_committed = on_committed
        self.peer_water_marks_by_term: dict[int, dict[str, int]] = {}
        self.pending_by_term: dict[int, dict[int, PendingAppend]] = {}
        self.ack_wakeup = Wakeup()
        self.fragments = PushFragments(store)
        self.dispatchers = {
            peer: EntryDispatcher(self, peer) for peer in state.peer_map if peer != state.self_id
        }
        self._tasks = TaskSet(f"dledger-{state.self_id}/pusher")
        self._self_id = state.self_id
        self._alone = state.peer_size == 1  # the peers are fixed for a member's life
        self._last_quorum_index = -1
        self._checker_term = -1
        self._last_check_leak_ms = 0

    def start(self) -> None:
        self._tasks.spawn(self._ack_checker(), name=f"dledger-{self.state.self_id}/ack-checker")
        for d in self.dispatchers.values():
            self._tasks.spawn(d.run(), name=f"dledger-{self.state.self_id}/push-{d.peer}")

    async def stop(self) -> None:
        await self._tasks.cancel_all(timeout_s=5.0)
        # Outcome unknown (the entry may still commit elsewhere): INTERNAL_ERROR, not a
        # cancellation a caller could take for its own.
        for term, pending in self.pending_by_term.items():
            for p in pending.values():
                self._answer(term, p, DLedgerResponseCode.INTERNAL_ERROR)
        self.pending_by_term.clear()

    def wakeup_dispatchers(self) -> None:
        for d in self.dispatchers.values():
            d.wakeup.set()

    # -- watermarks and pending appends --------------------------------------------------

    def _water_marks(self, term: int) -> dict[str, int]:
        marks = self.peer_water_marks_by_term.get(term)
        if marks is None:
            marks = dict.fromkeys(self.state.peer_map, -1)
            self.peer_water_marks_by_term[term] = marks
        return marks

    def update_peer_water_mark(self, term: int, peer: str, index: int) -> None:
        marks = self._water_marks(term)
        if marks.get(peer, -1) < index:
            marks[peer] = index

    def get_peer_water_mark(self, term: int, peer: str) -> int:
        return self._water_marks(term).get(peer, -1)

    def is_pending_full(self, term: int) -> bool:
        return len(self.pending_by_term.get(term, {})) > self.config.max_pending_requests_num

    def wait_ack(self, header: EntryHeader) -> asyncio.Future[AppendEntryResponse]:
        """``waitAck``: a future completed once a quorum holds ``header``'s entry."""
        fut: asyncio.Future[AppendEntryResponse] = asyncio.get_running_loop().create_future()
        self._wait(header, fut, None)
        return fut

    def wait_ack_then(self, header: EntryHeader, on_answer: AnswerCallback) -> None:
        """:meth:`wait_ack` with no future: ``on_answer(code)`` is called once, from the ack
        checker (at once in a group of one)."""
        self._wait(header, None, on_answer)

    def _wait(
        self,
        header: EntryHeader,
        fut: asyncio.Future[AppendEntryResponse] | None,
        on_answer: AnswerCallback | None,
    ) -> None:
        term, index = header.term, header.index
        self.update_peer_water_mark(term, self._self_id, index)
        p = PendingAppend(index, header.pos, self.clock.monotonic_ms(), fut, on_answer)
        if self._alone:
            self.store.update_committed_index(index)
            self._on_committed()
            self._answer(term, p, DLedgerResponseCode.SUCCESS)
            return
        self.pending_by_term.setdefault(term, {})[index] = p
        self.fragments.appended(term, index, term, header.pos, header.size)
        self.wakeup_dispatchers()

    def _answer(self, term: int, p: PendingAppend, code: int) -> None:
        """Answer ``p`` (taken out of the pending table by the caller) with ``code``, once."""
        on_answer, fut = p.on_answer, p.future
        if on_answer is not None:
            p.on_answer = None
            on_answer(code)
        elif fut is not None and not fut.done():
            if code == DLedgerResponseCode.SUCCESS:
                fut.set_result(self._ok(term, p.index, p.pos))
            else:
                fut.set_result(self._fail(term, p.index, code))

    def _ok(self, term: int, index: int, pos: int) -> AppendEntryResponse:
        return AppendEntryResponse(
            group=self.state.group, term=term, index=index, pos=pos, leader_id=self.state.self_id
        )

    def _fail(self, term: int, index: int, code: int) -> AppendEntryResponse:
        return AppendEntryResponse(
            group=self.state.group, term=term, index=index, code=code, leader_id=self.state.self_id
        )

    # -- QuorumAckChecker ---------------------------------------------------------------

    async def _ack_checker(self) -> None:
        while True:
            try:
                if self.state.is_leader:
                    self._check_quorum()
                else:
                    self._expire_pending()
            except Exception:  # the loop must outlive any failure: it ends every wait
                log.exception("dledger quorum ack check failed", self_id=self.state.self_id)
            await self.ack_wakeup.wait(IDLE_WAIT_S)

    def _expire_pending(self) -> None:
        """Not leading: appends of an office that ended still get 502 once older than
        ``maxWaitAckTimeMs`` (upstream leaves them to the next leadership's 501), so a caller
        never waits longer than that."""
        now = self.clock.monotonic_ms()
        for term, pending in self.pending_by_term.items():
            for index in [
                i
                for i, p in pending.items()
                if now - p.created_ms > self.config.max_wait_ack_time_ms
            ]:
                self._answer(term, pending.pop(index), DLedgerResponseCode.WAIT_QUORUM_ACK_TIMEOUT)

    def _check_quorum(self) -> None:  # noqa: C901 - upstream's one loop body
        term = self.state.curr_term
        if term != self._checker_term:
            # A new office: its quorum index starts again from the watermarks of this term.
            self._checker_term, self._last_quorum_index = term, -1
        for old in [t for t in self.pending_by_term if t != term]:
            for p in self.pending_by_term.pop(old).values():
                self._answer(old, p, DLedgerResponseCode.TERM_CHANGED)
        for old in [t for t in self.peer_water_marks_by_term if t != term]:
            del self.peer_water_marks_by_term[old]
        marks = self._water_marks(term)
        ordered = sorted(marks.values(), reverse=True)
        quorum_index = ordered[len(ordered) // 2]
        before = self.store.committed_index
        self.store.update_committed_index(quorum_index)
        if self.store.committed_index != before:
            self._on_committed()
        pending = self.pending_by_term.setdefault(term, {})
        now = self.clock.monotonic_ms()
        need_check = False
        ack = 0
        i = quorum_index
        while i > self._last_quorum_index:
            acked = pending.pop(i, None)
            if acked is None:
                need_check = True
                break
            self._answer(term, acked, DLedgerResponseCode.SUCCESS)
            ack += 1
            i -= 1
        if ack == 0:
            i = quorum_index + 1
            while True:
                late = pending.get(i)
                if late is None or now - late.created_ms <= self.config.max_wait_ack_time_ms:
                    break
                del pending[i]
                self._answer(term, late, DLedgerResponseCode.WAIT_QUORUM_ACK_TIMEOUT)
                i += 1
        if now - self._last_check_leak_ms > LEAK_CHECK_INTERVAL_MS or need_check:
            self.update_peer_water_mark(term, self.state.self_id, self.store.ledger_end_index)
            for index in sorted(pending):
                p = pending[index]
                if index < quorum_index:
                    del pending[index]
                    self._answer(term, p, DLedgerResponseCode.SUCCESS)
                elif now - p.created_ms > self.config.max_wait_ack_time_ms:
                    del pending[index]
                    self._answer(term, p, DLedgerResponseCode.WAIT_QUORUM_ACK_TIMEOUT)
            self._last_check_leak_ms = now
        self._last_quorum_index = quorum_index


class EntryDispatcher:
    """Pushes the leader's log to one follower."""

    def __init__(self, pusher: LeaderPusher, peer: str) -> None:
        self.p = pusher
        self.peer = peer
        self.type = PushType.COMPARE
        self.term = -1
        self.leader_id: str | None = None
        self.compare_index = -1
        self.write_index = -1
        #: first index -> (send time, count): one entry per key unless batch push.
        self.pending: dict[int, tuple[int, int]] = {}
        #: the JSON fragments of the entries from ``batch_first`` not pushed yet (batch push).
        self.batch: list[str] = []
        self.batch_first = -1
        self.batch_size = 0
        self.last_push_commit_ms = -1
        self.last_check_leak_ms = 0
        self.wakeup = Wakeup()
        self._tasks = TaskSet(f"dledger-{pusher.state.self_id}/push-{peer}/rpc")
        self.quota_second = -1
        self.quota_bytes = 0
        self.quota_resume_ms = -1
        #: pauses for the push quota (statistics).
        self.throttled = 0

    def _now(self) -> int:
        return self.p.clock.monotonic_ms()

    async def run(self) -> None:
        try:
            while True:
                try:
                    if self._check_and_fresh_state():
                        if self.type is PushType.APPEND:
                            self._do_append()
                        else:
                            await self._do_compare()
                except DLedgerStoreError:
                    log.exception("dledger dispatcher failed", peer=self.peer)
                    self._change_state(-1, PushType.COMPARE)
                await self.wakeup.wait(IDLE_WAIT_S)
        finally:
            await self._tasks.cancel_all(timeout_s=1.0)

    def _check_and_fresh_state(self) -> bool:
        st = self.p.state
        if not st.is_leader:
            return False
        if self.term != st.curr_term or self.leader_id != st.leader_id:
            self.term = st.curr_term
            self.leader_id = st.self_id
            self._change_state(-1, PushType.COMPARE)
        return True

    def _change_state(self, index: int, target: PushType) -> None:
        log.info("dledger push state", peer=self.peer, index=index, state=target.name)
        if target is PushType.APPEND:
            self.compare_index = -1
            self.p.update_peer_water_mark(self.term, self.peer, index)
            self.p.ack_wakeup.set()
            self.write_index = index + 1
            self.batch, self.batch_size = [], 0
        elif target is PushType.COMPARE:
            if self.type is PushType.APPEND:
                self.compare_index = -1
                self.pending.clear()
        else:
            self.compare_index = -1
        self.type = target

    def _request(self, ptype: PushType, entry: DLedgerEntry | None = None) -> PushEntryRequest:
        st = self.p.state
        return PushEntryRequest(
            group=st.group,
            local_id=st.self_id,
            remote_id=self.peer,
            leader_id=self.leader_id,
            term=self.term,
            type=ptype,
            entry=entry,
            commit_index=self.p.store.committed_index,
        )

    # -- APPEND ---------------------------------------------------------------------------

    def _do_append(self) -> None:
        store = self.p.store
        batch = self.p.config.enable_batch_push
        fragments = self.p.fragments
        # Nothing below awaits, so role, term and push state cannot change inside the loop:
        # checked once, not per entry.
        if not self._check_and_fresh_state() or self.type is not PushType.APPEND:
            return
        now = self._now()
        cfg, term = self.p.config, self.term
        max_pending, max_batch = cfg.max_pending_size, cfg.max_batch_push_size
        while True:
            index = self.write_index
            end = store.ledger_end_index
            if index > end:
                if batch and self.batch:
                    self._send_batch()
                self._do_commit()
                self._check_append_response()
                return
            if not self._room(now):
                return
            pos, size, fragment = fragments.get(term, index)
            if end - index > max_pending:  # checkQuotaAndWait's first test: per entry
                self._check_quota(pos, size)
            if batch:
                if not self.batch:
                    self.batch_first = index
                self.batch.append(fragment)
                self.batch_size += size
                if self.batch_size >= max_batch:
                    self._send_batch()
            else:
                self._send(index, [fragment], 0, batch=False)
            self.write_index = index + 1

    def _room(self, now: int) -> bool:
        """Whether another entry may be pushed now: fewer than ``maxPendingSize`` pushes
        unanswered (those the watermark covers are forgotten first, and at least every
        second) and no push quota pause."""
        pending = self.pending
        max_pending = self.p.config.max_pending_size
        if len(pending) >= max_pending or now - self.last_check_leak_ms > LEAK_CHECK_INTERVAL_MS:
            mark = self.p.get_peer_water_mark(self.term, self.peer)
            for k in [k for k, (_, n) in pending.items() if k + n - 1 <= mark]:
                del pending[k]
            self.last_check_leak_ms = now
        if len(pending) >= max_pending:
            self._check_append_response()
            return False
        return now >= self.quota_resume_ms

    def _check_quota(self, pos: int, size: int) -> None:
        """``checkQuotaAndWait`` for the entry at ``pos`` (``size`` bytes) of a follower the
        caller found more than ``maxPendingSize`` entries behind: one also
        ``peerPushThrottlePoint`` bytes behind gets at most ``peerPushQuota`` bytes a second;
        once this second's quota is spent, pushing pauses until the next second."""
        cfg, store = self.p.config, self.p.store
        if store.write_pos - pos < cfg.peer_push_throttle_point:
            return
        now = self._now()
        second = now // 1000
        if self.quota_second != second:
            self.quota_second, self.quota_bytes = second, 0
        self.quota_bytes += size
        if self.quota_bytes >= cfg.peer_push_quota:
            self.quota_resume_ms = (second + 1) * 1000
            self.throttled += 1
            log.warning(
                "dledger push quota exhausted", peer=self.peer, wait_ms=self.quota_resume_ms - now
            )

    def _send_batch(self) -> None:
        fragments, total = self.batch, self.batch_size
        self.batch, self.batch_size = [], 0
        self._send(self.batch_first, fragments, total, batch=True)

    def _send(self, first: int, fragments: list[str], total_size: int, *, batch: bool) -> None:
        """One APPEND push of the entries from ``first`` (their JSON ``fragments``)."""
        st = self.p.state
        body = encode_append(
            group=st.group, local_id=st.self_id, remote_id=self.peer, leader_id=self.leader_id,
            term=self.term, commit_index=self.p.store.committed_index, fragments=fragments,
            first_index=first, last_index=first + len(fragments) - 1, total_size=total_size,
            batch=batch,
        )  # fmt: skip
        self.pending[first] = (self._now(), len(fragments))
        # Answered in a done callback (no task per push) once connected.
        if not self.p.rpc.invoke_raw_soon(
            DLedgerRequestCode.PUSH, self.peer, body, PushEntryResponse, self._on_append_reply
        ):
            self._tasks.spawn(self._push_append(body))

    async def _push_append(self, body: bytes) -> None:
        self._on_append_reply(
            await self.p.rpc.invoke_raw(DLedgerRequestCode.PUSH, self.peer, body, PushEntryResponse)
        )

    def _on_append_reply(self, resp: PushEntryResponse | None) -> None:
        if resp is None:
            return
        if resp.code == DLedgerResponseCode.SUCCESS and resp.index is not None:
            last = resp.index + max(resp.count, 1) - 1
            self.pending.pop(resp.index, None)
            self.p.update_peer_water_mark(resp.term, self.peer, last)
            self.p.ack_wakeup.set()
            self.wakeup.set()
        elif resp.code == DLedgerResponseCode.INCONSISTENT_STATE and resp.term == self.term:
            log.info("dledger push inconsistent, compare again", peer=self.peer, index=resp.index)
            self._change_state(-1, PushType.COMPARE)
            self.wakeup.set()

    def _check_append_response(self) -> None:
        """Resend from watermark + 1 when that push got no answer within maxPushTimeOutMs."""
        mark = self.p.get_peer_water_mark(self.term, self.peer)
        sent = self.pending.get(mark + 1)
        if sent is None or self._now() - sent[0] <= self.p.config.max_push_timeout_ms:
            return
        log.warning("dledger push timed out, resending", peer=self.peer, index=mark + 1)
        count = sent[1]
        store = self.p.store
        last = min(mark + count, store.ledger_end_index)
        if last < mark + 1:
            return
        got = [self.p.fragments.get(self.term, i) for i in range(mark + 1, last + 1)]
        fragments = [f for _, _, f in got]
        if len(got) == 1 and count == 1:
            self._send(mark + 1, fragments, 0, batch=False)
        else:
            self._send(mark + 1, fragments, sum(size for _, size, _ in got), batch=True)

    def _do_commit(self) -> None:
        if self._now() - self.last_push_commit_ms > COMMIT_PUSH_INTERVAL_MS:
            self._tasks.spawn(self._push_commit(self._request(PushType.COMMIT)))
            self.last_push_commit_ms = self._now()

    async def _push_commit(self, request: PushEntryRequest) -> None:
        """A bare COMMIT; 406 in this term (a follower that verified nothing of ours yet, e.g.
        restarted) -> COMPARE again."""
        resp = await self.p.rpc.invoke(DLedgerRequestCode.PUSH, request, PushEntryResponse)
        if (
            resp is not None
            and resp.code == DLedgerResponseCode.INCONSISTENT_STATE
            and resp.term == self.term == request.term
            and self.type is PushType.APPEND
        ):
            log.info("dledger commit push inconsistent, compare again", peer=self.peer)
            self._change_state(-1, PushType.COMPARE)
            self.wakeup.set()

    # -- COMPARE / TRUNCATE -----------------------------------------------------------------

    async def _do_compare(self) -> None:
        store = self.p.store
        while self._check_and_fresh_state() and self.type in (PushType.COMPARE, PushType.TRUNCATE):
            begin, end = store.ledger_begin_index, store.ledger_end_index
            if self.compare_index == -1 and end == -1:
                return
            if self.compare_index == -1 or not begin <= self.compare_index <= end:
                self.compare_index = end
            entry = store.get(self.compare_index)
            term = self.term
            resp = await self.p.rpc.invoke(
                DLedgerRequestCode.PUSH, self._request(PushType.COMPARE, entry), PushEntryResponse
            )
            if term != self.term or not self.p.state.is_leader:
                return
            if resp is None or resp.code not in (
                DLedgerResponseCode.SUCCESS,
                DLedgerResponseCode.INCONSISTENT_STATE,
            ):
                log.debug(
                    "dledger compare failed",
                    peer=self.peer,
                    code=None if resp is None else resp.code,
                )
                return
            begin, end = store.ledger_begin_index, store.ledger_end_index
            truncate_index = -1
            if resp.code == DLedgerResponseCode.SUCCESS:
                if self.compare_index == resp.end_index:
                    self._change_state(self.compare_index, PushType.APPEND)
                    return
                truncate_index = self.compare_index
            elif (
                resp.end_index < begin
                or resp.begin_index > end
                or self.compare_index < resp.begin_index
            ):
                truncate_index = begin
            elif self.compare_index > resp.end_index:
                self.compare_index = resp.end_index
            else:
                self.compare_index -= 1
            if self.compare_index < begin:
                truncate_index = begin
            if truncate_index != -1:
                self._change_state(truncate_index, PushType.TRUNCATE)
                await self._do_truncate(truncate_index)
                return

    async def _do_truncate(self, index: int) -> None:
        entry = self.p.store.get(index)
        log.info("dledger truncate follower", peer=self.peer, index=index)
        term = self.term
        resp = await self.p.rpc.invoke(
            DLedgerRequestCode.PUSH, self._request(PushType.TRUNCATE, entry), PushEntryResponse
        )
        if term != self.term:
            return
        if resp is None or resp.code != DLedgerResponseCode.SUCCESS:
            log.warning(
                "dledger truncate failed", peer=self.peer, code=None if resp is None else resp.code
            )
            self._change_state(-1, PushType.COMPARE)
            return
        self.last_push_commit_ms = self._now()
        self._change_state(index, PushType.APPEND)
