"""One follower's push loop of a DLedger 0.3.1.2 leader: ``DLedgerEntryPusher.EntryDispatcher``
(dledger-commitlog.md section 2.3).

Owns: COMPARE -> TRUNCATE -> APPEND for one peer, pipelined up to ``maxPendingSize`` pushes,
the resend of lost or timed-out pushes, bare COMMIT pushes after 1 s idle, optional batch push,
the push quota. Watermarks, pending appends and quorum acks: :class:`.pusher.LeaderPusher`.
Must not: vote or apply pushes as a follower (:mod:`.entry_handler`).
"""

from __future__ import annotations

from typing import Protocol

import structlog

from rocketpy.common.aio import TaskSet
from rocketpy.common.clock import Clock
from rocketpy.dledger.commitlog_member.config import DLedgerMemberConfig
from rocketpy.dledger.commitlog_member.protocol import (
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
from rocketpy.remoting.transport.connection import Connection
from rocketpy.store.dledger_log.entry import DLedgerEntry
from rocketpy.store.dledger_log.store import DLedgerLogStore, DLedgerStoreError

log = structlog.get_logger(__name__)

IDLE_WAIT_S = 0.005
COMMIT_PUSH_INTERVAL_MS = 1000
LEAK_CHECK_INTERVAL_MS = 1000


class LeaderSide(Protocol):
    """What a dispatcher uses of its :class:`~.pusher.LeaderPusher` (the watermarks, the
    shared log and connections)."""

    config: DLedgerMemberConfig
    state: MemberState
    store: DLedgerLogStore
    rpc: PeerRpc
    clock: Clock
    ack_wakeup: Wakeup
    fragments: PushFragments

    def update_peer_water_mark(self, term: int, peer: str, index: int) -> None:
        """Raise ``peer``'s watermark in ``term`` to ``index``."""

    def get_peer_water_mark(self, term: int, peer: str) -> int:
        """``peer``'s watermark in ``term`` (-1: none)."""

    def acked(self, index: int) -> bool:
        """A follower's watermark in the current term rose to ``index``: whether the quorum
        was checked now (else the ack checker must be woken)."""


class EntryDispatcher:
    """Pushes the leader's log to one follower."""

    def __init__(self, pusher: LeaderSide, peer: str) -> None:
        self.p = pusher
        self.peer = peer
        self.type = PushType.COMPARE
        self.term = -1
        self.leader_id: str | None = None
        self.compare_index = -1
        self.write_index = -1
        #: first index -> (send time, count, the connection it went out on, None when it went
        #: through a dial): one entry per key unless batch push.
        self.pending: dict[int, tuple[int, int, Connection | None]] = {}
        #: The connection this pass queued pushes on, written at its end.
        self._unflushed: Connection | None = None
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
        #: pauses for the push quota, pushes resent as lost with their connection, pushes
        #: resent one at a time after maxPushTimeOutMs (statistics).
        self.throttled = 0
        self.lost_resent = 0
        self.probes = 0

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
        try:
            self._append_pushes()
        finally:
            conn, self._unflushed = self._unflushed, None
            if conn is not None:
                conn.flush()

    def _append_pushes(self) -> None:
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
        cached = fragments.table(term)  # nothing is appended while this loop runs
        # _room's answer changes only when a push is sent (pending grows) or the quota pauses
        # (_check_quota): asked again after those (None: ask), not before every entry.
        room: bool | None = None
        while True:
            index = self.write_index
            end = store.ledger_end_index
            if index > end:
                if batch and self.batch:
                    self._send_batch()
                self._do_commit()
                self._check_append_response()
                return
            if room is None:
                room = self._room(now)
            if not room:
                return
            hit = cached.get(index)
            pos, size, fragment = hit if hit is not None else fragments.get(term, index)
            if end - index > max_pending:  # checkQuotaAndWait's first test: per entry
                self._check_quota(pos, size)
                room = None
            if batch:
                if not self.batch:
                    self.batch_first = index
                self.batch.append(fragment)
                self.batch_size += size
                if self.batch_size >= max_batch:
                    self._send_batch()
                    room = None
            else:
                self._send(index, [fragment], 0, batch=False)
                room = None
            self.write_index = index + 1

    def _room(self, now: int) -> bool:
        """Whether another entry may be pushed now: fewer than ``maxPendingSize`` pushes
        unanswered (those the watermark covers are forgotten first, and at least every
        second) and no push quota pause."""
        pending = self.pending
        max_pending = self.p.config.max_pending_size
        if len(pending) >= max_pending or now - self.last_check_leak_ms > LEAK_CHECK_INTERVAL_MS:
            mark = self.p.get_peer_water_mark(self.term, self.peer)
            for k in [k for k, (_, n, _) in pending.items() if k + n - 1 <= mark]:
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
        # Answered in a done callback (no task per push) once connected.
        conn = self.p.rpc.invoke_raw_soon(
            DLedgerRequestCode.PUSH, self.peer, body, PushEntryResponse, self._on_append_reply
        )
        self.pending[first] = (self._now(), len(fragments), conn)
        self._unflushed = conn  # written once this pass is done (_do_append)
        if conn is None:
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
            if resp.term != self.term or not self.p.acked(last):
                self.p.ack_wakeup.set()
            self.wakeup.set()
        elif resp.code == DLedgerResponseCode.INCONSISTENT_STATE and resp.term == self.term:
            log.info("dledger push inconsistent, compare again", peer=self.peer, index=resp.index)
            self._change_state(-1, PushType.COMPARE)
            self.wakeup.set()
        elif resp.code != DLedgerResponseCode.REPEATED_PUSH and resp.index is not None:
            # Refused or dropped unapplied (a member not yet a follower after its restart
            # answers pushes with an error; a COMPARE or TRUNCATE drops the parked ones with
            # UNKNOWN): lost like a push of a closed connection (_check_append_response). A
            # repeated push's first copy is still parked there.
            sent = self.pending.get(resp.index)
            if sent is not None:
                self.pending[resp.index] = (sent[0], sent[1], None)

    def _check_append_response(self) -> None:
        """Resend what a follower will never answer once the push at watermark + 1 is older
        than ``maxPushTimeOutMs``.

        Upstream resends that one push each time it looks, so a gap of lost pushes is walked
        one round trip per push. Over TCP a push is lost only with its connection, or when the
        follower refuses or drops it unapplied (answered with an error), so here those are all
        sent again at once over the open connection: a follower back after a restart waited
        ~900 round trips, with a warning each, for its gap. Otherwise (no connection open, or
        pushes in flight on the open one) watermark + 1 alone is sent again, as upstream.
        """
        mark = self.p.get_peer_water_mark(self.term, self.peer)
        sent = self.pending.get(mark + 1)
        now = self._now()
        timeout = self.p.config.max_push_timeout_ms
        if sent is None or now - sent[0] <= timeout:
            return
        conn = self.p.rpc.open_connection(self.peer)
        if conn is not None and sent[2] is not conn:
            lost = sorted(k for k, (_, _, c) in self.pending.items() if c is not conn and k > mark)
            log.warning("dledger pushes lost with their connection, resending", peer=self.peer,
                        first=lost[0], pushes=len(lost))  # fmt: skip
            self.lost_resent += len(lost)
            for first in lost:
                self._resend(first, self.pending[first][1])
            return
        log.warning("dledger push timed out, resending", peer=self.peer, index=mark + 1)
        self.probes += 1
        self._resend(mark + 1, sent[1])

    def _resend(self, first: int, count: int) -> None:
        """Push the ``count`` entries from ``first`` (as far as the log goes) again."""
        last = min(first + count - 1, self.p.store.ledger_end_index)
        if last < first:
            return
        got = [self.p.fragments.get(self.term, i) for i in range(first, last + 1)]
        fragments = [f for _, _, f in got]
        if len(got) == 1 and count == 1:
            self._send(first, fragments, 0, batch=False)
        else:
            self._send(first, fragments, sum(size for _, size, _ in got), batch=True)

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
