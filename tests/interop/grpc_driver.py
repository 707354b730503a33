"""Drive the real 5.x gRPC client (rocketmq-python-client 5.1.2) against our proxy.

Runs in the interop venv (``install_grpc_client.py``), never in pytest's interpreter: the
client's generated ``apache.rocketmq.v2`` modules clash with ``rocketpy.proxy.pb``. Prints one
JSON line with the outcome, so the test can assert on it.

Commands:
    produce --endpoint HOST:PORT --topic T --count N [--tag TAG]: a Producer bound to the topic
        sends N NORMAL messages (body ``body-<i>``, key ``key-<i>``, property ``index=<i>``) and
        shuts down; prints each receipt's message id and offset, and each error.
    transaction --endpoint HOST:PORT --topic T --commit N --rollback N --orphan N: a Producer
        with a TransactionChecker (which answers COMMIT) sends N half messages it commits
        (body ``commit-<i>``), N it rolls back (``rollback-<i>``) and N it leaves open
        (``orphan-<i>``), then waits (at most ``--wait`` s) until the proxy relayed a check of
        every open one, lets the answers go out and shuts down; prints the message ids of each
        kind, the ids the checker saw, and each error.
    consume --endpoint HOST:PORT --topic T --group G --count N [--await-s S] [--invisible-s S]:
        a SimpleConsumer (await S, batch 32) receives until N messages arrived or 20 receives
        came back empty, acks each (unless ``--no-ack``), then receives once more; prints what
        it got (id, body, tag, keys, properties, delivery attempt), the ack errors and the last
        receive's length.
    push --endpoint HOST:PORT --topic T --group G --count N [--fail-every K] [--seconds S]:
        a PushConsumer whose listener fails the first delivery of every K-th index and succeeds
        otherwise, until every index succeeded or S seconds passed; prints each consumption
        (index, delivery attempt, result).
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time

from rocketmq import (
    ClientConfiguration,
    ConsumeResult,
    Credentials,
    FilterExpression,
    Message,
    MessageListener,
    Producer,
    PushConsumer,
    SimpleConsumer,
    TransactionChecker,
    TransactionResolution,
)


def produce(args: argparse.Namespace) -> dict[str, object]:
    """Send ``args.count`` messages and report the receipts."""
    config = ClientConfiguration(args.endpoint, Credentials(), request_timeout=5)
    producer = Producer(config, (args.topic,))
    started = time.monotonic()
    producer.startup()
    sent: list[dict[str, object]] = []
    errors: list[str] = []
    try:
        for i in range(args.count):
            msg = Message()
            msg.topic = args.topic
            msg.body = f"body-{i}".encode()
            msg.tag = args.tag
            msg.keys = f"key-{i}"
            msg.add_property("index", str(i))
            try:
                receipt = producer.send(msg)
            except Exception as e:  # noqa: BLE001 - reported to the test
                errors.append(f"{type(e).__name__}: {e}")
                continue
            sent.append({"index": i, "message_id": receipt.message_id, "offset": receipt.offset})
    finally:
        producer.shutdown()
    return {"sent": sent, "errors": errors, "seconds": time.monotonic() - started}


class CommitChecker(TransactionChecker):
    """Answers every check-back with COMMIT and notes which message it was asked about."""

    def __init__(self) -> None:
        self.checked: list[str] = []
        self.lock = threading.Lock()

    def check(self, message: Message) -> TransactionResolution:
        """COMMIT, after noting the message's body."""
        with self.lock:
            self.checked.append(message.body.decode())
        return TransactionResolution.COMMIT


def transaction(args: argparse.Namespace) -> dict[str, object]:
    """Commit, roll back and leave open half messages; wait for the open ones' check-backs."""
    config = ClientConfiguration(args.endpoint, Credentials(), request_timeout=5)
    checker = CommitChecker()
    producer = Producer(config, (args.topic,), checker)
    producer.startup()
    sent: dict[str, list[str]] = {"commit": [], "rollback": [], "orphan": []}
    errors: list[str] = []
    try:
        for kind, count in (
            ("commit", args.commit),
            ("rollback", args.rollback),
            ("orphan", args.orphan),
        ):
            for i in range(count):
                msg = Message()
                msg.topic = args.topic
                msg.body = f"{kind}-{i}".encode()
                msg.tag = "TagT"
                try:
                    txn = producer.begin_transaction()
                    receipt = producer.send(msg, txn)
                    if kind == "commit":
                        txn.commit()
                    elif kind == "rollback":
                        txn.rollback()
                except Exception as e:  # noqa: BLE001 - reported to the test
                    errors.append(f"{kind}-{i}: {type(e).__name__}: {e}")
                    continue
                sent[kind].append(receipt.message_id)
        orphans = {f"orphan-{i}" for i in range(args.orphan)}
        deadline = time.monotonic() + args.wait
        while time.monotonic() < deadline:
            with checker.lock:
                if orphans <= set(checker.checked):
                    break
            time.sleep(0.1)
        time.sleep(1.0)  # the checker's EndTransaction is sent asynchronously
    finally:
        producer.shutdown()
    with checker.lock:
        checked = sorted(set(checker.checked))
    return {"sent": sent, "checked": checked, "errors": errors}


def consume(args: argparse.Namespace) -> dict[str, object]:
    """Receive and ack ``args.count`` messages and report them."""
    config = ClientConfiguration(args.endpoint, Credentials(), request_timeout=5)
    consumer = SimpleConsumer(
        config, args.group, {args.topic: FilterExpression("*")}, await_duration=args.await_s
    )
    started = time.monotonic()
    consumer.startup()
    got: list[dict[str, object]] = []
    errors: list[str] = []
    empty_rounds = 0
    last: int = -1
    try:
        while len(got) < args.count and empty_rounds < 20:
            try:
                batch = consumer.receive(32, args.invisible_s)
            except Exception as e:  # noqa: BLE001 - reported to the test
                errors.append(f"receive {type(e).__name__}: {e}")
                empty_rounds += 1
                continue
            empty_rounds = 0 if batch else empty_rounds + 1
            for msg in batch:
                got.append({
                    "message_id": msg.message_id, "body": msg.body.decode(), "tag": msg.tag,
                    "keys": list(msg.keys), "properties": dict(msg.properties),
                    "attempt": msg.delivery_attempt,
                })  # fmt: skip
                if args.no_ack:
                    continue
                try:
                    consumer.ack(msg)
                except Exception as e:  # noqa: BLE001 - reported to the test
                    errors.append(f"ack {type(e).__name__}: {e}")
        last = len(consumer.receive(32, args.invisible_s))
    finally:
        consumer.shutdown()
    return {"got": got, "errors": errors, "last": last, "seconds": time.monotonic() - started}


class _Listener(MessageListener):
    """Fails the first delivery of every ``fail_every``-th index."""

    def __init__(self, count: int, fail_every: int) -> None:
        self.count = count
        self.fail_every = fail_every
        self.lock = threading.Lock()
        self.seen: list[dict[str, object]] = []
        self.ok: set[int] = set()
        self.done = threading.Event()

    def consume(self, message: Message) -> ConsumeResult:
        index = int(message.properties["index"])
        fail = index % self.fail_every == 0 and message.delivery_attempt == 1
        with self.lock:
            self.seen.append({"index": index, "attempt": message.delivery_attempt, "ok": not fail})
            if not fail:
                self.ok.add(index)
                if len(self.ok) >= self.count:
                    self.done.set()
        return ConsumeResult.FAILURE if fail else ConsumeResult.SUCCESS


def push(args: argparse.Namespace) -> dict[str, object]:
    """Consume with a PushConsumer until every index succeeded (or the time ran out)."""
    config = ClientConfiguration(args.endpoint, Credentials(), request_timeout=5)
    listener = _Listener(args.count, args.fail_every)
    consumer = PushConsumer(config, args.group, listener, {args.topic: FilterExpression("*")})
    started = time.monotonic()
    consumer.startup()
    try:
        listener.done.wait(args.seconds)
    finally:
        consumer.shutdown()
    with listener.lock:
        seen = list(listener.seen)
    return {"seen": seen, "seconds": time.monotonic() - started}


def main() -> int:
    """Parse the command line, run the command, print its JSON result."""
    parser = argparse.ArgumentParser(description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("produce")
    p.add_argument("--endpoint", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--count", type=int, default=10)
    p.add_argument("--tag", default="TagA")
    t = sub.add_parser("transaction")
    t.add_argument("--endpoint", required=True)
    t.add_argument("--topic", required=True)
    t.add_argument("--commit", type=int, default=3)
    t.add_argument("--rollback", type=int, default=3)
    t.add_argument("--orphan", type=int, default=2)
    t.add_argument("--wait", type=float, default=60.0)
    c = sub.add_parser("consume")
    c.add_argument("--endpoint", required=True)
    c.add_argument("--topic", required=True)
    c.add_argument("--group", required=True)
    c.add_argument("--count", type=int, default=10)
    c.add_argument("--await-s", type=int, default=5)
    c.add_argument("--invisible-s", type=int, default=30)
    c.add_argument("--no-ack", action="store_true")
    q = sub.add_parser("push")
    q.add_argument("--endpoint", required=True)
    q.add_argument("--topic", required=True)
    q.add_argument("--group", required=True)
    q.add_argument("--count", type=int, default=10)
    q.add_argument("--fail-every", type=int, default=10)
    q.add_argument("--seconds", type=float, default=60)
    args = parser.parse_args()
    commands = {
        "produce": produce, "transaction": transaction, "consume": consume, "push": push,
    }  # fmt: skip
    result = commands[args.command](args)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
