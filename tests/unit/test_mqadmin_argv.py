"""``mqadmin``'s argument rewriting for attribute deletions (``-a -key``)."""

from __future__ import annotations

from rocketpy.cli.admin import build_parser
from rocketpy.cli.admin_base import attach_attribute_values


def test_mqadmin_attaches_dash_attribute_values() -> None:
    """``-a -key`` reaches the parser as ``-a-key`` (argparse would read ``-key`` as an option);
    ``--attributes -key`` as ``--attributes=-key``; ``+key=v`` values and a following real
    option (``-n``) are left as written."""
    argv = ["updateTopic", "-t", "T", "-c", "C", "-a", "-reserve.time", "-n", "x:1"]
    assert attach_attribute_values(argv) == [
        "updateTopic", "-t", "T", "-c", "C", "-a-reserve.time", "-n", "x:1"
    ]  # fmt: skip
    args = build_parser().parse_args(attach_attribute_values(argv))
    assert (args.attributes, args.namesrv_addr) == ("-reserve.time", "x:1")
    assert attach_attribute_values(["--attributes", "-kk", "-a", "+k=v", "-a", "-n"]) == [
        "--attributes=-kk", "-a", "+k=v", "-a", "-n"
    ]  # fmt: skip
