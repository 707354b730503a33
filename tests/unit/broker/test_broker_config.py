"""BrokerConfig: upstream keys, defaults, NameServer address sources and validation."""

from __future__ import annotations

import pytest

from rocketpy.broker.config import BrokerConfig, parse_namesrv_addrs
from rocketpy.common.errors import ConfigError


def test_broker_config_defaults_are_upstream() -> None:
    """1. Build with no values. Expected: upstream defaults (port 10911, 8 default queues,
    auto-create on, 30 s registration, long polling on, 120 s channel expiry)."""
    cfg = BrokerConfig.build({})
    assert cfg.listen_port == 10911
    assert cfg.default_topic_queue_nums == 8
    assert cfg.auto_create_topic_enable is True
    assert cfg.register_name_server_period_ms == 30_000
    assert cfg.long_polling_enable is True
    assert cfg.short_polling_time_mills == 1000
    assert cfg.channel_expired_timeout_ms == 120_000
    assert cfg.broker_cluster_name == "DefaultCluster"
    assert cfg.namesrv_addr_list == []


def test_broker_config_namesrv_from_env_file_and_command_line() -> None:
    """1. NAMESRV_ADDR in the environment. 2. namesrvAddr in the file. 3. -n on the command line.
    Expected: the command line wins over the file, the file over NAMESRV_ADDR; the value splits
    on ';'."""
    env = {"NAMESRV_ADDR": "10.0.0.1:9876"}
    cfg, _ = BrokerConfig.load(env=env)
    assert cfg.namesrv_addr_list == ["10.0.0.1:9876"]
    cfg, _ = BrokerConfig.load(file_text="namesrvAddr=10.0.0.2:9876;10.0.0.3:9876\n", env=env)
    assert cfg.namesrv_addr_list == ["10.0.0.2:9876", "10.0.0.3:9876"]
    cfg, unknown = BrokerConfig.load(
        file_text="namesrvAddr=10.0.0.2:9876\nbogusKey=1\n",
        env=env,
        overrides={"namesrvAddr": "127.0.0.1:9876"},
    )
    assert cfg.namesrv_addr_list == ["127.0.0.1:9876"]
    assert unknown == ["bogusKey"]


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("namesrvAddr", "127.0.0.1"),
        ("namesrvAddr", "127.0.0.1:99999"),
        ("listenPort", "-1"),
        ("brokerName", " "),
        ("defaultTopicQueueNums", "0"),
    ],
)
def test_broker_config_bad_values_name_the_key(key: str, value: str) -> None:
    """A bad value raises ConfigError naming the upstream key."""
    with pytest.raises(ConfigError) as info:
        BrokerConfig.load(file_text=f"{key}={value}\n")
    assert info.value.key == key


def test_broker_config_listen_port_zero_and_properties() -> None:
    """listenPort=0 is allowed (tests bind an ephemeral port); -p renders upstream keys."""
    cfg = BrokerConfig.build({"listenPort": 0, "brokerName": "broker-a", "brokerIP1": "127.0.0.1"})
    props = cfg.to_properties()
    assert props["listenPort"] == "0"
    assert props["brokerName"] == "broker-a"
    assert props["autoCreateTopicEnable"] == "true"


def test_broker_config_parse_namesrv_addrs_drops_blanks() -> None:
    """';'-separated with spaces and empty entries."""
    assert parse_namesrv_addrs(" a:1 ; ;b:2;") == ["a:1", "b:2"]
    assert parse_namesrv_addrs(None) == []
