"""Proxy settings with upstream's ``rmq-proxy.json`` keys (``ProxyConfig``).

Owns: every key ``mqproxy -pc`` accepts, its default (upstream ``ProxyConfig``; proxy.md section
4) and validation. ``rmq-proxy.json`` is a JSON object keyed by ``ProxyConfig`` field names;
:func:`json_to_properties` turns it into the ``.properties`` text :class:`RocketSettings` reads,
so precedence stays command line > environment > file > defaults. Must not: read files or the
environment itself (``cli/proxy.py`` does).

Only keys rocketpy acts on are accepted (an unknown key is refused at start-up, as for the other
daemons). ``bindAddress`` is rocketpy's (upstream binds the gRPC port on every interface).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import ClassVar, Final, Literal

from pydantic import Field

from rocketpy.common.errors import ConfigError
from rocketpy.common.properties import render_properties
from rocketpy.common.settings import RocketSettings

DEFAULT_CLUSTER_NAME: Final = "DefaultCluster"
MIB: Final = 1024 * 1024


class ProxyConfig(RocketSettings):
    """Effective proxy configuration."""

    _upstream_env: ClassVar[Mapping[str, str]] = {
        "NAMESRV_ADDR": "namesrvAddr",
        "ROCKETMQ_HOME": "rocketmqHome",
    }

    rocketmq_home: str = Field("", alias="rocketmqHome")
    rocketmq_cluster_name: str = Field(DEFAULT_CLUSTER_NAME, alias="rocketMQClusterName")
    proxy_cluster_name: str = Field(DEFAULT_CLUSTER_NAME, alias="proxyClusterName")
    proxy_name: str = Field("DEFAULT_PROXY", alias="proxyName")
    namesrv_addr: str = Field("", alias="namesrvAddr")
    #: ``cluster`` (``mqproxy``) or ``local`` (only inside ``mqbroker --enable-proxy``).
    proxy_mode: Literal["cluster", "CLUSTER", "local", "LOCAL"] = Field(
        "cluster", alias="proxyMode"
    )
    bind_address: str = Field("0.0.0.0", alias="bindAddress")
    grpc_server_port: int = Field(8081, alias="grpcServerPort", ge=0, le=65535)
    #: The remoting front door is not served yet; the key is accepted so upstream files load.
    remoting_listen_port: int = Field(8080, alias="remotingListenPort", ge=0, le=65535)
    grpc_shutdown_time_s: int = Field(30, alias="grpcShutdownTimeSeconds", ge=0)
    grpc_max_inbound_message_size_bytes: int = Field(
        130 * MIB, alias="grpcMaxInboundMessageSize", ge=1024
    )
    max_message_size_bytes: int = Field(4 * MIB, alias="maxMessageSize", ge=0)
    enable_message_body_empty_check: bool = Field(True, alias="enableMessageBodyEmptyCheck")
    max_user_property_size_bytes: int = Field(16 * 1024, alias="maxUserPropertySize", ge=0)
    user_property_max_num: int = Field(128, alias="userPropertyMaxNum", ge=0)
    max_message_group_size_bytes: int = Field(64, alias="maxMessageGroupSize", ge=0)
    max_delay_time_ms: int = Field(24 * 3600 * 1000, alias="maxDelayTimeMills", ge=0)
    enable_topic_message_type_check: bool = Field(True, alias="enableTopicMessageTypeCheck")
    grpc_client_producer_max_attempts: int = Field(3, alias="grpcClientProducerMaxAttempts", ge=1)
    grpc_client_producer_backoff_initial_ms: int = Field(
        10, alias="grpcClientProducerBackoffInitialMillis", ge=0
    )
    grpc_client_producer_backoff_max_ms: int = Field(
        1000, alias="grpcClientProducerBackoffMaxMillis", ge=0
    )
    grpc_client_producer_backoff_multiplier: int = Field(
        2, alias="grpcClientProducerBackoffMultiplier", ge=1
    )
    grpc_client_idle_time_ms: int = Field(120_000, alias="grpcClientIdleTimeMills", ge=1000)
    use_endpoint_port_from_request: bool = Field(False, alias="useEndpointPortFromRequest")
    topic_route_service_cache_refresh_s: int = Field(
        20, alias="topicRouteServiceCacheRefreshSeconds", ge=0
    )
    topic_config_cache_refresh_s: int = Field(20, alias="topicConfigCacheRefreshSeconds", ge=0)
    #: Budget of one request to a NameServer or broker (rocketpy's; upstream uses the client's
    #: deadline minus a reserve).
    proxy_request_timeout_ms: int = Field(3000, alias="proxyRequestTimeoutMillis", ge=10)
    # -- consumption (ReceiveMessage, Ack, ChangeInvisibleDuration; rocketpy/proxy/consume.py) --
    grpc_client_consumer_min_long_polling_timeout_ms: int = Field(
        5000, alias="grpcClientConsumerMinLongPollingTimeoutMillis", ge=0
    )
    grpc_client_consumer_max_long_polling_timeout_ms: int = Field(
        20_000, alias="grpcClientConsumerMaxLongPollingTimeoutMillis", ge=0
    )
    min_invisible_time_ms_for_recv: int = Field(10_000, alias="minInvisibleTimeMillsForRecv", ge=0)
    max_invisible_time_ms: int = Field(12 * 3600 * 1000, alias="maxInvisibleTimeMills", ge=0)
    enable_proxy_auto_renew: bool = Field(True, alias="enableProxyAutoRenew")
    renew_slice_time_ms: int = Field(60_000, alias="renewSliceTimeMillis", ge=1000)
    renew_ahead_time_ms: int = Field(10_000, alias="renewAheadTimeMillis", ge=0)
    renew_max_time_ms: int = Field(3 * 3600 * 1000, alias="renewMaxTimeMillis", ge=0)
    renew_schedule_period_ms: int = Field(5000, alias="renewSchedulePeriodMillis", ge=100)
    # -- metrics (rocketpy/proxy/metrics.py): upstream's exporter keys, plus the metrics dumps --
    #: Only PROM is served; DISABLE, OTLP_GRPC and LOG export nothing.
    metrics_exporter_type: Literal["DISABLE", "OTLP_GRPC", "PROM", "LOG"] = Field(
        "DISABLE", alias="metricsExporterType"
    )
    #: Blank: ``bindAddress``.
    metrics_prom_exporter_host: str = Field("", alias="metricsPromExporterHost")
    metrics_prom_exporter_port: int = Field(5557, alias="metricsPromExporterPort", ge=0, le=65535)
    #: 0 turns the dumps off.
    metrics_dump_interval_ms: int = Field(10_000, alias="metricsDumpInterval", ge=0)
    #: Blank: ``<log dir>/metrics`` (``ROCKETPY_LOG_DIR`` or ``~/logs/rocketmqlogs``).
    metrics_dump_dir: str = Field("", alias="metricsDumpDir")
    metrics_dump_file_max_bytes: int = Field(64 * MIB, alias="metricsDumpFileMaxBytes", ge=1024)
    metrics_dump_file_max_count: int = Field(10, alias="metricsDumpFileMaxCount", ge=1)


def json_to_properties(text: str, source: str = "rmq-proxy.json") -> str:
    """``rmq-proxy.json`` as ``key=value`` lines (booleans as ``true``/``false``).

    Raises:
        ConfigError: not a JSON object, or a value that is an object or a list.
    """
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError(source, text[:40], f"not JSON: {e}") from e
    if not isinstance(obj, dict):
        raise ConfigError(source, type(obj).__name__, "must be a JSON object")
    values: dict[str, str] = {}
    for key, value in obj.items():
        if isinstance(value, dict | list):
            raise ConfigError(str(key), value, "must be a string, number or boolean")
        if isinstance(value, bool):
            text_value = "true" if value else "false"
        elif value is None:
            text_value = ""
        else:
            text_value = str(value)
        values[str(key)] = text_value
    return render_properties(values)
