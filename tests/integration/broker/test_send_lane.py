"""The send lane: many sends in one read, answered as one at a time would answer them.

A raw socket writes a whole pipeline of frames at once, so the broker decodes them from one read
and hands its consecutive single sends to the run form of the send processor
(``SendMessageProcessor.send_run_nowait``). Sends the lane leaves alone (a delay level, a batch)
and a oneway send sit among them; a malformed frame may end the read.
"""

from __future__ import annotations

import asyncio
import struct

import pytest

from rocketpy.broker.service import BrokerService
from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.common.message.batch_body import encode_batch_body
from rocketpy.common.message.properties import encode_properties
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.protocol.frame import decode_frame, encode_frame
from tests.helpers.broker_client import JavaLikeClient, decode_records, subscription
from tests.integration.broker.conftest import BrokerFactory, dispatched

pytestmark = pytest.mark.integration

TOPIC = "LaneTopic"


def _send(client: JavaLikeClient, i: int, *, oneway: bool = False, delay: bool = False) -> bytes:
    props = {"UNIQ_KEY": f"LANE{i:028d}", "WAIT": "true", "KEYS": f"k{i}"}
    if delay:
        props["DELAY"] = "1"
    ext = client.send_header(TOPIC, 0, props)
    request = RemotingCommand.request(
        RequestCode.SEND_MESSAGE_V2, ext, f"m{i}".encode(), oneway=oneway
    )
    return encode_frame(request)


def _batch(client: JavaLikeClient) -> bytes:
    ext = client.send_header(TOPIC, 1, {"WAIT": "true"}, batch=True)
    body = encode_batch_body(
        (0, f"b{j}".encode(), encode_properties({"UNIQ_KEY": f"BATCH{j:027d}"})) for j in range(3)
    )
    return encode_frame(RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, ext, body))


async def _answers(reader: asyncio.StreamReader, count: int) -> dict[int, RemotingCommand]:
    """``count`` response frames, by opaque."""
    out: dict[int, RemotingCommand] = {}
    async with asyncio.timeout(10):
        while len(out) < count:
            (length,) = struct.unpack(">i", await reader.readexactly(4))
            cmd = decode_frame(await reader.readexactly(length))
            out[cmd.opaque] = cmd
    return out


def _opaque(frame: bytes) -> int:
    return decode_frame(frame[4:]).opaque


async def _write_and_answers(
    broker: BrokerService, frames: list[bytes], count: int
) -> dict[int, RemotingCommand]:
    """Write ``frames`` in one write on a new connection; the ``count`` answers, by opaque."""
    reader, writer = await asyncio.open_connection("127.0.0.1", broker.server.port)
    try:
        writer.write(b"".join(frames))
        await writer.drain()
        return await _answers(reader, count)
    finally:
        writer.close()


async def test_sends_of_one_read_are_answered_and_stored_in_their_order(
    broker_factory: BrokerFactory, client: JavaLikeClient
) -> None:
    """1. A first send makes the topic and the commit log's first segment (until then each
    send waits for the segment, and waiting sends may take their offsets in any order, as
    upstream's send threads). 2. One write carries 10 sends, a send with a delay level, a
    batch, 5 sends, a oneway send and 3 more sends, all but the batch to queue 0. Expected:
    every request but the oneway one answered SUCCESS; the 19 plain sends (the oneway one
    included) hold queue offsets 1..19 of queue 0 in the order written, and a pull reads them
    back in that order; the delayed one went to the schedule topic, the batch to queue 1."""
    broker = await broker_factory()
    first = await client.send(broker.address, TOPIC, b"first")
    assert (first.code, first.ext("queueOffset")) == (ResponseCode.SUCCESS, "0")
    plain = [_send(client, i) for i in range(10)]
    delayed = _send(client, 100, delay=True)
    batch = _batch(client)
    plain += [_send(client, i) for i in range(10, 15)]
    oneway = _send(client, 15, oneway=True)
    tail = [_send(client, i) for i in range(16, 19)]
    frames = [*plain[:10], delayed, batch, *plain[10:], oneway, *tail]
    answered = [f for f in frames if f is not oneway]
    answers = await _write_and_answers(broker, frames, len(answered))
    assert {a.code for a in answers.values()} == {ResponseCode.SUCCESS}
    in_order = [*plain, tail[0], tail[1], tail[2]]
    offsets = [answers[_opaque(f)].ext_fields["queueOffset"] for f in in_order]
    # The oneway send took offset 15 between the fifth of the second group and the tail.
    assert offsets == [str(o) for o in [*range(1, 16), 17, 18, 19]]
    assert answers[_opaque(batch)].ext_fields["queueId"] == "1"
    await dispatched(broker, TOPIC, 20)
    await client.heartbeat(broker.address, "g", (subscription(TOPIC),))
    pulled = await client.pull(broker.address, "g", TOPIC, 1, max_nums=32, expression="*")
    assert pulled.code == ResponseCode.SUCCESS
    assert [m.body for m in decode_records(pulled.body or b"")] == [
        f"m{i}".encode() for i in range(19)
    ]
    assert broker.store.max_offset_in_queue("SCHEDULE_TOPIC_XXXX", 0) == 1


async def test_a_malformed_frame_after_sends_ends_the_read_after_their_answers(
    broker_factory: BrokerFactory, client: JavaLikeClient
) -> None:
    """1. A first send makes the topic and the first segment. 2. One write carries 6 sends,
    then a frame whose header is not JSON. Expected: the 6 are answered SUCCESS and stored
    (queue offsets 1..6), then the broker closes the connection (EOF)."""
    broker = await broker_factory()
    assert (await client.send(broker.address, TOPIC, b"first")).code == ResponseCode.SUCCESS
    frames = [_send(client, i) for i in range(6)]
    garbage = struct.pack(">ii", 12, 4) + b"{{{{" + b"zzzz"
    reader, writer = await asyncio.open_connection("127.0.0.1", broker.server.port)
    try:
        writer.write(b"".join(frames) + garbage)
        await writer.drain()
        answers = await _answers(reader, len(frames))
        async with asyncio.timeout(5):
            assert await reader.read() == b""
    finally:
        writer.close()
    assert [answers[_opaque(f)].ext_fields["queueOffset"] for f in frames] == [
        str(i) for i in range(1, 7)
    ]
    await dispatched(broker, TOPIC, 7)


def _to_queue(client: JavaLikeClient, i: int, queue_id: int, body: bytes) -> bytes:
    props = {"UNIQ_KEY": f"RUN{i:029d}", "WAIT": "true", "KEYS": f"key{i}"}
    ext = client.send_header(TOPIC, queue_id, props)
    return encode_frame(RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, ext, body))


async def test_a_run_over_four_queues_is_stored_per_queue_in_request_order(
    broker_factory: BrokerFactory, client: JavaLikeClient
) -> None:
    """1. A first send to each of queues 0..3 makes the topic and the first segment.
    2. One write carries 24 sends, round robin over the 4 queues (as a producer spreads
    them). Expected: all SUCCESS; each queue's sends hold its offsets 1..6 in the order
    written; each answer's msgId names the record of that send (its body, its queue and
    offset); a pull of each queue reads them in order; the key index finds each by KEYS
    and by UNIQ_KEY."""
    broker = await broker_factory()
    for q in range(4):
        first = await client.send(broker.address, TOPIC, b"first", queue_id=q)
        assert first.code == ResponseCode.SUCCESS
    frames = [_to_queue(client, i, i % 4, f"r{i}".encode()) for i in range(24)]
    answers = await _write_and_answers(broker, frames, len(frames))
    assert {a.code for a in answers.values()} == {ResponseCode.SUCCESS}
    for i, frame in enumerate(frames):
        ext = answers[_opaque(frame)].ext_fields or {}
        assert (ext["queueId"], ext["queueOffset"]) == (str(i % 4), str(1 + i // 4))
        assert ext["transactionId"] == f"RUN{i:029d}"
        stored = broker.store.look_message_by_offset(int(ext["msgId"][-16:], 16))
        assert stored is not None
        assert (stored.body, stored.queue_id, stored.queue_offset) == (
            f"r{i}".encode(), i % 4, 1 + i // 4,
        )  # fmt: skip
    await client.heartbeat(broker.address, "g", (subscription(TOPIC),))
    for q in range(4):
        await dispatched(broker, TOPIC, 7, q)
        pulled = await client.pull(broker.address, "g", TOPIC, 1, queue_id=q, max_nums=32)
        assert [m.body for m in decode_records(pulled.body or b"")] == [
            f"r{i}".encode() for i in range(q, 24, 4)
        ]
    async with asyncio.timeout(5):  # the reput dispatches to the index worker after the CQ
        while not (await _found(broker, "key23") and await _found(broker, f"RUN{23:029d}")):
            await asyncio.sleep(0.01)
    for i in range(24):
        assert await _found(broker, f"key{i}") == [f"r{i}".encode()]
        assert await _found(broker, f"RUN{i:029d}") == [f"r{i}".encode()]


async def _found(broker: BrokerService, key: str) -> list[bytes]:
    """The bodies the key index finds for ``key`` in TOPIC."""
    result = await broker.store.query_message(TOPIC, key, 32, 0, 2**62)
    return [broker.store.decode_message(raw).body for raw in result.records]


async def test_a_run_crossing_segment_ends_is_stored_whole_and_in_order(
    broker_factory: BrokerFactory, client: JavaLikeClient
) -> None:
    """1. A first send to each of queues 0..3 makes the topic and the first 64 KiB segment.
    2. One write carries 200 sends of 1 KiB bodies round robin over the 4 queues: about
    three segments' worth, so runs do not fit what is left of a segment (their messages then
    go one by one up to its end, the rest alone through a roll, where sends waiting for the
    segment may take their offsets in any order, as upstream's send threads). Expected: all
    SUCCESS; each queue's sends hold its offsets 1..50; a pull of each queue reads at each
    offset the body of the send answered with it."""
    broker = await broker_factory()
    for q in range(4):
        assert (await client.send(broker.address, TOPIC, b"f", queue_id=q)).code == 0
    bodies = [bytes([65 + i % 26]) * 1000 + f"{i:04d}".encode() for i in range(200)]
    frames = [_to_queue(client, i, i % 4, body) for i, body in enumerate(bodies)]
    answers = await _write_and_answers(broker, frames, len(frames))
    assert {a.code for a in answers.values()} == {ResponseCode.SUCCESS}
    assert len(broker.store.store.commit_log.mfq.files) >= 3
    await client.heartbeat(broker.address, "g", (subscription(TOPIC),))
    for q in range(4):
        sent = {
            int((answers[_opaque(frames[i])].ext_fields or {})["queueOffset"]): bodies[i]
            for i in range(q, 200, 4)
        }
        assert sorted(sent) == list(range(1, 51))
        await dispatched(broker, TOPIC, 51, q)
        got: list[bytes] = []
        while len(got) < 50:
            pulled = await client.pull(
                broker.address, "g", TOPIC, 1 + len(got), queue_id=q, max_nums=32
            )
            assert pulled.code == ResponseCode.SUCCESS
            got += [m.body for m in decode_records(pulled.body or b"")]
        assert got == [sent[offset] for offset in range(1, 51)]


async def test_a_send_whose_header_does_not_decode_is_answered_alone_between_stored_ones(
    broker_factory: BrokerFactory, client: JavaLikeClient
) -> None:
    """1. A first send makes the topic and the first segment. 2. One write carries 3 sends, a
    send whose queueId is not a number, and 3 more sends. Expected: the bad one alone gets an
    error answer; the 6 others SUCCESS with queue offsets 1..6 in the order written (the
    lane stores those before it, then goes on after it)."""
    broker = await broker_factory()
    assert (await client.send(broker.address, TOPIC, b"first")).code == ResponseCode.SUCCESS
    ext = client.send_header(TOPIC, 0, {"UNIQ_KEY": "BAD" + "0" * 29, "WAIT": "true"})
    ext["e"] = "x"
    bad = encode_frame(RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, ext, b"bad"))
    good = [_send(client, i) for i in range(6)]
    frames = [*good[:3], bad, *good[3:]]
    answers = await _write_and_answers(broker, frames, len(frames))
    assert answers[_opaque(bad)].code != ResponseCode.SUCCESS
    assert [(answers[_opaque(f)].ext_fields or {}).get("queueOffset") for f in good] == [
        str(i) for i in range(1, 7)
    ]
    await dispatched(broker, TOPIC, 7)


async def test_checks_made_once_per_topic_of_a_read_still_hold_for_each_send(
    broker_factory: BrokerFactory, client: JavaLikeClient
) -> None:
    """The lane checks a topic once per read and each later send to it only for its queue id.
    1. A first send to each of queues 0..3 makes the topic and the first segment. 2. One write
    carries: 2 sends to queue 0, a send to queue 99, 2 more to queue 1, then 2 sends to a
    topic no client may send to, and 1 more to queue 2. Expected: the queue-99 send alone
    gets INVALID_PARAMETER naming its queue id, both sends to the forbidden topic get
    NO_PERMISSION, and the 5 others SUCCESS at the next offsets of their queues."""
    broker = await broker_factory()
    for q in range(4):
        assert (await client.send(broker.address, TOPIC, b"first", queue_id=q)).code == 0
    good = [_to_queue(client, i, q, f"g{i}".encode()) for i, q in enumerate((0, 0))]
    beyond = _to_queue(client, 2, 99, b"beyond")
    good += [_to_queue(client, i, q, f"g{i}".encode()) for i, q in ((3, 1), (4, 1))]
    forbidden = []
    for i in (5, 6):
        ext = client.send_header("SCHEDULE_TOPIC_XXXX", 0, {"UNIQ_KEY": f"NO{i:030d}"})
        request = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, ext, b"no")
        forbidden.append(encode_frame(request))
    last = _to_queue(client, 7, 2, b"g7")
    frames = [*good[:2], beyond, *good[2:], *forbidden, last]
    answers = await _write_and_answers(broker, frames, len(frames))
    refused = answers[_opaque(beyond)]
    assert refused.code == ResponseCode.INVALID_PARAMETER
    assert "queueId[99]" in (refused.remark or "")
    assert [answers[_opaque(f)].code for f in forbidden] == [ResponseCode.NO_PERMISSION] * 2
    placed = [
        ((answers[_opaque(f)].ext_fields or {}).get("queueId"),
         (answers[_opaque(f)].ext_fields or {}).get("queueOffset"))
        for f in [*good, last]
    ]  # fmt: skip
    assert placed == [("0", "1"), ("0", "2"), ("1", "1"), ("1", "2"), ("2", "1")]
