"""``mqadmin`` message look-ups: queryMsgById, queryMsgByKey, queryMsgByOffset.

Mirrors ``tools/command/message/{QueryMsgByIdSubCommand,QueryMsgByKeySubCommand,
QueryMsgByOffsetSubCommand}`` and ``MQAdminImpl.queryMessage`` (flags, the printed message
fields, the key filter). The records come back raw from
:class:`~rocketpy.client.admin.AdminClient` and are decoded here with the store's pure record
codec (``MessageDecoder`` upstream). Like upstream, the body is written to
``<tmp>/rocketmq/msgbodys/<msgId>``. Not done: the consume-track lines upstream prints after a
message (``messageTrackDetail``).
"""

from __future__ import annotations

import argparse
import tempfile
import zlib
from pathlib import Path

from rocketpy.cli.admin_base import command, human_ms, printf
from rocketpy.client.admin import AdminClient, AdminError
from rocketpy.common.errors import CodecError, RemotingError
from rocketpy.common.message.const import MessageConst
from rocketpy.common.message.decoder import (
    decode_offset_msg_id,
    decode_records,
    encode_offset_msg_id,
)
from rocketpy.common.message.record import COMPRESSED_FLAG, MessageRecord
from rocketpy.remoting.protocol.body.broker import MessageQueue

LONG_MAX = 2**63 - 1
UNIQ_KEY_QUERY_MAX = 32  # MQAdminImpl.queryMessageByUniqKey asks for 32


def _offset_id(rec: MessageRecord) -> str:
    return encode_offset_msg_id(rec.store_host, rec.physical_offset)


def _msg_id(rec: MessageRecord) -> str:
    """``MessageClientExt.getMsgId``: the unique key when there is one, else the offset id."""
    return rec.property_map().get(MessageConst.UNIQ_KEY) or _offset_id(rec)


def _body(rec: MessageRecord) -> bytes:
    if rec.sys_flag & COMPRESSED_FLAG:
        try:
            return zlib.decompress(rec.body)
        except zlib.error:
            return rec.body
    return rec.body


def _body_file(rec: MessageRecord) -> Path:
    """``createBodyFile``: ``<tmp>/rocketmq/msgbodys/<msgId>``."""
    folder = Path(tempfile.gettempdir()) / "rocketmq" / "msgbodys"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / _msg_id(rec)
    path.write_bytes(_body(rec))
    return path


def print_msg(rec: MessageRecord, charset: str | None = None) -> None:
    """``QueryMsgByIdSubCommand.printMsg``: one ``%-20s %s`` line per field."""
    props = rec.property_map()
    rows: list[tuple[str, object]] = [
        ("OffsetID:", _offset_id(rec)),
        ("Topic:", rec.topic),
        ("Tags:", f"[{props.get(MessageConst.TAGS)}]".replace("[None]", "[null]")),
        ("Keys:", f"[{props.get(MessageConst.KEYS)}]".replace("[None]", "[null]")),
        ("Queue ID:", rec.queue_id),
        ("Queue Offset:", rec.queue_offset),
        ("CommitLog Offset:", rec.physical_offset),
        ("Reconsume Times:", rec.reconsume_times),
        ("Born Timestamp:", human_ms(rec.born_timestamp)),
        ("Store Timestamp:", human_ms(rec.store_timestamp)),
        ("Born Host:", f"{rec.born_host[0]}:{rec.born_host[1]}"),
        ("Store Host:", f"{rec.store_host[0]}:{rec.store_host[1]}"),
        ("System Flag:", rec.sys_flag),
        ("Properties:", "{" + ", ".join(f"{k}={v}" for k, v in props.items()) + "}"),
        ("Message Body Path:", _body_file(rec)),
    ]
    if charset:
        rows.append(("Message Body:", _body(rec).decode(charset, errors="replace")))
    for name, value in rows:
        print(f"{name:<20} {value}")


def _decode(raw: bytes) -> list[MessageRecord]:
    try:
        return decode_records(raw)
    except CodecError as e:
        raise AdminError(f"the broker returned an undecodable record: {e}") from e


async def query_by_key(
    admin: AdminClient, topic: str, key: str, *, max_num: int, begin: int, end: int, unique: bool
) -> list[MessageRecord]:
    """``MQAdminImpl.queryMessage``: ask every broker-set of the topic, keep the records whose
    unique key (``unique``) or one of whose ``KEYS`` equals ``key``."""
    found: list[MessageRecord] = []
    for _, addr in await admin.route_brokers(topic):
        raw = await admin.query_message(
            addr, topic, key, max_num=max_num, begin=begin, end=end, unique=unique
        )
        for rec in _decode(raw):
            props = rec.property_map()
            if unique:
                matched = props.get(MessageConst.UNIQ_KEY) == key
            else:
                matched = key in props.get(MessageConst.KEYS, "").split(" ")
            if matched and rec.topic == topic:
                found.append(rec)
    return found


async def _by_id(admin: AdminClient, topic: str | None, msg_id: str) -> MessageRecord:
    """``DefaultMQAdminExtImpl.viewMessage``: an offset id names the broker and commit-log
    offset; anything else (or a failed view) is looked up as a unique key in ``topic``."""
    try:
        (host, port), offset = decode_offset_msg_id(msg_id)
        records = _decode(await admin.view_message(f"{host}:{port}", offset))
        if records:
            return records[0]
    except (CodecError, ValueError, RemotingError):
        pass
    if not topic:
        raise AdminError(
            f"{msg_id}: no message by offset msgId; give -t to look it up as a unique key"
        )
    # Upstream starts the search at the time encoded in the id; ids not made by a Java client
    # carry no such time, so the whole index is searched.
    found = await query_by_key(
        admin, topic, msg_id, max_num=UNIQ_KEY_QUERY_MAX, begin=0, end=LONG_MAX, unique=True
    )
    if not found:
        raise AdminError(f"query message by key finished, but no message. msgId={msg_id}")
    return found[0]


def _by_id_opts(p: argparse.ArgumentParser) -> None:
    p.add_argument("-i", "--msgId", required=True, help="Message Id (offset id or unique key)")
    p.add_argument("-t", "--topic", help="topic name (needed to look up a unique key)")
    p.add_argument("-f", "--bodyFormat", help="print message body by the specified charset")
    p.add_argument("-c", "--cluster", help="cluster name (accepted for compatibility)")


@command("queryMsgById", "Query Message by Id.", _by_id_opts)
async def query_msg_by_id(args: argparse.Namespace, admin: AdminClient) -> int:
    """QueryMsgByIdSubCommand (lookup only): each comma-separated id printed like upstream."""
    topic = args.topic.strip() if args.topic else None
    for msg_id in (m.strip() for m in args.msgId.split(",")):
        if msg_id:
            print_msg(await _by_id(admin, topic, msg_id), args.bodyFormat)
    return 0


def _by_key_opts(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True, help="Topic name")
    p.add_argument("-k", "--msgKey", required=True, help="Message Key")
    p.add_argument("-b", "--beginTimestamp", type=int, default=0, help="Begin timestamp(ms)")
    p.add_argument("-e", "--endTimestamp", type=int, default=LONG_MAX, help="End timestamp(ms)")
    p.add_argument("-m", "--maxNum", type=int, default=64, help="max messages, default 64")
    p.add_argument("-c", "--cluster", help="cluster name (accepted for compatibility)")


@command("queryMsgByKey", "Query Message by Key.", _by_key_opts)
async def query_msg_by_key(args: argparse.Namespace, admin: AdminClient) -> int:
    """QueryMsgByKeySubCommand: ``#Message ID  #QID  #Offset`` per message with that key."""
    topic, key = args.topic.strip(), args.msgKey.strip()
    found = await query_by_key(
        admin,
        topic,
        key,
        max_num=args.maxNum,
        begin=args.beginTimestamp,
        end=args.endTimestamp,
        unique=False,
    )
    if not found:
        raise AdminError(f"query message by key finished, but no message. key={key}")
    printf("%-50s %4s %40s", "#Message ID", "#QID", "#Offset")
    for rec in found:
        printf("%-50s %4d %40d", _msg_id(rec), rec.queue_id, rec.queue_offset)
    return 0


def _by_offset_opts(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True, help="topic name")
    p.add_argument("-b", "--brokerName", required=True, help="Broker Name")
    p.add_argument("-i", "--queueId", type=int, required=True, help="Queue Id")
    p.add_argument("-o", "--offset", type=int, required=True, help="Queue Offset")
    p.add_argument("-f", "--bodyFormat", help="print message body by the specified charset")


@command("queryMsgByOffset", "Query Message by offset.", _by_offset_opts)
async def query_msg_by_offset(args: argparse.Namespace, admin: AdminClient) -> int:
    """QueryMsgByOffsetSubCommand: pull the one message at ``offset`` and print it."""
    topic, broker_name = args.topic.strip(), args.brokerName.strip()
    addrs = dict(await admin.route_brokers(topic))
    if broker_name not in addrs:
        raise AdminError(f"broker {broker_name!r} is not in the route of topic {topic!r}")
    mq = MessageQueue(topic=topic, broker_name=broker_name, queue_id=args.queueId)
    records = _decode(await admin.pull_one(addrs[broker_name], broker_name, mq, args.offset))
    if not records:
        raise AdminError(f"no message in {topic}/{broker_name}/{args.queueId} at {args.offset}")
    print_msg(records[0], args.bodyFormat)
    return 0
