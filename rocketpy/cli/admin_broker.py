"""``mqadmin`` broker commands: brokerStatus, getBrokerConfig, updateBrokerConfig, getBrokerEpoch.

Mirrors ``tools/command/broker/{BrokerStatusSubCommand,GetBrokerConfigCommand,
UpdateBrokerConfigSubCommand,GetBrokerEpochSubCommand}`` (flags and output lines). With ``-c``
a broker that fails is reported on one stderr line, the others are still served, and the exit
status is 1.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from rocketpy.cli.admin_base import broker_or_cluster, command, target_addrs
from rocketpy.client.admin import AdminClient
from rocketpy.common.codes import ResponseCode
from rocketpy.common.errors import RemoteError, RocketPyError


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


def _epoch_opts(p: argparse.ArgumentParser) -> None:
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("-c", "--clusterName", dest="cluster_name", help="which cluster")
    group.add_argument(
        "-b", "--brokerName", dest="broker_name", help="which broker to fetch (name or ip:port)"
    )
    p.add_argument("-i", "--interval", dest="interval", help="the interval(second) of get info")


async def _epoch_addrs(args: argparse.Namespace, admin: AdminClient) -> list[str]:
    """Every master and slave of ``-b`` or ``-c``. Decided: ``-b`` is a broker name as
    upstream's, but a value with a ``:`` is taken as one broker address (a broker that has
    not registered with the NameServer can still be asked)."""
    if args.broker_name:
        name = args.broker_name.strip()
        return [name] if ":" in name else await admin.broker_set_addrs(name)
    return await admin.all_addrs(args.cluster_name.strip())


async def _print_epochs(args: argparse.Namespace, admin: AdminClient) -> None:
    for addr in await _epoch_addrs(args, admin):
        try:
            cache = await admin.broker_epoch_cache(addr)
        except RemoteError as e:
            if e.code != ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
                raise
            # O-03: a broker outside controller mode keeps no epochs; say so, do not fail.
            print(f"\n#brokerAddr\t{addr}\n#Epoch: none (the broker is not in controller mode)")
            continue
        print(
            f"\n#clusterName\t{cache.cluster_name}\n#brokerName\t{cache.broker_name}"
            f"\n#brokerAddr\t{addr}\n#brokerId\t{cache.broker_id}",
            end="",
        )
        for i, entry in enumerate(cache.epochs):
            # The last epoch is still open: it ends at the broker's max offset (O-03).
            end = cache.max_offset if i == len(cache.epochs) - 1 else entry.end_offset
            print(
                f"\n#Epoch: EpochEntry{{epoch={entry.epoch}, startOffset={entry.start_offset}, "
                f"endOffset={end}}}",
                end="",
            )
        print()


@command("getBrokerEpoch", "Fetch broker epoch entries", _epoch_opts)
async def get_broker_epoch(args: argparse.Namespace, admin: AdminClient) -> int:
    """GetBrokerEpochSubCommand: per broker its cluster, name, address, id and every epoch
    with its start and end offsets (``-i`` repeats every N seconds until interrupted)."""
    if args.interval is None:
        await _print_epochs(args, admin)
        return 0
    every = int(args.interval) if str(args.interval).strip() else 3
    while True:
        await _print_epochs(args, admin)
        await asyncio.sleep(every)  # a CLI refresh interval, ended by ^C
