"""The leader's side of DLedger 0.3.1.2's ``DLedgerEntryPusher`` (dledger-commitlog.md section 2.3).

Owns: the per-term peer watermarks, the pending appends (each answered through its future or,
for a broker's send, a callback), one :class:`~.dispatcher.EntryDispatcher` per follower (its
push loop: COMPARE -> TRUNCATE -> APPEND, resends, COMMIT pushes, batch push) and the
``QuorumAckChecker`` (committed index = median of the sorted watermarks, pending appends
completed with 200 + pos, 502 after ``maxWaitAckTimeMs``, 501 for an older term). Mirrors
``DLedgerEntryPusher`` and its ``QuorumAckChecker``. Must not: vote or apply pushes as a
follower (:mod:`.entry_handler`).

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
from rocketpy.dledger.commitlog_member.dispatcher import (
    IDLE_WAIT_S,
    LEAK_CHECK_INTERVAL_MS,
    EntryDispatcher,
)
from rocketpy.dledger.commitlog_member.protocol import (
    AppendEntryResponse,
    DLedgerResponseCode,
)
from rocketpy.dledger.commitlog_member.push_codec import PushFragments
from rocketpy.dledger.commitlog_member.rpc import PeerRpc
from rocketpy.dledger.commitlog_member.state import MemberState
from rocketpy.dledger.commitlog_member.wakeup import Wakeup
from rocketpy.store.dledger_log.entry import EntryHeader
from rocketpy.store.dledger_log.store import DLedgerLogStore

log = structlog.get_logger(__name__)


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
        self._dispatcher_wakeups = tuple(d.wakeup for d in self.dispatchers.values())
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

    def acked(self, index: int) -> bool:
        """A push answer raised a follower's watermark in the current term to ``index``.
        When that can move the quorum index, the quorum is checked now, in the read that
        brought the answer, so the sends it commits are answered in this loop turn rather
        than the ack checker's next one (two loop turns, each after a poll's reads, on every
        send's way). True once checked; False: the ack checker is to be woken."""
        if not self.state.is_leader or self.state.curr_term != self._checker_term:
            return False
        if index <= self._last_quorum_index:
            return True  # moves nothing: the checker has nothing to answer for it either
        try:
            self._check_quorum()
        except Exception:  # as in the checker's loop: it must go on answering
            log.exception("dledger quorum ack check failed", self_id=self._self_id)
            return False
        return True

    def is_pending_full(self, term: int) -> bool:
        pending = self.pending_by_term.get(term)
        return pending is not None and len(pending) > self.config.max_pending_requests_num

    def wait_ack(self, header: EntryHeader) -> asyncio.Future[AppendEntryResponse]:
        """``waitAck``: a future completed once a quorum holds ``header``'s entry."""
        fut: asyncio.Future[AppendEntryResponse] = asyncio.get_running_loop().create_future()
        self._wait(header, fut, None)
        return fut

    def wait_ack_then(
        self, header: EntryHeader, on_answer: AnswerCallback, body: bytes | bytearray | None
    ) -> None:
        """:meth:`wait_ack` with no future: ``on_answer(code)`` is called once, from the ack
        checker (at once in a group of one). ``body``: the entry's body exactly as written,
        if the caller has it (pushes are encoded from it, not from the log read back)."""
        self._wait(header, None, on_answer, body)

    def _wait(
        self,
        header: EntryHeader,
        fut: asyncio.Future[AppendEntryResponse] | None,
        on_answer: AnswerCallback | None,
        body: bytes | bytearray | None = None,
    ) -> None:
        term, index = header.term, header.index
        marks = self.peer_water_marks_by_term.get(term) or self._water_marks(term)
        if marks.get(self._self_id, -1) < index:
            marks[self._self_id] = index
        p = PendingAppend(index, header.pos, self.clock.monotonic_ms(), fut, on_answer)
        if self._alone:
            self.store.update_committed_index(index)
            self._on_committed()
            self._answer(term, p, DLedgerResponseCode.SUCCESS)
            return
        pending = self.pending_by_term.get(term)
        if pending is None:
            pending = self.pending_by_term[term] = {}
        pending[index] = p
        self.fragments.appended(term, index, term, header.pos, header.size, body)
        for wakeup in self._dispatcher_wakeups:
            wakeup.set()

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

    def _answer_acked(
        self, term: int, pending: dict[int, PendingAppend], quorum_index: int
    ) -> tuple[int, bool]:
        """Answer 200 to the appends from ``quorum_index`` down to the last quorum index, as
        long as they are pending: (how many, whether one was missing)."""
        ack = 0
        i = quorum_index
        success = DLedgerResponseCode.SUCCESS
        while i > self._last_quorum_index:
            acked = pending.pop(i, None)
            if acked is None:
                return ack, True
            on_answer = acked.on_answer
            if on_answer is not None:  # a broker's send (_answer inlined: once per entry)
                acked.on_answer = None
                on_answer(success)
            else:
                self._answer(term, acked, success)
            ack += 1
            i -= 1
        return ack, False

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
        ack, need_check = self._answer_acked(term, pending, quorum_index)
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
