"""Hostile input against a running ``mqnamesrv`` process (acceptance section P).

Thousands of random, truncated and mutated frames, plus well-formed frames carrying every
NameServer request code with random header values and bodies. The daemon must never die, every
well-formed request must get an answer, and a control connection keeps working throughout.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import struct
from pathlib import Path

import pytest

from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.protocol.frame import encode_frame
from rocketpy.remoting.transport.client import RemotingClient
from tests.helpers.processes import start_namesrv

pytestmark = pytest.mark.process

NAMESRV_CODES = [
    RequestCode.PUT_KV_CONFIG,
    RequestCode.GET_KV_CONFIG,
    RequestCode.DELETE_KV_CONFIG,
    RequestCode.REGISTER_BROKER,
    RequestCode.UNREGISTER_BROKER,
    RequestCode.GET_ROUTEINFO_BY_TOPIC,
    RequestCode.GET_BROKER_CLUSTER_INFO,
    RequestCode.WIPE_WRITE_PERM_OF_BROKER,
    RequestCode.ADD_WRITE_PERM_OF_BROKER,
    RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
    RequestCode.DELETE_TOPIC_IN_NAMESRV,
    RequestCode.REGISTER_TOPIC_IN_NAMESRV,
    RequestCode.GET_KVLIST_BY_NAMESPACE,
    RequestCode.GET_TOPICS_BY_CLUSTER,
    RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS,
    RequestCode.QUERY_DATA_VERSION,
    RequestCode.UPDATE_NAMESRV_CONFIG,
    RequestCode.GET_NAMESRV_CONFIG,
    RequestCode.GET_BROKER_MEMBER_GROUP,
    RequestCode.BROKER_HEARTBEAT,
    4242,
]
FIELDS = [
    "topic",
    "brokerName",
    "brokerAddr",
    "clusterName",
    "haServerAddr",
    "brokerId",
    "namespace",
    "key",
    "value",
    "compressed",
    "bodyCrc32",
    "cluster",
    "heartbeatTimeoutMillis",
    "acceptStandardJsonOnly",
    "enableActingMaster",
]


def _value(rng: random.Random) -> str:
    return rng.choice(
        [
            "",
            "0",
            "-1",
            "true",
            "x" * rng.randrange(1, 300),
            str(rng.getrandbits(70)),
            "127.0.0.1:10911",
            "\u00e9\u4e2d",
            "null",
            "1e9",
            " 7 ",
        ]
    )


def _body(rng: random.Random) -> bytes | None:
    return rng.choice(
        [
            None,
            b"{}",
            b"not json",
            b'{"topicConfigSerializeWrapper":7}',
            b'{"queueDatas":[{"brokerName":1}]}',
            rng.randbytes(rng.randrange(1, 200)),
            b"listenPort=1\nkvConfigPath=/etc/passwd\n",
            b"orderMessageEnable=maybe\n",
            b'{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{},'
            b'"topicConfigTable":{"T":{"topicName":"T","perm":"x"}}}}',
        ]
    )


async def _hostile_requests(port: int, rng: random.Random, count: int) -> int:
    """Send well-formed frames with random headers; return how many were answered."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    answered = 0
    try:
        for _ in range(count):
            ext = {rng.choice(FIELDS): _value(rng) for _ in range(rng.randrange(0, 6))}
            cmd = RemotingCommand.request(rng.choice(NAMESRV_CODES), ext, _body(rng))
            writer.write(encode_frame(cmd))
        await writer.drain()
        async with asyncio.timeout(20):
            while answered < count:
                (length,) = struct.unpack(">i", await reader.readexactly(4))
                await reader.readexactly(length)
                answered += 1
    finally:
        writer.close()
    return answered


async def _garbage(port: int, rng: random.Random, rounds: int) -> None:
    valid = encode_frame(
        RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"})
    )
    for _ in range(rounds):
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        for _ in range(40):
            kind = rng.randrange(4)
            if kind == 0:
                writer.write(rng.randbytes(rng.randrange(1, 80)))
            elif kind == 1:
                writer.write(valid[: rng.randrange(1, len(valid))])
            elif kind == 2:
                mutated = bytearray(valid)
                for _ in range(3):
                    mutated[rng.randrange(len(mutated))] = rng.randrange(256)
                writer.write(bytes(mutated))
            else:
                writer.write(struct.pack(">i", rng.choice([-1, 0, 3, 17 * 1024 * 1024])))
        # The server closes the connection at the first bad frame: that is the expected outcome.
        with contextlib.suppress(ConnectionError):
            await writer.drain()
        writer.close()


async def test_p_namesrv_survives_hostile_input(tmp_path: Path) -> None:
    """1. Start mqnamesrv. 2. 2,000 well-formed hostile requests: every one answered.
    3. 4,000 garbage/truncated/mutated/oversized frames over 100 connections. 4. The control
    connection still gets correct answers and the process is alive."""
    daemon, addr = start_namesrv(tmp_path)
    port = int(addr.rsplit(":", 1)[1])
    rng = random.Random(7)
    control = RemotingClient()
    try:
        for _ in range(4):
            assert await _hostile_requests(port, rng, 500) == 500
        await _garbage(port, rng, 100)
        resp = await control.invoke(
            addr, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "Nope"}), 5
        )
        assert resp.code == ResponseCode.TOPIC_NOT_EXIST
        assert daemon.proc.poll() is None, daemon.output()
    finally:
        await control.close()
        assert daemon.stop() == 0, daemon.output()[-3000:]
