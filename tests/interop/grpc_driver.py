"""Drive the real 5.x gRPC client (rocketmq-python-client 5.1.2) against our proxy.

Runs in the interop venv (``install_grpc_client.py``), never in pytest's interpreter: the
client's generated ``apache.rocketmq.v2`` modules clash with ``rocketpy.proxy.pb``. Prints one
JSON line with the outcome, so the test can assert on it.

Commands:
    produce --endpoint HOST:PORT --topic T --count N [--tag TAG] [--groups G1,G2]
        [--delay-s S] [--body-size B]: a Producer bound to the topic sends N messages (body
        ``body-<i>``, key ``key-<i>``, property ``index=<i>``; FIFO in message group
        ``groups[i % len]``; DELAY with ``delivery_timestamp = int(time.time()) + S``; a body of
        exactly B bytes) and shuts down; prints each receipt's message id and offset, the send
        times (epoch s) and each error with its status code.
    transaction --endpoint HOST:PORT --topic T --commit N --rollback N --orphan N: a Producer
        with a TransactionChecker (which answers COMMIT) sends N half messages it commits
        (body ``commit-<i>``), N it rolls back (``rollback-<i>``) and N it leaves open
        (``orphan-<i>``), then waits (at most ``--wait`` s) until the proxy relayed a check of
        every open one, lets the answers go out and shuts down; prints the message ids of each
        kind, the ids the checker saw, and each error.
    consume --endpoint HOST:PORT --topic T --group G --count N [--await-s S] [--invisible-s S]:
        a SimpleConsumer (await S, batch 32) receives until N messages arrived or 20 receives
        (``--max-empty``) came back empty or failed (1 s pause after a failure), acks each
        (unless ``--no-ack``; only the first K with ``--ack-limit K``), then receives once more;
        prints what it got (id, body, tag, keys, properties, delivery attempt, message type,
        delivery timestamp, receive time, acked), the errors and the last receive's length.
    redeliver --endpoint HOST:PORT --topic T --group G: receives one message invisible 10 s
        without acking, receives until it is back; then acks the old handle, then the new one,
        and receives once more; prints the seconds until it came back, its attempt, each ack's
        status code (0 = OK) and the last receive's length.
    change --endpoint HOST:PORT --topic T --group G: receives one message invisible 10 s,
        changes that to 30 s, receives until 15 s passed, acks with the handle the change
        returned, receives once more; prints what came back before 15 s, the ack's code and the
        last receive's length.
    fifo --endpoint HOST:PORT --topic T --group G --count N: an orderly group's SimpleConsumer
        receives a first batch invisible 15 s without acking, receives (and acks) for 5 s more
        (what got past the blocked batch), then receives until the batch is back, acking
        everything from then on until N were acked; prints every delivery in order.
    push --endpoint HOST:PORT --topic T --group G --count N [--fail-every K] [--seconds S]:
        a PushConsumer whose listener fails the first delivery of every K-th index and succeeds
        otherwise, until every index succeeded or S seconds passed (``--slow-index K --slow-s
        D``: the listener sleeps D s on index K before answering SUCCESS; ``--linger L``: keep
        consuming L s after that); prints each consumption (index, delivery attempt, result).
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


def _code(e: Exception) -> int:
    """The status code a client exception carries (-1 for one raised without a status)."""
    code = getattr(e, "code", None)
    return int(code) if isinstance(code, int) else -1


def produce(args: argparse.Namespace) -> dict[str, object]:
    """Send ``args.count`` messages and report the receipts."""
    config = ClientConfiguration(args.endpoint, Credentials(), request_timeout=10)
    producer = Producer(config, (args.topic,))
    started = time.monotonic()
    producer.startup()
    groups = [g for g in args.groups.split(",") if g]
    sent: list[dict[str, object]] = []
    errors: list[str] = []
    codes: list[int] = []
    try:
        for i in range(args.count):
            msg = Message()
            msg.topic = args.topic
            msg.body = b"x" * args.body_size if args.body_size else f"body-{i}".encode()
            msg.tag = args.tag
            msg.keys = f"key-{i}"
            msg.add_property("index", str(i))
            if groups:
                msg.message_group = groups[i % len(groups)]
            if args.delay_s:
                msg.delivery_timestamp = int(time.time()) + args.delay_s
            sent_at = time.time()
            try:
                receipt = producer.send(msg)
            except Exception as e:  # noqa: BLE001 - reported to the test
                errors.append(f"{type(e).__name__}: {e}")
                codes.append(_code(e))
                continue
            sent.append({
                "index": i, "message_id": receipt.message_id, "offset": receipt.offset,
                "sent_at": sent_at, "delivery_timestamp": msg.delivery_timestamp,
                "group": msg.message_group,
            })  # fmt: skip
    finally:
        producer.shutdown()
    return {"sent": sent, "errors": errors, "codes": codes, "seconds": time.monotonic() - started}


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


def _simple(args: argparse.Namespace) -> SimpleConsumer:
    config = ClientConfiguration(args.endpoint, Credentials(), request_timeout=5)
    return SimpleConsumer(
        config, args.group, {args.topic: FilterExpression("*")}, await_duration=args.await_s
    )


def _fields(msg: Message) -> dict[str, object]:
    return {
        "message_id": msg.message_id, "body": msg.body.decode(), "tag": msg.tag,
        "keys": list(msg.keys), "properties": dict(msg.properties),
        "attempt": msg.delivery_attempt, "type": int(msg.message_type or 0),
        "delivery_timestamp": msg.delivery_timestamp, "group": msg.message_group,
        "received_at": time.time(),
    }  # fmt: skip


def _ack_code(consumer: SimpleConsumer, msg: Message) -> int:
    """Ack ``msg`` with the handle it holds; 0 when OK, else the status code."""
    try:
        consumer.ack(msg)
    except Exception as e:  # noqa: BLE001 - reported to the test
        return _code(e)
    return 0


def consume(args: argparse.Namespace) -> dict[str, object]:
    """Receive and ack ``args.count`` messages and report them."""
    consumer = _simple(args)
    started = time.monotonic()
    consumer.startup()
    got: list[dict[str, object]] = []
    errors: list[str] = []
    empty_rounds = 0
    acked = 0
    last: int = -1
    try:
        while len(got) < args.count and empty_rounds < args.max_empty:
            try:
                batch = consumer.receive(32, args.invisible_s)
            except Exception as e:  # noqa: BLE001 - reported to the test
                errors.append(f"receive {type(e).__name__}: {e}")
                empty_rounds += 1
                time.sleep(1.0)  # as a consumer backs off after a failed receive
                continue
            empty_rounds = 0 if batch else empty_rounds + 1
            for msg in batch:
                got.append(_fields(msg))
                if args.no_ack or 0 <= args.ack_limit <= acked:
                    continue
                try:
                    consumer.ack(msg)
                except Exception as e:  # noqa: BLE001 - reported to the test
                    errors.append(f"ack {type(e).__name__}: {e}")
                    continue
                got[-1]["acked"] = True
                acked += 1
        try:
            last = len(consumer.receive(32, args.invisible_s))
        except Exception as e:  # noqa: BLE001 - reported to the test
            errors.append(f"receive {type(e).__name__}: {e}")
    finally:
        consumer.shutdown()
    return {"got": got, "errors": errors, "last": last, "seconds": time.monotonic() - started}


def _receive_one(consumer: SimpleConsumer, invisible_s: int, rounds: int = 10) -> Message:
    for _ in range(rounds):
        batch = consumer.receive(1, invisible_s)
        if batch:
            return batch[0]
    raise RuntimeError("nothing to receive")


def redeliver(args: argparse.Namespace) -> dict[str, object]:
    """G3: a message not acked within its invisible time comes back; only the new handle acks."""
    consumer = _simple(args)
    consumer.startup()
    try:
        first = _receive_one(consumer, 10)
        received = time.monotonic()
        again: Message | None = None
        while again is None and time.monotonic() - received < 30:
            for msg in consumer.receive(32, 30):
                if msg.message_id == first.message_id:
                    again = msg
        if again is None:
            return {"back_after": None}
        back_after = time.monotonic() - received
        old_ack = _ack_code(consumer, first)
        new_ack = _ack_code(consumer, again)
        last = len(consumer.receive(32, 10))
    finally:
        consumer.shutdown()
    return {
        "message_id": first.message_id, "back_after": back_after,
        "attempts": [first.delivery_attempt, again.delivery_attempt],
        "old_ack": old_ack, "new_ack": new_ack, "last": last,
    }  # fmt: skip


def change(args: argparse.Namespace) -> dict[str, object]:
    """G4: invisible 10 s changed to 30 s: not back at 15 s; the returned handle acks."""
    consumer = _simple(args)
    consumer.startup()
    back: list[dict[str, object]] = []
    try:
        msg = _receive_one(consumer, 10)
        received = time.monotonic()
        old_handle = msg.receipt_handle
        consumer.change_invisible_duration(msg, 30)  # the client stores the returned handle
        changed = msg.receipt_handle != old_handle
        while time.monotonic() - received < 15:
            back.extend(_fields(m) for m in consumer.receive(32, 30))
        ack = _ack_code(consumer, msg)
        last = len(consumer.receive(32, 10))
    finally:
        consumer.shutdown()
    return {"back": back, "handle_changed": changed, "ack": ack, "last": last}


def fifo(args: argparse.Namespace) -> dict[str, object]:
    """G5: an orderly group's deliveries in order; an un-acked batch blocks its queue."""
    consumer = _simple(args)
    consumer.startup()
    held: list[dict[str, object]] = []
    leaked: list[dict[str, object]] = []
    deliveries: list[dict[str, object]] = []
    acked: set[str] = set()
    errors: list[str] = []
    try:
        batch: list[Message] = []
        for _ in range(10):
            batch = consumer.receive(32, 15)
            if batch:
                break
        held = [_fields(m) for m in batch]
        held_at = time.monotonic()
        while time.monotonic() - held_at < 5:  # the last receive ends before the batch expires
            for msg in consumer.receive(32, 30):
                leaked.append(_fields(msg))
                if _ack_code(consumer, msg) == 0:
                    acked.add(msg.message_id)
        empty_rounds = 0
        while len(acked) < args.count and empty_rounds < 10:
            batch = consumer.receive(32, 30)
            empty_rounds = 0 if batch else empty_rounds + 1
            for msg in batch:
                deliveries.append(_fields(msg))
                code = _ack_code(consumer, msg)
                if code:
                    errors.append(f"ack {msg.message_id}: {code}")
                else:
                    acked.add(msg.message_id)
        last = len(consumer.receive(32, 10))
    finally:
        consumer.shutdown()
    return {
        "held": held, "leaked": leaked, "deliveries": deliveries, "errors": errors, "last": last,
    }  # fmt: skip


class _Listener(MessageListener):
    """Fails the first delivery of every ``fail_every``-th index (none when 0)."""

    def __init__(
        self, count: int, fail_every: int, slow_index: int = -1, slow_s: float = 0
    ) -> None:
        self.count = count
        self.fail_every = fail_every
        self.slow_index = slow_index
        self.slow_s = slow_s
        self.lock = threading.Lock()
        self.seen: list[dict[str, object]] = []
        self.ok: set[int] = set()
        self.done = threading.Event()

    def consume(self, message: Message) -> ConsumeResult:
        index = int(message.properties["index"])
        fail = (
            self.fail_every > 0 and index % self.fail_every == 0 and message.delivery_attempt == 1
        )
        if index == self.slow_index:
            time.sleep(self.slow_s)
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
    listener = _Listener(args.count, args.fail_every, args.slow_index, args.slow_s)
    consumer = PushConsumer(config, args.group, listener, {args.topic: FilterExpression("*")})
    started = time.monotonic()
    consumer.startup()
    try:
        listener.done.wait(args.seconds)
        time.sleep(args.linger)
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
    p.add_argument("--groups", default="")
    p.add_argument("--delay-s", type=int, default=0)
    p.add_argument("--body-size", type=int, default=0)
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
    c.add_argument("--ack-limit", type=int, default=-1)
    c.add_argument("--max-empty", type=int, default=20)
    for name in ("redeliver", "change", "fifo"):
        r = sub.add_parser(name)
        r.add_argument("--endpoint", required=True)
        r.add_argument("--topic", required=True)
        r.add_argument("--group", required=True)
        r.add_argument("--count", type=int, default=1)
        r.add_argument("--await-s", type=int, default=5)
    q = sub.add_parser("push")
    q.add_argument("--endpoint", required=True)
    q.add_argument("--topic", required=True)
    q.add_argument("--group", required=True)
    q.add_argument("--count", type=int, default=10)
    q.add_argument("--fail-every", type=int, default=10)
    q.add_argument("--seconds", type=float, default=60)
    q.add_argument("--slow-index", type=int, default=-1)
    q.add_argument("--slow-s", type=float, default=0)
    q.add_argument("--linger", type=float, default=0)
    args = parser.parse_args()
    commands = {
        "produce": produce, "transaction": transaction, "consume": consume, "push": push,
        "redeliver": redeliver, "change": change, "fifo": fifo,
    }  # fmt: skip
    result = commands[args.command](args)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
