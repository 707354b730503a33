"""``make cluster-classic LAYOUT=...``: a classic master/slave cluster (no controller) on loopback.

Owns: reading a layout's broker configs (``conf/<layout>/*.properties``: 2m-noslave, 2m-2s-async,
2m-2s-sync, upstream's sample layouts), rewriting their ports and store paths for a throwaway
directory, and starting a NameServer plus those brokers through :func:`rocketpy.tools.cluster
.launch` (pids and addresses in ``<dir>/cluster.json``; ``stop`` ends them in reverse order).
Must not: import daemon packages (it drives them as processes, like an operator would).

Ports: with ``--base-port 9876`` (default) the NameServer listens on 9876 and each broker keeps
its conf's ``listenPort``/``haListenPort`` shifted by ``base - 9876``; ``--base-port 0`` gives
every daemon a free port (slaves learn their master's HA port from the NameServer).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from rocketpy.common.properties import parse_properties
from rocketpy.tools.cluster import (
    BROKER_BOOT,
    NAMESRV_BOOT,
    Member,
    Spec,
    launch,
    stop,
)

LAYOUTS = ("2m-noslave", "2m-2s-async", "2m-2s-sync")
DEFAULT_BASE_PORT = 9876
CONF_DIR = Path(__file__).resolve().parents[2] / "conf"


def read_layout(layout: str, conf_dir: Path = CONF_DIR) -> dict[str, dict[str, str]]:
    """The broker configs of ``layout``: file stem -> properties, masters before slaves.

    Raises:
        FileNotFoundError: no such layout directory or it holds no ``.properties`` file.
    """
    files = sorted((conf_dir / layout).glob("*.properties"))
    if not files:
        raise FileNotFoundError(f"no broker configs under {conf_dir / layout}")
    confs = {f.stem: parse_properties(f.read_text(encoding="utf-8")) for f in files}
    # slaves learn the master's HA address from the NameServer: start masters first
    return dict(sorted(confs.items(), key=lambda kv: (kv[1].get("brokerId", "0") != "0", kv[0])))


def layout_specs(
    layout: str,
    data: Path,
    *,
    base_port: int = DEFAULT_BASE_PORT,
    overrides: dict[str, str] | None = None,
    conf_dir: Path = CONF_DIR,
) -> list[Spec]:
    """A NameServer and the layout's brokers, rewritten for ``data`` and ``base_port``.

    Args:
        layout: one of :data:`LAYOUTS` (any directory of ``conf_dir`` works).
        data: where each daemon's store goes (``<data>/<name>/store``).
        base_port: the NameServer's port; brokers shift their conf ports by
            ``base_port - 9876``; 0 makes every port a free one.
        overrides: extra broker keys (e.g. smaller ``mappedFileSizeCommitLog`` for tests).
        conf_dir: the directory holding the layouts.
    """
    specs = [
        Spec(
            "namesrv",
            "namesrv",
            "rocketpy.cli.namesrv",
            {
                "listenPort": str(base_port),
                "bindAddress": "127.0.0.1",
                "kvConfigPath": str(data / "namesrv" / "kvConfig.json"),
                "configStorePath": str(data / "namesrv" / "namesrv.properties"),
            },
            NAMESRV_BOOT,
        )
    ]
    shift = base_port - DEFAULT_BASE_PORT
    for name, original in read_layout(layout, conf_dir).items():
        conf = dict(original)
        for key in ("listenPort", "haListenPort"):
            if key in conf:
                conf[key] = str(int(conf[key]) + shift) if base_port else "0"
        conf["storePathRootDir"] = str(data / name / "store")
        conf["namesrvAddr"] = "{namesrv}"
        conf.update(overrides or {})
        specs.append(Spec(name, "broker", "rocketpy.cli.broker", conf, BROKER_BOOT))
    return specs


def _print_summary(directory: Path, layout: str, members: list[Member]) -> None:
    namesrv = ";".join(m.address for m in members if m.role == "namesrv")
    print(f"rocketpy classic cluster ({layout}) running, data and logs under {directory}")
    for m in members:
        print(f"  {m.name:<14} {m.role:<8} {m.address:<22} pid {m.pid:<8} log {m.log}")
    print(f"NAMESRV_ADDR={namesrv}")
    print(f"  try:  bin/mqadmin clusterList -n {namesrv}")
    print(
        "        .venv/bin/python -m rocketpy.tools.benchmark producer"
        f" -n {namesrv} --topic BenchmarkTest --duration 10"
    )
    print(
        "  stop: make cluster-classic-stop   (or: python -m rocketpy.tools.cluster_classic stop"
        f" --dir {directory})"
    )


def main(argv: list[str] | None = None) -> int:
    """``python -m rocketpy.tools.cluster_classic start|stop --layout L --dir D``."""
    parser = argparse.ArgumentParser(prog="rocketpy.tools.cluster_classic", description=__doc__)
    parser.add_argument("action", choices=("start", "stop"))
    parser.add_argument("--layout", choices=LAYOUTS, default="2m-2s-async")
    parser.add_argument("--dir", type=Path, default=Path(".cluster-classic"))
    parser.add_argument(
        "--base-port", type=int, default=int(os.environ.get("BASE_PORT", DEFAULT_BASE_PORT))
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra broker key for every broker (repeatable)",
    )
    parser.add_argument("--conf-dir", type=Path, default=CONF_DIR)
    args = parser.parse_args(argv)
    directory = args.dir.resolve()
    if args.action == "stop":
        return stop(directory)
    overrides = dict(item.split("=", 1) for item in args.set if "=" in item)
    specs = layout_specs(
        args.layout,
        directory / "data",
        base_port=args.base_port,
        overrides=overrides,
        conf_dir=args.conf_dir,
    )
    members = launch(directory, specs, "make cluster-classic-stop")
    if members is None:
        return 1
    _print_summary(directory, args.layout, members)
    return 0


if __name__ == "__main__":
    sys.exit(main())
