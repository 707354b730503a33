"""Register fake brokers with a NameServer exactly as a Java broker's BrokerOuterAPI does."""

from __future__ import annotations

import zlib

from rocketpy.common.codes import RequestCode
from rocketpy.common.fastjson import Bean, dumps
from rocketpy.remoting.protocol.body.config_shapes import (
    DataVersion,
    TopicConfig,
    TopicConfigSerializeWrapper,
)
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.transport.client import RemotingClient


def register_body(topics: list[str], counter: int = 1, state_version: int = 0) -> bytes:
    """A JSON RegisterBrokerBody with 4 read/write queues per topic."""
    wrapper = TopicConfigSerializeWrapper(
        topic_config_table={t: TopicConfig(topic_name=t) for t in topics},
        data_version=DataVersion(timestamp=1, counter=counter, state_version=state_version),
    )
    bean = Bean(filterServerList=[], topicConfigSerializeWrapper=wrapper.to_json_value())
    return dumps(bean).encode()


async def register_broker(
    client: RemotingClient,
    namesrv: str,
    *,
    broker_name: str = "broker-a",
    broker_id: int = 0,
    addr: str = "127.0.0.1:10911",
    cluster: str = "DefaultCluster",
    topics: list[str] | None = None,
    heartbeat_timeout_ms: int | None = None,
    enable_acting_master: bool = False,
) -> RemotingCommand:
    """Send REGISTER_BROKER over ``client``'s connection to ``namesrv``."""
    body = register_body(topics if topics is not None else ["TopicTest", "TBW102"])
    host, port = addr.rsplit(":", 1)
    ext = {
        "brokerName": broker_name,
        "brokerAddr": addr,
        "clusterName": cluster,
        "haServerAddr": f"{host}:{int(port) + 1}",
        "brokerId": str(broker_id),
        "compressed": "false",
        "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF),
        "enableActingMaster": "true" if enable_acting_master else "false",
    }
    if heartbeat_timeout_ms is not None:
        ext["heartbeatTimeoutMillis"] = str(heartbeat_timeout_ms)
    request = RemotingCommand.request(RequestCode.REGISTER_BROKER, ext, body)
    return await client.invoke(namesrv, request, 5)
