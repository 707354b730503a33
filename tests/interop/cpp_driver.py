"""Drives the real C++-based client (``rocketmq-client-python``) in its own process; prints JSON.

Run by the interop tests as a subprocess so a crash or hang in the native library cannot take pytest
down with it. Commands:

- ``send-missing --namesrv ADDR --topic T``: one synchronous send to a topic no broker serves;
  reports the error and how long it took (a proper error reply must come back instead of a hang).
- ``produce --namesrv ADDR --topic T --count N``: N synchronous sends; reports statuses and msg ids.
- ``consume --namesrv ADDR --topic T --group G --count N --timeout S``: push-consumes until N
  distinct messages arrived or S seconds passed; reports the bodies received.
- ``txn --namesrv ADDR --topic T --count N --timeout S``: N transactional sends each of
  ``txn-commit-i`` (local COMMIT), ``txn-rollback-i`` (ROLLBACK) and ``txn-unknown-i`` (UNKNOWN,
  the checker commits); waits until every unknown one was checked back or S seconds passed;
  reports the send statuses and the bodies the broker checked.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from typing import Any


def _send_missing(args: argparse.Namespace) -> dict[str, Any]:
    from rocketmq.client import Message, Producer  # noqa: PLC0415 - optional native client

    producer = Producer("interop_missing_pg", timeout=3000)
    producer.set_name_server_address(args.namesrv)
    producer.start()
    started = time.monotonic()
    try:
        msg = Message(args.topic)
        msg.set_body(b"x")
        result = producer.send_sync(msg)
        return {"ok": True, "status": int(result.status), "seconds": time.monotonic() - started}
    except Exception as e:  # noqa: BLE001 - the point is to report whatever the client raises
        return {
            "ok": False,
            "error": f"{type(e).__name__}: {e}",
            "seconds": time.monotonic() - started,
        }
    finally:
        producer.shutdown()


def _produce(args: argparse.Namespace) -> dict[str, Any]:
    from rocketmq.client import Message, Producer  # noqa: PLC0415

    producer = Producer("interop_pg", timeout=5000)
    producer.set_name_server_address(args.namesrv)
    producer.start()
    statuses: list[int] = []
    ids: list[str] = []
    errors: list[str] = []
    try:
        for i in range(args.count):
            msg = Message(args.topic)
            msg.set_keys(f"k{i}")
            msg.set_tags("TagA")
            msg.set_body(f"interop-{i}".encode())
            try:
                result = producer.send_sync(msg)
                statuses.append(int(result.status))
                ids.append(str(result.msg_id))
            except Exception as e:  # noqa: BLE001
                errors.append(f"{type(e).__name__}: {e}")
    finally:
        producer.shutdown()
    return {"statuses": statuses, "ids": ids, "errors": errors[:5], "error_count": len(errors)}


def _consume(args: argparse.Namespace) -> dict[str, Any]:
    from rocketmq.client import ConsumeStatus, PushConsumer  # noqa: PLC0415

    seen: set[str] = set()
    lock = threading.Lock()
    done = threading.Event()

    def on_message(msg: Any) -> Any:
        with lock:
            seen.add(msg.body.decode())
            if len(seen) >= args.count:
                done.set()
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(args.group)
    consumer.set_name_server_address(args.namesrv)
    consumer.subscribe(args.topic, on_message)
    consumer.start()
    done.wait(args.timeout)
    with lock:
        result = {"received": sorted(seen)}
    # librocketmq 2.1.0 can crash inside PushConsumer shutdown
    # (shutdownMessageTraceInnerProducer dereferences the trace producer it never created when
    # message trace is off), so the result is printed before shutting down.
    print(json.dumps(result), flush=True)
    consumer.shutdown()
    return result


def _txn(args: argparse.Namespace) -> dict[str, Any]:
    from rocketmq.client import Message, TransactionMQProducer, TransactionStatus  # noqa: PLC0415

    checked: set[str] = set()
    lock = threading.Lock()
    all_checked = threading.Event()

    def check(msg: Any) -> Any:
        body = msg.body.decode()
        with lock:
            checked.add(body)
            if sum(b.startswith("txn-unknown") for b in checked) >= args.count:
                all_checked.set()
        return TransactionStatus.COMMIT if "unknown" in body else TransactionStatus.ROLLBACK

    outcomes = {
        "commit": TransactionStatus.COMMIT,
        "rollback": TransactionStatus.ROLLBACK,
        "unknown": TransactionStatus.UNKNOWN,
    }
    producer = TransactionMQProducer("interop_txn_pg", check, timeout=5000)
    producer.set_name_server_address(args.namesrv)
    producer.start()
    statuses: list[int] = []
    try:
        for i in range(args.count):
            for kind, outcome in outcomes.items():
                msg = Message(args.topic)
                msg.set_body(f"txn-{kind}-{i}".encode())
                result = producer.send_message_in_transaction(
                    msg, lambda _m, _a, outcome=outcome: outcome
                )
                statuses.append(int(result.status))
        all_checked.wait(args.timeout)
        with lock:
            return {"statuses": statuses, "checked": sorted(checked)}
    finally:
        producer.shutdown()


def main() -> int:
    """Parse the command, run it, print one JSON object."""
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=("send-missing", "produce", "consume", "txn"))
    parser.add_argument("--namesrv", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--group", default="interop_cg")
    parser.add_argument("--count", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=60.0)
    args = parser.parse_args()
    handlers = {
        "send-missing": _send_missing,
        "produce": _produce,
        "consume": _consume,
        "txn": _txn,
    }
    result = handlers[args.command](args)
    if args.command != "consume":
        print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
