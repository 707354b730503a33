"""Message store settings with upstream's ``MessageStoreConfig`` keys (store.md section 11).

Owns: the store keys the CommitLog, ConsumeQueue, flush and recovery read, their defaults and
validation, and the derived directory paths (``StorePathConfigHelper``).
"""

from __future__ import annotations

import enum
from pathlib import Path

from pydantic import Field, field_validator

from rocketpy.common.settings import RocketSettings

_HOME = Path.home()


class FlushDiskType(enum.StrEnum):
    """``flushDiskType``."""

    ASYNC_FLUSH = "ASYNC_FLUSH"
    SYNC_FLUSH = "SYNC_FLUSH"


class MessageStoreConfig(RocketSettings):
    """Effective store configuration. Sizes are bytes, intervals milliseconds."""

    store_path_root_dir: str = Field(str(_HOME / "store"), alias="storePathRootDir")
    # Empty means ``<storePathRootDir>/commitlog`` (upstream computes the same default).
    store_path_commit_log: str = Field("", alias="storePathCommitLog")
    # Empty means ``<storePathRootDir>/epochFileCheckpoint`` / ``<storePathRootDir>/brokerIdentity``
    # (upstream's MessageStoreConfig defaults; B-07).
    store_path_epoch_file: str = Field("", alias="storePathEpochFile")
    store_path_broker_identity: str = Field("", alias="storePathBrokerIdentity")
    mapped_file_size_commit_log: int = Field(1073741824, alias="mappedFileSizeCommitLog", ge=4096)
    mapped_file_size_consume_queue: int = Field(6000000, alias="mappedFileSizeConsumeQueue", ge=20)
    flush_disk_type: FlushDiskType = Field(FlushDiskType.ASYNC_FLUSH, alias="flushDiskType")
    flush_interval_commit_log: int = Field(500, alias="flushIntervalCommitLog", ge=1)
    flush_commit_log_least_pages: int = Field(4, alias="flushCommitLogLeastPages", ge=0)
    flush_commit_log_thorough_interval: int = Field(
        10000, alias="flushCommitLogThoroughInterval", ge=1
    )
    flush_interval_consume_queue: int = Field(1000, alias="flushIntervalConsumeQueue", ge=1)
    flush_consume_queue_least_pages: int = Field(2, alias="flushConsumeQueueLeastPages", ge=0)
    flush_consume_queue_thorough_interval: int = Field(
        60000, alias="flushConsumeQueueThoroughInterval", ge=1
    )
    sync_flush_timeout: int = Field(5000, alias="syncFlushTimeout", ge=1)
    max_message_size: int = Field(4194304, alias="maxMessageSize", ge=1)
    check_crc_on_recover: bool = Field(True, alias="checkCRCOnRecover")
    message_index_enable: bool = Field(True, alias="messageIndexEnable")
    #: rocketpy: build the index in a child process (``rocketpy.store.index.worker``, on
    #: another core) rather than on the broker's event loop. Off by default: on a host with a
    #: core to spare it takes the index off the loop (batches of 32: +30 % msg/s), but it
    #: costs more CPU in all (single sends on 2 cores shared with clients: -8 %) and a
    #: process (about 20 MB more anonymous memory).
    message_index_worker_enable: bool = Field(False, alias="messageIndexWorkerEnable")
    # Retention (CleanCommitLogService / CleanConsumeQueueService); ratios are percentages.
    file_reserved_time: int = Field(72, alias="fileReservedTime", ge=0)
    delete_when: str = Field("04", alias="deleteWhen")
    disk_max_used_space_ratio: int = Field(75, alias="diskMaxUsedSpaceRatio", ge=10, le=95)
    disk_space_warning_level_ratio: int = Field(90, alias="diskSpaceWarningLevelRatio", ge=35)
    disk_space_clean_forcibly_ratio: int = Field(85, alias="diskSpaceCleanForciblyRatio", ge=30)
    # Upstream defaults to true: over diskSpaceCleanForciblyRatio it deletes the oldest
    # segments whether or not they expired (acknowledged, unconsumed messages included). Here
    # an operator has to ask for that; writes are refused over diskSpaceWarningLevelRatio.
    clean_file_forcibly_enable: bool = Field(False, alias="cleanFileForciblyEnable")
    destroy_maped_file_interval_forcibly: int = Field(
        120000, alias="destroyMapedFileIntervalForcibly", ge=0
    )
    clean_resource_interval: int = Field(10000, alias="cleanResourceInterval", ge=1)
    delete_commit_log_files_interval: int = Field(100, alias="deleteCommitLogFilesInterval", ge=0)
    delete_consume_queue_files_interval: int = Field(
        100, alias="deleteConsumeQueueFilesInterval", ge=0
    )
    # 5.x timer messages (TimerMessageStore); the precision is rounded down to 100/200/500/1000.
    timer_wheel_enable: bool = Field(True, alias="timerWheelEnable")
    timer_max_delay_sec: int = Field(259200, alias="timerMaxDelaySec", ge=1)
    timer_precision_ms: int = Field(1000, alias="timerPrecisionMs", ge=1)
    timer_roll_window_slot: int = Field(172800, alias="timerRollWindowSlot")
    timer_flush_interval_ms: int = Field(1000, alias="timerFlushIntervalMs", ge=1)
    timer_progress_log_interval_ms: int = Field(10000, alias="timerProgressLogIntervalMs", ge=1)
    timer_stop_enqueue: bool = Field(False, alias="timerStopEnqueue")
    timer_stop_dequeue: bool = Field(False, alias="timerStopDequeue")
    timer_enable_retry_until_success: bool = Field(False, alias="timerEnableRetryUntilSuccess")
    timer_congest_num_each_slot: int = Field(2147483647, alias="timerCongestNumEachSlot", ge=0)
    mapped_file_size_timer_log: int = Field(104857600, alias="mappedFileSizeTimerLog", ge=4096)
    # DLedger CommitLog mode (dledger-commitlog.md section 4; checked by broker/dledger_config.py).
    enable_dleger_commit_log: bool = Field(False, alias="enableDLegerCommitLog")
    dleger_group: str | None = Field(None, alias="dLegerGroup")
    dleger_peers: str | None = Field(None, alias="dLegerPeers")
    dleger_self_id: str | None = Field(None, alias="dLegerSelfId")
    preferred_leader_id: str | None = Field(None, alias="preferredLeaderId")
    enable_batch_push: bool = Field(False, alias="enableBatchPush")
    store_path_dledger_commit_log: str | None = Field(None, alias="storePathDLedgerCommitLog")

    @field_validator("timer_precision_ms")
    @classmethod
    def _timer_precision(cls, value: int) -> int:
        # setTimerPrecisionMs: the largest of 100/200/500/1000 not above the value (100 below).
        return max([c for c in (100, 200, 500, 1000) if c <= value] or [100])

    @field_validator("delete_when")
    @classmethod
    def _delete_hours(cls, value: str) -> str:
        # UtilAll.isItTimeToDo: hours of the day separated by ';' ("04", "04;16").
        hours = [p.strip() for p in value.split(";")]
        if not all(h.isdigit() and 0 <= int(h) <= 23 for h in hours):
            raise ValueError("expected hours 00-23 separated by ';' (e.g. 04 or 04;16)")
        return value

    @property
    def root_dir(self) -> Path:
        """``storePathRootDir``."""
        return Path(self.store_path_root_dir)

    @property
    def commit_log_dir(self) -> Path:
        """``storePathCommitLog`` or its default under the root."""
        return Path(self.store_path_commit_log or self.root_dir / "commitlog")

    @property
    def epoch_file_path(self) -> Path:
        """``storePathEpochFile`` or ``<root>/epochFileCheckpoint`` (its copy: ``.bak``)."""
        return Path(self.store_path_epoch_file or self.root_dir / "epochFileCheckpoint")

    @property
    def broker_identity_path(self) -> Path:
        """``storePathBrokerIdentity`` or ``<root>/brokerIdentity``."""
        return Path(self.store_path_broker_identity or self.root_dir / "brokerIdentity")

    @property
    def consume_queue_dir(self) -> Path:
        """``<root>/consumequeue``."""
        return self.root_dir / "consumequeue"

    @property
    def checkpoint_path(self) -> Path:
        """``<root>/checkpoint``."""
        return self.root_dir / "checkpoint"

    @property
    def timer_log_dir(self) -> Path:
        """``<root>/timerlog`` (``TimerMessageStore.getTimerLogPath``)."""
        return self.root_dir / "timerlog"

    @property
    def timer_wheel_path(self) -> Path:
        """``<root>/timerwheel``."""
        return self.root_dir / "timerwheel"

    @property
    def timer_check_path(self) -> Path:
        """``<root>/config/timercheck`` (``BrokerPathConfigHelper.getTimerCheckPath``)."""
        return self.root_dir / "config" / "timercheck"

    @property
    def abort_path(self) -> Path:
        """``<root>/abort``: present while the store runs."""
        return self.root_dir / "abort"
