"""``mqadmin`` broker commands: brokerStatus, getBrokerConfig, updateBrokerConfig.

Mirrors ``tools/command/broker/{BrokerStatusSubCommand,GetBrokerConfigCommand,
UpdateBrokerConfigSubCommand}`` (flags and output lines). With ``-c`` a broker that fails is
reported on one stderr line, the others are still served, and the exit status is 1.
"""

from __future__ import annotations

import argparse
import sys

from rocketpy.cli.admin_base import broker_or_cluster, command, target_addrs
from rocketpy.client.admin import AdminClient
from rocketpy.common.errors import RocketPyError


@command("brokerStatus", "Fetch broker runtime status data.", broker_or_cluster)
async def broker_status(args: argparse.Namespace, admin: AdminClient) -> int:
    """BrokerStatusSubCommand: the runtime KVTable sorted by key; ``-c`` covers masters and
    slaves and prefixes each line with the address."""
    if args.broker_addr:
        stats = await admin.broker_runtime_stats(args.broker_addr.strip())
        for key in sorted(stats):
            print(f"{key:<32}: {stats[key]}")
        return 0
    status = 0
    for addr in await admin.all_addrs(args.cluster_name.strip()):
        try:
            stats = await admin.broker_runtime_stats(addr)
        except RocketPyError as e:
            print(f"brokerStatus {addr} failed: {e}", file=sys.stderr)
            status = 1
            continue
        for key in sorted(stats):
            print(f"{addr:<24} {key:<32}: {stats[key]}")
    return status


async def _print_config(admin: AdminClient, banner: str, addr: str) -> None:
    values = await admin.broker_config(addr)
    print(banner)
    for key, value in values.items():
        print(f"{key:<50}=  {value}")
    print()


@command("getBrokerConfig", "Get broker config by cluster or special broker.", broker_or_cluster)
async def get_broker_config(args: argparse.Namespace, admin: AdminClient) -> int:
    """GetBrokerConfigCommand: ``key=  value`` lines under a banner per broker."""
    if args.broker_addr:
        addr = args.broker_addr.strip()
        await _print_config(admin, f"============{addr}============", addr)
        return 0
    for broker in await admin.cluster_brokers(args.cluster_name.strip()):
        master = broker.broker_addrs.get(0)
        if master is None:
            print("============Master: NO_MASTER============")
        else:
            await _print_config(admin, f"============Master: {master}============", master)
        for bid, slave in sorted(broker.broker_addrs.items()):
            if bid != 0:
                banner = f"============My Master: {master or 'NO_MASTER'}=====Slave: {slave}"
                await _print_config(admin, f"{banner}============", slave)
    return 0


def _update_opts(p: argparse.ArgumentParser) -> None:
    broker_or_cluster(p)
    p.add_argument("-a", "--updateAllBroker", default=None, help="update all brokers include slave")
    p.add_argument("-k", "--key", required=True, help="config key")
    p.add_argument("-v", "--value", required=True, help="config value")


@command("updateBrokerConfig", "Update broker's config.", _update_opts)
async def update_broker_config(args: argparse.Namespace, admin: AdminClient) -> int:
    """UpdateBrokerConfigSubCommand: one key on ``-b``, or on the masters (``-a``: and the
    slaves) of ``-c``. A refused key (unknown, black-listed, start-up only) fails with the
    broker's reason."""
    values = {args.key.strip(): args.value.strip()}
    if args.broker_addr or args.updateAllBroker is None:
        addrs = await target_addrs(args, admin)
    else:
        addrs = await admin.all_addrs(args.cluster_name.strip())
    status = 0
    for addr in addrs:
        try:
            await admin.update_broker_config(addr, values)
        except RocketPyError as e:
            print(f"updateBrokerConfig command failed: {e}", file=sys.stderr)
            status = 1
            continue
        print(f"update broker config success, {addr}")
    return status
