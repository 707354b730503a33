"""PULL_MESSAGE as both consumers send it, and the response -> :class:`PullResult` mapping.

Owns: :class:`PullStatus`, :class:`PullResult`, :func:`build_subscription`
(``FilterAPI.buildSubscriptionData``), :func:`pull_message` (``PullAPIWrapper.pullKernelImpl`` +
``processPullResponse`` + ``processPullResult``: decode records, drop tags outside ``tagsSet``,
set ``MIN_OFFSET``/``MAX_OFFSET``), and the offset requests a consumer needs (QUERY/UPDATE
_CONSUMER_OFFSET, GET_MAX_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP). Spec: client-flows.md 4.2-4.4.
"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass
from typing import Final

from rocketpy.client.instance import ClientInstance
from rocketpy.client.message import MessageExt, decode_message_exts
from rocketpy.client.route_cache import MASTER_ID
from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.common.errors import ClientError, RemoteError
from rocketpy.common.javahash import java_string_hash
from rocketpy.common.message.const import MessageConst
from rocketpy.remoting.protocol.body.broker import MessageQueue
from rocketpy.remoting.protocol.body.heartbeat import SUB_ALL, SubscriptionData
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.protocol.headers.base import ext_encoder, to_ext
from rocketpy.remoting.protocol.headers.broker import (
    GetMaxOffsetRequestHeader,
    PullMessageRequestHeader,
    QueryConsumerOffsetRequestHeader,
    QueueRequestHeader,
    SearchOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)

# PullSysFlag bits (message-format.md section 2).
FLAG_COMMIT_OFFSET: Final = 0x1
FLAG_SUSPEND: Final = 0x2
FLAG_SUBSCRIPTION: Final = 0x4

#: The PullMessageRequestHeader fields set per pull, in the order pull_message passes them; with
#: FLAG_SUBSCRIPTION the subscription follows them.
_PULL_FIELDS: Final = (
    "consumer_group",
    "topic",
    "queue_id",
    "queue_offset",
    "max_msg_nums",
    "sys_flag",
    "commit_offset",
    "suspend_timeout_millis",
    "sub_version",
    "expression_type",
    "bname",
)
#: Every field is set per pull; the template's values only make the header whole.
_PULL_TEMPLATE: Final = PullMessageRequestHeader(
    consumer_group="", topic="", queue_id=0, queue_offset=0, max_msg_nums=0, sys_flag=0,
    commit_offset=0, suspend_timeout_millis=0, sub_version=0,
)  # fmt: skip
# PULL_MESSAGE's extFields encoders, compiled as SEND_MESSAGE_V2's is: one request per pull.
_encode_pull: Final = ext_encoder(_PULL_TEMPLATE, _PULL_FIELDS)
_encode_pull_with_subscription: Final = ext_encoder(_PULL_TEMPLATE, (*_PULL_FIELDS, "subscription"))


class PullStatus(enum.Enum):
    """``PullStatus``."""

    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


_STATUS: Final[dict[int, PullStatus]] = {
    ResponseCode.SUCCESS: PullStatus.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class PullResult:
    """``PullResult``: ``msgs`` already filtered by tag and decoded."""

    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    msgs: list[MessageExt]


def build_subscription(
    topic: str, expression: str | None, version: int | None = None
) -> SubscriptionData:
    """``FilterAPI.buildSubscriptionData``: ``"a || b"`` -> tags and their hash codes; ``*`` or
    empty subscribes to everything. ``version`` defaults to now in milliseconds."""
    expr = (expression or "").strip() or SUB_ALL
    tags: tuple[str, ...] = ()
    if expr != SUB_ALL:
        tags = tuple(dict.fromkeys(t.strip() for t in expr.split("||") if t.strip()))
    return SubscriptionData(
        topic=topic,
        sub_string=expr,
        tags_set=tags,
        code_set=tuple(java_string_hash(t) for t in tags),
        sub_version=time.time_ns() // 1_000_000 if version is None else version,
    )


async def pull_message(
    client: ClientInstance,
    addr: str,
    group: str,
    mq: MessageQueue,
    offset: int,
    *,
    sub: SubscriptionData,
    max_nums: int,
    sys_flag: int,
    commit_offset: int,
    suspend_timeout_ms: int,
    timeout_s: float,
) -> PullResult:
    """One PULL_MESSAGE to ``addr`` and its result.

    Raises:
        RemoteError: any response code other than the four pull outcomes.
        ConnectionClosed, RequestTimeout: transport failures.
    """
    # Positional, in _PULL_FIELDS order (a tuple and * would cost a tenth of the encoding).
    if sys_flag & FLAG_SUBSCRIPTION:
        ext = _encode_pull_with_subscription(
            group, mq.topic, mq.queue_id, offset, max_nums, sys_flag, commit_offset,
            suspend_timeout_ms, sub.sub_version, sub.expression_type, mq.broker_name,
            sub.sub_string,
        )  # fmt: skip
    else:
        ext = _encode_pull(
            group, mq.topic, mq.queue_id, offset, max_nums, sys_flag, commit_offset,
            suspend_timeout_ms, sub.sub_version, sub.expression_type, mq.broker_name,
        )  # fmt: skip
    request = RemotingCommand.request(RequestCode.PULL_MESSAGE, ext)
    response = await client.remoting.invoke(addr, request, timeout_s)
    status = _STATUS.get(response.code)
    if status is None:
        raise RemoteError.for_code(response.code, response.remark or "")
    rext = response.ext_fields or {}
    # processPullResponse -> updatePullFromWhichNode: the next pull goes where the broker says
    client.pull_from_which_node[mq] = int(rext.get("suggestWhichBrokerId", MASTER_ID))
    min_offset = int(rext.get("minOffset", 0))
    max_offset = int(rext.get("maxOffset", 0))
    msgs: list[MessageExt] = []
    if status is PullStatus.FOUND and response.body:
        msgs = decode_message_exts(
            response.body,
            mq.broker_name,
            tags=None if sub.matches_all else frozenset(sub.tags_set),
            extra_properties={
                MessageConst.MIN_OFFSET: str(min_offset),
                MessageConst.MAX_OFFSET: str(max_offset),
            },
        )
    return PullResult(
        status=status,
        next_begin_offset=int(rext.get("nextBeginOffset", offset)),
        min_offset=min_offset,
        max_offset=max_offset,
        msgs=msgs,
    )


def broker_addr(client: ClientInstance, mq: MessageQueue) -> str:
    """The address to pull/commit ``mq`` at: its master, else a replica.

    Raises:
        ClientError: the broker name is not in any fetched route.
    """
    addr = client.routes.any_addr(mq.broker_name)
    if addr is None:
        raise ClientError(f"The broker[{mq.broker_name}] not exist")
    return addr


def pull_addr(client: ClientInstance, mq: MessageQueue) -> tuple[str, bool]:
    """Where to pull ``mq`` now and whether that broker is a slave.

    ``recalculatePullFromWhichNode`` + ``findBrokerAddressInSubscribe(name, id, false)``: the
    broker id the last response suggested (the master at first) if the route has it, else the
    master, else any replica. A pull sent to a slave must not carry COMMIT_OFFSET
    (``pullKernelImpl`` clears the flag).

    Raises:
        ClientError: the broker name is not in any fetched route.
    """
    wanted = client.pull_from_which_node.get(mq, MASTER_ID)
    addrs = client.routes.brokers.get(mq.broker_name, {})
    if wanted in addrs:
        return addrs[wanted], wanted != MASTER_ID
    addr = broker_addr(client, mq)
    return addr, addr != addrs.get(MASTER_ID)


async def refresh_pull_route(client: ClientInstance, mq: MessageQueue) -> None:
    """After a failed pull of ``mq``: pull from the master again next time, and re-fetch the
    topic's route now (shared, rate-limited), so a failover is followed at once."""
    client.pull_from_which_node.pop(mq, None)
    await client.routes.refresh_after_failure(mq.topic)


async def query_consumer_offset(client: ClientInstance, group: str, mq: MessageQueue) -> int:
    """QUERY_CONSUMER_OFFSET; -1 when the broker has none (QUERY_NOT_FOUND)."""
    ext = to_ext(
        QueryConsumerOffsetRequestHeader(
            consumer_group=group, topic=mq.topic, queue_id=mq.queue_id, bname=mq.broker_name
        )
    )
    response = await client.invoke(broker_addr(client, mq), RequestCode.QUERY_CONSUMER_OFFSET, ext)
    if response.code == ResponseCode.QUERY_NOT_FOUND:
        return -1
    if response.code != ResponseCode.SUCCESS:
        raise RemoteError.for_code(response.code, response.remark or "")
    return int((response.ext_fields or {}).get("offset", -1))


async def update_consumer_offset(
    client: ClientInstance, group: str, mq: MessageQueue, offset: int
) -> None:
    """UPDATE_CONSUMER_OFFSET, waiting for the answer (Java sends it oneway; waiting lets
    shutdown know the offsets are on the broker before UNREGISTER_CLIENT)."""
    header = UpdateConsumerOffsetRequestHeader(
        consumer_group=group,
        topic=mq.topic,
        queue_id=mq.queue_id,
        commit_offset=offset,
        bname=mq.broker_name,
    )
    ext = to_ext(header)
    await client.invoke_ok(broker_addr(client, mq), RequestCode.UPDATE_CONSUMER_OFFSET, ext)


async def queue_offset(
    client: ClientInstance, mq: MessageQueue, code: int, timestamp_ms: int | None = None
) -> int:
    """GET_MAX_OFFSET / GET_MIN_OFFSET / SEARCH_OFFSET_BY_TIMESTAMP of ``mq``, the last with
    ``timestamp_ms``."""
    header: GetMaxOffsetRequestHeader | QueueRequestHeader | SearchOffsetRequestHeader
    if code == RequestCode.GET_MAX_OFFSET:
        header = GetMaxOffsetRequestHeader(
            topic=mq.topic, queue_id=mq.queue_id, bname=mq.broker_name
        )
    elif timestamp_ms is None:
        header = QueueRequestHeader(topic=mq.topic, queue_id=mq.queue_id, bname=mq.broker_name)
    else:
        header = SearchOffsetRequestHeader(
            topic=mq.topic, queue_id=mq.queue_id, timestamp=timestamp_ms, bname=mq.broker_name
        )
    ext = to_ext(header)
    response = await client.invoke_ok(broker_addr(client, mq), code, ext)
    return int((response.ext_fields or {}).get("offset", 0))
