"""Bad input against a real ``bin/mqbroker`` process: the broker answers or drops only the
offending connection, and keeps serving everyone else.

One namesrv + broker per module, started with ``autoCreateTopicEnable=false`` and
``maxMessageSize=1024``; topic ``Known`` is created over the wire by the fixture.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from rocketpy.common.codes import RequestCode, ResponseCode
from tests.helpers.broker_client import JavaLikeClient
from tests.helpers.processes import Daemon, start_broker, start_namesrv

pytestmark = pytest.mark.process

MAX_MESSAGE_SIZE = 1024


@dataclass
class Broker:
    """The shared broker process and its address."""

    daemon: Daemon
    addr: str


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    tmp: Path = tmp_path_factory.mktemp("badinput")
    namesrv, ns_addr = start_namesrv(tmp)
    try:
        daemon, addr = start_broker(
            tmp,
            ns_addr,
            extra=f"autoCreateTopicEnable=false\nmaxMessageSize={MAX_MESSAGE_SIZE}\n",
        )
        try:
            asyncio.run(_create_topic(addr, "Known"))
            yield Broker(daemon, addr)
            assert daemon.proc.poll() is None, daemon.output()
        finally:
            daemon.stop()
    finally:
        namesrv.stop()


async def _create_topic(addr: str, topic: str) -> None:
    client = JavaLikeClient()
    try:
        ext = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": "2",
               "writeQueueNums": "2", "perm": "6", "topicFilterType": "SINGLE_TAG"}  # fmt: skip
        resp = await client.call(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, ext)
        assert resp.code == ResponseCode.SUCCESS, resp.remark
    finally:
        await client.close()


@pytest.fixture
async def client() -> AsyncIterator[JavaLikeClient]:
    made = JavaLikeClient()
    try:
        yield made
    finally:
        await made.close()


async def _send_ok(client: JavaLikeClient, addr: str) -> None:
    resp = await client.send(addr, "Known", b"fine")
    assert resp.code == ResponseCode.SUCCESS, resp.remark


async def _closed_by_peer(reader: asyncio.StreamReader) -> bool:
    """True when the broker closes the connection (EOF or reset) within 5 s."""
    async with asyncio.timeout(5):
        try:
            return await reader.read(65536) == b""
        except ConnectionResetError:
            return True


async def test_broker_oversized_body_gets_message_illegal(
    broker: Broker, client: JavaLikeClient
) -> None:
    """1. Send a body of maxMessageSize + 1 bytes to a known topic. 2. Send a small message on
    the same connection.
    Expected: MESSAGE_ILLEGAL naming the size limit, nothing stored; the next send succeeds."""
    resp = await client.send(broker.addr, "Known", b"x" * (MAX_MESSAGE_SIZE + 1))
    assert resp.code == ResponseCode.MESSAGE_ILLEGAL
    assert f"{MAX_MESSAGE_SIZE}B" in (resp.remark or "")
    await _send_ok(client, broker.addr)


async def test_broker_unknown_topic_without_auto_create(
    broker: Broker, client: JavaLikeClient
) -> None:
    """1. Send to a topic the broker does not have (autoCreateTopicEnable=false).
    Expected: TOPIC_NOT_EXIST with upstream's "apply first please" remark."""
    resp = await client.send(broker.addr, "NoSuchTopic", b"lost")
    assert resp.code == ResponseCode.TOPIC_NOT_EXIST
    assert "topic[NoSuchTopic] not exist, apply first please!" in (resp.remark or "")


@pytest.mark.parametrize(
    "garbage",
    [
        pytest.param(struct.pack(">iI", 8, 0x50) + b"\0" * 4, id="header-longer-than-frame"),
        pytest.param(struct.pack(">iI", 12, 8) + b"notjson!", id="header-not-json"),
        pytest.param(struct.pack(">iI", 12, 0x05000008) + b"\0" * 8, id="unknown-serialize-type"),
        pytest.param(struct.pack(">i", -7) + b"\0" * 8, id="negative-length"),
        pytest.param(struct.pack(">i", 16 * 1024 * 1024 + 1) + b"\0" * 64, id="over-16MiB"),
    ],
)
async def test_broker_bad_frame_closes_only_that_connection(
    broker: Broker, client: JavaLikeClient, garbage: bytes
) -> None:
    """1. A normal client sends once. 2. A raw connection writes a malformed frame.
    3. The normal client sends again on its existing connection, and a new client connects.
    Expected: the broker closes the raw connection without answering; both later sends
    succeed and the broker process is still running."""
    await _send_ok(client, broker.addr)
    host, port = broker.addr.rsplit(":", 1)
    async with asyncio.timeout(5):
        reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(garbage)
        await writer.drain()
        assert await _closed_by_peer(reader)
    finally:
        writer.close()
    await _send_ok(client, broker.addr)
    fresh = JavaLikeClient()
    try:
        await _send_ok(fresh, broker.addr)
    finally:
        await fresh.close()
    assert broker.daemon.proc.poll() is None


@pytest.mark.parametrize(
    ("drop", "change", "named"),
    [
        pytest.param("b", {}, "b", id="missing-topic"),
        pytest.param("a", {}, "a", id="missing-producer-group"),
        pytest.param(None, {"e": "zero"}, "e", id="queue-id-not-a-number"),
        pytest.param(None, {"g": ""}, "g", id="born-timestamp-empty"),
    ],
)
async def test_broker_malformed_send_header_gets_error_reply(
    broker: Broker, client: JavaLikeClient, drop: str | None, change: dict[str, str], named: str
) -> None:
    """1. Send SEND_MESSAGE_V2 with a header field missing or not a number. 2. Send normally.
    Expected: a SYSTEM_ERROR reply (the connection stays open) whose remark names the field;
    the next send on the same connection succeeds."""
    ext = client.send_header("Known", 0, {"WAIT": "true", "UNIQ_KEY": "U1"})
    if drop is not None:
        del ext[drop]
    ext.update(change)
    resp = await client.call(broker.addr, RequestCode.SEND_MESSAGE_V2, ext, b"body")
    assert resp.code == ResponseCode.SYSTEM_ERROR, resp.remark
    assert named in (resp.remark or "")
    await _send_ok(client, broker.addr)


async def test_broker_queue_id_out_of_range_is_invalid_parameter(
    broker: Broker, client: JavaLikeClient
) -> None:
    """1. Send to queue 7 of a topic with 2 queues.
    Expected: INVALID_PARAMETER (5.x) and the connection keeps working."""
    resp = await client.send(broker.addr, "Known", b"q", queue_id=7)
    assert resp.code == ResponseCode.INVALID_PARAMETER, resp.remark
    await _send_ok(client, broker.addr)


@pytest.mark.parametrize(
    ("change", "named"),
    [
        pytest.param({"readQueueNums": "-1"}, "readQueueNums=-1", id="negative-read-queues"),
        pytest.param({"writeQueueNums": "-4"}, "writeQueueNums=-4", id="negative-write-queues"),
        pytest.param({"perm": "99"}, "perm 99", id="perm-out-of-range"),
        pytest.param({"topicFilterType": "WHAT"}, "WHAT", id="unknown-filter-type"),
    ],
)
async def test_broker_create_topic_bad_values_refused(
    broker: Broker, client: JavaLikeClient, change: dict[str, str], named: str
) -> None:
    """1. UPDATE_AND_CREATE_TOPIC with a negative queue count, perm 99 or an unknown filter
    type. 2. GET_TOPIC_CONFIG of that topic.
    Expected: INVALID_PARAMETER naming the bad value, and the topic was not created."""
    ext = {
        "topic": "BadValues",
        "defaultTopic": "TBW102",
        "readQueueNums": "2",
        "writeQueueNums": "2",
        "perm": "6",
        "topicFilterType": "SINGLE_TAG",
        **change,
    }
    resp = await client.call(broker.addr, RequestCode.UPDATE_AND_CREATE_TOPIC, ext)
    assert resp.code == ResponseCode.INVALID_PARAMETER
    assert named in (resp.remark or "")
    found = await client.call(broker.addr, RequestCode.GET_TOPIC_CONFIG, {"topic": "BadValues"})
    assert found.code == ResponseCode.TOPIC_NOT_EXIST
