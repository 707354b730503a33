"""proxy.md section 6 acceptance checks with the real rocketmq-python-client 5.1.2, both modes.

Every check runs the real client in a subprocess (``grpc_driver.py`` in ``.venv-interop5``) against
a Cluster-mode ``mqproxy`` (``cluster``) and a Local-mode ``mqbroker --enable-proxy`` (``local``),
each started once per module (namesrv + broker [+ proxy] on loopback, port 0); each test makes its
own topics and groups with ``mqadmin``. The broker SIGKILL test starts processes of its own.

=====  ===========================================================================================
Check  Test (``[cluster]`` and ``[local]`` unless said)
=====  ===========================================================================================
G1     ``test_g1_thousand_messages_each_once_with_their_fields``
G3     ``test_g3_unacked_message_returns_and_only_the_new_handle_acks``
G4     ``test_g4_changed_invisible_time_holds_and_its_handle_acks``
G5     ``test_g5_fifo_group_in_send_order_and_unacked_batch_blocks``
G6     ``test_g6_delay_message_arrives_on_time_and_two_days_is_refused``
G7     ``test_g7_transaction_commit_rollback_and_check_back``
G8     ``test_g8_push_consumer_retries_a_failure`` (attempt 2);
       ``test_g8_push_listener_of_70_s_still_acks`` (auto renew; ``slow``: > 70 s by design)
G10    ``test_g10_four_mib_body_is_sent_and_one_byte_more_refused``
G11    every ``[local]`` variant (Local mode passes the same checks as Cluster mode)
G12    the ``env`` fixture: each mode's log shows the clients' termination, every daemon exits 0
kill   ``test_broker_sigkill_behind_proxy_loses_nothing_acked`` (Cluster mode): what the client
       acked never comes back after the broker's SIGKILL and restart (on a new port), the rest
       does, after at most 2 failed receives (the proxy expires the route through the dead port)
=====  ===========================================================================================
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from rocketpy.proxy.pb import definition_pb2 as pb
from tests.helpers.processes import Daemon, run_bin, start_broker, start_namesrv
from tests.helpers.proxy import start_proxy
from tests.interop.install_grpc_client import interop_python
from tests.process.proxy.test_local_mode import LOCAL_BOOT, TXN_EXTRA, write_proxy_conf

pytestmark = pytest.mark.interop

HERE = Path(__file__).parent
MAX_BODY = 4 * 1024 * 1024
#: Transaction check-backs after 1 s; commit log files that hold a 4 MiB message (G10).
BROKER_EXTRA = f"{TXN_EXTRA}mappedFileSizeCommitLog={4 * MAX_BODY}\n"


@dataclass
class Env:
    """One mode's daemons: ``front`` is the process serving gRPC (proxy or Local-mode broker)."""

    mode: str
    tmp: Path
    ns_addr: str
    port: int
    front: Daemon

    @property
    def endpoint(self) -> str:
        """The client's endpoint."""
        return f"127.0.0.1:{self.port}"


@pytest.fixture(scope="module", autouse=True)
def _grpc_client() -> None:
    if not interop_python().exists():
        pytest.skip("rocketmq-python-client 5.1.2 is not installed; run `make test`")


@pytest.fixture(scope="module", params=["cluster", "local"])
def env(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    """namesrv + broker + ``mqproxy`` (cluster) or namesrv + ``mqbroker --enable-proxy`` (local);
    at the end (G12) the front logged the clients' termination and every daemon exits 0."""
    mode = str(request.param)
    tmp = tmp_path_factory.mktemp(f"gchecks-{mode}")
    daemons: list[Daemon] = []
    try:
        namesrv, ns_addr = start_namesrv(tmp)
        daemons.append(namesrv)
        if mode == "cluster":
            broker, _ = start_broker(tmp, ns_addr, extra=BROKER_EXTRA)
            daemons.append(broker)
            front, port = start_proxy(tmp, ns_addr)
            daemons.append(front)
        else:
            args = ["--enable-proxy", "-pc", str(write_proxy_conf(tmp))]
            front, _ = start_broker(tmp, ns_addr, extra=BROKER_EXTRA, args=args)
            daemons.append(front)
            port = int(front.wait_for(LOCAL_BOOT).group(1))
        yield Env(mode, tmp, ns_addr, port, front)
        front.wait_output("client terminated")  # G12
    finally:
        codes = [d.stop() for d in reversed(daemons)]
    assert codes == [0] * len(codes), daemons[-1].tail(3000)


def driver(*args: str, timeout_s: float = 120.0) -> dict[str, object]:
    """Run ``grpc_driver.py`` in the interop venv; its JSON result."""
    result = subprocess.run(
        [str(interop_python()), str(HERE / "grpc_driver.py"), *args],
        capture_output=True, text=True, timeout=timeout_s, check=False, cwd=HERE,
    )  # fmt: skip
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    assert lines, f"driver printed no result (rc {result.returncode}):\n{result.stderr[-3000:]}"
    parsed: dict[str, object] = json.loads(lines[-1])
    return parsed


def unique(prefix: str) -> str:
    """A fresh resource name."""
    return f"{prefix}{uuid.uuid4().hex[:8]}"


def topic(env: Env, kind: str, queues: int = 4) -> str:
    """A fresh topic of ``kind`` made with ``mqadmin updateTopic ... +message.type=<kind>``."""
    name = unique(f"G{kind.title()}")
    done = run_bin(
        ["mqadmin", "updateTopic", "-n", env.ns_addr, "-c", "DefaultCluster", "-t", name,
         "-r", str(queues), "-w", str(queues), "-a", f"+message.type={kind}"],
        env.tmp,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return name


def orderly_group(env: Env) -> str:
    """A fresh FIFO group made with ``mqadmin updateSubGroup -o true``."""
    name = unique("GFifo")
    done = run_bin(
        ["mqadmin", "updateSubGroup", "-n", env.ns_addr, "-c", "DefaultCluster", "-g", name,
         "-o", "true"],
        env.tmp,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return name


def produce(env: Env, name: str, count: int, *extra: str) -> list[dict[str, object]]:
    """The Producer sends ``count`` messages; every send succeeded; the receipts."""
    result = driver("produce", "--endpoint", env.endpoint, "--topic", name, "--count", str(count),
                    *extra)  # fmt: skip
    assert result["errors"] == []
    sent = result["sent"]
    assert isinstance(sent, list)
    assert len(sent) == count
    return sent


def records(result: dict[str, object], key: str) -> list[dict[str, object]]:
    """A list of records of a driver result."""
    value = result[key]
    assert isinstance(value, list)
    return value


def test_g1_thousand_messages_each_once_with_their_fields(env: Env) -> None:
    name, count = topic(env, "NORMAL"), 1000
    ids = {int(str(s["index"])): s["message_id"] for s in produce(env, name, count)}
    assert len(set(ids.values())) == count
    result = driver(
        "consume", "--endpoint", env.endpoint, "--topic", name, "--group", unique("G1g"),
        "--count", str(count), timeout_s=300,
    )  # fmt: skip
    assert result["errors"] == []
    got = records(result, "got")
    assert len(got) == count  # each once
    by_index = {int(str(m["properties"]["index"])): m for m in got}  # type: ignore[index]
    assert sorted(by_index) == list(range(count))
    for i, msg in by_index.items():
        assert msg["message_id"] == ids[i]
        assert (msg["body"], msg["tag"], msg["keys"]) == (f"body-{i}", "TagA", [f"key-{i}"])
        assert msg["properties"] == {"index": str(i)}
        assert (msg["attempt"], msg["type"]) == (1, pb.MessageType.NORMAL)
    assert result["last"] == 0  # all acked: the next receive is empty


def test_g3_unacked_message_returns_and_only_the_new_handle_acks(env: Env) -> None:
    name = topic(env, "NORMAL", queues=1)
    sent = produce(env, name, 1)
    result = driver("redeliver", "--endpoint", env.endpoint, "--topic", name,
                    "--group", unique("G3g"))  # fmt: skip
    assert result["message_id"] == sent[0]["message_id"]
    back_after = result["back_after"]
    assert isinstance(back_after, float)
    assert 9.5 <= back_after <= 15.5, back_after
    assert result["attempts"] == [1, 2]
    assert result["old_ack"] == pb.Code.INVALID_RECEIPT_HANDLE
    assert result["new_ack"] == 0
    assert result["last"] == 0  # never seen again


def test_g4_changed_invisible_time_holds_and_its_handle_acks(env: Env) -> None:
    name = topic(env, "NORMAL", queues=1)
    produce(env, name, 1)
    result = driver("change", "--endpoint", env.endpoint, "--topic", name,
                    "--group", unique("G4g"), timeout_s=60)  # fmt: skip
    assert result["handle_changed"] is True
    assert result["back"] == []  # not back at 15 s
    assert (result["ack"], result["last"]) == (0, 0)


def test_g5_fifo_group_in_send_order_and_unacked_batch_blocks(env: Env) -> None:
    name, group = topic(env, "FIFO"), orderly_group(env)
    sent = produce(env, name, 200, "--groups", "g1,g2")
    order = {g: [s["message_id"] for s in sent if s["group"] == g] for g in ("g1", "g2")}
    result = driver(
        "fifo", "--endpoint", env.endpoint, "--topic", name, "--group", group, "--count", "200",
        timeout_s=180,
    )  # fmt: skip
    assert result["errors"] == []
    held, leaked = records(result, "held"), records(result, "leaked")
    assert held, "the first receive got nothing"
    held_groups = {m["group"] for m in held}
    for g in held_groups:  # the held batch starts its group, in order
        mine = [m["message_id"] for m in held if m["group"] == g]
        assert mine == order[str(g)][: len(mine)]
    brief = [(m["body"], m["group"], m["attempt"]) for m in held + leaked]
    assert [m for m in leaked if m["group"] in held_groups] == [], brief  # blocked while held
    deliveries = records(result, "deliveries")
    held_ids = {m["message_id"] for m in held}
    assert {m["message_id"]: m["attempt"] for m in deliveries if m["message_id"] in held_ids} == {
        i: 2 for i in held_ids
    }  # the held batch came back once it expired
    for g in ("g1", "g2"):
        firsts = [m["message_id"] for m in leaked + deliveries if m["group"] == g]
        assert firsts == order[g]  # each once, in send order
    assert result["last"] == 0


def test_g6_delay_message_arrives_on_time_and_two_days_is_refused(env: Env) -> None:
    name = topic(env, "DELAY")
    sent = produce(env, name, 1, "--delay-s", "10")
    result = driver(
        "consume", "--endpoint", env.endpoint, "--topic", name, "--group", unique("G6g"),
        "--count", "1", timeout_s=120,
    )  # fmt: skip
    got = records(result, "got")
    assert [m["message_id"] for m in got] == [sent[0]["message_id"]]
    deliver_s = sent[0]["delivery_timestamp"]  # the client sends seconds, reads back ms
    assert isinstance(deliver_s, int)
    assert got[0]["delivery_timestamp"] == deliver_s * 1000
    received_at, sent_at = float(str(got[0]["received_at"])), float(str(sent[0]["sent_at"]))
    assert received_at >= deliver_s - 0.5  # not before ~10 s
    assert received_at - sent_at <= 12.5  # by ~12 s
    assert got[0]["type"] == pb.MessageType.DELAY
    refused = driver("produce", "--endpoint", env.endpoint, "--topic", name, "--count", "1",
                     "--delay-s", str(2 * 86400))  # fmt: skip
    assert refused["sent"] == []
    assert refused["codes"] == [pb.Code.ILLEGAL_DELIVERY_TIME], refused["errors"]


def test_g7_transaction_commit_rollback_and_check_back(env: Env) -> None:
    name, group = topic(env, "TRANSACTION"), unique("G7g")
    result = driver(
        "transaction", "--endpoint", env.endpoint, "--topic", name,
        "--commit", "3", "--rollback", "3", "--orphan", "2",
    )  # fmt: skip
    assert result["errors"] == []
    sent = result["sent"]
    assert isinstance(sent, dict)
    assert result["checked"] == ["orphan-0", "orphan-1"]
    got = driver(
        "consume", "--endpoint", env.endpoint, "--topic", name, "--group", group, "--count", "5",
        timeout_s=180,
    )  # fmt: skip
    bodies = sorted(str(m["body"]) for m in records(got, "got"))
    assert bodies == ["commit-0", "commit-1", "commit-2", "orphan-0", "orphan-1"]
    ids = {m["body"]: m["message_id"] for m in records(got, "got")}
    assert [ids[f"commit-{i}"] for i in range(3)] == sent["commit"]
    assert got["last"] == 0  # rollback: never


def test_g8_push_consumer_retries_a_failure(env: Env) -> None:
    name, count = topic(env, "NORMAL"), 100
    produce(env, name, count)
    result = driver(
        "push", "--endpoint", env.endpoint, "--topic", name, "--group", unique("G8g"),
        "--count", str(count), "--fail-every", "10", "--seconds", "90", timeout_s=300,
    )  # fmt: skip
    seen = records(result, "seen")
    ok = sorted(int(str(s["index"])) for s in seen if s["ok"])
    assert ok == list(range(count))  # each consumed successfully exactly once
    failed = sorted(int(str(s["index"])) for s in seen if not s["ok"])
    assert failed == list(range(0, count, 10))
    attempts = {int(str(s["index"])): s["attempt"] for s in seen if s["ok"]}
    assert {attempts[i] for i in failed} == {2}
    assert {attempts[i] for i in set(ok) - set(failed)} == {1}


@pytest.mark.slow
def test_g8_push_listener_of_70_s_still_acks(env: Env) -> None:
    """The proxy renews the handle of a message the listener holds past its invisible time (60 s
    by default, renewed 10 s ahead): it is not redelivered and its ack at 70 s holds."""
    name, count = topic(env, "NORMAL"), 10
    produce(env, name, count)
    result = driver(
        "push", "--endpoint", env.endpoint, "--topic", name, "--group", unique("G8s"),
        "--count", str(count), "--fail-every", "0", "--slow-index", "3", "--slow-s", "70",
        "--seconds", "100", "--linger", "8", timeout_s=200,
    )  # fmt: skip
    seen = records(result, "seen")
    assert sorted(int(str(s["index"])) for s in seen) == list(range(count))  # none redelivered
    assert {s["attempt"] for s in seen} == {1}


def test_g10_four_mib_body_is_sent_and_one_byte_more_refused(env: Env) -> None:
    name = topic(env, "NORMAL", queues=1)
    produce(env, name, 1, "--body-size", str(MAX_BODY))
    result = driver(
        "consume", "--endpoint", env.endpoint, "--topic", name, "--group", unique("G10g"),
        "--count", "1", timeout_s=120,
    )  # fmt: skip
    got = records(result, "got")
    assert [len(str(m["body"])) for m in got] == [MAX_BODY]
    refused = driver("produce", "--endpoint", env.endpoint, "--topic", name, "--count", "1",
                     "--body-size", str(MAX_BODY + 1))  # fmt: skip
    assert refused["sent"] == []
    # the client refuses it itself, by the limit the proxy's Settings reply gave it
    assert [f"max size={MAX_BODY} bytes" in str(e) for e in records(refused, "errors")] == [True]


def test_broker_sigkill_behind_proxy_loses_nothing_acked(tmp_path: Path) -> None:
    """Cluster mode: the client acks half of 100 messages and holds the rest un-acked; the broker
    is SIGKILLed and restarted on its store; what was acked never comes back, the rest does."""
    namesrv, ns_addr = start_namesrv(tmp_path)
    broker, _ = start_broker(tmp_path, ns_addr)
    proxy: Daemon | None = None
    try:
        proxy, port = start_proxy(tmp_path, ns_addr)
        env = Env("cluster", tmp_path, ns_addr, port, proxy)
        name, group, count = topic(env, "NORMAL"), unique("GKill"), 100
        sent = {str(s["message_id"]) for s in produce(env, name, count)}
        first = driver(
            "consume", "--endpoint", env.endpoint, "--topic", name, "--group", group,
            "--count", str(count), "--ack-limit", str(count // 2), "--invisible-s", "10",
        )  # fmt: skip
        assert first["errors"] == []
        acked = {str(m["message_id"]) for m in records(first, "got") if m.get("acked")}
        assert len(acked) == count // 2
        broker.proc.kill()
        broker.proc.wait(timeout=10)
        broker.stop()
        broker, _ = start_broker(tmp_path, ns_addr)
        second = driver(
            "consume", "--endpoint", env.endpoint, "--topic", name, "--group", group,
            "--count", str(count - len(acked)), "--max-empty", "30", timeout_s=300,
        )  # fmt: skip
        # The restarted broker has a new port: a refused connection expires the proxy's cached
        # routes through the old address, the next receive reaches the new one.
        assert len(records(second, "errors")) <= 2, second["errors"]
        again = {str(m["message_id"]) for m in records(second, "got")}
        assert again & acked == set()  # acked: never back
        assert again == sent - acked  # not acked: back, nothing lost
    finally:
        codes = [d.stop() for d in (proxy, broker, namesrv) if d is not None]
    assert codes == [0] * len(codes), proxy.tail(3000) if proxy else ""
