"""NameServer settings with upstream's keys (``NamesrvConfig`` + ``NettyServerConfig``).

Owns: every key ``mqnamesrv -c`` accepts, its default (namesrv.md section 8) and validation.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

from pydantic import Field

from rocketpy.common.settings import RocketSettings

_HOME = Path.home()


class NamesrvConfig(RocketSettings):
    """Effective NameServer configuration."""

    _upstream_env: ClassVar[Mapping[str, str]] = {"ROCKETMQ_HOME": "rocketmqHome"}

    rocketmq_home: str = Field("", alias="rocketmqHome")
    kv_config_path: str = Field(str(_HOME / "namesrv" / "kvConfig.json"), alias="kvConfigPath")
    config_store_path: str = Field(
        str(_HOME / "namesrv" / "namesrv.properties"), alias="configStorePath"
    )
    product_env_name: str = Field("center", alias="productEnvName")
    cluster_test: bool = Field(False, alias="clusterTest")
    order_message_enable: bool = Field(False, alias="orderMessageEnable")
    return_order_topic_config_to_broker: bool = Field(True, alias="returnOrderTopicConfigToBroker")
    scan_not_active_broker_interval_ms: int = Field(
        5000, alias="scanNotActiveBrokerInterval", ge=10
    )
    un_register_broker_queue_capacity: int = Field(
        3000, alias="unRegisterBrokerQueueCapacity", ge=1
    )
    support_acting_master: bool = Field(False, alias="supportActingMaster")
    enable_all_topic_list: bool = Field(True, alias="enableAllTopicList")
    enable_topic_list: bool = Field(True, alias="enableTopicList")
    notify_min_broker_id_changed: bool = Field(False, alias="notifyMinBrokerIdChanged")
    enable_controller_in_namesrv: bool = Field(False, alias="enableControllerInNamesrv")
    need_wait_for_service: bool = Field(False, alias="needWaitForService")
    wait_seconds_for_service: int = Field(45, alias="waitSecondsForService", ge=0)
    delete_topic_with_broker_registration: bool = Field(
        False, alias="deleteTopicWithBrokerRegistration"
    )
    config_black_list: str = Field(
        "configBlackList;configStorePath;kvConfigPath", alias="configBlackList"
    )
    bind_address: str = Field("0.0.0.0", alias="bindAddress")
    listen_port: int = Field(9876, alias="listenPort", ge=0, le=65535)
    server_channel_max_idle_time_seconds: int = Field(
        120, alias="serverChannelMaxIdleTimeSeconds", ge=0
    )
    server_frame_max_length: int = Field(
        16 * 1024 * 1024, alias="serverFrameMaxLength", ge=1024, le=1 << 30
    )

    def black_list(self) -> set[str]:
        """Keys UPDATE_NAMESRV_CONFIG refuses (always including ``rocketmqHome``)."""
        keys = {k.strip() for k in self.config_black_list.split(";") if k.strip()}
        return keys | {"configBlackList", "configStorePath", "kvConfigPath", "rocketmqHome"}
