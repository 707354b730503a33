"""Bounds on hostile input (issue 25, item 3): a decompression bomb in REGISTER_BROKER, a send
header integer the record cannot hold, header integers beyond Java's int or long, and a frame
header integer beyond 32 bits are refused with a clear answer, and cost nothing; concurrent
config updates are written one at a time.
"""

from __future__ import annotations

import asyncio
import json
import struct
import time
import zlib
from pathlib import Path

import pytest

from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.transport.client import RemotingClient
from rocketpy.tools.loadgen import rss_mb
from tests.helpers.broker_client import JavaLikeClient
from tests.helpers.processes import (
    start_broker,
    start_controller,
    start_namesrv,
    write_controller_confs,
)

pytestmark = pytest.mark.process


def _bomb(inflated: int) -> bytes:
    """A zlib stream of ``inflated`` zero bytes (about 1/1000 of that compressed)."""
    packer = zlib.compressobj(9)
    chunk = bytes(1 << 20)
    parts = [packer.compress(chunk) for _ in range(inflated >> 20)]
    return b"".join(parts) + packer.flush()


async def _register(addr: str, body: bytes) -> RemotingCommand:
    client = RemotingClient(name="test")
    ext = {
        "brokerName": "broker-x",
        "brokerAddr": "127.0.0.1:1",
        "clusterName": "C",
        "haServerAddr": "127.0.0.1:2",
        "brokerId": "0",
        "compressed": "true",
        "bodyCrc32": "0",
    }
    try:
        request = RemotingCommand.request(RequestCode.REGISTER_BROKER, ext, body)
        return await client.invoke(addr, request, 30)
    finally:
        await client.close()


def test_namesrv_refuses_a_register_body_that_inflates_beyond_the_frame_limit(
    tmp_path: Path,
) -> None:
    """1. Start mqnamesrv. 2. REGISTER_BROKER with compressed=true and a body of 256 KB that
    inflates to 256 MiB, three times.
    Expected: each is refused (SYSTEM_ERROR, the remark says it inflates beyond the frame
    limit); the NameServer's RSS grows by less than 40 MB; it still answers."""
    namesrv, ns = start_namesrv(tmp_path)
    try:
        body = _bomb(256 << 20)
        assert len(body) < 400_000
        before = rss_mb(namesrv.proc.pid)
        for _ in range(3):
            resp = asyncio.run(_register(ns, body))
            assert resp.code == ResponseCode.SYSTEM_ERROR, resp.remark
            assert "inflates beyond" in (resp.remark or ""), resp.remark
        grown = rss_mb(namesrv.proc.pid) - before
        assert grown < 40, f"RSS grew {grown:.0f} MB"
        ok = asyncio.run(_register(ns, zlib.compress(b"")))  # still serving (a short body)
        assert ok.code == ResponseCode.SYSTEM_ERROR
    finally:
        assert namesrv.stop() == 0, namesrv.output()


async def _sends(addr: str) -> list[RemotingCommand]:
    client = JavaLikeClient()
    try:
        first = await client.send(addr, "Bounds", b"one")
        ext = client.send_header("Bounds", 0, {"WAIT": "true"})
        ext["f"] = "2147483649"  # sysFlag beyond Java's int
        bad = await client.call(addr, RequestCode.SEND_MESSAGE_V2, ext, b"two")
        third = await client.send(addr, "Bounds", b"three")
        return [first, bad, third]
    finally:
        await client.close()


def test_broker_refuses_a_send_field_the_record_cannot_hold(tmp_path: Path) -> None:
    """1. Start mqnamesrv and a broker. 2. Send a message, then one whose sysFlag (``f``) is
    2147483649, then another.
    Expected: SYSTEM_ERROR naming the field for the second (upstream's Integer.parseInt fails
    as it decodes the header), with nothing stored; the first and third are SEND_OK at
    consecutive queue offsets (no offset was consumed by the refused one)."""
    namesrv, ns = start_namesrv(tmp_path)
    broker, addr = start_broker(tmp_path, ns, extra="autoCreateTopicEnable=true\n")
    try:
        first, bad, third = asyncio.run(_sends(addr))
        assert first.code == ResponseCode.SUCCESS, first.remark
        assert bad.code == ResponseCode.SYSTEM_ERROR, (bad.code, bad.remark)
        assert "field=f" in (bad.remark or ""), bad.remark
        assert third.code == ResponseCode.SUCCESS, third.remark
        offsets = [int(r.ext("queueOffset") or -1) for r in (first, third)]
        assert offsets[1] == offsets[0] + 1, offsets
        assert "struct.error" not in broker.output()
    finally:
        broker.stop()
        namesrv.stop()


async def _raw_frame(addr: str, header: dict[str, object]) -> bytes:
    """Send one JSON-header frame on a fresh connection; return what comes back before the
    broker closes it (or 3 s pass)."""
    host, port = addr.rsplit(":", 1)
    data = json.dumps(header).encode()
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(struct.pack(">ii", 4 + len(data), len(data)) + data)
        await writer.drain()
        async with asyncio.timeout(3):
            return await reader.read()
    finally:
        writer.close()


async def _out_of_range(addr: str) -> dict[str, RemotingCommand]:
    client = JavaLikeClient()
    topic = {
        "topic": "Wide",
        "defaultTopic": "TBW102",
        "readQueueNums": str(2**40),
        "writeQueueNums": "2",
        "perm": "6",
        "topicFilterType": "SINGLE_TAG",
    }
    try:
        return {
            "readQueueNums": await client.call(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, topic),
            "queueId": await client.call(
                addr, RequestCode.GET_MAX_OFFSET, {"topic": "Bounds", "queueId": str(2**33)}
            ),
            "commitOffset": await client.call(
                addr,
                RequestCode.UPDATE_CONSUMER_OFFSET,
                {
                    "consumerGroup": "g",
                    "topic": "Bounds",
                    "queueId": "0",
                    "commitOffset": str(2**70),
                },
            ),
            "topic": await client.call(addr, RequestCode.GET_TOPIC_CONFIG, {"topic": "Wide"}),
        }
    finally:
        await client.close()


def test_broker_refuses_header_integers_beyond_java_types(tmp_path: Path) -> None:
    """1. Start mqnamesrv and a broker. 2. UPDATE_AND_CREATE_TOPIC with readQueueNums 2**40 (an
    Integer upstream), GET_MAX_OFFSET with queueId 2**33, UPDATE_CONSUMER_OFFSET with
    commitOffset 2**70 (a Long), then GET_TOPIC_CONFIG of the refused topic. 3. A frame whose
    JSON header has opaque 2**63.
    Expected: 2. SYSTEM_ERROR naming each field; the topic does not exist. 3. The broker closes
    that connection without an answer (it cannot echo the opaque) and logs why, with no
    traceback; it still serves."""
    namesrv, ns = start_namesrv(tmp_path)
    broker, addr = start_broker(tmp_path, ns, extra="autoCreateTopicEnable=true\n")
    try:
        answers = asyncio.run(_out_of_range(addr))
        for field in ("readQueueNums", "queueId", "commitOffset"):
            resp = answers[field]
            assert resp.code == ResponseCode.SYSTEM_ERROR, (field, resp.code, resp.remark)
            assert f"field={field}" in (resp.remark or ""), resp.remark
        assert answers["topic"].code == ResponseCode.TOPIC_NOT_EXIST
        header = {"code": 26, "language": "JAVA", "version": 1, "opaque": 2**63, "flag": 0}
        assert asyncio.run(_raw_frame(addr, header)) == b""
        broker.wait_output("header integer out of int range")
        assert "Traceback" not in broker.output()
        again = asyncio.run(_sends(addr))
        assert again[0].code == ResponseCode.SUCCESS
    finally:
        broker.stop()
        namesrv.stop()


async def _hammer_config(addr: str, update: int, get: int, key: str) -> tuple[list[int], str]:
    """200 concurrent updates of ``key`` (alternately true and false) over 20 connections;
    return the answer codes and what the daemon then reports for ``key``."""
    clients = [RemotingClient(name="test") for _ in range(20)]

    async def one(i: int) -> int:
        body = f"{key}={'true' if i % 2 else 'false'}\n".encode()
        resp = await clients[i % 20].invoke(addr, RemotingCommand.request(update, {}, body), 10)
        return resp.code

    try:
        async with asyncio.timeout(60):
            codes = list(await asyncio.gather(*(one(i) for i in range(200))))
            shown = await clients[0].invoke(addr, RemotingCommand.request(get, {}), 10)
    finally:
        for c in clients:
            await c.close()
    text = (shown.body or b"").decode()
    value = next(ln.split("=", 1)[1] for ln in text.splitlines() if ln.startswith(f"{key}="))
    return codes, value


@pytest.mark.parametrize("daemon", ["namesrv", "controller"])
def test_concurrent_config_updates_are_serialized(tmp_path: Path, daemon: str) -> None:
    """1. Start mqnamesrv (or one mqcontroller) with configStorePath set. 2. 200 concurrent
    UPDATE_NAMESRV_CONFIG (UPDATE_CONTROLLER_CONFIG) over 20 connections, flipping one key.
    3. GET the config; read the stored file; restart the daemon on it.
    Expected: every update SUCCESS; the file holds exactly the value the daemon reports, no
    temp file is left beside it, and the daemon boots again on it."""
    if daemon == "namesrv":
        proc, addr = start_namesrv(tmp_path)
        stored = tmp_path / "kv" / "namesrv.properties"
        codes_ = (RequestCode.UPDATE_NAMESRV_CONFIG, RequestCode.GET_NAMESRV_CONFIG)
        key = "orderMessageEnable"
    else:
        conf = write_controller_confs(tmp_path, 1)[0]
        proc, addr = start_controller(conf, tmp_path)
        stored = tmp_path / "n0" / "controller.properties"
        codes_ = (RequestCode.UPDATE_CONTROLLER_CONFIG, RequestCode.GET_CONTROLLER_CONFIG)
        key = "notifyBrokerRoleChanged"
    try:
        codes, value = asyncio.run(_hammer_config(addr, *codes_, key))
        assert codes == [ResponseCode.SUCCESS] * 200
        lines = stored.read_text(encoding="utf-8").splitlines()
        assert f"{key}={value}" in lines
        assert not [p.name for p in stored.parent.iterdir() if ".tmp" in p.name]
    finally:
        assert proc.stop() == 0, proc.output()
    again = (
        start_namesrv(tmp_path)[0] if daemon == "namesrv" else start_controller(conf, tmp_path)[0]
    )
    assert again.stop() == 0


async def _flood_refusals(addr: str, connections: int, each: int) -> int:
    """``connections`` x ``each`` pipelined GET_MAX_OFFSET requests with a bad queueId (each
    logs a "request refused" warning); return how many were answered."""
    host, port = addr.rsplit(":", 1)

    async def one() -> int:
        reader, writer = await asyncio.open_connection(host, int(port))
        frames = bytearray()
        for i in range(each):
            hdr = json.dumps({"code": RequestCode.GET_MAX_OFFSET, "language": "JAVA",
                              "version": 1, "opaque": i, "flag": 0,
                              "extFields": {"topic": "T", "queueId": "x"}}).encode()  # fmt: skip
            frames += struct.pack(">ii", 4 + len(hdr), len(hdr)) + hdr
        try:
            writer.write(bytes(frames))
            await writer.drain()
            for _ in range(each):
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                await reader.readexactly(size)
            return each
        finally:
            writer.close()

    async with asyncio.timeout(120):
        return sum(await asyncio.gather(*(one() for _ in range(connections))))


def test_broker_stops_promptly_after_a_flood_of_warnings(tmp_path: Path) -> None:
    """1. Start a broker. 2. 40,000 pipelined requests over 20 connections, each refused with
    a logged warning. 3. SIGTERM at once.
    Expected: every request answered; the broker exits 0 within 10 s (the log queue is bounded
    and a shutdown writes only its newest records; a flood used to leave minutes of log behind
    and a SIGTERM that took over 15 s); the log names what it dropped, if anything."""
    namesrv, ns = start_namesrv(tmp_path)
    broker, addr = start_broker(tmp_path, ns)
    try:
        assert asyncio.run(_flood_refusals(addr, 20, 2000)) == 40_000
        began = time.monotonic()
        assert broker.stop(timeout_s=30) == 0
        took = time.monotonic() - began
        out = broker.output()
        assert took < 10, f"SIGTERM took {took:.1f} s"
        assert "request refused" in out
        assert "broker shutdown: done" in out
    finally:
        broker.stop()
        namesrv.stop()
