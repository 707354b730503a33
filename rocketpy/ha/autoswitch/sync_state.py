"""The master's SyncStateSet bookkeeping and confirm offset (ha.md section 3.7).

Owns: the local SyncStateSet, the set being proposed to the controller ("synchronizing"), each
slave's last caught-up time, and the pure decisions of ``maybeExpandInSyncStateSet``,
``maybeShrinkSyncStateSet`` and ``computeConfirmOffset``. Must not: do I/O or talk to the
controller (the service reports what these methods return). Mirrors the SyncStateSet part of
``AutoSwitchHAService`` (apache/rocketmq 5.1.1+). Times are monotonic milliseconds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class ExpandCheck:
    """What a slave report says about the slave and the master at that moment."""

    slave_id: int
    slave_max_offset: int
    is_async_learner: bool
    last_master_max_offset: int  # master max offset when the last data frame was sent to it
    confirm_offset: int
    current_epoch_start: int  # start offset of the master's last epoch


class SyncStateTracker:
    """SyncStateSet of one master; ``local_id`` (the master) is always a member."""

    def __init__(self, local_id: int, max_time_not_catchup_ms: int) -> None:
        self.local_id = local_id
        self.max_time_not_catchup_ms = max_time_not_catchup_ms
        self.sync_state_set: frozenset[int] = frozenset({local_id})
        # Invariant: None unless a change was proposed and the controller has not answered.
        self.proposed: frozenset[int] | None = None
        self.caught_up_ms: dict[int, int] = {}

    @property
    def is_synchronizing(self) -> bool:
        """A proposed set is waiting for the controller."""
        return self.proposed is not None

    def effective(self) -> frozenset[int]:
        """The set used for safety decisions: the union while synchronizing."""
        return self.sync_state_set | (self.proposed or frozenset())

    def set_sync_state_set(self, members: frozenset[int]) -> None:
        """The controller's answer (or an initial set): becomes the local set."""
        self.sync_state_set = frozenset(members) | {self.local_id}
        self.proposed = None

    def _propose(self, members: frozenset[int]) -> frozenset[int]:
        self.proposed = members
        return members

    def update_caught_up(self, slave_id: int, when_ms: int) -> None:
        """Record that ``slave_id`` had everything the master had at ``when_ms``."""
        self.caught_up_ms[slave_id] = max(when_ms, self.caught_up_ms.get(slave_id, 0))

    def maybe_expand(self, check: ExpandCheck) -> frozenset[int] | None:
        """``maybeExpandInSyncStateSet``: the set to report, or None when nothing changes."""
        current = self.effective()
        if check.is_async_learner or check.slave_id in current:
            return None
        off = check.slave_max_offset
        if (
            off >= check.last_master_max_offset
            and off >= check.confirm_offset
            and off >= check.current_epoch_start
        ):
            return self._propose(current | {check.slave_id})
        return None

    def maybe_shrink(self, now_ms: int, connected: frozenset[int]) -> frozenset[int] | None:
        """``maybeShrinkSyncStateSet``: drop members that lag or have no connection; while a
        proposal is pending, propose the set again unless it equals the committed one."""
        keep = {self.local_id}
        for member in self.effective() - {self.local_id}:
            caught = self.caught_up_ms.get(member, 0)
            if member in connected and now_ms - caught <= self.max_time_not_catchup_ms:
                keep.add(member)
        new = frozenset(keep)
        if new == self.sync_state_set:  # also covers "nothing pending, nothing changed"
            return None
        # Mirrors checkSyncStateSetAndDoReport: the set goes to the controller again every
        # period while it differs from the committed one, so a refused or lost report (say
        # CONTROLLER_BROKER_NOT_ALIVE for a slave whose heartbeat has not arrived yet) is
        # retried instead of leaving the proposal pending forever (found by the chaos test).
        return self._propose(new)

    def remove(self, slave_id: int) -> frozenset[int] | None:
        """A slave's connection closed: drop it at once (``removeConnection``)."""
        if slave_id not in self.effective() or slave_id == self.local_id:
            return None
        return self._propose(self.effective() - {slave_id})

    def compute_confirm_offset(
        self,
        master_max_offset: int,
        acks: Mapping[int, int],
        previous: int,
    ) -> int:
        """``computeConfirmOffset``: min ack over connected members, or ``previous`` when a
        member has no connection (5.1.1+, upstream #6662).

        Args:
            master_max_offset: the master's commit-log max offset.
            acks: ack offset of every connected slave, by broker id.
            previous: the confirm offset computed last time.
        """
        members = self.effective() - {self.local_id}
        if any(m not in acks for m in members):
            return previous
        confirm = master_max_offset
        for member in members:
            ack = acks[member]
            if ack > 0:
                confirm = min(confirm, ack)
        return confirm
