"""``mqadmin`` consumer-group commands: consumerProgress, updateSubGroup, resetOffsetByTime.

Mirrors ``tools/command/consumer/{ConsumerProgressSubCommand,UpdateSubGroupSubCommand}`` and
``tools/command/offset/ResetOffsetByTimeCommand`` (flags and output lines), with
``DefaultMQAdminExtImpl.examineConsumeStats`` / ``resetOffsetByTimestamp`` for where to ask.
"""

from __future__ import annotations

import argparse
import datetime
import json
import time

from rocketpy.cli.admin_base import (
    broker_or_cluster,
    command,
    date_seconds,
    front,
    java_bool,
    printf,
    target_addrs,
)
from rocketpy.client.admin import AdminClient, AdminError
from rocketpy.common.errors import CodecError
from rocketpy.remoting.protocol.body.broker import MessageQueue, OffsetWrapper
from rocketpy.remoting.protocol.body.config_shapes import SubscriptionGroupConfig

RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"  # MixAll.RETRY_GROUP_TOPIC_PREFIX


def _progress_opts(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--groupName", dest="group", required=True, help="consumer group name")
    p.add_argument("-t", "--topicName", dest="topic", help="topic name")
    p.add_argument("-c", "--cluster", help="cluster name, used to find the route (lmq)")


@command("consumerProgress", "Query consumer's progress, speed.", _progress_opts)
async def consumer_progress(args: argparse.Namespace, admin: AdminClient) -> int:
    """ConsumerProgressSubCommand with ``-g``: per queue broker offset, consumer offset, diff
    and in-flight, then the totals. Asks every broker-set of the topic's route (``-t``), else of
    the group's retry topic."""
    group = args.group.strip()
    topic = args.topic.strip() if args.topic else None
    route_topic = (
        args.cluster.strip() if args.cluster else topic or RETRY_GROUP_TOPIC_PREFIX + group
    )
    table: dict[MessageQueue, OffsetWrapper] = {}
    tps = 0.0
    for _, addr in await admin.route_brokers(route_topic):
        stats = await admin.consume_stats(addr, group, topic)
        table.update(stats.offset_table)
        tps += stats.consume_tps
    if not table:
        raise AdminError(
            "Not found the consumer group consume stats, because return offset table is empty, "
            "maybe the consumer not consume any message"
        )
    printf(
        "%-64s  %-32s  %-4s  %-20s  %-20s  %-20s %-20s%s",
        "#Topic",
        "#Broker Name",
        "#QID",
        "#Broker Offset",
        "#Consumer Offset",
        "#Diff",
        "#Inflight",
        "#LastTime",
    )
    diff_total = inflight_total = 0
    for mq in sorted(table):
        w = table[mq]
        diff = w.broker_offset - w.consumer_offset
        inflight = w.pull_offset - w.consumer_offset
        diff_total += diff
        inflight_total += inflight
        last = "N/A" if w.last_timestamp == 0 else date_seconds(w.last_timestamp)
        printf(
            "%-64s  %-32s  %-4d  %-20d  %-20d  %-20d %-20d %s",
            front(mq.topic, 64),
            front(mq.broker_name, 32),
            mq.queue_id,
            w.broker_offset,
            w.consumer_offset,
            diff,
            inflight,
            last,
        )
    print()
    print(f"Consume TPS: {tps:.2f}")
    print(f"Consume Diff Total: {diff_total}")
    print(f"Consume Inflight Total: {inflight_total}")
    return 0


def _sub_group_opts(p: argparse.ArgumentParser) -> None:
    broker_or_cluster(p)
    p.add_argument("-g", "--groupName", dest="group", required=True, help="consumer group name")
    p.add_argument("-s", "--consumeEnable", help="consume enable")
    p.add_argument("-m", "--consumeFromMinEnable", help="from min offset")
    p.add_argument("-d", "--consumeBroadcastEnable", help="broadcast")
    p.add_argument("-o", "--consumeMessageOrderly", help="consume message orderly")
    p.add_argument("-q", "--retryQueueNums", type=int, help="retry queue nums")
    p.add_argument("-r", "--retryMaxTimes", type=int, help="retry max times")
    p.add_argument("-p", "--groupRetryPolicy", help="the json string of retry policy")
    p.add_argument("-i", "--brokerId", type=int, help="consumer from which broker id")
    p.add_argument("-w", "--whichBrokerWhenConsumeSlowly", type=int, help="broker id when slow")
    p.add_argument("-a", "--notifyConsumerIdsChanged", help="notify consumerId changed")
    p.add_argument("--attributes", help="attribute(+a=b,+c=d,-e)")


def _group_config(args: argparse.Namespace) -> SubscriptionGroupConfig:
    """The command's ``SubscriptionGroupConfig``: upstream's bean defaults except broadcast and
    from-min, which the command turns off unless given.

    Raises:
        AdminError: a bad ``-p`` or ``--attributes``.
    """
    obj: dict[str, object] = {
        "groupName": args.group.strip(),
        "consumeBroadcastEnable": False,
        "consumeFromMinEnable": False,
    }
    for opt in (
        "consumeEnable",
        "consumeFromMinEnable",
        "consumeBroadcastEnable",
        "consumeMessageOrderly",
    ):
        if getattr(args, opt) is not None:
            obj[opt] = java_bool(getattr(args, opt))
    if args.notifyConsumerIdsChanged is not None:
        obj["notifyConsumerIdsChangedEnable"] = java_bool(args.notifyConsumerIdsChanged)
    for opt in ("retryQueueNums", "retryMaxTimes", "brokerId", "whichBrokerWhenConsumeSlowly"):
        if getattr(args, opt) is not None:
            obj[opt] = getattr(args, opt)
    if args.groupRetryPolicy:
        try:
            obj["groupRetryPolicy"] = json.loads(args.groupRetryPolicy)
        except json.JSONDecodeError as e:
            raise AdminError(f"groupRetryPolicy is not JSON: {e.msg}") from e
    if args.attributes:
        obj["attributes"] = _attributes(args.attributes)
    try:
        return SubscriptionGroupConfig.from_json_value(obj)
    except CodecError as e:
        raise AdminError(f"bad subscription group option: {e}") from e


def _attributes(text: str) -> dict[str, str]:
    """``AttributeParser.parseToMap``: ``+k=v`` sets, ``-k`` deletes (sent as ``k=""``)."""
    out: dict[str, str] = {}
    for raw in text.split(","):
        item = raw.strip()
        if item.startswith("+") and "=" in item:
            key, _, value = item[1:].partition("=")
            out[key] = value
        elif item.startswith("-") and "=" not in item:
            out[item[1:]] = ""
        elif item:
            raise AdminError(f"attribute format is wrong: {item}")
    return out


def _group_string(cfg: SubscriptionGroupConfig) -> str:
    """``SubscriptionGroupConfig.toString`` (Guava ``toStringHelper``)."""
    fields = (
        ("groupName", cfg.group_name),
        ("consumeEnable", cfg.consume_enable),
        ("consumeFromMinEnable", cfg.consume_from_min_enable),
        ("consumeBroadcastEnable", cfg.consume_broadcast_enable),
        ("consumeMessageOrderly", cfg.consume_message_orderly),
        ("retryQueueNums", cfg.retry_queue_nums),
        ("retryMaxTimes", cfg.retry_max_times),
        ("brokerId", cfg.broker_id),
        ("whichBrokerWhenConsumeSlowly", cfg.which_broker_when_consume_slowly),
        ("notifyConsumerIdsChangedEnable", cfg.notify_consumer_ids_changed_enable),
        ("groupSysFlag", cfg.group_sys_flag),
        ("consumeTimeoutMinute", cfg.consume_timeout_minute),
    )
    text = ", ".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in fields)
    return f"SubscriptionGroupConfig{{{text}}}"


@command("updateSubGroup", "Update or create subscription group.", _sub_group_opts)
async def update_sub_group(args: argparse.Namespace, admin: AdminClient) -> int:
    """UpdateSubGroupSubCommand: create/update on ``-b`` or on every master of ``-c``."""
    cfg = _group_config(args)
    body = dict(cfg.to_json_value())
    for addr in await target_addrs(args, admin):
        await admin.create_subscription_group(addr, body)
        print(f"create subscription group to {addr} success.")
    print(_group_string(cfg))
    return 0


def _reset_opts(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--group", required=True, help="set the consumer group")
    p.add_argument("-t", "--topic", required=True, help="set the topic")
    p.add_argument(
        "-s", "--timestamp", required=True, help="now|currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS"
    )
    p.add_argument("-f", "--force", help="force rollback by timestamp [true|false]. Deprecated.")
    p.add_argument("-b", "--broker", help="broker addr")
    p.add_argument("-q", "--queue", type=int, help="queue id")
    p.add_argument("-o", "--offset", type=int, help="expect queue offset")
    p.add_argument("-c", "--cluster", help="cluster name, used to find the route (lmq)")


def parse_timestamp(text: str) -> int:
    """``now``, epoch milliseconds, or ``yyyy-MM-dd#HH:mm:ss:SSS`` in local time.

    Raises:
        AdminError: none of those.
    """
    if text == "now":
        return int(time.time() * 1000)
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        when = datetime.datetime.strptime(text, "%Y-%m-%d#%H:%M:%S:%f")  # local time, as upstream
    except ValueError as e:
        raise AdminError(
            f"bad timestamp {text!r}: use now, milliseconds or yyyy-MM-dd#HH:mm:ss:SSS"
        ) from e
    return int(when.timestamp() * 1000)


@command(
    "resetOffsetByTime", "Reset consumer offset by timestamp(without client restart).", _reset_opts
)
async def reset_offset_by_time(args: argparse.Namespace, admin: AdminClient) -> int:
    """ResetOffsetByTimeCommand: one queue of one broker (``-b -q``), else every broker-set of
    the topic's route; the brokers reset the committed offsets themselves."""
    group, topic, text = args.group.strip(), args.topic.strip(), args.timestamp.strip()
    timestamp = parse_timestamp(text)
    if args.broker and args.queue is not None and args.queue >= 0:
        broker = args.broker.strip()
        print(
            f"start reset consumer offset by specified, group[{group}], topic[{topic}], "
            f"queueId[{args.queue}], broker[{broker}], timestamp(string)[{text}], "
            f"timestamp(long)[{timestamp}]"
        )
        offset = args.offset
        if offset is None:
            offset = await admin.search_offset(broker, topic, args.queue, timestamp)
        print(f"reset consumer offset to {offset}")
        if offset > 0:
            await admin.reset_offset(
                broker, topic, group, timestamp, queue_id=args.queue, offset=offset
            )
        return 0
    route_topic = args.cluster.strip() if args.cluster else topic
    table: dict[MessageQueue, int] = {}
    for _, addr in await admin.route_brokers(route_topic):
        table.update(await admin.reset_offset(addr, topic, group, timestamp))
    force = java_bool(args.force) if args.force is not None else True
    print(
        f"start reset consumer offset by specified, group[{group}], topic[{topic}], "
        f"force[{str(force).lower()}], timestamp(string)[{text}], timestamp(long)[{timestamp}]"
    )
    printf("%-40s  %-40s  %-40s", "#brokerName", "#queueId", "#offset")
    for mq in sorted(table):
        printf("%-40s  %-40d  %-40d", front(mq.broker_name, 32), mq.queue_id, table[mq])
    return 0
