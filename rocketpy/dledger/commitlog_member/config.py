"""A DLedger 0.3.1.2 member's settings (``DLedgerConfig``; dledger-commitlog.md sections 2-4).

Owns: the values below, their upstream names (in each field's comment) and parsing
``dLegerPeers`` (``n0-127.0.0.1:40911;n1-...``). Must not: read files or the broker config (the
broker maps ``dLegerGroup``/``dLegerPeers``/``dLegerSelfId``/``preferredLeaderId``/
``enableBatchPush`` onto this in a later step). Defaults are upstream's; tests shorten timings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from rocketpy.store.dledger_log.store import DEFAULT_DATA_FILE_SIZE, DEFAULT_INDEX_FILE_SIZE


def parse_peers(peers: str) -> dict[str, str]:
    """``dLegerPeers`` -> {id: host:port} in written order.

    Raises:
        ValueError: an item is not ``<id>-<host>:<port>`` or an id repeats.
    """
    result: dict[str, str] = {}
    for item in peers.split(";"):
        text = item.strip()
        if not text:
            continue
        peer_id, sep, addr = text.partition("-")
        if not sep or not peer_id or ":" not in addr:
            raise ValueError(f"bad dLegerPeers item {text!r}")
        if peer_id in result:
            raise ValueError(f"dLegerPeers names {peer_id} twice")
        result[peer_id] = addr
    if not result:
        raise ValueError("dLegerPeers is empty")
    return result


def render_peers(peers: dict[str, str]) -> str:
    """The inverse of :func:`parse_peers`."""
    return ";".join(f"{k}-{v}" for k, v in peers.items())


@dataclass(frozen=True, slots=True, kw_only=True)
class DLedgerMemberConfig:
    """One member of one group."""

    group: str  # group (dLegerGroup)
    self_id: str  # selfId (dLegerSelfId)
    peers: str  # peers (dLegerPeers)
    store_base_dir: Path  # storeBaseDir; the member keeps its files in dledger-<selfId>/
    preferred_leader_ids: str | None = None  # preferredLeaderIds (RocketMQ preferredLeaderId)
    enable_batch_push: bool = False  # enableBatchPush
    max_batch_push_size: int = 4 * 1024  # maxBatchPushSize
    heart_beat_time_interval_ms: int = 2000  # heartBeatTimeIntervalMs
    max_heart_beat_leak: int = 3  # maxHeartBeatLeak
    min_vote_interval_ms: int = 300  # minVoteIntervalMs
    max_vote_interval_ms: int = 1000  # maxVoteIntervalMs
    min_take_leadership_vote_interval_ms: int = 30  # minTakeLeadershipVoteIntervalMs
    max_take_leadership_vote_interval_ms: int = 100  # maxTakeLeadershipVoteIntervalMs
    #: The candidate's wait for votes is ``vote_wait_base_ms + rand(max_vote_interval_ms)``
    #: (2000 hard-wired upstream); it ends early once every peer answered.
    vote_wait_base_ms: int = 2000
    max_pending_requests_num: int = 10000  # maxPendingRequestsNum
    max_wait_ack_time_ms: int = 2500  # maxWaitAckTimeMs
    max_push_timeout_ms: int = 1000  # maxPushTimeOutMs
    max_pending_size: int = 1000  # maxPendingSize (outstanding pushes per follower)
    peer_push_throttle_point: int = 300 * 1024 * 1024  # peerPushThrottlePoint
    peer_push_quota: int = 20 * 1024 * 1024  # peerPushQuota (bytes a second)
    max_leadership_transfer_wait_index: int = 1000  # maxLeadershipTransferWaitIndex
    leadership_transfer_wait_timeout_ms: int = 1000  # leadershipTransferWaitTimeout
    check_point_interval_ms: int = 3000  # checkPointInterval (persistCheckPoint)
    flush_file_interval_ms: int = 10  # flushFileInterval
    rpc_timeout_ms: int = 3000  # DLedgerRpcNettyService's invokeAsync timeout
    data_file_size: int = DEFAULT_DATA_FILE_SIZE  # mappedFileSizeForEntryData
    index_file_size: int = DEFAULT_INDEX_FILE_SIZE  # mappedFileSizeForEntryIndex
    data_dir: Path | None = None  # storePathDLedgerCommitLog (RocketMQ 5.x): data files here
    # Retention (CleanSpaceService); RocketMQ's DLedgerCommitLog sets the first four from
    # fileReservedTime + 1, deleteWhen, diskMaxUsedSpaceRatio / 100, cleanFileForciblyEnable.
    file_reserved_hours: int = 72  # fileReservedHours
    delete_when: str = "04"  # deleteWhen
    disk_space_ratio_to_check_expired: float = 0.70  # diskSpaceRatioToCheckExpired
    enable_disk_force_clean: bool = True  # enableDiskForceClean
    disk_space_ratio_to_force_clean: float = 0.85  # diskSpaceRatioToForceClean
    clean_space_interval_ms: int = 100  # CleanSpaceService's waitForRunning(100)
    peer_map: dict[str, str] = field(init=False, compare=False)

    def __post_init__(self) -> None:
        peers = parse_peers(self.peers)
        if self.self_id not in peers:
            raise ValueError(f"dLegerSelfId {self.self_id} is not in dLegerPeers {self.peers}")
        if self.min_vote_interval_ms >= self.max_vote_interval_ms:
            raise ValueError("minVoteIntervalMs must be < maxVoteIntervalMs")
        object.__setattr__(self, "peer_map", peers)

    @property
    def self_address(self) -> str:
        """This member's ``host:port`` (its peer port, not the broker's)."""
        return self.peer_map[self.self_id]

    @property
    def base_dir(self) -> Path:
        """``storeBaseDir/dledger-<selfId>`` (``getDefaultPath``)."""
        return self.store_base_dir / f"dledger-{self.self_id}"

    @property
    def force_clean_ratio(self) -> float:
        """``getDiskSpaceRatioToForceClean``: never below 0.50."""
        return max(self.disk_space_ratio_to_force_clean, 0.50)

    @property
    def disk_full_ratio(self) -> float:
        """``getDiskFullRatio``: the force-clean ratio (as set) + 0.05, at most 0.95."""
        return min(self.disk_space_ratio_to_force_clean + 0.05, 0.95)

    def preferred(self) -> list[str]:
        """``preferredLeaderIds`` split on ``;`` (empty when unset)."""
        if not self.preferred_leader_ids:
            return []
        return [p for p in self.preferred_leader_ids.split(";") if p]
