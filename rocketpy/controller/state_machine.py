"""The Raft state machine of the controller: committed entries are event batches.

Owns: :class:`ControllerStateMachine`, the adapter between the Raft node (``apply``,
``snapshot``, ``restore``) and :class:`ReplicasInfoManager`. Every committed entry holds the
events one request decided (``encode_events``); ``apply`` decodes and applies them in order on
every node. Must not: validate requests or do I/O. Mirrors ``DLedgerControllerStateMachine``.

Contract (hashicorp/raft ``fsm.go``): ``apply`` is called once per committed entry, in log
order, and is deterministic; an empty entry (the leader's no-op, a read barrier) changes
nothing. ``snapshot`` captures everything ``apply`` has applied; ``restore`` replaces the whole
state, after which entries after the snapshot index are applied again.
"""

from __future__ import annotations

from rocketpy.controller.state.events import decode_events
from rocketpy.controller.state.replicas_info import ReplicasInfoManager
from rocketpy.controller.state.snapshot import encode_state, restore_state


class ControllerStateMachine:
    """Applies committed event batches to ``manager``.

    Args:
        manager: the replicated tables (the service reads them to decide requests).
    """

    def __init__(self, manager: ReplicasInfoManager) -> None:
        self.manager = manager
        self.applied_index = 0

    def apply(self, index: int, data: bytes) -> object:
        """Apply the events of entry ``index``; returns how many were applied.

        Raises:
            CodecError: the entry is not an event batch (only a bug writes one).
        """
        self.applied_index = index
        if not data:
            return 0
        events = decode_events(data)
        self.manager.apply_all(events)
        return len(events)

    def snapshot(self) -> bytes:
        """The whole state (``snapshot.encode_state``)."""
        return encode_state(self.manager)

    def restore(self, data: bytes) -> None:
        """Replace the state by a snapshot.

        Raises:
            CodecError: not a controller snapshot; the state is unchanged.
        """
        restore_state(self.manager, data)
