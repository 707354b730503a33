"""Broker settings: the ``BrokerConfig`` and ``NettyServerConfig`` keys of a broker config.

Owns: the broker's own keys with upstream names, defaults and validation (STYLE.md section 11);
:func:`parse_namesrv_addrs`. The store's keys (``storePathRootDir``, ``maxMessageSize``,
``flushDiskType``, ...) belong to ``rocketpy.store.config``'s MessageStoreConfig; upstream store
keys that only the broker uses (``brokerRole``, ``messageDelayLevel``, the index sizes) are here
until the store reads them. The same file feeds both (``cli/broker.py`` loads them side by side, as
``BrokerStartup`` does). Mirrors ``common/BrokerConfig`` and ``remoting/netty/NettyServerConfig``
of apache/rocketmq 5.3.x. Must not: read the environment (``cli/`` passes it in).

Deviations, on purpose:
* ``registerNameServerPeriod`` is not clamped to [10 s, 60 s] as upstream does, so tests can
  register quickly; the default is upstream's 30 s.
* Thread-pool sizes become concurrency caps of the request families (asyncio has no pools); the
  queue capacities bound how many requests of a family may wait before ``SYSTEM_BUSY``.
"""

from __future__ import annotations

import enum
import re
import socket
from collections.abc import Mapping
from typing import ClassVar

from pydantic import Field, field_validator, model_validator

from rocketpy.common.settings import RocketSettings


class BrokerRole(enum.StrEnum):
    """``brokerRole``."""

    ASYNC_MASTER = "ASYNC_MASTER"
    SYNC_MASTER = "SYNC_MASTER"
    SLAVE = "SLAVE"


class MetricsExporterType(enum.StrEnum):
    """``metricsExporterType`` (upstream ``MetricsExporterType``); only PROM is served here, the
    others are accepted and export nothing."""

    DISABLE = "DISABLE"
    OTLP_GRPC = "OTLP_GRPC"
    PROM = "PROM"
    LOG = "LOG"


DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"

#: ``PermName``: the broker's own permission bits (``brokerPermission``).
PERM_READ_WRITE = 6


def _default_broker_name() -> str:
    """``BrokerConfig.defaultBrokerName``: the host name, else ``DEFAULT_BROKER``."""
    try:
        return socket.gethostname() or "DEFAULT_BROKER"
    except OSError:
        return "DEFAULT_BROKER"


def _default_broker_ip() -> str:
    """``RemotingUtil.getLocalAddress``: the IPv4 address of the default route's interface (a UDP
    ``connect`` sends nothing), else loopback."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(("192.0.2.1", 9))  # TEST-NET-1: routing decision only
            address = str(probe.getsockname()[0])
    except OSError:
        return "127.0.0.1"
    return address if address and address != "0.0.0.0" else "127.0.0.1"


def parse_namesrv_addrs(value: str | None) -> list[str]:
    """``namesrvAddr`` split on ``;`` (upstream's separator), blanks dropped."""
    if not value:
        return []
    return [a.strip() for a in value.split(";") if a.strip()]


class BrokerConfig(RocketSettings):
    """The broker's keys (BrokerConfig + NettyServerConfig)."""

    _upstream_env: ClassVar[Mapping[str, str]] = {
        "ROCKETMQ_HOME": "rocketmqHome",
        "NAMESRV_ADDR": "namesrvAddr",
    }

    # -- identity and addresses
    rocketmq_home: str = Field("", alias="rocketmqHome")
    namesrv_addr: str | None = Field(None, alias="namesrvAddr")
    broker_ip1: str = Field(default_factory=_default_broker_ip, alias="brokerIP1")
    broker_ip2: str = Field("", alias="brokerIP2")
    broker_name: str = Field(default_factory=_default_broker_name, alias="brokerName")
    broker_cluster_name: str = Field("DefaultCluster", alias="brokerClusterName")
    #: -1 is accepted with ``enableControllerMode`` (upstream's quick-start configs use it: the
    #: controller assigns the id); otherwise >= 0.
    broker_id: int = Field(0, alias="brokerId", ge=-1)
    region_id: str = Field("DefaultRegion", alias="regionId")
    trace_on: bool = Field(True, alias="traceOn")
    broker_permission: int = Field(PERM_READ_WRITE, alias="brokerPermission", ge=0, le=7)

    # -- NettyServerConfig
    listen_port: int = Field(10911, alias="listenPort", ge=0, le=65535)
    bind_address: str = Field("0.0.0.0", alias="bindAddress")
    server_channel_max_idle_time_seconds: int = Field(
        120, alias="serverChannelMaxIdleTimeSeconds", ge=1
    )
    # Requests being processed per connection, suspended long-polling pulls included: a consumer
    # holds one per assigned queue (BenchmarkTest alone has 1,024), so the cap is a guard against
    # a flooding peer (~2 KiB each), not a throttle; sends are throttled by the request gate.
    max_inflight_per_connection: int = Field(8192, alias="serverMaxInflightPerConnection", ge=1)

    # -- topics and groups
    auto_create_topic_enable: bool = Field(True, alias="autoCreateTopicEnable")
    default_topic_queue_nums: int = Field(8, alias="defaultTopicQueueNums", ge=1)
    cluster_topic_enable: bool = Field(True, alias="clusterTopicEnable")
    broker_topic_enable: bool = Field(True, alias="brokerTopicEnable")
    auto_create_subscription_group: bool = Field(True, alias="autoCreateSubscriptionGroup")
    trace_topic_enable: bool = Field(False, alias="traceTopicEnable")
    msg_trace_topic_name: str = Field("RMQ_SYS_TRACE_TOPIC", alias="msgTraceTopicName")
    reject_transaction_message: bool = Field(False, alias="rejectTransactionMessage")
    enable_property_filter: bool = Field(False, alias="enablePropertyFilter")
    #: UPDATE_AND_CREATE_TOPIC may set ``message.type=MIXED`` only with this on (upstream).
    enable_mixed_message_type: bool = Field(False, alias="enableMixedMessageType")
    #: Refuse sends whose message type differs from the topic's ``message.type``. Upstream
    #: checks this in the proxy (``ProxyConfig``, default true); rocketpy's broker checks it
    #: itself when on (broker/message_type_check.py), so it is off by default here.
    enable_topic_message_type_check: bool = Field(False, alias="enableTopicMessageTypeCheck")

    # -- NameServer registration
    register_name_server_period_ms: int = Field(30_000, alias="registerNameServerPeriod", ge=50)
    register_broker_timeout_ms: int = Field(24_000, alias="registerBrokerTimeoutMills", ge=1)
    broker_not_active_timeout_ms: int = Field(10_000, alias="brokerNotActiveTimeoutMillis", ge=1)
    force_register: bool = Field(True, alias="forceRegister")
    enable_acting_master: bool = Field(False, alias="enableSlaveActingMaster")

    # -- request families (thread-pool sizes upstream; concurrency caps here)
    send_message_thread_pool_nums: int = Field(4, alias="sendMessageThreadPoolNums", ge=1)
    pull_message_thread_pool_nums: int = Field(32, alias="pullMessageThreadPoolNums", ge=1)
    query_message_thread_pool_nums: int = Field(16, alias="queryMessageThreadPoolNums", ge=1)
    admin_broker_thread_pool_nums: int = Field(16, alias="adminBrokerThreadPoolNums", ge=1)
    client_manage_thread_pool_nums: int = Field(32, alias="clientManageThreadPoolNums", ge=1)
    consumer_manage_thread_pool_nums: int = Field(32, alias="consumerManageThreadPoolNums", ge=1)
    send_thread_pool_queue_capacity: int = Field(10_000, alias="sendThreadPoolQueueCapacity", ge=0)
    pull_thread_pool_queue_capacity: int = Field(100_000, alias="pullThreadPoolQueueCapacity", ge=0)
    query_thread_pool_queue_capacity: int = Field(
        20_000, alias="queryThreadPoolQueueCapacity", ge=0
    )
    admin_broker_thread_pool_queue_capacity: int = Field(
        10_000, alias="adminBrokerThreadPoolQueueCapacity", ge=0
    )
    client_manager_thread_pool_queue_capacity: int = Field(
        1_000_000, alias="clientManagerThreadPoolQueueCapacity", ge=0
    )
    consumer_manager_thread_pool_queue_capacity: int = Field(
        1_000_000, alias="consumerManagerThreadPoolQueueCapacity", ge=0
    )
    broker_fast_failure_enable: bool = Field(True, alias="brokerFastFailureEnable")
    wait_time_mills_in_send_queue: int = Field(200, alias="waitTimeMillsInSendQueue", ge=0)
    wait_time_mills_in_pull_queue: int = Field(5_000, alias="waitTimeMillsInPullQueue", ge=0)
    start_accept_send_request_time_stamp: int = Field(
        0, alias="startAcceptSendRequestTimeStamp", ge=0
    )

    # -- consumption
    long_polling_enable: bool = Field(True, alias="longPollingEnable")
    short_polling_time_mills: int = Field(1_000, alias="shortPollingTimeMills", ge=1)
    long_polling_check_interval_ms: int = Field(5_000, alias="longPollingCheckInterval", ge=10)
    slave_read_enable: bool = Field(False, alias="slaveReadEnable")
    #: rocketpy key: how often a slave copies its master's metadata (``SlaveSynchronize``;
    #: upstream 5.x fixes it at 10 s); tests shorten it.
    slave_synchronize_interval_ms: int = Field(10_000, alias="slaveSynchronizeIntervalMs", ge=10)
    channel_expired_timeout_ms: int = Field(120_000, alias="channelExpiredTimeout", ge=1)
    client_scan_interval_ms: int = Field(10_000, alias="clientChannelScanInterval", ge=10)
    rebalance_lock_max_live_time_ms: int = Field(
        60_000, alias="rocketmq.broker.rebalance.lockMaxLiveTime", ge=1
    )
    flush_consumer_offset_interval_ms: int = Field(
        5_000, alias="flushConsumerOffsetInterval", ge=10
    )
    flush_delay_offset_interval_ms: int = Field(10_000, alias="flushDelayOffsetInterval", ge=10)
    schedule_scan_interval_ms: int = Field(100, alias="scheduleScanInterval", ge=1)
    use_server_side_reset_offset: bool = Field(True, alias="useServerSideResetOffset")

    # -- transactional messages (``rocketpy.broker.transaction``)
    transaction_timeout_ms: int = Field(6_000, alias="transactionTimeOut", ge=0)
    transaction_check_max: int = Field(15, alias="transactionCheckMax", ge=0)
    transaction_check_interval_ms: int = Field(30_000, alias="transactionCheckInterval", ge=10)
    end_transaction_thread_pool_nums: int = Field(16, alias="endTransactionThreadPoolNums", ge=1)
    end_transaction_pool_queue_capacity: int = Field(
        100_000, alias="endTransactionPoolQueueCapacity", ge=0
    )

    config_black_list: str = Field("configBlackList;brokerConfigPath", alias="configBlackList")
    notify_consumer_ids_changed_enable: bool = Field(True, alias="notifyConsumerIdsChangedEnable")

    # -- upstream MessageStoreConfig keys that rocketpy.store.config does not read (the broker
    #    uses them); they belong there once the store needs them
    broker_role: BrokerRole = Field(BrokerRole.ASYNC_MASTER, alias="brokerRole")
    message_delay_level: str = Field(DEFAULT_DELAY_LEVELS, alias="messageDelayLevel")
    max_hash_slot_num: int = Field(5_000_000, alias="maxHashSlotNum", ge=1)
    max_index_num: int = Field(20_000_000, alias="maxIndexNum", ge=2)
    max_msgs_num_batch: int = Field(64, alias="maxMsgsNumBatch", ge=1)
    default_query_max_num: int = Field(32, alias="defaultQueryMaxNum", ge=1)
    #: Percent of physical memory a pull may lag behind the CommitLog end and still count as
    #: served from the page cache; beyond it a master with ``slaveReadEnable`` suggests the slave.
    access_message_in_memory_max_ratio: int = Field(
        40, alias="accessMessageInMemoryMaxRatio", ge=0, le=100
    )

    # -- metrics: upstream's Prometheus exporter keys, plus rocketpy's metrics dumps
    metrics_exporter_type: MetricsExporterType = Field(
        MetricsExporterType.DISABLE, alias="metricsExporterType"
    )
    #: Blank: bind ``brokerIP1``, as upstream's BrokerMetricsManager does.
    metrics_prom_exporter_host: str = Field("", alias="metricsPromExporterHost")
    metrics_prom_exporter_port: int = Field(5557, alias="metricsPromExporterPort", ge=0, le=65535)
    #: One dump record per interval; 0 turns dumps off.
    metrics_dump_interval_ms: int = Field(10_000, alias="metricsDumpInterval", ge=0)
    #: Blank: ``<storePathRootDir>/metrics``.
    metrics_dump_dir: str = Field("", alias="metricsDumpDir")
    metrics_dump_file_max_bytes: int = Field(
        64 * 1024 * 1024, alias="metricsDumpFileMaxBytes", ge=1024
    )
    metrics_dump_file_max_count: int = Field(10, alias="metricsDumpFileMaxCount", ge=1)

    # -- request timeouts towards NameServers and clients
    notify_client_timeout_ms: int = Field(3_000, alias="notifyClientTimeoutMillis", ge=1)
    shutdown_timeout_ms: int = Field(30_000, alias="shutdownTimeoutMillis", ge=1)

    # -- controller mode (BrokerConfig, controller.md section 10); ``allAckInSyncStateSet`` and
    #    ``minInSyncReplicas`` are HA keys (``rocketpy.ha.config``), ``enableElectUncleanMaster``
    #    a controller key (``rocketpy.controller.config``)
    enable_controller_mode: bool = Field(False, alias="enableControllerMode")
    controller_addr: str = Field("", alias="controllerAddr")
    sync_broker_metadata_period_ms: int = Field(5_000, alias="syncBrokerMetadataPeriod", ge=10)
    check_sync_state_set_period_ms: int = Field(5_000, alias="checkSyncStateSetPeriod", ge=10)
    sync_controller_metadata_period_ms: int = Field(
        10_000, alias="syncControllerMetadataPeriod", ge=10
    )
    controller_heartbeat_timeout_ms: int = Field(
        10_000, alias="controllerHeartBeatTimeoutMills", ge=1
    )
    broker_election_priority: int = Field(2**31 - 1, alias="brokerElectionPriority")
    broker_heartbeat_interval_ms: int = Field(1_000, alias="brokerHeartbeatInterval", ge=10)

    # -- slave acting master (seed 003, ``rocketpy.broker.acting_master``);
    #    ``enableSlaveActingMaster`` and ``brokerNotActiveTimeoutMillis`` are registration keys
    enable_remote_escape: bool = Field(False, alias="enableRemoteEscape")
    send_heartbeat_timeout_ms: int = Field(1_000, alias="sendHeartbeatTimeoutMillis", ge=1)
    sync_broker_member_group_period_ms: int = Field(
        1_000, alias="syncBrokerMemberGroupPeriod", ge=10
    )
    skip_pre_online: bool = Field(False, alias="skipPreOnline")
    lock_in_strict_mode: bool = Field(False, alias="lockInStrictMode")
    consumer_offset_update_version_step: int = Field(
        500, alias="consumerOffsetUpdateVersionStep", ge=1
    )

    # -- POP consumption (``rocketpy.broker.pop_setup``); the revive service keeps due times
    #    itself, ``enablePopBufferMerge`` is not supported and must stay false
    revive_queue_num: int = Field(8, alias="reviveQueueNum", ge=1, le=998)
    revive_interval_ms: int = Field(1_000, alias="reviveInterval", ge=10)
    revive_max_slow_s: int = Field(3, alias="reviveMaxSlow", ge=0)
    pop_from_retry_probability: int = Field(20, alias="popFromRetryProbability", ge=0, le=100)
    pop_polling_size: int = Field(1024, alias="popPollingSize", ge=1)
    max_pop_polling_size: int = Field(100_000, alias="maxPopPollingSize", ge=1)
    init_pop_offset_by_check_msg_in_mem: bool = Field(True, alias="initPopOffsetByCheckMsgInMem")
    enable_pop_buffer_merge: bool = Field(False, alias="enablePopBufferMerge")
    enable_retry_topic_v2: bool = Field(False, alias="enableRetryTopicV2")
    pop_response_return_actual_retry_topic: bool = Field(
        False, alias="popResponseReturnActualRetryTopic"
    )

    @field_validator("enable_pop_buffer_merge")
    @classmethod
    def _no_buffer_merge(cls, value: bool) -> bool:
        if value:
            raise ValueError("PopBufferMergeService is not supported; set it to false")
        return value

    @field_validator("broker_name", "broker_cluster_name")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value

    @field_validator("message_delay_level")
    @classmethod
    def _levels(cls, value: str) -> str:
        if not re.fullmatch(r"\s*([0-9]+[smhd]\s+)*[0-9]+[smhd]\s*", value):
            raise ValueError("expected space-separated <number><s|m|h|d> levels")
        return value

    @field_validator("namesrv_addr")
    @classmethod
    def _addresses(cls, value: str | None) -> str | None:
        for addr in parse_namesrv_addrs(value):
            host, sep, port = addr.rpartition(":")
            if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ValueError(f"expected host:port[;host:port...], bad entry {addr!r}")
        return value

    @field_validator("controller_addr")
    @classmethod
    def _controller_addresses(cls, value: str) -> str:
        return cls._addresses(value) or ""

    @model_validator(mode="after")
    def _broker_id_in_mode(self) -> BrokerConfig:
        if self.broker_id < 0 and not self.enable_controller_mode:
            raise ValueError("brokerId must be >= 0 unless enableControllerMode=true")
        return self

    @property
    def namesrv_addr_list(self) -> list[str]:
        """The NameServer addresses, in configured order."""
        return parse_namesrv_addrs(self.namesrv_addr)

    @property
    def controller_addr_list(self) -> list[str]:
        """The controller addresses (``controllerAddr``, ``;``-separated), in configured order."""
        return parse_namesrv_addrs(self.controller_addr)
