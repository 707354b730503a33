"""``mqadmin``: upstream's admin subcommands with upstream's output columns.

Owns: argument parsing and printing. Each subcommand is a :class:`Command` in :data:`COMMANDS`;
other modules add theirs with :func:`command`; the controller commands (``-a``, no NameServer)
live in :mod:`rocketpy.cli.admin_controller`. The requests themselves are made by
:class:`rocketpy.client.admin.AdminClient`. ``-n`` (or ``NAMESRV_ADDR``) names the NameServers.
Exit status: 0 ok, 1 the request failed, 2 bad usage.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import NoReturn

from rocketpy.cli import admin_broker, admin_consumer, admin_message, admin_topic
from rocketpy.cli.admin_base import COMMANDS, Command, attach_attribute_values, command, printf
from rocketpy.cli.admin_controller import CONTROLLER_COMMANDS, ControllerCommand
from rocketpy.client.admin import AdminClient, BrokerInfo
from rocketpy.client.controller_admin import ControllerAdminClient
from rocketpy.common.aio import run
from rocketpy.common.errors import RocketPyError

# The command modules register themselves with @command when imported.
COMMAND_MODULES = (admin_broker, admin_consumer, admin_message, admin_topic)
__all__ = ["COMMANDS", "Command", "command", "main"]


def _topic_opt(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True, help="topic name")


def _kv_opts(p: argparse.ArgumentParser, *, value: bool) -> None:
    p.add_argument("-s", "--namespace", required=True, help="set the namespace")
    p.add_argument("-k", "--key", required=True, help="set the key name")
    if value:
        p.add_argument("-v", "--value", required=True, help="set the key value")


def _stat(stats: dict[str, str], key: str, default: str = "") -> str:
    return stats.get(key, default)


def _first_number(text: str) -> float:
    try:
        return float(text.split(" ", 1)[0]) if text else 0.0
    except ValueError:
        return 0.0


def _cluster_opts(p: argparse.ArgumentParser) -> None:
    p.add_argument("-m", "--moreStats", action="store_true", help="Print more stats")
    p.add_argument("-c", "--clusterName", dest="cluster_name", help="which cluster")


def _selected(
    args: argparse.Namespace, clusters: dict[str, list[str]]
) -> list[tuple[str, list[str]]]:
    names = [args.cluster_name.strip()] if args.cluster_name else sorted(clusters)
    return [(c, sorted(clusters.get(c, []))) for c in names]


def _total(stats: dict[str, str], later: str, earlier: str) -> int:
    try:
        return int(stats[later]) - int(stats[earlier])
    except (KeyError, ValueError):
        return 0


@command("clusterList", "List cluster infos", _cluster_opts)
async def cluster_list(args: argparse.Namespace, admin: AdminClient) -> int:
    """ClusterListSubCommand: base info, or with ``-m`` the message totals."""
    if args.moreStats:
        return await _cluster_more_stats(args, admin)
    info = await admin.cluster_info()
    fmt = "%-22s  %-22s  %-4s  %-22s %-16s  %16s  %30s  %-22s  %-11s  %-12s  %-8s  %-10s"
    row = "%-22s  %-22s  %-4s  %-22s %-16s  %16s  %30s  %-22s  %11s  %-12s  %-8s  %10s"
    print(
        fmt
        % (
            "#Cluster Name",
            "#Broker Name",
            "#BID",
            "#Addr",
            "#Version",
            "#InTPS(LOAD)",
            "#OutTPS(LOAD)",
            "#Timer(Progress)",
            "#PCWait(ms)",
            "#Hour",
            "#SPACE",
            "#ACTIVATED",
        )
    )
    for cluster, names in _selected(args, info.clusters):
        for name in names:
            broker = info.brokers.get(name)
            if broker is None:
                continue
            for bid, addr in sorted(broker.broker_addrs.items()):
                try:
                    stats = await admin.broker_runtime_stats(addr)
                except RocketPyError:
                    stats = {}
                tps_in = _first_number(_stat(stats, "putTps"))
                tps_out = _first_number(_stat(stats, "getTransferredTps"))
                send_q = _stat(stats, "sendThreadPoolQueueSize")
                send_w = _stat(stats, "sendThreadPoolQueueHeadWaitTimeMills")
                pull_q = _stat(stats, "pullThreadPoolQueueSize")
                pull_w = _stat(stats, "pullThreadPoolQueueHeadWaitTimeMills")
                ack_q = _stat(stats, "ackThreadPoolQueueSize", "N")
                ack_w = _stat(stats, "ackThreadPoolQueueHeadWaitTimeMills", "N")
                print(
                    row
                    % (
                        cluster,
                        name,
                        bid,
                        addr,
                        _stat(stats, "brokerVersionDesc"),
                        f"{tps_in:9.2f}({send_q},{send_w}ms)",
                        f"{tps_out:9.2f}({pull_q},{pull_w}ms|{ack_q},{ack_w}ms)",
                        "0-0(0.0w, 0.0, 0.0)",
                        _stat(stats, "pageCacheLockTimeMills"),
                        f"{_hours(stats):.2f}",
                        f"{_first_number(_stat(stats, 'commitLogDiskRatio')):.4f}",
                        _stat(stats, "brokerActive", "false"),
                    )
                )
    return 0


async def _cluster_more_stats(args: argparse.Namespace, admin: AdminClient) -> int:
    """ClusterListSubCommand.printClusterMoreStats: yesterday's and today's put/get totals."""
    info = await admin.cluster_info()
    printf(
        "%-16s  %-32s %14s %14s %14s %14s",
        "#Cluster Name",
        "#Broker Name",
        "#InTotalYest",
        "#OutTotalYest",
        "#InTotalToday",
        "#OutTotalToday",
    )
    for cluster, names in _selected(args, info.clusters):
        for name in names:
            broker: BrokerInfo | None = info.brokers.get(name)
            for _, addr in sorted((broker.broker_addrs if broker else {}).items()):
                try:
                    st = await admin.broker_runtime_stats(addr)
                except RocketPyError:
                    st = {}
                printf(
                    "%-16s  %-32s %14d %14d %14d %14d",
                    cluster,
                    name,
                    _total(st, "msgPutTotalTodayMorning", "msgPutTotalYesterdayMorning"),
                    _total(st, "msgGetTotalTodayMorning", "msgGetTotalYesterdayMorning"),
                    _total(st, "msgPutTotalTodayNow", "msgPutTotalTodayMorning"),
                    _total(st, "msgGetTotalTodayNow", "msgGetTotalTodayMorning"),
                )
    return 0


def _hours(stats: dict[str, str]) -> float:
    earliest = stats.get("earliestMessageTimeStamp")
    if not earliest or not earliest.isdigit():
        return 0.0
    return (time.time() * 1000 - int(earliest)) / 3_600_000


@command("topicRoute", "Examine topic route info", _topic_opt)
async def topic_route(args: argparse.Namespace, admin: AdminClient) -> int:
    """TopicRouteSubCommand: the route as pretty JSON."""
    route = await admin.topic_route(args.topic)
    print(json.dumps(route.raw, indent="\t", ensure_ascii=False))
    return 0


@command("topicList", "Fetch all topic list from name server")
async def topic_list(args: argparse.Namespace, admin: AdminClient) -> int:
    """TopicListSubCommand without -c: one topic per line."""
    for topic in await admin.topic_list():
        print(topic)
    return 0


@command("getNamesrvConfig", "Get configs of name server")
async def get_namesrv_config(args: argparse.Namespace, admin: AdminClient) -> int:
    """GetNamesrvConfigCommand."""
    for addr, values in (await admin.namesrv_config()).items():
        print(f"============{addr}============")
        for key, value in values.items():
            print(f"{key:<50}=  {value}")
    return 0


def _key_value(p: argparse.ArgumentParser) -> None:
    p.add_argument("-k", "--key", required=True, help="config key")
    p.add_argument("-v", "--value", required=True, help="config value")


@command("updateNamesrvConfig", "Update configs of name server", _key_value)
async def update_namesrv_config(args: argparse.Namespace, admin: AdminClient) -> int:
    """UpdateNamesrvConfigCommand."""
    await admin.update_namesrv_config({args.key: args.value})
    print(f"update name server config success!{admin_addrs(args)}\n{args.key} : {args.value}")
    return 0


@command("updateKvConfig", "Create or update KV config", lambda p: _kv_opts(p, value=True))
async def update_kv_config(args: argparse.Namespace, admin: AdminClient) -> int:
    """UpdateKvConfigCommand."""
    await admin.put_kv_config(args.namespace, args.key, args.value)
    print("create or update kv config to namespace success.")
    return 0


@command("deleteKvConfig", "Delete KV config", lambda p: _kv_opts(p, value=False))
async def delete_kv_config(args: argparse.Namespace, admin: AdminClient) -> int:
    """DeleteKvConfigCommand."""
    await admin.delete_kv_config(args.namespace, args.key)
    print("delete kv config from namespace success.")
    return 0


def admin_addrs(args: argparse.Namespace) -> str:
    """The NameServer list as given."""
    return str(args.namesrv_addr)


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line (``mqadmin updateTopic: error: ...``), exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    """``mqadmin <command> [-n addr] [options]``."""
    parser = _Parser(prog="mqadmin", description="rocketpy admin tool")
    sub = parser.add_subparsers(dest="command", metavar="command")
    for cmd in COMMANDS.values():
        p = sub.add_parser(cmd.name, help=cmd.help)
        p.add_argument(
            "-n",
            "--namesrvAddr",
            dest="namesrv_addr",
            default=os.environ.get("NAMESRV_ADDR"),
            help="name server address list",
        )
        cmd.configure(p)
    for ctl in CONTROLLER_COMMANDS.values():
        ctl.configure(sub.add_parser(ctl.name, help=ctl.help))
    return parser


async def _run_controller(cmd: ControllerCommand, args: argparse.Namespace) -> int:
    admin = ControllerAdminClient()
    try:
        return await cmd.run(args, admin)
    except (RocketPyError, OSError, ValueError) as e:
        text = " ".join(str(e).split())
        print(f"{cmd.name} command failed: {text}", file=sys.stderr)
        return 1
    finally:
        await admin.close()


async def _run(cmd: Command, args: argparse.Namespace) -> int:
    admin = AdminClient(args.namesrv_addr)
    try:
        return await cmd.run(args, admin)
    except (RocketPyError, OSError, ValueError) as e:
        # one line: remote remarks may carry a "See https://..." second line
        text = " ".join(str(e).split())
        print(f"{cmd.name} command failed: {text}", file=sys.stderr)
        return 1
    finally:
        await admin.close()


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``bin/mqadmin``."""
    parser = build_parser()
    args = parser.parse_args(attach_attribute_values(sys.argv[1:] if argv is None else argv))
    if not args.command:
        parser.print_help()
        return 2
    if args.command in CONTROLLER_COMMANDS:
        return run(_run_controller(CONTROLLER_COMMANDS[args.command], args))
    if not args.namesrv_addr:
        print("please set the name server address with -n or NAMESRV_ADDR", file=sys.stderr)
        return 2
    return run(_run(COMMANDS[args.command], args))


if __name__ == "__main__":
    sys.exit(main())
