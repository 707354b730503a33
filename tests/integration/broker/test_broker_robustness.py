"""Refusals and protocol robustness: size limits, unknown topics, garbage frames (P-0x)."""

from __future__ import annotations

import asyncio
import struct

import pytest

from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.remoting.protocol.command import RemotingCommand
from tests.helpers.broker_client import JavaLikeClient
from tests.integration.broker.conftest import BrokerFactory

pytestmark = pytest.mark.integration


async def test_broker_oversized_body_refused_and_keeps_serving(
    broker_factory: BrokerFactory, client: JavaLikeClient
) -> None:
    """1. maxMessageSize is 4 MiB. 2. Send a 4 MiB + 1 byte body. 3. Send a normal message.
    Expected: MESSAGE_ILLEGAL naming the limit, nothing stored; the next send on the same
    connection succeeds at queue offset 0."""
    broker = await broker_factory()
    addr = broker.address
    resp = await client.send(addr, "T", b"x" * (4 * 1024 * 1024 + 1))
    assert resp.code == ResponseCode.MESSAGE_ILLEGAL
    assert "4194304B" in (resp.remark or "")
    ok = await client.send(addr, "T", b"fine")
    assert (ok.code, ok.ext("queueOffset")) == (ResponseCode.SUCCESS, "0")


async def test_broker_unknown_topic_without_auto_create(
    broker_factory: BrokerFactory, client: JavaLikeClient
) -> None:
    """With autoCreateTopicEnable=false a send to an unknown topic gets TOPIC_NOT_EXIST
    "topic[X] not exist, apply first please!" and a pull gets TOPIC_NOT_EXIST."""
    broker = await broker_factory(autoCreateTopicEnable=False)
    resp = await client.send(broker.address, "X", b"x")
    assert (resp.code, resp.remark) == (
        ResponseCode.TOPIC_NOT_EXIST,
        "topic[X] not exist, apply first please!",
    )
    pull = await client.pull(broker.address, "g", "X", 0, expression="*")
    assert pull.code == ResponseCode.TOPIC_NOT_EXIST


@pytest.mark.parametrize(
    "garbage",
    [
        struct.pack(">ii", 12, (7 << 24) | 4) + b"abcdefgh",  # unknown serialize type
        struct.pack(">ii", 12, 4) + b"{{{{" + b"zzzz",  # invalid JSON header
        struct.pack(">ii", 8, 100) + b"abcd",  # header longer than the frame
        struct.pack(">i", 0x7FFFFFFF),  # oversized frame length
    ],
    ids=["serialize-type", "bad-json", "header-length", "oversized"],
)
async def test_p03_garbage_frame_closes_only_that_connection(
    broker_factory: BrokerFactory, client: JavaLikeClient, garbage: bytes
) -> None:
    """P-01/P-02/P-03: 1. A raw socket sends a garbage frame. 2. Another client sends.
    Expected: the raw socket is closed by the broker (EOF); the other client's connection keeps
    working."""
    broker = await broker_factory()
    await client.send(broker.address, "T", b"before")
    reader, writer = await asyncio.open_connection("127.0.0.1", broker.server.port)
    try:
        writer.write(garbage)
        await writer.drain()
        async with asyncio.timeout(5):
            assert await reader.read() == b""
    finally:
        writer.close()
    resp = await client.send(broker.address, "T", b"after")
    assert resp.code == ResponseCode.SUCCESS


async def test_p04_p06_unknown_code_and_oneway(
    broker_factory: BrokerFactory, client: JavaLikeClient
) -> None:
    """P-04: an unknown code answers REQUEST_CODE_NOT_SUPPORTED with upstream's remark and the
    same opaque. P-06: a oneway send with a bad topic gets no response, the connection stays."""
    broker = await broker_factory()
    addr = broker.address
    resp = await client.call(addr, 9999)
    assert (resp.code, resp.remark) == (
        ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
        " request type 9999 not supported",
    )
    conn = await client.remoting.connection(addr)
    conn.invoke_oneway(RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {"b": "bad topic!"}))
    assert (await client.send(addr, "T", b"x")).code == ResponseCode.SUCCESS
    assert not conn.is_closed
