"""Drive the real 5.x gRPC client (rocketmq-python-client 5.1.2) against our proxy.

Runs in the interop venv (``install_grpc_client.py``), never in pytest's interpreter: the
client's generated ``apache.rocketmq.v2`` modules clash with ``rocketpy.proxy.pb``. Prints one
JSON line with the outcome, so the test can assert on it.

Commands:
    produce --endpoint HOST:PORT --topic T --count N [--tag TAG]: a Producer bound to the topic
        sends N NORMAL messages (body ``body-<i>``, key ``key-<i>``, property ``index=<i>``) and
        shuts down; prints each receipt's message id and offset, and each error.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from rocketmq import ClientConfiguration, Credentials, Message, Producer


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


def main() -> int:
    """Parse the command line, run the command, print its JSON result."""
    parser = argparse.ArgumentParser(description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("produce")
    p.add_argument("--endpoint", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--count", type=int, default=10)
    p.add_argument("--tag", default="TagA")
    args = parser.parse_args()
    result = produce(args)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
