"""A one-member Raft stand-in for controller pipeline tests, and a fake broker's requests.

:class:`SoloNode` has the behaviour of a single-node group (every proposal is committed and
applied at once, in order; a non-leader raises NotLeader), which is what the validation-order
tests need without timers. Multi-node behaviour is tested against the real ``RaftNode``.
"""

from __future__ import annotations

from collections.abc import Callable

from rocketpy.controller.state_machine import ControllerStateMachine
from rocketpy.dledger.core_types import NotLeader


class SoloNode:
    """Commits every proposal immediately while it is the leader."""

    def __init__(self, state_machine: ControllerStateMachine, node_id: str = "n0") -> None:
        self._sm = state_machine
        self._id = node_id
        self._leader = False
        self._listeners: list[Callable[[bool], None]] = []
        self.entries: list[bytes] = []
        self.address = "127.0.0.1:0"

    @property
    def is_leader(self) -> bool:
        return self._leader

    @property
    def leader_id(self) -> str | None:
        return self._id if self._leader else None

    @property
    def leader_address(self) -> str | None:
        return self.address if self._leader else None

    @property
    def term(self) -> int:
        return 1

    async def propose(self, data: bytes, timeout_s: float = 3.0) -> object:
        if not self._leader:
            raise NotLeader(self._id, None)
        self.entries.append(data)
        return self._sm.apply(len(self.entries), data)

    def add_role_listener(self, listener: Callable[[bool], None]) -> None:
        self._listeners.append(listener)

    def register(self, registry: object) -> None:
        """No peer RPCs: a one-member group."""

    async def start(self) -> None:
        """Become leader at once, as a one-member group does after its first timeout."""
        self.set_leader(True)

    async def stop(self) -> None:
        self._leader = False

    def set_leader(self, leader: bool) -> None:
        """Become (or stop being) the leader and tell the listeners."""
        self._leader = leader
        for listener in self._listeners:
            listener(leader)
