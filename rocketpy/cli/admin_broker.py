"""``mqadmin`` broker commands: brokerStatus, getBrokerConfig, updateBrokerConfig, getBrokerEpoch,
statsAll.

Mirrors ``tools/command/broker/{BrokerStatusSubCommand,GetBrokerConfigCommand,
UpdateBrokerConfigSubCommand,GetBrokerEpochSubCommand}`` and
``tools/command/stats/StatsAllSubCommand`` (flags and output lines). With ``-c`` a broker that
fails is reported on one stderr line, the others are still served, and the exit status is 1.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from rocketpy.broker.stats import GROUP_GET_NUMS, TOPIC_PUT_NUMS
from rocketpy.broker.topic_validator import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX
from rocketpy.cli.admin_base import broker_or_cluster, command, front, printf, target_addrs
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


def _stats_opts(p: argparse.ArgumentParser) -> None:
    p.add_argument("-a", "--activeTopic", action="store_true", help="print active topic only")
    p.add_argument("-t", "--topic", default=None, help="print select topic only")


def _sum_24h(data: dict[str, dict[str, float]]) -> int:
    """``compute24HourSum``: the day's sum, else the hour's, else the minute's."""
    for view in ("statsDay", "statsHour", "statsMinute"):
        total = int(data.get(view, {}).get("sum", 0))
        if total:
            return total
    return 0


async def _item(admin: AdminClient, masters: list[str], name: str, key: str) -> tuple[float, int]:
    """(minute TPS, 24-hour sum) of one stats item summed over the masters; a broker that fails
    or never counted the item adds nothing, as upstream swallows those errors."""
    tps, total = 0.0, 0
    for addr in masters:
        try:
            data = await admin.broker_stats_data(addr, name, key)
        except RocketPyError:
            continue
        if data is not None:
            tps += float(data.get("statsMinute", {}).get("tps", 0.0))
            total += _sum_24h(data)
    return tps, total


async def _accumulation(admin: AdminClient, masters: list[str], group: str, topic: str) -> int:
    diff = 0
    for addr in masters:
        try:
            stats = await admin.consume_stats(addr, group, topic)
        except RocketPyError:
            continue
        diff += sum(w.broker_offset - w.consumer_offset for w in stats.offset_table.values())
    return max(diff, 0)


async def _print_topic(admin: AdminClient, topic: str, active_only: bool) -> None:
    """``printTopicDetail``: one line per consuming group, or one NO_CONSUMER line."""
    route = await admin.topic_route(topic)
    masters = [a for b in route.brokers if (a := b.broker_addrs.get(0)) is not None]
    in_tps, in_24h = await _item(admin, masters, TOPIC_PUT_NUMS, topic)
    groups: set[str] = set()
    for addr in masters:
        try:
            groups.update(await admin.topic_consume_by_who(addr, topic))
        except RocketPyError:
            continue
    if not groups:
        if not active_only or in_24h > 0:
            printf(
                "%-64s  %-32s %12d %11.2f %11s %14d %14s",
                front(topic, 64), "", 0, in_tps, "", in_24h, "NO_CONSUMER",
            )  # fmt: skip
        return
    for group in sorted(groups):
        out_tps, out_24h = await _item(admin, masters, GROUP_GET_NUMS, f"{topic}@{group}")
        accumulate = await _accumulation(admin, masters, group, topic)
        if not active_only or in_24h > 0 or out_24h > 0:
            printf(
                "%-64s  %-64s %12d %11.2f %11.2f %14d %14d",
                front(topic, 64), front(group, 64), accumulate, in_tps, out_tps, in_24h, out_24h,
            )  # fmt: skip


@command("statsAll", "Topic and Consumer tps stats", _stats_opts)
async def stats_all(args: argparse.Namespace, admin: AdminClient) -> int:
    """StatsAllSubCommand: per topic (retry and DLQ topics skipped) and consuming group, the
    accumulation, in/out TPS over the last minute and the messages in/out over the last 24 hours,
    from every master's VIEW_BROKER_STATS_DATA (TOPIC_PUT_NUMS, GROUP_GET_NUMS ``topic@group``).
    A topic whose route or stats cannot be read is skipped, as upstream."""
    printf(
        "%-32s  %-32s %12s %11s %11s %14s %14s",
        "#Topic", "#Consumer Group", "#Accumulation", "#InTPS", "#OutTPS", "#InMsg24Hour",
        "#OutMsg24Hour",
    )  # fmt: skip
    for topic in await admin.topic_list():
        if topic.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX)):
            continue
        if args.topic and topic != args.topic:
            continue
        try:
            await _print_topic(admin, topic, args.activeTopic)
        except RocketPyError:
            continue
    return 0
