"""PULL_MESSAGE (11) and LITE_PULL_MESSAGE (361), with long polling and commit-on-pull.

Owns: the pull checks in upstream's order (client-flows.md section 4.3 table), mapping the
store's read status to a response code, the always-present response header
(``nextBeginOffset``/``minOffset``/``maxOffset``/``suggestWhichBrokerId`` ...), the body of
whole stored records (message-format.md section 7), parking PULL_NOT_FOUND requests that carry
the SUSPEND flag in the :class:`PullRequestHoldService`, and the COMMIT_OFFSET flag. Mirrors
``broker/processor/PullMessageProcessor`` and ``DefaultPullMessageResultHandler`` (5.3.x).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import structlog

from rocketpy.broker.filter import build_subscription
from rocketpy.broker.long_polling import PullRequest, PullRequestHoldService
from rocketpy.broker.runtime import DEFAULT_PULL_MAX_BYTES, BrokerRuntime
from rocketpy.broker.topic_validator import (
    RMQ_SYS_TRANS_HALF_TOPIC,
    RMQ_SYS_TRANS_OP_HALF_TOPIC,
    is_sys_consumer_group,
)
from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.common.errors import CodecError, RemoteError
from rocketpy.remoting.protocol.body.config_shapes import PERM_READ, SubscriptionGroupConfig
from rocketpy.remoting.protocol.body.heartbeat import BROADCASTING, EXPRESSION_TAG, SubscriptionData
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.protocol.headers.base import from_ext, to_ext
from rocketpy.remoting.protocol.headers.broker import (
    PullMessageRequestHeader,
    PullMessageResponseHeader,
)
from rocketpy.remoting.transport.dispatch import Processor, RequestContext
from rocketpy.store.get_types import GetMessageStatus, GetResult

log = structlog.get_logger(__name__)

REJECT_SLAVE_PULL: Final = "[REJECTREQUEST]system busy, start flow control for a while"

FLAG_COMMIT_OFFSET: Final = 0x1
FLAG_SUSPEND: Final = 0x2
FLAG_SUBSCRIPTION: Final = 0x4
MASTER_ID: Final = 0
_TRANSACTION_TOPICS: Final = frozenset({RMQ_SYS_TRANS_HALF_TOPIC, RMQ_SYS_TRANS_OP_HALF_TOPIC})

_STATUS_CODES: Final[Mapping[GetMessageStatus, int]] = {
    GetMessageStatus.FOUND: ResponseCode.SUCCESS,
    GetMessageStatus.MESSAGE_WAS_REMOVING: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetMessageStatus.NO_MATCHED_MESSAGE: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetMessageStatus.OFFSET_FOUND_NULL: ResponseCode.PULL_NOT_FOUND,
    GetMessageStatus.OFFSET_OVERFLOW_ONE: ResponseCode.PULL_NOT_FOUND,
    GetMessageStatus.OFFSET_OVERFLOW_BADLY: ResponseCode.PULL_OFFSET_MOVED,
    GetMessageStatus.OFFSET_RESET: ResponseCode.PULL_OFFSET_MOVED,
    GetMessageStatus.OFFSET_TOO_SMALL: ResponseCode.PULL_OFFSET_MOVED,
}


class PullMessageProcessor:
    """Pulls, long polling included."""

    def __init__(self, rt: BrokerRuntime) -> None:
        """Args: ``rt`` the shared broker state. Call :meth:`attach` before serving."""
        self._rt = rt
        self._hold: PullRequestHoldService | None = None

    def attach(self, hold: PullRequestHoldService) -> None:
        """Use ``hold`` to park pulls (it calls :meth:`wake_up`)."""
        self._hold = hold

    def handlers(self) -> Mapping[int, Processor]:
        """Request code -> processor."""
        return {
            RequestCode.PULL_MESSAGE: self.pull_message,
            RequestCode.LITE_PULL_MESSAGE: self.pull_message,
        }

    async def pull_message(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand | None:
        """An original pull: may be parked (returns None) and may commit the offset."""
        return self.process(ctx, request, allow_suspend=True)

    async def wake_up(self, ctx: RequestContext, request: RemotingCommand) -> None:
        """``executeRequestWhenWakeup``: re-run without suspension and write the response."""
        try:
            response = self.process(ctx, request, allow_suspend=False)
        except (RemoteError, CodecError) as e:
            code = e.code if isinstance(e, RemoteError) else ResponseCode.SYSTEM_ERROR
            remark = e.remark if isinstance(e, RemoteError) else str(e)
            response = request.make_response(code, remark)
        if response is not None and not request.is_oneway:
            ctx.channel.send_response(response)

    def process(
        self, ctx: RequestContext, request: RemotingCommand, *, allow_suspend: bool
    ) -> RemotingCommand | None:
        """``processRequest(channel, request, brokerAllowSuspend)``."""
        h = from_ext(PullMessageRequestHeader, request.ext_fields)
        rt = self._rt
        group_config, subscription = self._check(ctx, h)
        result = self._read(h, subscription)
        response = self._compose(request, h, result, group_config)
        if allow_suspend and h.sys_flag & FLAG_COMMIT_OFFSET:
            rt.offsets.commit_offset(
                ctx.channel.peer, h.consumer_group, h.topic, h.queue_id, h.commit_offset
            )
        if response.code == ResponseCode.SUCCESS:
            rt.offsets.commit_pull_offset(
                h.consumer_group, h.topic, h.queue_id, result.next_begin_offset
            )
            rt.stats.inc_get(h.consumer_group, h.topic, result.message_count)
            response.body = b"".join(result.records)
            rt.metrics.record_get(
                h.consumer_group, h.topic, h.queue_id, result.message_count, len(response.body)
            )
        elif response.code == ResponseCode.PULL_NOT_FOUND and allow_suspend:
            if h.sys_flag & FLAG_SUSPEND and self._hold is not None:
                self._park(ctx, request, h, subscription)
                return None
        elif response.code == ResponseCode.PULL_OFFSET_MOVED:
            log.warning(
                "PULL_OFFSET_MOVED:correction offset",
                topic=h.topic,
                group=h.consumer_group,
                request_offset=h.queue_offset,
                new_offset=result.next_begin_offset,
            )
        return response

    def _check(
        self, ctx: RequestContext, h: PullMessageRequestHeader
    ) -> tuple[SubscriptionGroupConfig, SubscriptionData]:
        """The checks of client-flows.md section 4.3, in order; RemoteError on failure."""
        rt = self._rt
        if rt.reject_slave_pulls and rt.is_slave and not rt.config.slave_read_enable:
            raise RemoteError(ResponseCode.SYSTEM_BUSY, REJECT_SLAVE_PULL)
        if not rt.broker_readable:
            raise RemoteError(
                ResponseCode.NO_PERMISSION,
                f"the broker[{rt.config.broker_ip1}] pulling message is forbidden",
            )
        group_config = rt.groups.find_consumable(h.consumer_group)
        topic_config = rt.topics.select(h.topic)
        if topic_config is None:
            log.error("the topic not exist", topic=h.topic, consumer=ctx.channel.peer)
            raise RemoteError(
                ResponseCode.TOPIC_NOT_EXIST, f"topic[{h.topic}] not exist, apply first please!"
            )
        if not topic_config.perm & PERM_READ:
            raise RemoteError(
                ResponseCode.NO_PERMISSION, f"the topic[{h.topic}] pulling message is forbidden"
            )
        if h.topic in _TRANSACTION_TOPICS and not is_sys_consumer_group(h.consumer_group):
            raise RemoteError(  # half/op messages are read by the transaction check only
                ResponseCode.NO_PERMISSION, f"the topic[{h.topic}] pulling message is forbidden"
            )
        if not 0 <= h.queue_id < topic_config.read_queue_nums:
            raise RemoteError(
                ResponseCode.INVALID_PARAMETER,
                f"queueId[{h.queue_id}] is illegal, topic:[{h.topic}] "
                f"topicConfig.readQueueNums:[{topic_config.read_queue_nums}] "
                f"consumer:[{ctx.channel.peer}]",
            )
        subscription = self._subscription(h, group_config)
        if subscription.expression_type != EXPRESSION_TAG:
            raise RemoteError(
                ResponseCode.SYSTEM_ERROR,
                "The broker does not support consumer to filter message by "
                f"{subscription.expression_type}",
            )
        return group_config, subscription

    def _subscription(
        self, h: PullMessageRequestHeader, group_config: SubscriptionGroupConfig
    ) -> SubscriptionData:
        rt = self._rt
        if h.sys_flag & FLAG_SUBSCRIPTION:
            try:
                return build_subscription(h.topic, h.subscription, h.expression_type, h.sub_version)
            except ValueError as e:
                raise RemoteError(
                    ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                    "parse the consumer's subscription failed",
                ) from e
        group_info = rt.consumers.group(h.consumer_group)
        if group_info is None:
            log.warning("the consumer's group info not exist", group=h.consumer_group)
            raise RemoteError(
                ResponseCode.SUBSCRIPTION_NOT_EXIST, "the consumer's group info not exist"
            )
        if not group_config.consume_broadcast_enable and group_info.message_model == BROADCASTING:
            raise RemoteError(
                ResponseCode.NO_PERMISSION,
                f"the consumer group[{h.consumer_group}] can not consume by broadcast way",
            )
        subscription = group_info.subscriptions.get(h.topic)
        if subscription is None:
            raise RemoteError(
                ResponseCode.SUBSCRIPTION_NOT_EXIST, "the consumer's subscription not exist"
            )
        if subscription.sub_version < h.sub_version:
            log.warning("The broker's subscription is not latest", group=h.consumer_group)
            raise RemoteError(
                ResponseCode.SUBSCRIPTION_NOT_LATEST, "the consumer's subscription not latest"
            )
        return subscription

    def _read(self, h: PullMessageRequestHeader, subscription: SubscriptionData) -> GetResult:
        rt = self._rt
        if rt.config.use_server_side_reset_offset:
            reset = rt.offsets.query_then_erase_reset_offset(h.topic, h.consumer_group, h.queue_id)
            if reset is not None:
                return GetResult(
                    status=GetMessageStatus.OFFSET_RESET,
                    next_begin_offset=reset,
                    min_offset=rt.store.min_offset_in_queue(h.topic, h.queue_id),
                    max_offset=rt.store.max_offset_in_queue(h.topic, h.queue_id),
                )
        return rt.store.get_message(
            h.consumer_group,
            h.topic,
            h.queue_id,
            h.queue_offset,
            max_msg_nums=max(1, h.max_msg_nums),
            max_total_bytes=h.max_msg_bytes or DEFAULT_PULL_MAX_BYTES,
            tags_codes=None if subscription.matches_all else set(subscription.code_set),
        )

    def _compose(
        self,
        request: RemotingCommand,
        h: PullMessageRequestHeader,
        result: GetResult,
        group_config: SubscriptionGroupConfig,
    ) -> RemotingCommand:
        """``composeResponseHeader``: code from the status, header always filled."""
        rt = self._rt
        code = _STATUS_CODES.get(result.status)
        if code is None:  # NO_MATCHED_LOGIC_QUEUE, NO_MESSAGE_IN_QUEUE
            code = (
                ResponseCode.PULL_OFFSET_MOVED
                if h.queue_offset != 0
                else ResponseCode.PULL_NOT_FOUND
            )
        suggest = MASTER_ID
        if rt.config.slave_read_enable:
            suggest = (
                group_config.which_broker_when_consume_slowly
                if result.suggest_pulling_from_slave
                else group_config.broker_id
            )
        if rt.config.broker_id != MASTER_ID and result.status != GetMessageStatus.FOUND:
            suggest = MASTER_ID
            code = ResponseCode.PULL_RETRY_IMMEDIATELY
        if code == ResponseCode.PULL_OFFSET_MOVED and rt.is_slave:
            suggest = group_config.broker_id
            code = ResponseCode.PULL_RETRY_IMMEDIATELY
        topic_config = rt.topics.select(h.topic)
        header = PullMessageResponseHeader(
            suggest_which_broker_id=suggest,
            next_begin_offset=result.next_begin_offset,
            min_offset=result.min_offset,
            max_offset=result.max_offset,
            topic_sys_flag=topic_config.topic_sys_flag if topic_config is not None else 0,
            group_sys_flag=group_config.group_sys_flag,
        )
        return request.make_response(code, result.status.value, ext_fields=to_ext(header))

    def _park(
        self,
        ctx: RequestContext,
        request: RemotingCommand,
        h: PullMessageRequestHeader,
        subscription: SubscriptionData,
    ) -> None:
        rt = self._rt
        polling_ms = h.suspend_timeout_millis
        if not rt.config.long_polling_enable:
            polling_ms = rt.config.short_polling_time_mills
        assert self._hold is not None  # noqa: S101 - checked by the caller
        self._hold.suspend(
            PullRequest(
                ctx=ctx,
                request=request,
                topic=h.topic,
                queue_id=h.queue_id,
                pull_from_this_offset=h.queue_offset,
                subscription=subscription,
                deadline_ms=rt.clock.monotonic_ms() + max(0, polling_ms),
            )
        )
