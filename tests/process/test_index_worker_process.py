"""The broker's index worker (a child process) across a kill -9 of the broker: records the
consume queues hold but the index never got are indexed again at the next start."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.tools.loadgen import child_pids
from tests.helpers.broker_client import JavaLikeClient, decode_records
from tests.helpers.processes import start_broker, start_namesrv

pytestmark = pytest.mark.process

TOPIC = "IdxWorker"
EXTRA = "maxHashSlotNum=4096\nmaxIndexNum=16384\nmessageIndexWorkerEnable=true\n"


async def _query(client: JavaLikeClient, addr: str, key: str) -> list[bytes]:
    """The bodies QUERY_MESSAGE finds for ``key`` (empty when none)."""
    ext = {"topic": TOPIC, "key": key, "maxNum": "32", "beginTimestamp": "0",
           "endTimestamp": str(2**62)}  # fmt: skip
    resp = await client.call(addr, RequestCode.QUERY_MESSAGE, ext)
    if resp.code == ResponseCode.QUERY_NOT_FOUND:
        return []
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return [m.body for m in decode_records(resp.body or b"")]


async def _until_found(client: JavaLikeClient, addr: str, key: str) -> list[bytes]:
    async with asyncio.timeout(20):
        while not (found := await _query(client, addr, key)):
            await asyncio.sleep(0.05)
    return found


async def _each_found_once(client: JavaLikeClient, addr: str, count: int) -> None:
    """Once the last of keys 0..``count``-1 is found, each finds exactly its own message."""
    last = count - 1
    assert await _until_found(client, addr, f"key{last}") == [f"m{last}".encode()]
    for i in range(count):
        assert await _query(client, addr, f"key{i}") == [f"m{i}".encode()]


async def _sends(addr: str, first: int, n: int) -> None:
    client = JavaLikeClient()
    try:
        for i in range(first, first + n):
            sent = await client.send(addr, TOPIC, f"m{i}".encode(), keys=f"key{i}")
            assert sent.code == ResponseCode.SUCCESS, sent.remark
    finally:
        await client.close()


async def _dispatched(addr: str, upto: int) -> None:
    """Wait until the consume queue holds ``upto`` messages (a pull at upto-1 finds one)."""
    client = JavaLikeClient()
    try:
        async with asyncio.timeout(20):
            while True:
                resp = await client.pull(
                    addr, "g", TOPIC, upto - 1, queue_id=0, suspend_ms=200, expression="*"
                )
                if resp.code == ResponseCode.SUCCESS:
                    return
                await asyncio.sleep(0.05)
    finally:
        await client.close()


def test_records_the_index_missed_in_a_kill_are_indexed_at_the_next_start(
    tmp_path: Path,
) -> None:
    """1. A broker indexes sends 0..19 (found by key). 2. Its index worker is stopped
    (SIGSTOP); sends 20..39 are acknowledged and reach the consume queue. 3. SIGKILL the
    broker and the worker: what the worker had not read is gone. 4. A broker on the same store.
    Expected: keys 20..39 are found, each once (re-dispatched from the index's last record);
    keys 0..19 are found once (no record indexed twice)."""
    namesrv, ns_addr = start_namesrv(tmp_path)
    store = tmp_path / "store"
    try:
        broker, addr = start_broker(tmp_path, ns_addr, store=store, extra=EXTRA)
        try:
            (worker,) = child_pids(broker.proc.pid)

            async def before() -> None:
                await _sends(addr, 0, 20)
                client = JavaLikeClient()
                try:
                    assert await _until_found(client, addr, "key19") == [b"m19"]
                finally:
                    await client.close()
                os.kill(worker, signal.SIGSTOP)
                await _sends(addr, 20, 20)
                await _dispatched(addr, 40)

            asyncio.run(before())
        finally:
            broker.proc.send_signal(signal.SIGKILL)
            os.kill(worker, signal.SIGKILL)
            broker.stop()
        again, addr2 = start_broker(tmp_path, ns_addr, store=store, extra=EXTRA)
        try:

            async def after() -> None:
                client = JavaLikeClient()
                try:
                    await _each_found_once(client, addr2, 40)
                finally:
                    await client.close()

            asyncio.run(after())
        finally:
            assert again.stop() == 0, again.output()
    finally:
        namesrv.stop()


async def _replaced(client: JavaLikeClient, addr: str, broker_pid: int, old: int) -> None:
    """Until a worker other than ``old`` runs and answers queries (StoreError until then)."""
    ext = {"topic": TOPIC, "key": "none", "maxNum": "1", "beginTimestamp": "0",
           "endTimestamp": str(2**62)}  # fmt: skip
    async with asyncio.timeout(20):
        while True:
            if [p for p in child_pids(broker_pid) if p != old]:
                resp = await client.call(addr, RequestCode.QUERY_MESSAGE, ext)
                if resp.code in (ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND):
                    return
            await asyncio.sleep(0.05)


def test_a_replaced_worker_is_given_what_the_dead_one_lost(tmp_path: Path) -> None:
    """1. A broker indexes sends 0..19 (found by key). 2. Its index worker is stopped
    (SIGSTOP); sends 20..29 are acknowledged and reach the consume queue (handed to the
    stopped worker's socket), then the worker is SIGKILLed. 3. Sends 30..39 at once, while no
    worker runs. Expected, without a broker restart: a new worker starts; keys 0..39 are each
    found once (the reput went back to the new worker's last record); the consume queue still
    holds 40 messages (the units it had are not written twice)."""
    namesrv, ns_addr = start_namesrv(tmp_path)
    try:
        broker, addr = start_broker(tmp_path, ns_addr, store=tmp_path / "store", extra=EXTRA)
        try:
            (worker,) = child_pids(broker.proc.pid)

            async def run() -> None:
                await _sends(addr, 0, 20)
                client = JavaLikeClient()
                try:
                    assert await _until_found(client, addr, "key19") == [b"m19"]
                    os.kill(worker, signal.SIGSTOP)
                    await _sends(addr, 20, 10)
                    await _dispatched(addr, 30)
                    os.kill(worker, signal.SIGKILL)
                    await _sends(addr, 30, 10)
                    await _replaced(client, addr, broker.proc.pid, worker)
                    await _each_found_once(client, addr, 40)
                    pulled = await client.pull(addr, "g2", TOPIC, 0, max_nums=64, expression="*")
                    assert pulled.code == ResponseCode.SUCCESS, pulled.remark
                    bodies = [m.body for m in decode_records(pulled.body or b"")]
                    assert bodies == [f"m{i}".encode() for i in range(40)]
                    assert pulled.ext("maxOffset") == "40"
                finally:
                    await client.close()

            asyncio.run(run())
        finally:
            assert broker.stop() == 0, broker.output()
    finally:
        namesrv.stop()
