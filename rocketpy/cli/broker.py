"""``mqbroker``: start a broker in the foreground (``BrokerStartup``).

Flags as upstream: ``-c`` config file (broker, remoting and store keys in one ``.properties``
file), ``-n`` NameServer address list (``;``-separated; else ``namesrvAddr`` from the file or the
``NAMESRV_ADDR`` environment variable), ``-p`` print the effective configuration and exit. Prints
``The broker[<brokerName>, <ip>:<port>] boot success. serializeType=JSON and name server is
<namesrvAddr>`` when serving (the real port when ``listenPort=0``; the ``and name server is``
part only when a NameServer is configured, as upstream). In controller mode the line waits until
the controllers gave the broker a role; until then it prints that it waits for them. SIGTERM/SIGINT
stop it in order; a bad config exits 2 with one line; a broker that dies of a bug exits 1.

``--enable-proxy [-pc rmq-proxy.json]`` (Local mode, upstream ``ProxyStartup -pm local``) also
serves the 5.x gRPC clients from this process (``rocketpy/cli/local_proxy.py``): after the boot
line it prints ``rocketmq-proxy startup successfully, grpc address <host>:<port>,
proxyMode=local ...``; SIGTERM stops the proxy first, then the broker.
"""

from __future__ import annotations

import asyncio
import sys

from rocketpy.broker.config import BrokerConfig
from rocketpy.broker.dledger_roles import check_dledger_config
from rocketpy.broker.service import BrokerService
from rocketpy.cli.common import (
    EXIT_CONFIG,
    boot,
    daemon_parser,
    load_settings,
    print_config,
    refuse_unknown,
    start_logging,
)
from rocketpy.common.aio import Service, run, serve_until_signalled, tune_gc
from rocketpy.common.errors import ConfigError
from rocketpy.ha.config import HAConfig
from rocketpy.proxy.config import ProxyConfig
from rocketpy.store.config import MessageStoreConfig


def boot_line(service: BrokerService) -> str:
    """Upstream's boot-success line for ``service``."""
    cfg = service.config
    line = f"The broker[{cfg.broker_name}, {service.address}] boot success. serializeType=JSON"
    if cfg.namesrv_addr:
        line += f" and name server is {cfg.namesrv_addr}"
    return line


def waiting_line(service: BrokerService) -> str:
    """What a controller-mode broker prints instead of the boot line while no controller has
    given it a role (the boot line follows once one does)."""
    cfg = service.config
    return (
        f"The broker[{cfg.broker_name}, {service.address}] is up but has no role yet: waiting "
        f"for the controllers at {cfg.controller_addr} (the boot line follows once one answers)"
    )


def resolve_ha_config(ha: HAConfig, broker: BrokerConfig) -> HAConfig:
    """``haListenPort`` defaults to ``listenPort + 1`` (``BrokerStartup``); decided: an explicit
    ``haListenPort`` wins (0 = any free port), and ``listenPort=0`` gives an HA port of 0 too."""
    if "ha_listen_port" in ha.model_fields_set:
        return ha
    port = broker.listen_port + 1 if broker.listen_port else 0
    return ha.with_updates({"haListenPort": port})


async def _serve(
    config: BrokerConfig, store_config: MessageStoreConfig, ha_config: HAConfig,
    proxy_config: ProxyConfig | None,
) -> int:  # fmt: skip
    shutdown = asyncio.Event()
    service = BrokerService(config, store_config, on_fatal=shutdown.set, ha_config=ha_config)
    service.on_ready = lambda: boot(boot_line(service))
    services: list[Service] = [service]
    if proxy_config is not None:
        # gRPC and protobuf only in a broker that serves them (~15 MB of its idle RSS).
        from rocketpy.cli import proxy as proxy_cli  # noqa: PLC0415
        from rocketpy.cli.local_proxy import local_proxy  # noqa: PLC0415

        proxy = local_proxy(proxy_config, service)
        services.append(proxy)

    def started() -> None:
        tune_gc()  # after start-up: what it made is the long-lived part of the heap
        if not service.ready.is_set():
            boot(waiting_line(service))
        if len(services) > 1:
            boot(proxy_cli.boot_line(proxy))

    code = await serve_until_signalled(
        services,
        on_started=started,
        stop_timeout_s=config.shutdown_timeout_ms / 1000 + 5,
        shutdown=shutdown,
    )
    return 1 if service.failed.is_set() else code


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``bin/mqbroker`` and ``python -m rocketpy.cli.broker``."""
    parser = daemon_parser("mqbroker", __doc__ or "")
    parser.add_argument(
        "--enable-proxy", dest="enable_proxy", action="store_true",
        help="also serve the 5.x gRPC clients in this process (Local mode)",
    )  # fmt: skip
    parser.add_argument("-pc", "--proxyConfigPath", dest="proxy_config", help="rmq-proxy.json")
    args = parser.parse_args(argv)
    overrides = {"namesrvAddr": args.namesrv_addr} if args.namesrv_addr else None
    refuse_unknown(args, BrokerConfig, MessageStoreConfig, HAConfig)
    config, _ = load_settings(BrokerConfig, args, overrides)
    store_config, _ = load_settings(MessageStoreConfig, args)
    ha_config, _ = load_settings(HAConfig, args)
    ha_config = resolve_ha_config(ha_config, config)
    try:
        check_dledger_config(config, store_config)
    except ConfigError as e:
        print(str(e), file=sys.stderr)
        return EXIT_CONFIG
    proxy_config = None
    if args.enable_proxy:
        from rocketpy.cli.local_proxy import load_local_config  # noqa: PLC0415 - as in _serve

        proxy_config = load_local_config(args.proxy_config, config.namesrv_addr)
    if args.print_config:
        print_config(config)
        print_config(store_config)
        print_config(ha_config)
        if proxy_config is not None:
            print_config(proxy_config)
        return 0
    start_logging("broker")
    return run(_serve(config, store_config, ha_config, proxy_config))


if __name__ == "__main__":
    sys.exit(main())
