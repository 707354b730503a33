"""JSON bodies the NameServer reads and writes, byte-compatible with fastjson.

Owns: the body shapes of namesrv.md sections 3, 6 and 7 and codes.md section 5 -- TopicRouteData in
both encodings (fastjson's default form with unquoted integer keys for clients older than 4.9.4,
and the "standard" form: quoted, sorted keys, ``\\uXXXX`` for non-ASCII and ``\\/``), ClusterInfo,
TopicList, KVTable, the broker member group, and RegisterBrokerBody in its JSON and its
deflate-compressed binary form. Pure.
"""

from __future__ import annotations

import re
import struct
import zlib
from collections.abc import Mapping
from typing import Any, Final

import orjson

from rocketpy.common import fastjson
from rocketpy.common.errors import CodecError
from rocketpy.common.fastjson import Bean
from rocketpy.namesrv.route_info import BrokerData, QueueData, TopicRouteData
from rocketpy.remoting.protocol.body.config_shapes import (
    DataVersion,
    TopicConfig,
    TopicConfigSerializeWrapper,
)
from rocketpy.remoting.protocol.frame import DEFAULT_MAX_FRAME_BYTES

_I32: Final = struct.Struct(">i")
_NON_ASCII: Final = re.compile(r"[^\x00-\x7f]")
#: MQVersion ordinals (remoting.md section 6).
V3_0_11: Final = 37
V4_9_4: Final = 401
V5_0_0: Final = 413

#: A compressed REGISTER_BROKER body may inflate to at most the frame limit (16 MiB): what an
#: uncompressed body could carry.
MAX_INFLATED_BYTES: Final = DEFAULT_MAX_FRAME_BYTES


def _queue_bean(q: QueueData) -> Bean:
    return Bean(
        brokerName=q.broker_name,
        perm=q.perm,
        readQueueNums=q.read_queue_nums,
        topicSysFlag=q.topic_sys_flag,
        writeQueueNums=q.write_queue_nums,
    )


def _broker_bean(d: BrokerData) -> Bean:
    return Bean(
        brokerAddrs=dict(sorted(d.broker_addrs.items())),
        brokerName=d.broker_name,
        cluster=d.cluster,
        enableActingMaster=d.enable_acting_master,
        zoneName=d.zone_name,
    )


def _route_bean(route: TopicRouteData) -> Bean:
    return Bean(
        brokerDatas=[_broker_bean(d) for d in route.broker_datas],
        filterServerTable={k: list(v) for k, v in route.filter_server_table.items()},
        orderTopicConf=route.order_topic_conf,
        queueDatas=[_queue_bean(q) for q in route.queue_datas],
    )


def encode_topic_route(route: TopicRouteData, *, standard: bool) -> bytes:
    """TopicRouteData as Java's NameServer answers: standard JSON for clients >= 4.9.4 or that
    ask for it, fastjson's default (unquoted integer keys) otherwise (namesrv.md section 5 step 6).
    """
    bean = _route_bean(route)
    return (encode_standard(bean) if standard else fastjson.dumps(bean)).encode()


def encode_standard(value: Any) -> str:
    """fastjson with BrowserCompatible + QuoteFieldNames + MapSortField: quoted, sorted keys,
    ``\\uXXXX`` (upper-case hex) for non-ASCII and ``\\/`` for ``/``."""
    text = orjson.dumps(_standard_value(value)).decode()
    if not text.isascii():
        text = _NON_ASCII.sub(lambda m: f"\\u{ord(m.group(0)):04X}", text)
    return text.replace("/", "\\/")


def _standard_value(value: Any) -> Any:
    if isinstance(value, dict):
        items = [(k, v) for k, v in value.items() if not (isinstance(value, Bean) and v is None)]
        items.sort(key=lambda kv: (0, kv[0], "") if isinstance(kv[0], int) else (1, 0, kv[0]))
        return {str(k): _standard_value(v) for k, v in items}
    if isinstance(value, list | tuple):
        return [_standard_value(v) for v in value]
    return value


def encode_cluster_info(
    brokers: Mapping[str, BrokerData], clusters: Mapping[str, set[str]]
) -> bytes:
    """ClusterInfo (GET_BROKER_CLUSTER_INFO), fastjson default form."""
    bean = Bean(
        brokerAddrTable={name: _broker_bean(d) for name, d in brokers.items()},
        clusterAddrTable={c: sorted(names) for c, names in clusters.items()},
    )
    return fastjson.dumps(bean).encode()


def encode_topic_list(topics: list[str], broker_addr: str | None = None) -> bytes:
    """TopicList: ``{"brokerAddr":...,"topicList":[...]}``."""
    return fastjson.dumps(Bean(brokerAddr=broker_addr, topicList=list(topics))).encode()


def encode_kv_table(table: Mapping[str, str]) -> bytes:
    """KVTable: ``{"table":{...}}``."""
    return fastjson.dumps(Bean(table=dict(table))).encode()


def encode_member_group(cluster: str, broker_name: str, addrs: Mapping[int, str]) -> bytes:
    """GetBrokerMemberGroupResponseBody."""
    group = Bean(brokerAddrs=dict(sorted(addrs.items())), brokerName=broker_name, cluster=cluster)
    return fastjson.dumps(Bean(brokerMemberGroup=group)).encode()


def decode_queue_datas(body: bytes) -> list[QueueData]:
    """The ``queueDatas`` of a TopicRouteData body (REGISTER_TOPIC_IN_NAMESRV).

    Raises:
        CodecError: not a TopicRouteData object.
    """
    obj = fastjson.loads(body)
    if not isinstance(obj, dict) or not isinstance(obj.get("queueDatas", []), list):
        raise CodecError("body is not a TopicRouteData", field="queueDatas")
    out = []
    for q in obj.get("queueDatas", []):
        if not isinstance(q, dict) or not isinstance(q.get("brokerName"), str):
            raise CodecError("queueData without brokerName", field="queueDatas")
        try:
            out.append(
                QueueData(
                    broker_name=q["brokerName"],
                    read_queue_nums=int(q.get("readQueueNums", 0)),
                    write_queue_nums=int(q.get("writeQueueNums", 0)),
                    perm=int(q.get("perm", 6)),
                    topic_sys_flag=int(q.get("topicSysFlag", q.get("topicSynFlag")) or 0),
                )
            )
        except (TypeError, ValueError) as e:
            raise CodecError(f"bad queueData {q!r}", field="queueDatas") from e
    return out


def decode_register_body(
    body: bytes | None, *, compressed: bool, version: int
) -> tuple[TopicConfigSerializeWrapper, tuple[str, ...]]:
    """A RegisterBrokerBody: the topic config wrapper and the filter-server list.

    Raises:
        CodecError: the body does not decode in the form the header announced.
    """
    if not body:
        return (
            TopicConfigSerializeWrapper(
                topic_config_table={}, data_version=DataVersion(timestamp=0)
            ),
            (),
        )
    if compressed:
        return _decode_compressed(body, version)
    obj = fastjson.loads(body)
    if not isinstance(obj, dict):
        raise CodecError("register body is not a JSON object", field="body")
    if version < V3_0_11:
        return TopicConfigSerializeWrapper.from_json_value(obj), ()
    wrapper = TopicConfigSerializeWrapper.from_json_value(
        obj.get("topicConfigSerializeWrapper", {})
    )
    filters = obj.get("filterServerList") or []
    return wrapper, tuple(str(f) for f in filters)


def _decode_compressed(
    body: bytes, version: int
) -> tuple[TopicConfigSerializeWrapper, tuple[str, ...]]:
    inflater = zlib.decompressobj()
    try:
        raw = inflater.decompress(body, MAX_INFLATED_BYTES + 1)
    except zlib.error as e:
        raise CodecError(f"compressed register body: {e}", field="body") from e
    if len(raw) > MAX_INFLATED_BYTES or inflater.unconsumed_tail:
        # A few hundred KB of zeros inflate to gigabytes: refused before they are produced.
        raise CodecError(
            f"compressed register body inflates beyond {MAX_INFLATED_BYTES} bytes "
            "(the frame limit)",
            field="body",
        )
    pos = 0

    def chunk() -> bytes:
        nonlocal pos
        if pos + 4 > len(raw):
            raise CodecError("truncated compressed register body", field="body", offset=pos)
        (n,) = _I32.unpack_from(raw, pos)
        if n < 0 or pos + 4 + n > len(raw):
            raise CodecError("bad length in compressed register body", field="body", offset=pos)
        pos += 4 + n
        return raw[pos - n : pos]

    version_obj = DataVersion.from_json_value(fastjson.loads(chunk()))
    if pos + 4 > len(raw):
        raise CodecError("truncated topic count", field="body", offset=pos)
    (count,) = _I32.unpack_from(raw, pos)
    pos += 4
    topics: dict[str, TopicConfig] = {}
    for _ in range(max(0, count)):
        cfg = TopicConfig.decode_text(chunk().decode())
        topics[cfg.topic_name] = cfg
    filters = fastjson.loads(chunk())
    # The topic-queue-mapping section (version >= 5.0.0) is for static topics: read past it.
    del version
    wrapper = TopicConfigSerializeWrapper(topic_config_table=topics, data_version=version_obj)
    return wrapper, tuple(str(f) for f in filters or [])


def encode_compressed_register_body(
    wrapper: TopicConfigSerializeWrapper, filters: list[str], *, version: int
) -> bytes:
    """The ``compressed=true`` RegisterBrokerBody (BrokerOuterAPI with ``compressedRegister``)."""
    parts: list[bytes] = []

    def put(data: bytes) -> None:
        parts.append(_I32.pack(len(data)))
        parts.append(data)

    put(fastjson.dumps(wrapper.data_version.to_json_value()).encode())
    parts.append(_I32.pack(len(wrapper.topic_config_table)))
    for cfg in wrapper.topic_config_table.values():
        put(cfg.encode_text().encode())
    put(fastjson.dumps(list(filters)).encode())
    if version >= V5_0_0:
        parts.append(_I32.pack(0))
    return zlib.compress(b"".join(parts), 9)


def encode_register_body(wrapper: TopicConfigSerializeWrapper, filters: list[str]) -> bytes:
    """The JSON RegisterBrokerBody."""
    bean = Bean(filterServerList=list(filters), topicConfigSerializeWrapper=wrapper.to_json_value())
    return fastjson.dumps(bean).encode()
