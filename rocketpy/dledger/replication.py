"""Log replication, snapshots and leadership transfer of the Raft core.

Owns: :class:`Replication`: the leader's pipelined, batched appends and their answers
(``DLedgerEntryPusher``), the quorum commit rule, install-snapshot for followers too far behind,
the follower's side of appends and snapshots, and leadership transfer / preferred leaders
(``handleLeadershipTransfer``, ``handleTakeLeadership``, ``checkPreferredLeader``; seed 002).
Must not: do I/O. Part of :class:`~rocketpy.dledger.core.RaftCore`.
"""

from __future__ import annotations

from rocketpy.common.types import LogIndex, Term
from rocketpy.dledger.core_base import CoreBase
from rocketpy.dledger.core_types import Role
from rocketpy.dledger.messages import (
    NO_INDEX,
    AppendRequest,
    AppendResponse,
    InstallSnapshotRequest,
    InstallSnapshotResponse,
    Message,
    ResponseCode,
    Snapshot,
    TakeLeadershipRequest,
)
from rocketpy.dledger.progress import ProgressState, quorum_index
from rocketpy.dledger.storage import LogCompacted


class Replication(CoreBase):
    """Replication and transfer steps (see :class:`~rocketpy.dledger.core.RaftCore`)."""

    def _resume(self, peer: str) -> None:
        """A follower answered a heartbeat: unblock its replication if it lags."""
        pr = self.progress[peer]
        if pr.state is ProgressState.SNAPSHOT:
            pr.snapshot_wait += 1
            if pr.snapshot_wait >= self.config.snapshot_timeout_heartbeats:
                pr.become_probe()  # the snapshot (or its answer) was lost: start over
        elif pr.state is ProgressState.PROBE:
            pr.probe_sent = False
        elif len(pr.inflight) >= self.config.max_inflight_appends:
            pr.free_one()
        if pr.match < self.log.last_index():
            self._send_append(peer, allow_empty=True)

    def _on_replication_response(self, msg: AppendResponse | InstallSnapshotResponse) -> None:
        """Leader: a follower answered an append or a snapshot."""
        if msg.term > self.term:
            self._step_up_to(msg.term)
            return
        if msg.term < self.term:
            return  # an answer to an earlier term's leader
        pr = self.progress[msg.from_id]
        if isinstance(msg, InstallSnapshotResponse):
            if msg.code is ResponseCode.SUCCESS:
                pr.maybe_update(msg.index)
                pr.become_probe()
        elif msg.code is ResponseCode.INCONSISTENT_STATE:
            if pr.maybe_decrement(msg.index, msg.hint):
                self._send_append(msg.from_id)
            return
        elif msg.code is ResponseCode.SUCCESS and pr.maybe_update(msg.index):
            if pr.state is ProgressState.PROBE:
                pr.become_replicate()
            self._maybe_commit()
        self._send_appends(msg.from_id)
        if msg.from_id == self._transferee:
            self._advance_transfer(msg.from_id)

    def _maybe_commit(self) -> None:
        # Raft 5.4.2: only count replicas for entries of the current term.
        matches = [self.log.last_index()] + [pr.match for pr in self.progress.values()]
        self.log.maybe_commit(quorum_index(matches), self.term)

    def _flush_broadcast(self) -> None:
        if self._broadcast_pending and self.role is Role.LEADER:
            for peer in self.others:
                self._send_appends(peer)
        self._broadcast_pending = False

    def _send_appends(self, peer: str) -> None:
        """Send as many batched appends as the follower's window allows (pipelining)."""
        while self._send_append(peer):
            if self.progress[peer].state is not ProgressState.REPLICATE:
                break

    def _send_append(self, peer: str, *, allow_empty: bool = False) -> bool:
        pr = self.progress[peer]
        if pr.is_paused(self.config.max_inflight_appends):
            return False
        prev = LogIndex(pr.next - 1)
        prev_term = self.log.term_or_none(prev)
        hi = LogIndex(min(self.log.last_index() + 1, pr.next + self.config.max_entries_per_append))
        try:
            entries = self.log.slice(pr.next, hi, self.config.max_append_bytes)
        except LogCompacted:
            prev_term = None
        if prev_term is None:
            self._send_snapshot(peer)
            return False
        if not entries and not allow_empty:
            return False
        self._send(
            AppendRequest(
                from_id=self.id,
                to_id=peer,
                term=self.term,
                prev_index=prev,
                prev_term=prev_term,
                entries=tuple(entries),
                commit_index=self.log.committed,
            )
        )
        pr.sent(LogIndex(prev + len(entries)), len(entries))
        return bool(entries)

    def _send_snapshot(self, peer: str) -> None:
        snapshot = self.log.unstable.snapshot or self.log.storage.snapshot()
        pr = self.progress[peer]
        pr.become_snapshot(snapshot.meta.index)
        self._send(
            InstallSnapshotRequest(
                from_id=self.id,
                to_id=peer,
                term=self.term,
                meta=snapshot.meta,
                data=snapshot.data,
            )
        )

    def _start_transfer(self, target: str) -> None:
        """Leader: refuse writes until ``target`` holds the whole log, then hand over."""
        if target in (self.id, self._transferee):
            return
        self._transferee = target
        self._transfer_elapsed = 0
        self._advance_transfer(target)

    def _advance_transfer(self, target: str) -> None:
        """Send TakeLeadership once the transferee holds our whole log (seed 002)."""
        pr = self.progress[target]
        if pr.match >= self.log.last_index():
            self._send(
                TakeLeadershipRequest(
                    from_id=self.id,
                    to_id=target,
                    term=self.term,
                    ledger_end_index=self.log.last_index(),
                )
            )
        else:
            self._send_appends(target)

    def _check_preferred_leader(self) -> None:
        """DLedgerServer ``checkPreferredLeader``: hand over to a caught-up preferred member."""
        preferred = self.config.preferred_leader_ids
        if not preferred or self.id in preferred or self._transferee is not None:
            return
        for candidate in preferred:
            if candidate not in self.progress or candidate not in self._recent_active:
                continue
            lag = self.log.last_index() - self.progress[candidate].match
            if lag <= self.config.max_transfer_lag:
                self._start_transfer(candidate)
                return

    def _accept_leader_message(
        self, msg: AppendRequest | InstallSnapshotRequest | TakeLeadershipRequest
    ) -> bool:
        """Term and leader checks shared by every leader -> follower request."""
        if msg.term < self.term:
            self._reject_leader_message(msg, ResponseCode.EXPIRED_TERM)
            return False
        if msg.term > self.term or self.leader_id is None:
            # Raft 5.1: the sender is that term's only leader (a leader's leader_id is itself,
            # so a second leader in one term falls through to INCONSISTENT_LEADER).
            self._become_follower(msg.term, msg.from_id)
        elif self.leader_id != msg.from_id:
            self._reject_leader_message(msg, ResponseCode.INCONSISTENT_LEADER)
            return False
        self._leader_silent_ticks = 0
        return True

    def _reject_leader_message(
        self,
        msg: AppendRequest | InstallSnapshotRequest | TakeLeadershipRequest,
        code: ResponseCode,
    ) -> None:
        if isinstance(msg, AppendRequest):
            self._send(self._append_response(msg.from_id, code, LogIndex(0)))
        elif isinstance(msg, InstallSnapshotRequest):
            self._send(self._snapshot_response(msg.from_id, code))

    def _step_follower(self, msg: Message) -> None:
        if isinstance(msg, AppendRequest):
            self._on_append(msg)
        elif isinstance(msg, InstallSnapshotRequest):
            self._on_install_snapshot(msg)
        elif isinstance(msg, TakeLeadershipRequest):
            self._on_take_leadership(msg)

    def _on_append(self, req: AppendRequest) -> None:
        log = self.log
        if req.prev_index < log.committed:
            # Everything up to our commit index matches the leader (Leader Completeness).
            self._send(self._append_response(req.from_id, ResponseCode.SUCCESS, log.committed))
            return
        last_new = log.maybe_append(req.prev_index, req.prev_term, req.commit_index, req.entries)
        if last_new is not None:
            self._send(self._append_response(req.from_id, ResponseCode.SUCCESS, last_new))
            return
        hint = LogIndex(min(req.prev_index, log.last_index()))
        self._send(
            self._append_response(
                req.from_id, ResponseCode.INCONSISTENT_STATE, req.prev_index, hint
            )
        )

    def _append_response(
        self, to: str, code: ResponseCode, index: LogIndex, hint: LogIndex = NO_INDEX
    ) -> AppendResponse:
        return AppendResponse(
            from_id=self.id, to_id=to, term=self.term, code=code, index=index, hint=hint
        )

    def _snapshot_response(self, to: str, code: ResponseCode) -> InstallSnapshotResponse:
        return InstallSnapshotResponse(
            from_id=self.id, to_id=to, term=self.term, code=code, index=self.log.committed
        )

    def _on_install_snapshot(self, req: InstallSnapshotRequest) -> None:
        meta = req.meta
        if meta.index > self.log.committed:
            if self.log.match_term(meta.index, meta.term):
                self.log.commit_to(meta.index)  # we already hold that prefix
            else:
                self.log.restore(Snapshot(meta=meta, data=req.data))
        self._send(self._snapshot_response(req.from_id, ResponseCode.SUCCESS))

    def _on_take_leadership(self, req: TakeLeadershipRequest) -> None:
        """DLedger ``handleTakeLeadership``: move to term + 1 and campaign after the short
        take-leadership interval; until then the vote is free, so rival candidates of that term
        get REJECT_TAKING_LEADERSHIP."""
        target = Term(req.term + 1)
        self._take_leadership_term = target
        self._step_up_to(target)
