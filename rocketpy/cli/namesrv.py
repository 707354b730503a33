"""``mqnamesrv``: start a NameServer in the foreground (``NamesrvStartup``).

Flags as upstream: ``-c`` config file, ``-p`` print the effective config and exit. Prints
``The Name Server boot success. serializeType=JSON, address <host>:<port>`` when listening (the
real port when ``listenPort=0``). SIGTERM/SIGINT stop it cleanly; a bad config exits 2.
"""

from __future__ import annotations

import sys

from rocketpy.cli.common import boot, daemon_parser, load_settings, print_config, start_logging
from rocketpy.common.aio import run, serve_until_signalled
from rocketpy.namesrv.config import NamesrvConfig
from rocketpy.namesrv.service import NamesrvService


async def _serve(config: NamesrvConfig) -> int:
    service = NamesrvService(config)
    return await serve_until_signalled(
        [service],
        on_started=lambda: boot(
            f"The Name Server boot success. serializeType=JSON, address {service.address}"
        ),
    )


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``bin/mqnamesrv`` and ``python -m rocketpy.cli.namesrv``."""
    args = daemon_parser("mqnamesrv", __doc__ or "").parse_args(argv)
    config, unknown = load_settings(NamesrvConfig, args)
    if args.print_config:
        print_config(config)
        return 0
    start_logging("namesrv", unknown)
    return run(_serve(config))


if __name__ == "__main__":
    sys.exit(main())
