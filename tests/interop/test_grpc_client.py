"""The real 5.x gRPC client (rocketmq-python-client 5.1.2) through the proxy, both modes.

Producer through ``mqproxy`` (Cluster mode):

1. Start ``mqnamesrv``, ``mqbroker`` and ``mqproxy`` as processes on loopback (the proxy on port
   0, read from its boot line). 2. Create a NORMAL topic with ``mqadmin``. 3. In the interop venv
   (``install_grpc_client.py``; the client's generated modules clash with ours in one process) a
   ``Producer`` bound to the topic sends NORMAL messages through the proxy and shuts down. 4. Every
   send returns a receipt with the client's message id. 5. Our own remoting pull consumer reads
   every message back from the broker with the body, tag, key, user property and ``UNIQ_KEY`` the
   client sent. 6. The proxy logged the client's termination and exits 0 on SIGTERM.

Producer through Local mode (``mqbroker --enable-proxy``, no ``mqproxy``): as the first test.
The consumer, transaction and PushConsumer checks of proxy.md section 6 are in
``test_grpc_checks.py``, in both modes.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import pytest

from rocketpy.client.message import MessageExt, MessageQueue
from rocketpy.client.pull_api import PullStatus
from rocketpy.client.pull_consumer import PullConsumer
from tests.helpers.processes import run_bin, start_broker, start_namesrv
from tests.helpers.proxy import start_proxy
from tests.interop.install_grpc_client import interop_python
from tests.process.proxy.test_local_mode import LOCAL_BOOT, write_proxy_conf

pytestmark = pytest.mark.interop

HERE = Path(__file__).parent
COUNT = 200
TOPIC = "GrpcInteropTopic"


@pytest.fixture(scope="module", autouse=True)
def _grpc_client() -> None:
    if not interop_python().exists():
        pytest.skip("rocketmq-python-client 5.1.2 is not installed; run `make test`")


def _driver(*args: str, timeout_s: float = 120.0) -> dict[str, object]:
    result = subprocess.run(
        [str(interop_python()), str(HERE / "grpc_driver.py"), *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
        cwd=HERE,
    )
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    assert lines, f"driver printed no result (rc {result.returncode}):\n{result.stderr[-3000:]}"
    parsed: dict[str, object] = json.loads(lines[-1])
    return parsed


async def _pull_all(namesrv: str, topic: str) -> list[MessageExt]:
    consumer = PullConsumer("grpc_interop_reader", namesrv)
    await consumer.start()
    got: list[MessageExt] = []
    try:
        async with asyncio.timeout(30):
            for queue in await consumer.fetch_queues(topic):
                got.extend(await _pull_queue(consumer, queue))
    finally:
        await consumer.shutdown()
    return got


async def _pull_queue(consumer: PullConsumer, queue: MessageQueue) -> list[MessageExt]:
    got: list[MessageExt] = []
    offset = 0
    while True:
        result = await consumer.pull(queue, offset, max_nums=32)
        if result.status != PullStatus.FOUND:
            return got
        got.extend(result.msgs)
        offset = result.next_begin_offset


def _create_topic(tmp: Path, ns_addr: str, topic: str, kind: str) -> None:
    created = run_bin(
        ["mqadmin", "updateTopic", "-n", ns_addr, "-c", "DefaultCluster", "-t", topic,
         "-r", "4", "-w", "4", "-a", f"+message.type={kind}"],
        tmp,
    )  # fmt: skip
    assert created.returncode == 0, created.stdout + created.stderr


def _produce_and_check(ns_addr: str, port: int) -> None:
    """The Producer sends COUNT messages through the proxy at ``port``; all are stored."""
    result = _driver(
        "produce", "--endpoint", f"127.0.0.1:{port}", "--topic", TOPIC, "--count", str(COUNT)
    )
    assert result["errors"] == []
    sent = result["sent"]
    assert isinstance(sent, list)
    assert len(sent) == COUNT
    ids = {int(s["index"]): str(s["message_id"]) for s in sent}
    assert len(set(ids.values())) == COUNT
    stored = asyncio.run(_pull_all(ns_addr, TOPIC))
    by_index = {int(m.properties["index"]): m for m in stored}
    assert sorted(by_index) == list(range(COUNT)), f"{len(stored)} stored"
    for i, msg in by_index.items():
        assert msg.body == f"body-{i}".encode()
        assert msg.msg_id == ids[i]  # UNIQ_KEY = the client's message id
        assert (msg.tags, msg.keys) == ("TagA", f"key-{i}")
        assert msg.properties["PGROUP"] == TOPIC
    assert len({m.queue_id for m in stored}) == 4  # round robin over the write queues


def test_python_grpc_producer_sends_through_mqproxy(tmp_path: Path) -> None:
    namesrv, ns_addr = start_namesrv(tmp_path)
    broker, _ = start_broker(tmp_path, ns_addr)
    proxy = None
    try:
        _create_topic(tmp_path, ns_addr, TOPIC, "NORMAL")
        proxy, port = start_proxy(tmp_path, ns_addr)
        _produce_and_check(ns_addr, port)
        proxy.wait_output("client terminated")
    finally:
        codes = [d.stop() for d in (proxy, broker, namesrv) if d is not None]
    assert codes == [0] * len(codes), proxy.tail(3000) if proxy else ""


def test_python_grpc_producer_sends_through_local_mode(tmp_path: Path) -> None:
    namesrv, ns_addr = start_namesrv(tmp_path)
    broker = None
    try:
        broker, _ = start_broker(
            tmp_path, ns_addr, args=["--enable-proxy", "-pc", str(write_proxy_conf(tmp_path))]
        )
        port = int(broker.wait_for(LOCAL_BOOT).group(1))
        _create_topic(tmp_path, ns_addr, TOPIC, "NORMAL")
        _produce_and_check(ns_addr, port)
        broker.wait_output("client terminated")
    finally:
        codes = [d.stop() for d in (broker, namesrv) if d is not None]
    assert codes == [0] * len(codes), broker.tail(3000) if broker else ""
