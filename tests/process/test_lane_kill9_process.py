"""SIGKILL of a broker while a pipelining producer's sends go through the send lane.

A raw socket pipelines 3,000 sends, 256 in flight (round robin over 4 queues, as a producer
spreads them): the broker reads them many to a read and stores each read's sends as one batch
per queue. The broker is killed once 2,000 answers have arrived, sends still in flight; a new
broker on the same store must hold every acknowledged send at the queue offset its answer
named (ASYNC_FLUSH: the records are in the page cache, which a process kill keeps). The
broker's index worker (a child process) ends by itself, and the new broker's index finds
acknowledged sends by UNIQ_KEY.
"""

from __future__ import annotations

import asyncio
import signal
import struct
import time
from pathlib import Path

import pytest

from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.protocol.frame import decode_frame, encode_frame
from rocketpy.tools.loadgen import child_pids
from tests.helpers.broker_client import JavaLikeClient, decode_records
from tests.helpers.processes import Daemon, start_broker, start_namesrv

pytestmark = pytest.mark.process

TOPIC = "LaneKill"
SENDS = 3000
KILL_AFTER = 2000
INFLIGHT = 256


def _frame(client: JavaLikeClient, i: int) -> tuple[int, bytes, bytes]:
    """Send ``i``: its opaque, body and frame."""
    body = f"lane-{i:05d}-".encode() * (1 + i % 9)
    ext = client.send_header(TOPIC, i % 4, {"UNIQ_KEY": f"K{i:031d}", "WAIT": "true"})
    request = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, ext, body)
    return request.opaque, body, encode_frame(request)


async def _send_then_kill(addr: str, broker: Daemon) -> dict[tuple[int, int], tuple[int, bytes]]:
    """Pipeline the sends, INFLIGHT at a time; SIGKILL the broker after KILL_AFTER answers.
    The acknowledged (SUCCESS) sends' (queue, offset) -> (send number, body); a send answered
    otherwise (flow control under load) is not acknowledged."""
    client = JavaLikeClient()
    sends = [_frame(client, i) for i in range(SENDS)]
    by_opaque = {opaque: (i, body) for i, (opaque, body, _) in enumerate(sends)}
    acked: dict[tuple[int, int], tuple[int, bytes]] = {}
    host, port = addr.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(b"".join(frame for _, _, frame in sends[:INFLIGHT]))
        written = INFLIGHT
        async with asyncio.timeout(60):
            for _ in range(KILL_AFTER):
                (length,) = struct.unpack(">i", await reader.readexactly(4))
                answer = decode_frame(await reader.readexactly(length))
                if written < SENDS:
                    writer.write(sends[written][2])
                    written += 1
                if answer.code != ResponseCode.SUCCESS:
                    continue
                i, body = by_opaque[answer.opaque]
                ext = answer.ext_fields or {}
                assert ext["queueId"] == str(i % 4)
                acked[(i % 4, int(ext["queueOffset"]))] = (i, body)
        broker.proc.send_signal(signal.SIGKILL)
    finally:
        writer.close()
        await client.close()
    assert len(acked) >= KILL_AFTER // 2, f"only {len(acked)} sends acknowledged"
    return acked


def _gone(pid: int, within_s: float) -> bool:
    """Whether ``pid`` exits within ``within_s`` (a zombie counts as exited)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False


async def _query(addr: str, key: str) -> list[bytes]:
    """The bodies QUERY_MESSAGE finds for ``key`` in TOPIC, once the index has it."""
    client = JavaLikeClient()
    ext = {"topic": TOPIC, "key": key, "maxNum": "32", "beginTimestamp": "0",
           "endTimestamp": str(2**62)}  # fmt: skip
    try:
        async with asyncio.timeout(30):
            while True:
                resp = await client.call(addr, RequestCode.QUERY_MESSAGE, ext)
                if resp.code == ResponseCode.SUCCESS:
                    return [m.body for m in decode_records(resp.body or b"")]
                assert resp.code == ResponseCode.QUERY_NOT_FOUND, resp.remark
                await asyncio.sleep(0.1)
    finally:
        await client.close()


async def _read(addr: str, queue_id: int, upto: int) -> dict[int, bytes]:
    """Queue ``queue_id``'s offsets 0..upto-1 -> body."""
    client = JavaLikeClient()
    got: dict[int, bytes] = {}
    try:
        offset = 0
        async with asyncio.timeout(30):
            while offset < upto:
                resp = await client.pull(
                    addr, "reader", TOPIC, offset, queue_id=queue_id, expression="*",
                    suspend_ms=1000,
                )  # fmt: skip
                if resp.code == ResponseCode.SUCCESS and resp.body is not None:
                    for m in decode_records(resp.body):
                        got[m.queue_offset] = m.body
                offset = int(resp.ext("nextBeginOffset") or offset)
    finally:
        await client.close()
    return got


@pytest.mark.parametrize("sizes", ["64KiB", "default"])
def test_sigkill_during_pipelined_sends_keeps_every_acknowledged_one(
    tmp_path: Path, sizes: str
) -> None:
    """1. A broker with ASYNC_FLUSH (64 KiB commit-log segments, or the default 1 GiB).
    2. 3,000 pipelined sends over 4 queues, 256 in flight; SIGKILL once 2,000 are answered
    (sends still in flight).
    3. A broker on the same store.
    Expected: the killed broker's index worker exits by itself; every answered send's body
    at its (queue, offset), read back by pulls; the first and last answered sends found by
    their UNIQ_KEY through the new broker's index."""
    namesrv, ns_addr = start_namesrv(tmp_path)
    store = tmp_path / "store"
    # Every key fits one index file; the index in its worker process.
    extra = "maxHashSlotNum=8192\nmaxIndexNum=32768\nmessageIndexWorkerEnable=true\n"
    if sizes == "default":
        extra += "mappedFileSizeCommitLog=1073741824\nmappedFileSizeConsumeQueue=6000000\n"
    try:
        broker, addr = start_broker(tmp_path, ns_addr, store=store, extra=extra)
        try:
            workers = child_pids(broker.proc.pid)
            assert len(workers) == 1, workers  # the index worker
            acked = asyncio.run(_send_then_kill(addr, broker))
        finally:
            broker.proc.send_signal(signal.SIGKILL)
            broker.stop()
        assert _gone(workers[0], 10.0), "the index worker outlived its broker"
        assert (store / "abort").exists()
        segments = sorted((store / "commitlog").iterdir())
        assert segments[0].stat().st_size == (1 << 30 if sizes == "default" else 65536)
        assert len(segments) >= (1 if sizes == "default" else 5)  # the 64 KiB log rolled
        again, addr2 = start_broker(tmp_path, ns_addr, store=store, extra=extra)
        try:
            for q in range(4):
                mine = {offset: body for (queue, offset), (_, body) in acked.items() if queue == q}
                got = asyncio.run(_read(addr2, q, max(mine) + 1))
                assert {offset: got.get(offset) for offset in mine} == mine
            for i, body in (min(acked.values()), max(acked.values())):
                assert asyncio.run(_query(addr2, f"K{i:031d}")) == [body]
        finally:
            assert again.stop() == 0, again.output()
    finally:
        namesrv.stop()
