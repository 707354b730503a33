"""``mqadmin`` topic commands on brokers: updateTopic, deleteTopic, topicStatus.

Mirrors ``tools/command/topic/{UpdateTopicSubCommand,DeleteTopicSubCommand,
TopicStatusSubCommand}`` (flags and output lines). Requests go through
:class:`~rocketpy.client.admin.AdminClient`.
"""

from __future__ import annotations

import argparse

from rocketpy.cli.admin_base import broker_or_cluster, command, front, human_ms, java_bool, printf
from rocketpy.client.admin import AdminClient, AdminError, TopicSpec
from rocketpy.common.attributes import InvalidAttributeError, parse_to_map, parse_to_string
from rocketpy.remoting.protocol.body.broker import MessageQueue, TopicOffset

ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"  # NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG
_PERM_NAMES = {2: "-W-", 4: "R--", 6: "RW-"}


def _perm_string(perm: int) -> str:
    """``PermName.perm2String``."""
    return ("R" if perm & 4 else "-") + ("W" if perm & 2 else "-") + ("X" if perm & 1 else "-")


def _update_topic_opts(p: argparse.ArgumentParser) -> None:
    broker_or_cluster(p)
    p.add_argument("-t", "--topic", required=True, help="topic name")
    p.add_argument("-a", "--attributes", help="attribute(+a=b,+c=d,-e)")
    p.add_argument("-r", "--readQueueNums", dest="read", type=int, default=8, help="read queues")
    p.add_argument("-w", "--writeQueueNums", dest="write", type=int, default=8, help="write q.")
    p.add_argument("-p", "--perm", type=int, default=6, help="permission(2|4|6): 2:W 4:R 6:RW")
    p.add_argument("-o", "--order", default="false", help="set topic's order(true|false)")
    p.add_argument("-u", "--unit", default="false", help="is unit topic (true|false)")
    p.add_argument("-s", "--hasUnitSub", default="false", help="has unit sub (true|false)")


def _topic_config_string(spec: TopicSpec, modification: dict[str, str]) -> str:
    """``TopicConfig.toString``; like upstream the attributes are the parsed ``-a`` map, signs
    kept (Java's HashMap order; sorted here)."""
    attrs = ", ".join(f"{k}={v}" for k, v in sorted(modification.items()))
    return (
        f"TopicConfig [topicName={spec.topic}, readQueueNums={spec.read_queue_nums}, "
        f"writeQueueNums={spec.write_queue_nums}, perm={_perm_string(spec.perm)}, "
        f"topicFilterType=SINGLE_TAG, topicSysFlag={spec.topic_sys_flag}, "
        f"order={str(spec.order).lower()}, attributes={{{attrs}}}]"
    )


@command("updateTopic", "Update or create topic.", _update_topic_opts)
async def update_topic(args: argparse.Namespace, admin: AdminClient) -> int:
    """UpdateTopicSubCommand: create/update on ``-b`` or on every master of ``-c``; an order
    topic also gets its ``brokerName:writeQueueNums`` order conf on the NameServers."""
    if args.perm not in _PERM_NAMES:
        raise AdminError(f"invalid perm {args.perm}: use 2 (W), 4 (R) or 6 (RW)")
    if args.read <= 0 or args.write <= 0:
        raise AdminError("readQueueNums and writeQueueNums must be positive")
    # TopicSysFlag.buildSysFlag(unit, hasUnitSub)
    sys_flag = (1 if java_bool(args.unit) else 0) | (2 if java_bool(args.hasUnitSub) else 0)
    try:
        modification = parse_to_map(args.attributes.strip() if args.attributes else None)
    except InvalidAttributeError as e:
        raise AdminError(f"bad -a/--attributes: {e}") from e
    spec = TopicSpec(
        topic=args.topic.strip(),
        read_queue_nums=args.read,
        write_queue_nums=args.write,
        perm=args.perm,
        topic_sys_flag=sys_flag,
        order=java_bool(args.order),
        attributes=parse_to_string(modification) or None,
    )
    if args.broker_addr:
        addr = args.broker_addr.strip()
        await admin.create_topic(addr, spec)
        if spec.order:
            conf = f"{await _broker_name(admin, addr)}:{spec.write_queue_nums}"
            await admin.put_kv_config(ORDER_TOPIC_CONFIG, spec.topic, conf)
            print(f"set broker orderConf. isOrder=true, orderConf=[{conf}]")
        print(f"create topic to {addr} success.")
    else:
        cluster = args.cluster_name.strip()
        brokers = await admin.cluster_brokers(cluster)
        masters = [b.broker_addrs[0] for b in brokers if 0 in b.broker_addrs]
        if not masters:
            raise AdminError(f"no master broker in cluster {cluster!r}")
        for addr in masters:
            await admin.create_topic(addr, spec)
            print(f"create topic to {addr} success.")
        if spec.order:
            conf = ";".join(f"{b.broker_name}:{spec.write_queue_nums}" for b in brokers)
            await admin.put_kv_config(ORDER_TOPIC_CONFIG, spec.topic, conf)
            print(f"set cluster orderConf. isOrder=true, orderConf=[{conf}]")
    print(_topic_config_string(spec, modification))
    return 0


async def _broker_name(admin: AdminClient, addr: str) -> str:
    """``CommandUtil.fetchBrokerNameByAddr``."""
    info = await admin.cluster_info()
    for broker in info.brokers.values():
        if addr in broker.broker_addrs.values():
            return broker.broker_name
    raise AdminError(f"broker {addr} is not registered with the name servers")


def _delete_topic_opts(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True, help="topic name")
    p.add_argument("-c", "--clusterName", dest="cluster_name", required=True, help="cluster")


@command("deleteTopic", "Delete topic from broker and NameServer.", _delete_topic_opts)
async def delete_topic(args: argparse.Namespace, admin: AdminClient) -> int:
    """DeleteTopicSubCommand: from every master of the cluster, then from the NameServers."""
    topic, cluster = args.topic.strip(), args.cluster_name.strip()
    for addr in await admin.master_addrs(cluster):
        await admin.delete_topic_in_broker(addr, topic)
    print(f"delete topic [{topic}] from cluster [{cluster}] success.")
    await admin.delete_topic_in_namesrv(topic, cluster)
    print(f"delete topic [{topic}] from NameServer success.")
    return 0


def _topic_status_opts(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True, help="topic name")
    p.add_argument("-c", "--cluster", help="cluster name, used to find the route (lmq)")


@command("topicStatus", "Examine topic Status info.", _topic_status_opts)
async def topic_status(args: argparse.Namespace, admin: AdminClient) -> int:
    """TopicStatusSubCommand: per queue min/max offset and last store time, from the master
    of every broker-set in the route."""
    topic = args.topic.strip()
    route_topic = args.cluster.strip() if args.cluster else topic
    table: dict[MessageQueue, TopicOffset] = {}
    put_tps = 0.0
    for _, addr in await admin.route_brokers(route_topic):
        offsets, tps = await admin.topic_stats(addr, topic)
        table.update(offsets)
        put_tps += tps
    printf(
        "%-32s  %-4s  %-20s  %-20s    %s",
        "#Broker Name",
        "#QID",
        "#Min Offset",
        "#Max Offset",
        "#Last Updated",
    )
    for mq in sorted(table):
        off = table[mq]
        last = human_ms(off.last_update_timestamp) if off.last_update_timestamp > 0 else ""
        printf(
            "%-32s  %-4d  %-20d  %-20d    %s",
            front(mq.broker_name, 32),
            mq.queue_id,
            off.min_offset,
            off.max_offset,
            last,
        )
    print()
    print(f"Topic Put TPS: {put_tps}")
    return 0
