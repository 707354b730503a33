"""An in-process DLedger group on loopback: one RemotingServer and one RaftNode per member.

Owns: :class:`LocalGroup` (start all, stop/restart one member on its own port and store
directory, find the leader) and :class:`RecordingStateMachine` (applies entries to a list, so
replicas compare with ``==``). Used by the DLedger integration tests and
:mod:`rocketpy.tools.bench_dledger`. Must not: be used by daemons (the controller wires its own
server and node). Shaped like hashicorp/raft ``testing.go`` (a cluster handle with
``leader()``).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path

import msgpack

from rocketpy.common.types import LogIndex
from rocketpy.dledger.log import RecoveryReport
from rocketpy.dledger.node import NodeConfig, RaftNode
from rocketpy.remoting.transport.dispatch import ProcessorRegistry
from rocketpy.remoting.transport.server import RemotingServer


class RecordingStateMachine:
    """Applies each entry by recording ``(index, data)``; ``apply`` returns the index."""

    def __init__(self) -> None:
        self.applied: list[tuple[int, bytes]] = []

    def apply(self, index: LogIndex, data: bytes) -> object:
        """Record the entry."""
        self.applied.append((int(index), data))
        return int(index)

    def snapshot(self) -> bytes:
        """msgpack list of ``[index, data]``."""
        packed: bytes = msgpack.packb(self.applied, use_bin_type=True)
        return packed

    def restore(self, data: bytes) -> None:
        """Replace the record with a :meth:`snapshot`."""
        self.applied = [(int(i), bytes(d)) for i, d in msgpack.unpackb(data, raw=False)]

    def payloads(self) -> list[bytes]:
        """The applied data in order."""
        return [d for _, d in self.applied]


@dataclass
class Member:
    """One member: its server, node and state machine (``node`` is None while stopped)."""

    node_id: str
    store_path: Path
    server: RemotingServer
    registry: ProcessorRegistry
    port: int
    sm: RecordingStateMachine = field(default_factory=RecordingStateMachine)
    node: RaftNode | None = None

    @property
    def running(self) -> RaftNode:
        """The running node.

        Raises:
            RuntimeError: the member is stopped.
        """
        if self.node is None:
            raise RuntimeError(f"{self.node_id} is stopped")
        return self.node


class LocalGroup:
    """A DLedger group of in-process members on 127.0.0.1 (ports picked by the OS).

    Args:
        base_dir: each member stores its log in ``base_dir/<id>``.
        ids: member ids.
        heartbeat_interval_ms / election_timeout_ms / snapshot_threshold / log_segment_bytes:
            passed to every member's :class:`NodeConfig`.
        seed: base seed of the members' vote jitter (member i gets seed + i).
    """

    def __init__(
        self,
        base_dir: Path,
        ids: tuple[str, ...] = ("n0", "n1", "n2"),
        *,
        group: str = "dledger-test",
        heartbeat_interval_ms: int = 100,
        election_timeout_ms: int = 300,
        snapshot_threshold: int = 10_000,
        log_segment_bytes: int = 1 << 20,
        seed: int | None = None,
    ) -> None:
        self.base_dir = base_dir
        self.ids = ids
        self.group = group
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.election_timeout_ms = election_timeout_ms
        self.snapshot_threshold = snapshot_threshold
        self.log_segment_bytes = log_segment_bytes
        self.seed = seed
        self.members: dict[str, Member] = {}
        self.peers: dict[str, str] = {}

    async def start(self) -> None:
        """Bind every member's server, then start every node."""
        for node_id in self.ids:
            registry = ProcessorRegistry()
            server = RemotingServer(registry, name=f"dledger-{node_id}")
            await server.start()
            self.members[node_id] = Member(
                node_id, self.base_dir / node_id, server, registry, server.port
            )
            self.peers[node_id] = server.address
        for node_id in self.ids:
            await self._start_node(self.members[node_id])

    def _config(self, member: Member) -> NodeConfig:
        return NodeConfig(
            group=self.group,
            self_id=member.node_id,
            peers=self.peers,
            store_path=member.store_path,
            heartbeat_interval_ms=self.heartbeat_interval_ms,
            election_timeout_ms=self.election_timeout_ms,
            snapshot_threshold=self.snapshot_threshold,
            log_segment_bytes=self.log_segment_bytes,
        )

    async def _start_node(self, member: Member) -> None:
        seed = None if self.seed is None else self.seed + self.ids.index(member.node_id)
        node = RaftNode(self._config(member), member.sm, seed=seed)
        node.register(member.registry)
        member.node = node
        await node.start()

    async def stop_member(self, node_id: str) -> None:
        """Stop one member's node and server (its store directory stays)."""
        member = self.members[node_id]
        node, member.node = member.node, None
        await member.server.stop(timeout_s=1.0)
        if node is not None:
            await node.stop()

    async def restart_member(self, node_id: str, *, fresh_state: bool = True) -> RaftNode:
        """Start a stopped member again on the same port and store directory.

        Args:
            fresh_state: give it an empty state machine (it must rebuild from disk).
        """
        member = self.members[node_id]
        if fresh_state:
            member.sm = RecordingStateMachine()
        member.registry = ProcessorRegistry()
        member.server = RemotingServer(
            member.registry, port=member.port, name=f"dledger-{member.node_id}"
        )
        await member.server.start()
        await self._start_node(member)
        return member.running

    def recovery(self, node_id: str) -> RecoveryReport | None:
        """What the member's log recovery found at its last start."""
        node = self.members[node_id].node
        return None if node is None else node.recovery

    def running(self) -> list[Member]:
        """Members whose node is running."""
        return [m for m in self.members.values() if m.node is not None]

    def leader(self) -> Member | None:
        """The running member that leads, if exactly one does."""
        leaders = [m for m in self.running() if m.running.is_leader]
        return leaders[0] if len(leaders) == 1 else None

    async def wait_leader(self, timeout_s: float = 5.0, *, exclude: str | None = None) -> Member:
        """Wait until one running member leads and every running member follows it.

        Raises:
            TimeoutError: no agreed leader within ``timeout_s``.
        """
        deadline = time.monotonic() + timeout_s
        async with asyncio.timeout(timeout_s):
            while True:
                leader = self.leader()
                if (
                    leader is not None
                    and leader.node_id != exclude
                    and all(m.running.leader_id == leader.node_id for m in self.running())
                ):
                    return leader
                await asyncio.sleep(min(0.01, max(0.0, deadline - time.monotonic())))

    async def close(self) -> None:
        """Stop every member (idempotent)."""
        for node_id in self.ids:
            if node_id in self.members:
                await self.stop_member(node_id)
