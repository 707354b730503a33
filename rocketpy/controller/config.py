"""Controller settings with upstream's keys (``ControllerConfig``), validated at start-up.

Owns: every key ``mqcontroller -c`` (and ``mqnamesrv`` with ``enableControllerInNamesrv``)
accepts, its default (controller.md section 1), and the checks that make a bad deployment fail
with one line: ``controllerDLegerPeers`` and ``controllerDLegerSelfId`` are mandatory, the peer
list must parse as ``id-host:port;...`` and must contain the self id. Mirrors
``common/.../ControllerConfig.java``.

rocketpy additions (no upstream key exists; DLedger hard-codes its timings):
``controllerDLegerHeartBeatTimeIntervalMs`` / ``controllerDLegerElectionTimeoutMs`` (the Raft
node's heartbeat and election timeout, short in tests) and ``controllerStartupGraceMs`` (scenario
C-14: how long a fresh controller leader waits for heartbeats before it declares masters dead;
``-1`` = one ``scanNotActiveBrokerInterval``). ``metricsDumpInterval`` (ms, 0 = off),
``metricsDumpDir`` (blank: ``<controllerStorePath>/metrics``), ``metricsDumpFileMaxBytes`` and
``metricsDumpFileMaxCount``: the controller's metrics dumps, as the broker's keys of those names.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar, Self

from pydantic import Field, model_validator

from rocketpy.common.errors import ConfigError
from rocketpy.common.settings import RocketSettings

_HOME = Path.home()
DLEDGER_CONTROLLER = "DLedger"


def parse_peer_list(text: str) -> dict[str, str]:
    """``n0-127.0.0.1:9877;n1-127.0.0.1:9878`` -> ``{"n0": "127.0.0.1:9877", ...}``.

    Mirrors ``ControllerConfig.getDLedgerAddress`` (split on ``;``, then on the first ``-``).

    Raises:
        ValueError: an item is not ``id-host:port`` or an id repeats.
    """
    peers: dict[str, str] = {}
    for raw in text.split(";"):
        item = raw.strip()
        if not item:
            continue
        node_id, sep, addr = item.partition("-")
        host, colon, port = addr.rpartition(":")
        if not sep or not node_id or not colon or not host or not port.isdigit():
            raise ValueError(f"peer {item!r} is not id-host:port")
        if not 0 <= int(port) < 65536:  # 0: bind any (a one-member group in tests)
            raise ValueError(f"peer {item!r} has a bad port")
        if node_id in peers:
            raise ValueError(f"peer id {node_id!r} appears twice")
        peers[node_id] = addr
    if not peers:
        raise ValueError("no peers")
    return peers


class ControllerConfig(RocketSettings):
    """Effective controller configuration."""

    _upstream_env: ClassVar[Mapping[str, str]] = {"ROCKETMQ_HOME": "rocketmqHome"}

    rocketmq_home: str = Field("", alias="rocketmqHome")
    config_store_path: str = Field(
        str(_HOME / "controller" / "controller.properties"), alias="configStorePath"
    )
    controller_type: str = Field(DLEDGER_CONTROLLER, alias="controllerType")
    scan_not_active_broker_interval_ms: int = Field(
        5000, alias="scanNotActiveBrokerInterval", ge=10
    )
    controller_thread_pool_nums: int = Field(16, alias="controllerThreadPoolNums", ge=1)
    controller_request_thread_pool_queue_capacity: int = Field(
        50000, alias="controllerRequestThreadPoolQueueCapacity", ge=1
    )
    controller_dleger_group: str = Field("", alias="controllerDLegerGroup")
    controller_dleger_peers: str = Field("", alias="controllerDLegerPeers")
    controller_dleger_self_id: str = Field("", alias="controllerDLegerSelfId")
    mapped_file_size_bytes: int = Field(1024 * 1024 * 1024, alias="mappedFileSize", ge=4096)
    controller_store_path: str = Field("", alias="controllerStorePath")
    elect_master_max_retry_count: int = Field(3, alias="electMasterMaxRetryCount", ge=1)
    enable_elect_unclean_master: bool = Field(False, alias="enableElectUncleanMaster")
    is_process_read_event: bool = Field(False, alias="isProcessReadEvent")
    notify_broker_role_changed: bool = Field(True, alias="notifyBrokerRoleChanged")
    scan_inactive_master_interval_ms: int = Field(5000, alias="scanInactiveMasterInterval", ge=10)
    config_black_list: str = Field("configBlackList;configStorePath", alias="configBlackList")
    # rocketpy additions (module docstring)
    heartbeat_interval_ms: int = Field(2000, alias="controllerDLegerHeartBeatTimeIntervalMs", ge=10)
    election_timeout_ms: int = Field(3000, alias="controllerDLegerElectionTimeoutMs", ge=20)
    startup_grace_ms: int = Field(-1, alias="controllerStartupGraceMs", ge=-1)
    metrics_dump_interval_ms: int = Field(10_000, alias="metricsDumpInterval", ge=0)
    metrics_dump_dir: str = Field("", alias="metricsDumpDir")
    metrics_dump_file_max_bytes: int = Field(
        64 * 1024 * 1024, alias="metricsDumpFileMaxBytes", ge=1024
    )
    metrics_dump_file_max_count: int = Field(10, alias="metricsDumpFileMaxCount", ge=1)
    # NettyServerConfig keys that apply to the controller's (DLedger) port
    server_channel_max_idle_time_seconds: int = Field(
        120, alias="serverChannelMaxIdleTimeSeconds", ge=0
    )
    server_frame_max_length: int = Field(
        16 * 1024 * 1024, alias="serverFrameMaxLength", ge=1024, le=1 << 30
    )

    @model_validator(mode="after")
    def _check_group(self) -> Self:
        if self.controller_type != DLEDGER_CONTROLLER:
            raise ConfigError("controllerType", self.controller_type, "only DLedger is supported")
        if not self.controller_dleger_peers.strip():
            raise ConfigError(
                "controllerDLegerPeers", None, "mandatory, e.g. n0-127.0.0.1:9877;n1-..."
            )
        if not self.controller_dleger_self_id.strip():
            raise ConfigError("controllerDLegerSelfId", None, "mandatory, e.g. n0")
        try:
            peers = parse_peer_list(self.controller_dleger_peers)
        except ValueError as e:
            raise ConfigError("controllerDLegerPeers", self.controller_dleger_peers, str(e)) from e
        if self.controller_dleger_self_id not in peers:
            raise ConfigError(
                "controllerDLegerSelfId",
                self.controller_dleger_self_id,
                f"must be one of the peer ids {sorted(peers)}",
            )
        if self.heartbeat_interval_ms >= self.election_timeout_ms:
            raise ConfigError(
                "controllerDLegerHeartBeatTimeIntervalMs",
                self.heartbeat_interval_ms,
                "must be below controllerDLegerElectionTimeoutMs",
            )
        return self

    def peers(self) -> dict[str, str]:
        """Peer id -> ``host:port`` (validated at construction)."""
        return parse_peer_list(self.controller_dleger_peers)

    def self_address(self) -> str:
        """This node's peer address: where the controller serves (``getDLedgerAddress``)."""
        return self.peers()[self.controller_dleger_self_id]

    def store_path(self) -> Path:
        """``getControllerStorePath``: ``~/DLedgerController`` when unset."""
        if self.controller_store_path:
            return Path(self.controller_store_path)
        return _HOME / f"{self.controller_type}Controller"

    def metrics_dump_path(self) -> Path:
        """Where metrics dumps go: ``metricsDumpDir`` or ``<controllerStorePath>/metrics``."""
        if self.metrics_dump_dir:
            return Path(self.metrics_dump_dir)
        return self.store_path() / "metrics"

    def group(self) -> str:
        """The Raft group name (``default`` when unset, as DLedgerConfig)."""
        return self.controller_dleger_group or "default"

    def grace_ms(self) -> int:
        """Start-up grace before declaring masters dead (scenario C-14)."""
        if self.startup_grace_ms >= 0:
            return self.startup_grace_ms
        return self.scan_not_active_broker_interval_ms

    def black_list(self) -> set[str]:
        """Keys UPDATE_CONTROLLER_CONFIG refuses (always including ``rocketmqHome``)."""
        keys = {k.strip() for k in self.config_black_list.split(";") if k.strip()}
        return keys | {"configBlackList", "configStorePath", "rocketmqHome"}
