"""An in-memory network of RaftCores for tests: deliver, drop, reorder, duplicate, partition,
crash and restart, all driven by logical ticks and seeded RNGs (etcd-io/raft ``rafttest``).

Each node has a :class:`MemoryStorage` that survives a crash; a crash throws away everything
the node had not persisted (its core, its in-flight Ready, messages not yet handed to the
network) and a restart builds a new core from the storage, as the driver will do from disk.
The applied state machine is a list of entry payloads, rebuilt on restart from the snapshot
(a msgpack list of payloads) plus the committed entries the first Ready hands out.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import msgpack

from rocketpy.common.types import LogIndex
from rocketpy.dledger.core import RaftConfig, RaftCore, Ready, Role
from rocketpy.dledger.messages import (
    Entry,
    EntryKind,
    HardState,
    Message,
    Snapshot,
    decode_message,
    encode_message,
)
from rocketpy.dledger.storage import MemoryStorage, StorageView

FAST = RaftConfig(
    heartbeat_interval_ticks=2,
    max_heartbeat_leak=3,
    min_vote_interval_ticks=1,
    max_vote_interval_ticks=6,
    vote_wait_ticks=4,
    max_inflight_appends=4,
    max_entries_per_append=3,
    transfer_timeout_ticks=20,
    snapshot_timeout_heartbeats=2,
)


def state_of(data: bytes) -> list[tuple[int, bytes]]:
    """Decode the test state machine's snapshot: a msgpack list of [index, payload]."""
    return [(int(i), bytes(p)) for i, p in msgpack.unpackb(data)] if data else []


def persist(storage: Storage, rd: Ready) -> None:
    """What the driver does with a Ready before sending (storage writer contract)."""
    if rd.snapshot is not None:
        storage.install_snapshot(rd.snapshot)
    storage.append(rd.entries)
    if rd.hard_state is not None:
        storage.set_hard_state(rd.hard_state)


def drain(core: RaftCore, storage: MemoryStorage) -> list[Message]:
    """Persist and advance every pending Ready of ``core``; return the messages it sends."""
    out: list[Message] = []
    while core.has_ready():
        rd = core.ready()
        persist(storage, rd)
        out.extend(rd.messages)
        core.advance(rd)
    return out


class Storage(StorageView, Protocol):
    """A StorageView with the writers the driver uses (MemoryStorage, DLedgerLog)."""

    def append(self, entries: Sequence[Entry]) -> None: ...
    def set_hard_state(self, hard_state: HardState) -> None: ...
    def install_snapshot(self, snapshot: Snapshot) -> None: ...
    def create_snapshot(self, index: LogIndex, data: bytes) -> Snapshot: ...
    def compact(self, index: LogIndex) -> None: ...


@dataclass
class Node:
    """One simulated member: its durable storage, its core, its applied state."""

    node_id: str
    storage: Storage
    core: RaftCore | None
    applied: list[tuple[int, bytes]] = field(default_factory=list)
    applied_index: int = 0


class Cluster:
    """A group of cores joined by a lossy, reordering in-memory network."""

    def __init__(
        self,
        ids: Iterable[str] = ("n0", "n1", "n2"),
        *,
        seed: int = 0,
        config: RaftConfig = FAST,
        wire: bool = False,
        open_storage: Callable[[str], Storage] | None = None,
    ) -> None:
        self.ids = tuple(ids)
        # restart() reopens storage through this (e.g. DLedgerLog.open on a directory)
        self.open_storage = open_storage
        self.config = config
        self.rng = random.Random(seed)
        self.wire = wire  # round-trip every message through the msgpack codec
        self.nodes: dict[str, Node] = {}
        self.in_flight: list[Message] = []
        self.cut: set[frozenset[str]] = set()  # pairs that cannot talk
        self.drop_rate = 0.0
        self.dup_rate = 0.0
        self.delivered = 0
        self.observers: list[Callable[[Cluster, str], None]] = []
        for i in self.ids:
            self.nodes[i] = Node(i, open_storage(i) if open_storage else MemoryStorage(), None)
            self.restart(i)

    # -- membership of the simulation ----------------------------------------------------------

    def core(self, node_id: str) -> RaftCore:
        """The live core of ``node_id`` (fails if crashed)."""
        core = self.nodes[node_id].core
        assert core is not None, f"{node_id} is down"
        return core

    def live(self) -> list[str]:
        """Ids of nodes that are up."""
        return [i for i in self.ids if self.nodes[i].core is not None]

    def crash(self, node_id: str) -> None:
        """Lose the node's volatile state; its storage survives."""
        node = self.nodes[node_id]
        node.core = None
        self.in_flight = [m for m in self.in_flight if m.to_id != node_id]

    def restart(self, node_id: str) -> None:
        """Rebuild the core from storage (and the state machine from the snapshot)."""
        node = self.nodes[node_id]
        if self.open_storage is not None and node.core is None:
            node.storage = self.open_storage(node_id)
        seed = self.rng.randrange(1 << 30)
        node.core = RaftCore(node_id, self.ids, node.storage, random.Random(seed), self.config)
        snap = node.storage.snapshot()
        node.applied = state_of(snap.data)
        node.applied_index = snap.meta.index

    def compact(self, node_id: str, keep: int = 0) -> None:
        """Snapshot the node's applied state and drop the log up to ``applied - keep``."""
        node = self.nodes[node_id]
        index = node.applied_index - keep
        if index <= node.storage.snapshot().meta.index:
            return
        state = [list(x) for x in node.applied if x[0] <= index]
        node.storage.create_snapshot(LogIndex(index), msgpack.packb(state))
        node.storage.compact(LogIndex(index))

    # -- network -------------------------------------------------------------------------------

    def partition(self, *groups: Iterable[str]) -> None:
        """Only members of the same group can talk."""
        sets = [set(g) for g in groups]
        self.cut = {
            frozenset((a, b))
            for a in self.ids
            for b in self.ids
            if a != b and not any(a in s and b in s for s in sets)
        }

    def isolate(self, node_id: str) -> None:
        """Cut ``node_id`` off from everyone."""
        self.partition([node_id], [i for i in self.ids if i != node_id])

    def heal(self) -> None:
        """Everyone can talk again."""
        self.cut = set()

    def _process(self, node_id: str) -> None:
        node = self.nodes[node_id]
        core = node.core
        if core is None:
            return
        while core.has_ready():
            rd = core.ready()
            persist(node.storage, rd)
            if rd.snapshot is not None:
                node.applied = state_of(rd.snapshot.data)
                node.applied_index = rd.snapshot.meta.index
            for m in rd.messages:
                self._post(m)
            for e in rd.committed_entries:
                assert e.index == node.applied_index + 1, (node_id, e.index, node.applied_index)
                node.applied_index = e.index
                if e.kind is EntryKind.NORMAL:
                    node.applied.append((e.index, e.data))
            core.advance(rd)
        for obs in self.observers:
            obs(self, node_id)

    def _post(self, m: Message) -> None:
        if frozenset((m.from_id, m.to_id)) in self.cut:
            return
        if self.drop_rate and self.rng.random() < self.drop_rate:
            return
        if self.wire:
            m = decode_message(encode_message(m))
        self.in_flight.append(m)
        if self.dup_rate and self.rng.random() < self.dup_rate:
            self.in_flight.append(m)

    def deliver_one(self, index: int = 0) -> Message | None:
        """Deliver the in-flight message at ``index`` (0 = oldest)."""
        if not self.in_flight:
            return None
        m = self.in_flight.pop(index)
        if frozenset((m.from_id, m.to_id)) in self.cut:
            return m
        core = self.nodes[m.to_id].core
        if core is not None:
            core.step(m)
            self.delivered += 1
            self._process(m.to_id)
        return m

    def deliver_random(self) -> Message | None:
        """Deliver a random in-flight message (reordering)."""
        if not self.in_flight:
            return None
        return self.deliver_one(self.rng.randrange(len(self.in_flight)))

    def deliver_all(self, limit: int = 10_000) -> None:
        """Deliver until quiet (FIFO)."""
        for _ in range(limit):
            if self.deliver_one() is None:
                return
        raise AssertionError("network did not quiesce")

    def tick(self, node_id: str | None = None) -> None:
        """Tick one node, or every live node."""
        for i in [node_id] if node_id else self.live():
            core = self.nodes[i].core
            if core is not None:
                core.tick()
                self._process(i)

    def flush(self, node_id: str) -> None:
        """Process a node's Ready after a direct call on its core (propose, transfer...)."""
        self._process(node_id)

    def run(self, ticks: int) -> None:
        """Tick everyone and deliver everything, ``ticks`` times."""
        for _ in range(ticks):
            self.tick()
            self.deliver_all()

    # -- queries -------------------------------------------------------------------------------

    def leaders(self) -> list[str]:
        """Live nodes that believe they lead."""
        return [i for i in self.live() if self.core(i).role is Role.LEADER]

    def leader(self) -> str | None:
        """The leader with the highest term, if any."""
        best = sorted(self.leaders(), key=lambda i: self.core(i).term)
        return best[-1] if best else None

    def elect(self, max_ticks: int = 500) -> str:
        """Tick and deliver until exactly one leader is up and every live node follows it."""
        for _ in range(max_ticks):
            self.tick()
            self.deliver_all()
            leader = self.leader()
            if leader is not None and all(self.core(i).leader_id == leader for i in self.live()):
                return leader
        raise AssertionError("no leader elected")

    def propose(self, data: bytes) -> int:
        """Propose on the current leader and process its Ready."""
        leader = self.leader()
        assert leader is not None
        index = self.core(leader).propose(data)
        self._process(leader)
        return index

    def applied(self, node_id: str) -> list[bytes]:
        """Payloads the node has applied, in order."""
        return [d for _i, d in self.nodes[node_id].applied]


# -- single-core helpers for table tests -------------------------------------------------------


@dataclass
class Solo:
    """One core under test, its storage, and what it has sent and applied so far."""

    core: RaftCore
    storage: MemoryStorage
    sent: list[Message] = field(default_factory=list)
    applied: list[int] = field(default_factory=list)

    def drain(self) -> list[Message]:
        """Persist/advance every Ready; return the messages of this round (also kept)."""
        out: list[Message] = []
        while self.core.has_ready():
            rd = self.core.ready()
            persist(self.storage, rd)
            out.extend(rd.messages)
            self.applied.extend(e.index for e in rd.committed_entries)
            self.core.advance(rd)
        self.sent.extend(out)
        return out

    def step(self, msg: Message) -> list[Message]:
        """Step one message and drain."""
        self.core.step(msg)
        return self.drain()

    def ticks(self, n: int) -> list[Message]:
        """Tick ``n`` times and drain after each; return everything sent."""
        out: list[Message] = []
        for _ in range(n):
            self.core.tick()
            out.extend(self.drain())
        return out


def solo(
    node_id: str = "n0",
    peers: tuple[str, ...] = ("n0", "n1", "n2"),
    *,
    storage: MemoryStorage | None = None,
    seed: int = 0,
    config: RaftConfig = FAST,
) -> Solo:
    """A fresh core (or one restarted over ``storage``), already drained once."""
    storage = storage or MemoryStorage()
    s = Solo(RaftCore(node_id, peers, storage, random.Random(seed), config), storage)
    s.drain()
    return s
