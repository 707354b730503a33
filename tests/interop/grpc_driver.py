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
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time

from rocketmq import (
    ClientConfiguration,
    Credentials,
    Message,
    Producer,
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
    args = parser.parse_args()
    result = produce(args) if args.command == "produce" else transaction(args)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
