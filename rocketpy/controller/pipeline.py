"""The leader's request pipeline: decide on the current state, commit the events, then answer.

Owns: :class:`ControllerPipeline`, which serializes every state request (one at a time, as
upstream's single event-queue thread), refuses them unless this node is the leader *and* has
committed its start-of-term barrier, proposes a request's events through Raft and waits for
them to be applied; and :class:`RaftNodeApi`, the part of the Raft node it needs. Must not:
parse requests (processors) or touch sockets. Mirrors ``DLedgerController`` (``scheduleEvent``,
``appendToEventQueue``, ``ControllerEventHandler``, the role-change handler that commits an
empty entry before serving).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any, Final, Protocol, TypeVar

import structlog

from rocketpy.common.codes import ResponseCode
from rocketpy.common.errors import RequestTimeout
from rocketpy.controller.state.events import ReadEvent, encode_events
from rocketpy.controller.state.replicas_info import ControllerResult
from rocketpy.dledger.core_types import NotLeader
from rocketpy.remoting.transport.dispatch import ProcessorRegistry

log = structlog.get_logger(__name__)

H = TypeVar("H")

NOT_LEADER_REMARK: Final = "The controller is not in leader state"
#: Upstream's event queue capacity (``DLedgerController.EventScheduler``).
EVENT_QUEUE_CAPACITY: Final = 1024


class RaftNodeApi(Protocol):
    """What the controller uses of ``rocketpy.dledger.node.RaftNode``."""

    @property
    def is_leader(self) -> bool:
        """Is this node the leader now?"""
        ...

    @property
    def leader_id(self) -> str | None:
        """The leader this node knows of."""
        ...

    @property
    def leader_address(self) -> str | None:
        """The known leader's peer address."""
        ...

    @property
    def term(self) -> int:
        """The current term."""
        ...

    async def propose(self, data: bytes, timeout_s: float = 3.0) -> object:
        """Append ``data``, wait until applied here; raises NotLeader / RequestTimeout."""
        ...

    def add_role_listener(self, listener: Callable[[bool], None]) -> None:
        """Call ``listener(is_leader)`` on every role change."""
        ...

    def register(self, registry: ProcessorRegistry) -> None:
        """Route the node's peer RPC codes on the shared server."""
        ...

    async def start(self) -> None:
        """Recover from disk and start ticking."""
        ...

    async def stop(self) -> None:
        """Stop (idempotent)."""
        ...


def not_leader() -> ControllerResult[H]:
    """The answer of a node that is not (yet) serving as leader."""
    return ControllerResult(code=ResponseCode.CONTROLLER_NOT_LEADER, remark=NOT_LEADER_REMARK)


class ControllerPipeline:
    """Serialized decide -> propose -> apply on the leader.

    Args:
        node: the Raft node.
        commit_timeout_s: how long a request waits for its events to be applied (upstream's
            5 s future wait).
        process_read_event: ``isProcessReadEvent``: commit an empty entry before every read.
        on_serving: called with True once the leader may serve, with False when it may not.
    """

    def __init__(
        self,
        node: RaftNodeApi,
        *,
        commit_timeout_s: float = 5.0,
        process_read_event: bool = False,
        on_serving: Callable[[bool], None] | None = None,
    ) -> None:
        self._node = node
        self._commit_timeout_s = commit_timeout_s
        self.process_read_event = process_read_event
        self._on_serving = on_serving
        self._lock = asyncio.Lock()
        self._waiting = 0
        self._serving = False
        self._barrier: asyncio.Task[None] | None = None

    @property
    def serving(self) -> bool:
        """Leader with its start-of-term barrier committed (``isLeaderState``)."""
        return self._serving and self._node.is_leader

    def on_role_change(self, is_leader: bool) -> None:
        """Role listener: on leadership, commit a barrier, then serve; on loss, stop serving."""
        if self._barrier is not None:
            self._barrier.cancel()
            self._barrier = None
        self._set_serving(False)
        if is_leader:
            self._barrier = asyncio.get_running_loop().create_task(
                self._commit_barrier(), name="controller/leader-barrier"
            )
            self._barrier.add_done_callback(_log_failure)

    async def close(self) -> None:
        """Stop the barrier task (idempotent)."""
        self._set_serving(False)
        task, self._barrier = self._barrier, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _set_serving(self, serving: bool) -> None:
        if serving == self._serving:
            return
        self._serving = serving
        if self._on_serving is not None:
            self._on_serving(serving)

    async def _commit_barrier(self) -> None:
        # Upstream commits an empty entry when it becomes leader so that every entry of earlier
        # terms is applied before it answers anything (Raft 5.4.2 / 8: read-only after NOOP).
        while self._node.is_leader:
            try:
                await self._node.propose(encode_events([ReadEvent()]), self._commit_timeout_s)
            except NotLeader:
                return
            except (RequestTimeout, TimeoutError) as e:
                log.warning("leader barrier not committed yet, retrying", error=repr(e))
                continue
            log.info("The controller became leader and is serving")
            self._set_serving(True)
            return

    async def write(self, decide: Callable[[], ControllerResult[H]]) -> ControllerResult[H]:
        """Decide on the current state and commit the decided events (then answer).

        A result without events answers at once. Not serving -> CONTROLLER_NOT_LEADER; the
        commit failing or timing out -> SYSTEM_ERROR (upstream: the 5 s wait throws).
        """
        if not self.serving:
            return not_leader()
        if self._waiting >= EVENT_QUEUE_CAPACITY:
            return ControllerResult(code=ResponseCode.SYSTEM_BUSY, remark="event queue full")
        self._waiting += 1
        try:
            async with self._lock:
                if not self.serving:
                    return not_leader()
                result = decide()
                if result.events:
                    failed = await self._commit(encode_events(result.events))
                    if failed is not None:
                        return failed
                elif self.process_read_event:
                    failed = await self._commit(encode_events([ReadEvent()]))
                    if failed is not None:
                        return failed
                return result
        finally:
            self._waiting -= 1

    async def read(self, decide: Callable[[], ControllerResult[H]]) -> ControllerResult[H]:
        """Answer a read on the leader (after a committed empty entry if configured)."""
        return await self.write(decide)

    async def _commit(self, data: bytes) -> ControllerResult[Any] | None:
        try:
            await self._node.propose(data, self._commit_timeout_s)
        except NotLeader:
            return not_leader()
        except (RequestTimeout, TimeoutError) as e:
            log.warning("controller event not committed", error=repr(e))
            return ControllerResult(
                code=ResponseCode.SYSTEM_ERROR,
                remark=f"the request was not committed in {self._commit_timeout_s} s",
            )
        return None


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("leader barrier failed", exc_info=task.exception())
