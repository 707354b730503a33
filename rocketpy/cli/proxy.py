"""``mqproxy``: start the gRPC proxy in the foreground (``ProxyStartup``), Cluster mode.

Flags as upstream: ``-n`` NameServer address list (else ``namesrvAddr`` from the file or the
``NAMESRV_ADDR`` environment variable), ``-pc`` the ``rmq-proxy.json`` file (a JSON object keyed
by ``ProxyConfig`` field names; default ``$ROCKETMQ_HOME/conf/rmq-proxy.json`` when that
exists), ``-pm`` the proxy mode (``cluster``; ``local`` is ``mqbroker --enable-proxy`` and is
refused here), and rocketpy's ``-p`` (print the effective configuration and exit). Prints
``rocketmq-proxy startup successfully, grpc address <host>:<port>, proxyMode=cluster and name
server is <namesrvAddr>`` when serving (the bound port when ``grpcServerPort=0``).
SIGTERM/SIGINT stop it: no new calls, in-flight ones finish, then the broker connections close.
A bad or unknown key exits 2 with one line.
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
from pathlib import Path

from rocketpy.cli.common import EXIT_CONFIG, boot, log_dir, print_config, start_logging
from rocketpy.common.aio import run, serve_until_signalled
from rocketpy.common.errors import ConfigError
from rocketpy.common.properties import parse_properties
from rocketpy.proxy.cluster_backend import ClusterBackend
from rocketpy.proxy.config import ProxyConfig, json_to_properties
from rocketpy.proxy.grpc_server import ProxyService


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mqproxy", description=__doc__)
    parser.add_argument("-n", "--namesrvAddr", dest="namesrv_addr", help="name server address list")
    parser.add_argument("-pc", "--proxyConfigPath", dest="proxy_config", help="rmq-proxy.json")
    parser.add_argument("-pm", "--proxyMode", dest="proxy_mode", help="cluster (default)")
    parser.add_argument(
        "-p", "--printConfigItem", dest="print_config", action="store_true",
        help="print all config items and exit",
    )  # fmt: skip
    return parser


def _config_path(args: argparse.Namespace) -> Path | None:
    if args.proxy_config:
        return Path(args.proxy_config)
    home = os.environ.get("ROCKETMQ_HOME")
    default = Path(home) / "conf" / "rmq-proxy.json" if home else None
    return default if default is not None and default.exists() else None


def load_config(args: argparse.Namespace) -> ProxyConfig:
    """The effective settings: ``-n``/``-pm`` over the environment over ``-pc`` over defaults.
    Exits 2 with one line on an unreadable file, an unknown key or a bad value."""
    text = None
    path = _config_path(args)
    try:
        if path is not None:
            text = json_to_properties(path.read_text(encoding="utf-8"), str(path))
    except OSError as e:
        print(f"cannot read config file {path}: {e.strerror}", file=sys.stderr)
        raise SystemExit(EXIT_CONFIG) from e
    except ConfigError as e:
        print(str(e), file=sys.stderr)
        raise SystemExit(EXIT_CONFIG) from e
    known = list(ProxyConfig.keys())
    unknown = sorted(set(parse_properties(text or "")) - set(known))
    if unknown:
        named = []
        for key in unknown:
            close = difflib.get_close_matches(key, known, n=1, cutoff=0.75)
            named.append(f"{key} (did you mean {close[0]}?)" if close else key)
        print(
            f"unknown config keys in {path}: {', '.join(named)}; rocketpy does not support "
            "them, so they would have no effect: fix their spelling or remove them",
            file=sys.stderr,
        )
        raise SystemExit(EXIT_CONFIG)
    overrides = {"namesrvAddr": args.namesrv_addr, "proxyMode": args.proxy_mode}
    try:
        config, _ = ProxyConfig.load(file_text=text, env=os.environ, overrides=overrides)
    except ConfigError as e:
        print(str(e), file=sys.stderr)
        raise SystemExit(EXIT_CONFIG) from e
    return config


def boot_line(service: ProxyService) -> str:
    """Upstream's start-up line plus the bound gRPC address."""
    cfg = service.config
    line = (
        f"rocketmq-proxy startup successfully, grpc address {service.address}, "
        f"proxyMode={cfg.proxy_mode.lower()}"
    )
    if cfg.namesrv_addr:
        line += f" and name server is {cfg.namesrv_addr}"
    return line


async def _serve(config: ProxyConfig) -> int:
    service = ProxyService(config, ClusterBackend(config), metrics_dir=log_dir() / "metrics")
    return await serve_until_signalled(
        [service],
        on_started=lambda: boot(boot_line(service)),
        stop_timeout_s=config.grpc_shutdown_time_s + 5,
    )


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``bin/mqproxy`` and ``python -m rocketpy.cli.proxy``."""
    args = _parser().parse_args(argv)
    config = load_config(args)
    if config.proxy_mode.lower() == "local":
        print(
            "proxyMode=local runs the proxy inside a broker: start `mqbroker --enable-proxy` "
            "instead of mqproxy",
            file=sys.stderr,
        )
        raise SystemExit(EXIT_CONFIG)
    if args.print_config:
        print_config(config)
        return 0
    start_logging("proxy")
    return run(_serve(config))


if __name__ == "__main__":
    sys.exit(main())
