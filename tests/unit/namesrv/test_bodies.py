"""Body encodings byte-exact against namesrv.md section 6, and RegisterBrokerBody round trips."""

from __future__ import annotations

import pytest

from rocketpy.common.errors import CodecError
from rocketpy.namesrv import bodies
from rocketpy.namesrv.route_info import BrokerData, QueueData, TopicRouteData
from rocketpy.remoting.protocol.body.config_shapes import (
    DataVersion,
    TopicConfig,
    TopicConfigSerializeWrapper,
)

ROUTE = TopicRouteData(
    queue_datas=(QueueData("broker-a", 4, 4, 6, 0),),
    broker_datas=(
        BrokerData("DefaultCluster", "broker-a", {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"}),
    ),
    filter_server_table={},
)
OLD_FORM = (
    b'{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"},'
    b'"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false}],'
    b'"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,'
    b'"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}'
)


def test_bodies_route_old_form_matches_spec() -> None:
    """Section 6 example, old form (clients older than 4.9.4)."""
    assert bodies.encode_topic_route(ROUTE, standard=False) == OLD_FORM


def test_bodies_route_standard_form_matches_spec() -> None:
    """Section 6 example, standard form: identical but quoted integer keys."""
    expected = OLD_FORM.replace(b"{0:", b'{"0":').replace(b",1:", b',"1":')
    assert bodies.encode_topic_route(ROUTE, standard=True) == expected


def test_bodies_standard_form_escapes_and_sorts() -> None:
    """Standard form: non-ASCII as upper-case \\uXXXX, '/' as \\/, long keys sorted numerically."""
    route = TopicRouteData(
        queue_datas=(QueueData("b/é", 1, 1, 6),),
        broker_datas=(BrokerData("C", "b/é", {10: "x", 2: "y"}),),
        filter_server_table={},
    )
    text = bodies.encode_topic_route(route, standard=True)
    assert b'"b\\/\\u00E9"' in text
    assert b'{"2":"y","10":"x"}' in text


def _wrapper() -> TopicConfigSerializeWrapper:
    return TopicConfigSerializeWrapper(
        topic_config_table={
            "T": TopicConfig(topic_name="T", read_queue_nums=8, write_queue_nums=8)
        },
        data_version=DataVersion(timestamp=1700000000000, counter=3, state_version=2),
    )


@pytest.mark.parametrize("compressed", [False, True])
def test_bodies_register_body_round_trip(compressed: bool) -> None:
    """JSON and deflate-compressed RegisterBrokerBody decode to the same wrapper and filters."""
    if compressed:
        raw = bodies.encode_compressed_register_body(_wrapper(), ["f:1"], version=479)
    else:
        raw = bodies.encode_register_body(_wrapper(), ["f:1"])
    wrapper, filters = bodies.decode_register_body(raw, compressed=compressed, version=479)
    assert filters == ("f:1",)
    assert wrapper.data_version == _wrapper().data_version
    assert wrapper.topic_config_table["T"].read_queue_nums == 8


def test_bodies_compressed_garbage_is_codec_error() -> None:
    """A compressed flag over non-zlib bytes is a CodecError, not a crash."""
    with pytest.raises(CodecError):
        bodies.decode_register_body(b"not zlib", compressed=True, version=479)


def test_bodies_queue_datas_accept_old_spelling() -> None:
    """REGISTER_TOPIC_IN_NAMESRV bodies: 4.8's topicSynFlag is read as topicSysFlag."""
    body = (
        b'{"queueDatas":[{"brokerName":"b","perm":6,"readQueueNums":2,'
        b'"topicSynFlag":1,"writeQueueNums":2}]}'
    )
    assert bodies.decode_queue_datas(body) == [QueueData("b", 2, 2, 6, 1)]
