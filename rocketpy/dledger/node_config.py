"""Configuration of one running DLedger member, and its translation into core ticks.

Owns: :class:`NodeConfig` (wall-clock milliseconds, as operators write them),
:func:`parse_peers` (the ``controllerDLegerPeers`` syntax) and :func:`raft_timing`, which picks
the tick length and the :class:`RaftConfig` in ticks. Must not: do I/O. Re-exported by
:mod:`rocketpy.dledger.node`.

Mirrors openmessaging/dledger ``DLedgerConfig`` (``group``, ``selfId``, ``peers``,
``storeBaseDir``, ``heartBeatTimeIntervalMs``, ``maxHeartBeatLeak``, ``min/maxVoteIntervalMs``,
``preferredLeaderIds``, snapshot thresholds).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from rocketpy.common.errors import ConfigError
from rocketpy.dledger.core_types import RaftConfig

#: Ticks per heartbeat interval: the resolution of every timer (10 ms ticks for a 100 ms beat).
HEARTBEAT_TICKS: Final = 10
PEERS_SYNTAX: Final = (
    "id-host:port pairs separated by ';', e.g. n0-127.0.0.1:9877;n1-127.0.0.1:9878"
)


def parse_peers(text: str) -> dict[str, str]:
    """Parse ``controllerDLegerPeers``: ``n0-127.0.0.1:9877;n1-127.0.0.1:9878`` -> id -> address.

    Raises:
        ConfigError: empty text, an entry without ``id-host:port``, a bad port or a duplicate id.
    """
    peers: dict[str, str] = {}
    for raw in text.split(";"):
        item = raw.strip()
        if not item:
            continue
        node_id, sep, addr = item.partition("-")
        host, colon, port = addr.rpartition(":")
        if not sep or not node_id or not colon or not host or not port.isdigit():
            raise ConfigError("controllerDLegerPeers", text, PEERS_SYNTAX)
        if not 0 <= int(port) <= 65535 or node_id in peers:
            raise ConfigError("controllerDLegerPeers", text, PEERS_SYNTAX + ", unique ids")
        peers[node_id] = addr
    if not peers:
        raise ConfigError("controllerDLegerPeers", text, PEERS_SYNTAX)
    return peers


def render_peers(peers: Mapping[str, str]) -> str:
    """Inverse of :func:`parse_peers`."""
    return ";".join(f"{node_id}-{addr}" for node_id, addr in peers.items())


@dataclass(frozen=True, slots=True)
class NodeConfig:
    """One member of a DLedger group.

    Attributes:
        group: ``controllerDLegerGroup``; peers of another group are refused.
        self_id: ``controllerDLegerSelfId``; must be a key of ``peers``.
        peers: every member id -> ``host:port`` (this member included).
        store_path: ``controllerStorePath``: the Raft log directory.
        heartbeat_interval_ms: ``heartBeatTimeIntervalMs``.
        election_timeout_ms: how long a follower waits without heartbeats before campaigning;
            rounded to a whole number (>= 2) of heartbeat intervals (DLedger
            ``maxHeartBeatLeak``).
        preferred_leader: ``preferredLeaderIds``: the leader hands over to this member once it
            has caught up.
        snapshot_threshold: applied entries since the last snapshot that trigger the next one.
        log_segment_bytes: size at which a log segment file rolls (``mappedFileSize``).
    """

    group: str
    self_id: str
    peers: Mapping[str, str]
    store_path: Path
    heartbeat_interval_ms: int = 2000
    election_timeout_ms: int = 3000
    preferred_leader: str | None = None
    snapshot_threshold: int = 10_000
    log_segment_bytes: int = 64 << 20

    def __post_init__(self) -> None:
        if self.self_id not in self.peers:
            raise ConfigError(
                "controllerDLegerSelfId", self.self_id, f"one of {sorted(self.peers)}"
            )
        if self.preferred_leader is not None and self.preferred_leader not in self.peers:
            raise ConfigError(
                "preferredLeaderIds", self.preferred_leader, f"one of {sorted(self.peers)}"
            )
        if self.heartbeat_interval_ms < HEARTBEAT_TICKS:
            raise ConfigError(
                "heartBeatTimeIntervalMs", self.heartbeat_interval_ms, f">= {HEARTBEAT_TICKS}"
            )
        if self.election_timeout_ms <= self.heartbeat_interval_ms:
            raise ConfigError(
                "electionTimeoutMs", self.election_timeout_ms, "> heartBeatTimeIntervalMs"
            )
        if self.snapshot_threshold < 1:
            raise ConfigError("snapshotThreshold", self.snapshot_threshold, ">= 1")

    @property
    def address(self) -> str:
        """This member's own ``host:port`` (the port the owner's server must listen on)."""
        return self.peers[self.self_id]


def raft_timing(config: NodeConfig) -> tuple[RaftConfig, int]:
    """The core's config and the tick length in ms for ``config``.

    One heartbeat interval is :data:`HEARTBEAT_TICKS` ticks. DLedger's vote intervals
    (300-1000 ms against a 2000 ms beat) scale with the beat; a vote round waits half a beat
    for a peer that does not answer (DLedger: 2000 ms), which on a LAN is plenty.
    """
    tick_ms = max(1, config.heartbeat_interval_ms // HEARTBEAT_TICKS)
    leak = max(2, round(config.election_timeout_ms / config.heartbeat_interval_ms))
    preferred = (config.preferred_leader,) if config.preferred_leader else ()
    raft = RaftConfig(
        heartbeat_interval_ticks=HEARTBEAT_TICKS,
        max_heartbeat_leak=leak,
        min_vote_interval_ticks=3,
        max_vote_interval_ticks=8,
        vote_wait_ticks=HEARTBEAT_TICKS // 2,
        preferred_leader_ids=preferred,
        transfer_timeout_ticks=HEARTBEAT_TICKS * 6,
    )
    return raft, tick_ms
