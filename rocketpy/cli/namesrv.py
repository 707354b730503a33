"""``mqnamesrv``: start a NameServer in the foreground (``NamesrvStartup``).

Flags as upstream: ``-c`` config file, ``-p`` print the effective config and exit. Prints
``The Name Server boot success. serializeType=JSON, address <host>:<port>`` when listening (the
real port when ``listenPort=0``). With ``enableControllerInNamesrv=true`` the same file's controller
keys start an embedded controller too (``The ControllerManager boot success. ...`` follows).
SIGTERM/SIGINT stop it cleanly; a bad config exits 2.
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
from rocketpy.common.aio import Service, run, serve_until_signalled
from rocketpy.controller.config import ControllerConfig
from rocketpy.controller.raft_node import make_raft_node
from rocketpy.controller.service import ControllerService
from rocketpy.namesrv.config import NamesrvConfig
from rocketpy.namesrv.service import NamesrvService


async def _serve(config: NamesrvConfig, controller: ControllerConfig | None) -> int:
    service = NamesrvService(config)
    services: list[Service] = [service]
    embedded = None
    if controller is not None:
        # enableControllerInNamesrv: the same controller, on its own (DLedger peer) port.
        embedded = ControllerService(controller, node_factory=make_raft_node)
        services.append(embedded)

    def started() -> None:
        boot(f"The Name Server boot success. serializeType=JSON, address {service.address}")
        if embedded is not None:
            boot(
                "The ControllerManager boot success. serializeType=JSON, "
                f"address {embedded.address}"
            )

    return await serve_until_signalled(services, on_started=started)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``bin/mqnamesrv`` and ``python -m rocketpy.cli.namesrv``."""
    args = daemon_parser("mqnamesrv", __doc__ or "").parse_args(argv)
    # The same file may hold the embedded controller's keys, used or not.
    refuse_unknown(args, NamesrvConfig, ControllerConfig)
    config, _ = load_settings(NamesrvConfig, args)
    controller = None
    if config.enable_controller_in_namesrv:
        controller, _ = load_settings(ControllerConfig, args)  # same file, controller keys
    if args.print_config:
        print_config(config)
        if controller is not None:
            print_config(controller)
        return 0
    start_logging("namesrv")
    return run(_serve(config, controller))


if __name__ == "__main__":
    sys.exit(main())
