"""``mqcontroller``: start one controller (a member of the controller Raft group) in the
foreground (``ControllerStartup``).

Flags as upstream: ``-c`` config file, ``-p`` print the effective config and exit. Prints
``The Controller Server boot success. serializeType=JSON, address <host>:<port>`` once the node
listens on its peer address and its Raft node runs. SIGTERM/SIGINT stop it cleanly (scans, Raft
node, port); a bad or contradictory config (no ``controllerDLegerPeers``/``controllerDLegerSelfId``,
self id not among the peers) exits 2 with one line.
"""

from __future__ import annotations

import sys

from rocketpy.cli.common import (
    boot,
    daemon_parser,
    load_settings,
    print_config,
    refuse_unknown,
    start_logging,
)
from rocketpy.common.aio import run, serve_until_signalled
from rocketpy.controller.config import ControllerConfig
from rocketpy.controller.raft_node import make_raft_node
from rocketpy.controller.service import ControllerService

BOOT_LINE = "The Controller Server boot success. serializeType=JSON, address {address}"


async def _serve(config: ControllerConfig) -> int:
    service = ControllerService(config, node_factory=make_raft_node)
    return await serve_until_signalled(
        [service], on_started=lambda: boot(BOOT_LINE.format(address=service.address))
    )


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``bin/mqcontroller`` and ``python -m rocketpy.cli.controller``."""
    args = daemon_parser("mqcontroller", __doc__ or "").parse_args(argv)
    refuse_unknown(args, ControllerConfig)
    config, _ = load_settings(ControllerConfig, args)
    if args.print_config:
        print_config(config)
        return 0
    start_logging("controller")
    return run(_serve(config))


if __name__ == "__main__":
    sys.exit(main())
