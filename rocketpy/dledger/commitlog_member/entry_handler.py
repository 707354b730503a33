"""The follower's side of DLedger 0.3.1.2's ``DLedgerEntryPusher`` (dledger-commitlog.md section
2.3): ``EntryHandler``.

Owns: parking APPEND pushes by first index (a duplicate gets 413) and applying them strictly in
``end + 1`` order (single or batch, whatever this member's own ``enableBatchPush``), the
1024-slot queue of COMPARE/TRUNCATE/COMMIT pushes (full -> 421; COMPARE/TRUNCATE drop parked
appends), the checks of ``appendAsFollower`` (role FOLLOWER, term == current, leader == known
leader, written pos == ``entry.pos``), truncation on divergence, and the committed index
``min(commitIndex, end)``. A parked push that cannot be applied for more than
``maxPushTimeOutMs`` (a gap before it) is answered 406, which sends the leader back to COMPARE
(``checkAbnormalFuture``). Mirrors ``DLedgerEntryPusher.EntryHandler``.

Deviation: the committed index never passes the last entry this term's leader has verified
here (appended from it, compared equal or truncated to). Upstream takes ``min(commitIndex,
end)`` alone, so a follower back in the same term with a divergent tail can mark that tail
committed from a COMMIT push before COMPARE finds it (dledger-commitlog.md section 6 check 8).
A COMMIT push from a leader that verified nothing here yet (this process restarted while the
leader stayed in APPEND) is answered 406, which sends our leader back to COMPARE.
Must not: push or vote.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Final

import structlog

from rocketpy.common.aio import TaskSet
from rocketpy.common.clock import Clock
from rocketpy.dledger.commitlog_member.config import DLedgerMemberConfig
from rocketpy.dledger.commitlog_member.dispatcher import IDLE_WAIT_S
from rocketpy.dledger.commitlog_member.protocol import (
    DLedgerResponseCode,
    PushEntryRequest,
    PushEntryResponse,
    PushType,
)
from rocketpy.dledger.commitlog_member.state import MemberState
from rocketpy.dledger.commitlog_member.wakeup import Wakeup
from rocketpy.store.dledger_log.entry import DLedgerEntry
from rocketpy.store.dledger_log.store import DLedgerLogStore, DLedgerStoreError

log = structlog.get_logger(__name__)

#: ``compareOrTruncateRequests`` capacity.
MAX_CONTROL_REQUESTS: Final = 1024
ABNORMAL_CHECK_INTERVAL_MS: Final = 1000

_Parked = tuple[PushEntryRequest, "asyncio.Future[PushEntryResponse]", int]


def same_entry(a: DLedgerEntry, b: DLedgerEntry) -> bool:
    """``DLedgerEntry.equals``: size, magic, index, term, channel, pos and body (the CRCs,
    never computed in 0.3.1.2, are not compared)."""
    return (a.size, a.magic, a.index, a.term, a.channel, a.pos, a.body) == (
        b.size, b.magic, b.index, b.term, b.channel, b.pos, b.body,
    )  # fmt: skip


class EntryHandler:
    """Applies a leader's pushes to this member's log."""

    def __init__(
        self,
        *,
        config: DLedgerMemberConfig,
        state: MemberState,
        store: DLedgerLogStore,
        clock: Clock,
        executor: Executor,
        on_committed: Callable[[], None],
    ) -> None:
        self.config = config
        self.state = state
        self.store = store
        self.clock = clock
        self._executor = executor
        self._on_committed = on_committed
        self.writes: dict[int, _Parked] = {}
        self.controls: deque[_Parked] = deque()
        self.wakeup = Wakeup()
        self._tasks = TaskSet(f"dledger-{state.self_id}/entry-handler")
        self._last_abnormal_check_ms = 0
        #: A push parked whose entries this log holds already (a resend of what was applied
        #: while the leader's wait for its answer timed out): answered without the 1 s wait.
        self._applied_parked = False
        self._verified_for: tuple[int, str | None] = (-1, None)
        #: The loop is awaiting a COMPARE/TRUNCATE: pushes that arrive meanwhile wait for it.
        self._in_control = False
        self._verified_end = -1
        #: APPEND pushes applied, single and batch (statistics).
        self.applied_single = 0
        self.applied_batch = 0

    def start(self) -> None:
        self._tasks.spawn(self._run(), name=f"dledger-{self.state.self_id}/entry-handler")

    async def stop(self) -> None:
        await self._tasks.cancel_all(timeout_s=5.0)
        for _, fut, _ in [*self.writes.values(), *self.controls]:
            if not fut.done():
                fut.cancel()
        self.writes.clear()
        self.controls.clear()

    def _response(self, request: PushEntryRequest, code: int) -> PushEntryResponse:
        """``buildResponse`` / ``buildBatchAppendResponse``."""
        return PushEntryResponse(
            group=self.state.group,
            code=code,
            term=request.term,
            index=None if request.type is PushType.COMMIT else request.first_entry_index,
            count=0 if request.type is PushType.COMMIT else request.count,
            begin_index=self.store.ledger_begin_index,
            end_index=self.store.ledger_end_index,
        )

    def handle_push(self, request: PushEntryRequest) -> asyncio.Future[PushEntryResponse]:
        """``handlePush``: park or queue ``request``; the returned future is its answer. An
        APPEND that follows this log's end while no COMPARE/TRUNCATE/COMMIT is queued or
        running is applied at once: its future is done on return."""
        fut: asyncio.Future[PushEntryResponse] = asyncio.get_running_loop().create_future()
        item: _Parked = (request, fut, self.clock.monotonic_ms())
        if request.type is PushType.APPEND:
            if request.count == 0:
                fut.set_result(self._response(request, DLedgerResponseCode.UNEXPECTED_ARGUMENT))
                return fut
            first = request.first_entry_index
            if first in self.writes:
                log.warning("dledger repeated push", index=first)
                fut.set_result(self._response(request, DLedgerResponseCode.REPEATED_PUSH))
                return fut
            if (
                first == self.store.ledger_end_index + 1
                and not self.controls
                and not self._in_control
                and self.state.is_follower
            ):
                # Next in line, nothing queued before it: applied now, as the handler's loop
                # would a turn later (the answer goes out with this read's, no task waits).
                fut.set_result(self._append(request))
                if self.writes:  # parked pushes after it may follow on now
                    self.wakeup.set()
                return fut
            self.writes[first] = item
            if request.last_entry_index <= self.store.ledger_end_index:
                self._applied_parked = True
        else:
            if request.type is not PushType.COMMIT and request.entry is None:
                fut.set_result(self._response(request, DLedgerResponseCode.UNEXPECTED_ARGUMENT))
                return fut
            if len(self.controls) >= MAX_CONTROL_REQUESTS:
                fut.set_result(self._response(request, DLedgerResponseCode.PUSH_REQUEST_IS_FULL))
                return fut
            if request.type is not PushType.COMMIT:
                # Upstream just forgets them (the leader's futures time out); they are answered
                # UNKNOWN here, which the leader ignores as it ignores a timeout, so no response
                # task waits forever and no stale 406 sends a fresh APPEND phase back to COMPARE.
                for dropped, parked, _ in self.writes.values():
                    if not parked.done():
                        parked.set_result(self._response(dropped, DLedgerResponseCode.UNKNOWN))
                self.writes.clear()
            self.controls.append(item)
        self.wakeup.set()
        return fut

    async def _run(self) -> None:
        while True:
            try:
                await self._do_work()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("dledger entry handler failed", self_id=self.state.self_id)
            await self.wakeup.wait(IDLE_WAIT_S)

    async def _do_work(self) -> None:
        while self.state.is_follower:
            if self.controls:
                request, fut, _ = self.controls.popleft()
                self._in_control = True
                try:
                    response = await self._control(request)
                finally:
                    self._in_control = False
                if not fut.done():
                    fut.set_result(response)
                continue
            item = self.writes.pop(self.store.ledger_end_index + 1, None)
            if item is None:
                if self._applied_parked:
                    self._answer_applied()
                self._check_abnormal()
                return
            request, fut, _ = item
            response = self._append(request)
            if not fut.done():
                fut.set_result(response)

    def _check_leader(self, request: PushEntryRequest) -> int | None:
        st = self.state
        if not st.is_follower:
            return DLedgerResponseCode.NOT_FOLLOWER
        if request.term != st.curr_term:
            return DLedgerResponseCode.INCONSISTENT_TERM
        if request.leader_id != st.leader_id:
            return DLedgerResponseCode.INCONSISTENT_LEADER
        return None

    def _verified(self, request: PushEntryRequest, index: int, *, exact: bool = False) -> None:
        """Entries up to ``index`` are known to match this term's leader (appended from it,
        compared equal, or truncated to)."""
        key = (request.term, request.leader_id)
        if self._verified_for != key:
            self._verified_for, self._verified_end = key, -1
        self._verified_end = index if exact else max(self._verified_end, index)

    def _update_committed(self, request: PushEntryRequest) -> None:
        """committedIndex = min(commitIndex, end), and (a deviation, see the module docstring)
        never past what this term's leader has verified here."""
        if request.term != self.state.curr_term:
            return
        if self._verified_for != (request.term, request.leader_id):
            return
        before = self.store.committed_index
        target = min(request.commit_index, self.store.ledger_end_index, self._verified_end)
        self.store.update_committed_index(target)
        if self.store.committed_index != before:
            self._on_committed()

    def _append(self, request: PushEntryRequest) -> PushEntryResponse:
        """``handleDoAppend`` / ``handleDoBatchAppend``."""
        refused = self._check_leader(request)
        if refused is not None:
            return self._response(request, refused)
        store = self.store
        entries = request.entries()
        if entries[0].index != store.ledger_end_index + 1:
            return self._response(request, DLedgerResponseCode.INCONSISTENT_STATE)
        try:
            # A batch in one write of its data and one of its index units (the store goes
            # entry by entry where it cannot).
            store.append_batch_as_follower(entries)
        except DLedgerStoreError as e:
            log.warning("dledger append as follower failed", error=str(e))
            return self._response(request, DLedgerResponseCode.INCONSISTENT_STATE)
        self._verified(request, request.last_entry_index)
        if request.is_batch:
            self.applied_batch += 1
        else:
            self.applied_single += 1
        self._update_committed(request)
        return self._response(request, DLedgerResponseCode.SUCCESS)

    async def _control(self, request: PushEntryRequest) -> PushEntryResponse:
        if request.type is PushType.COMMIT:
            if request.term == self.state.curr_term and self._verified_for != (
                request.term, request.leader_id,
            ):  # fmt: skip
                # Nothing verified for this leader yet (restarted while it kept its APPEND
                # state): 406 sends it back to COMPARE, or the committed index would wait for
                # the next append. A Java leader ignores COMMIT answers.
                return self._response(request, DLedgerResponseCode.INCONSISTENT_STATE)
            self._update_committed(request)
            return self._response(request, DLedgerResponseCode.SUCCESS)
        entry = request.entry
        assert entry is not None  # noqa: S101 - checked in handle_push
        if request.type is PushType.COMPARE:
            try:
                same = same_entry(self.store.get(entry.index), entry)
            except DLedgerStoreError:
                same = False
            if same and self._check_leader(request) is None:
                self._verified(request, entry.index)
            code = DLedgerResponseCode.SUCCESS if same else DLedgerResponseCode.INCONSISTENT_STATE
            return self._response(request, code)
        refused = self._check_leader(request)
        if refused is not None:
            return self._response(request, refused)
        try:
            loop = asyncio.get_running_loop()
            index = await loop.run_in_executor(self._executor, self.store.truncate, entry)
        except DLedgerStoreError as e:
            log.warning("dledger truncate failed", error=str(e))
            return self._response(request, DLedgerResponseCode.INCONSISTENT_STATE)
        log.info("dledger truncated", self_id=self.state.self_id, index=index)
        if index != entry.index:
            return self._response(request, DLedgerResponseCode.INCONSISTENT_STATE)
        self._verified(request, index, exact=True)
        self._update_committed(request)
        return self._response(request, DLedgerResponseCode.SUCCESS)

    def _answer_applied(self) -> None:
        """Answer every parked push whose entries this log holds: 200 when they are the same,
        else 406. Upstream does this only in ``checkAbnormalFuture``, at most once a second:
        a follower paused past the leader's rpc timeout applied pushes whose answers the
        leader then dropped, and the leader's resends, one per watermark step, each waited
        for it (one entry a second)."""
        self._applied_parked = False
        end = self.store.ledger_end_index
        for first in sorted(self.writes):
            request, fut, _ = self.writes[first]
            if request.last_entry_index > end:
                continue
            try:
                same = all(same_entry(self.store.get(e.index), e) for e in request.entries())
            except DLedgerStoreError:
                same = False
            del self.writes[first]
            code = DLedgerResponseCode.SUCCESS if same else DLedgerResponseCode.INCONSISTENT_STATE
            if not fut.done():
                fut.set_result(self._response(request, code))

    def _check_abnormal(self) -> None:
        """``checkAbnormalFuture``: answer pushes already applied and unblock a gap."""
        now = self.clock.monotonic_ms()
        if now - self._last_abnormal_check_ms < ABNORMAL_CHECK_INTERVAL_MS or not self.writes:
            return
        self._last_abnormal_check_ms = now
        self._answer_applied()
        end = self.store.ledger_end_index
        oldest = None
        for first in sorted(self.writes):
            _, _, created = self.writes[first]
            if first == end + 1:
                return
            if now - created > self.config.max_push_timeout_ms and oldest is None:
                oldest = first
        if oldest is not None:
            request, fut, _ = self.writes.pop(oldest)
            if not fut.done():
                fut.set_result(self._response(request, DLedgerResponseCode.INCONSISTENT_STATE))
