"""Settings answers and the client registry (``GrpcClientSettingsManager``), and the config file."""

from __future__ import annotations

import pytest

from rocketpy.common.errors import ConfigError
from rocketpy.proxy.client_settings import ClientRegistry, answer
from rocketpy.proxy.config import ProxyConfig, json_to_properties
from rocketpy.proxy.pb import definition_pb2 as pb

CONFIG = ProxyConfig()


def test_producer_settings_get_the_proxy_limits_and_backoff() -> None:
    sent = pb.Settings(
        client_type=pb.ClientType.PRODUCER,
        publishing=pb.Publishing(topics=[pb.Resource(name="T")], max_body_size=128 << 20),
        request_timeout={"seconds": 3},
    )
    got = answer(sent, CONFIG)
    assert got.publishing.max_body_size == 4 * 1024 * 1024
    assert got.publishing.validate_message_type is True
    assert [t.name for t in got.publishing.topics] == ["T"]
    policy = got.backoff_policy
    assert policy.max_attempts == 3
    assert policy.exponential_backoff.initial.ToMilliseconds() == 10
    assert policy.exponential_backoff.max.ToMilliseconds() == 1000
    assert policy.exponential_backoff.multiplier == 2
    assert got.HasField("metric")
    assert got.metric.on is False
    assert got.request_timeout.seconds == 3


def test_consumer_settings_get_group_defaults() -> None:
    registry = ClientRegistry(idle_s=120)
    sent = pb.Settings(
        client_type=pb.ClientType.SIMPLE_CONSUMER,
        subscription=pb.Subscription(group=pb.Resource(name="G")),
    )
    got = answer(registry.update("c1", sent, now=0).settings, CONFIG)
    assert got.subscription.group.name == "G"
    assert got.subscription.receive_batch_size == 32
    assert got.subscription.long_polling_timeout.seconds == 20
    assert got.subscription.fifo is False
    assert got.backoff_policy.max_attempts == 17
    assert [d.ToMilliseconds() for d in got.backoff_policy.customized_backoff.next][:3] == [
        1000, 5000, 10000,
    ]  # fmt: skip


def test_registry_touch_remove_and_expiry() -> None:
    registry = ClientRegistry(idle_s=10)
    settings = pb.Settings(publishing=pb.Publishing())
    registry.update("a", settings, now=0)
    registry.update("b", settings, now=0)
    assert registry.touch("a", now=8) is not None
    assert registry.touch("zz", now=8) is None
    assert registry.expire(now=11) == ["b"]
    assert registry.remove("a") is not None
    assert registry.remove("a") is None
    assert len(registry) == 0


def test_rmq_proxy_json_loads_with_upstream_keys() -> None:
    text = json_to_properties(
        '{"rocketMQClusterName": "C1", "grpcServerPort": 0, "enableTopicMessageTypeCheck": false,'
        ' "namesrvAddr": "a:9876;b:9876"}'
    )
    config, unknown = ProxyConfig.load(file_text=text, env={"NAMESRV_ADDR": "env:1"})
    assert unknown == []
    assert config.rocketmq_cluster_name == "C1"
    assert config.grpc_server_port == 0
    assert config.enable_topic_message_type_check is False
    # NAMESRV_ADDR only fills namesrvAddr when neither -n nor the file set it.
    assert config.namesrv_addr == "a:9876;b:9876"


def test_rmq_proxy_json_refuses_non_objects() -> None:
    with pytest.raises(ConfigError):
        json_to_properties("[1, 2]")
    with pytest.raises(ConfigError):
        json_to_properties('{"grpcServerPort": {"nested": 1}}')
    with pytest.raises(ConfigError):
        json_to_properties("{not json")
