"""PEEK_MESSAGE (200052), NOTIFICATION (200054) and POLLING_INFO (200055): the read-only
siblings of POP_MESSAGE.

Owns: peeking from the pop offsets without a checkpoint or commit, answering whether a pop would
find anything (parking like a pop when not), and counting the parked pops of a polling key.
Mirrors ``broker/processor/PeekMessageProcessor``, ``NotificationProcessor`` and
``PollingInfoProcessor`` (5.3.x). Must not: write checkpoints or move offsets; the checks, offsets
and reads are :class:`~rocketpy.broker.processors.pop.PopMessageProcessor`'s.
"""

from __future__ import annotations

from collections.abc import Mapping

from rocketpy.broker.pop_long_polling import PopRequest
from rocketpy.broker.processors.pop import PopMessageProcessor
from rocketpy.broker.runtime import BrokerRuntime
from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.common.errors import RemoteError
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.protocol.headers.base import from_ext, to_ext
from rocketpy.remoting.protocol.headers.pop import (
    NotificationRequestHeader,
    NotificationResponseHeader,
    PeekMessageRequestHeader,
    PollingInfoRequestHeader,
    PollingInfoResponseHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
)
from rocketpy.remoting.transport.dispatch import Processor, RequestContext


class PopQueryProcessor:
    """PEEK, NOTIFICATION and POLLING_INFO."""

    def __init__(self, rt: BrokerRuntime, pop: PopMessageProcessor) -> None:
        """Args: ``rt`` shared state; ``pop`` the POP processor whose checks, offsets, reads and
        long polling these share (a woken notification is re-run through it)."""
        self._rt = rt
        self._pop = pop
        pop.notification = self.notification

    def handlers(self) -> Mapping[int, Processor]:
        """Request code -> processor."""
        return {
            RequestCode.PEEK_MESSAGE: self.peek_message,
            RequestCode.NOTIFICATION: self.notification,
            RequestCode.POLLING_INFO: self.polling_info,
        }

    async def peek_message(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand | None:
        """``PeekMessageProcessor``: read from the pop offsets without a checkpoint or commit."""
        h = from_ext(PeekMessageRequestHeader, request.ext_fields)
        rt = self._rt
        pop = self._pop
        pop_like = PopMessageRequestHeader(
            consumer_group=h.consumer_group, topic=h.topic, queue_id=h.queue_id,
            max_msg_nums=h.max_msg_nums, invisible_time=0, poll_time=0, born_time=0, init_mode=0,
        )  # fmt: skip
        read_queues = pop.check_request(pop_like)
        records: list[bytes] = []
        rest = 0
        qids = range(read_queues) if h.queue_id < 0 else (h.queue_id,)
        for qid in qids:
            want = h.max_msg_nums - len(records)
            offset = pop.pop_offset(pop_like, h.topic, qid, commit_init=False)
            if want > 0:
                result = pop.read(h.consumer_group, h.topic, qid, offset, want, None)
                records.extend(result.records)
                offset = result.next_begin_offset
            rest += max(0, rt.store.max_offset_in_queue(h.topic, qid) - offset)
        header = PopMessageResponseHeader(
            pop_time=rt.clock.wall_ms(), invisible_time=0, revive_qid=0, rest_num=rest
        )
        code = ResponseCode.SUCCESS if records else ResponseCode.PULL_NOT_FOUND
        response = request.make_response(code, None, ext_fields=to_ext(header))
        response.body = b"".join(records) if records else None
        return response

    async def notification(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand | None:
        """``NotificationProcessor``: is there anything to pop? Parks like a pop when not."""
        h = from_ext(NotificationRequestHeader, request.ext_fields)
        rt = self._rt
        pop = self._pop
        pop_like = PopMessageRequestHeader(
            consumer_group=h.consumer_group, topic=h.topic, queue_id=h.queue_id, max_msg_nums=1,
            invisible_time=0, poll_time=h.poll_time, born_time=h.born_time, init_mode=0,
        )  # fmt: skip
        read_queues = pop.check_request(pop_like)
        has_msg = False
        topics = [(h.topic, q) for q in (range(read_queues) if h.queue_id < 0 else (h.queue_id,))]
        retry = rt.topics.select(pop.retry_topic(h.topic, h.consumer_group))
        if retry is not None:
            topics += [(retry.topic_name, q) for q in range(retry.read_queue_nums)]
        for topic, qid in topics:
            offset = pop.pop_offset(pop_like, topic, qid, commit_init=False)
            if rt.store.max_offset_in_queue(topic, qid) > offset:
                has_msg = True
                break
        if not has_msg and h.poll_time > 0 and pop.polling is not None:
            parked = pop.polling.polling(
                PopRequest(
                    ctx=ctx, request=request, topic=h.topic, group=h.consumer_group,
                    queue_id=h.queue_id, retry_topic=pop.retry_topic(h.topic, h.consumer_group),
                    subscription=None,
                    deadline_ms=rt.clock.monotonic_ms() + h.poll_time,
                )
            )  # fmt: skip
            if parked:
                request.ext_fields = {**(request.ext_fields or {}), "pollTime": "0"}
                return None
            if parked is False:
                return request.make_response(ResponseCode.POLLING_FULL, "polling full")
        return request.make_response(
            ResponseCode.SUCCESS,
            None,
            ext_fields=to_ext(NotificationResponseHeader(has_msg=has_msg)),
        )

    async def polling_info(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand | None:
        """``PollingInfoProcessor``: parked POPs for the key."""
        h = from_ext(PollingInfoRequestHeader, request.ext_fields)
        rt = self._rt
        pop = self._pop
        topic_config = rt.topics.select(h.topic)
        if topic_config is None:
            raise RemoteError(
                ResponseCode.TOPIC_NOT_EXIST, f"topic[{h.topic}] not exist, apply first please!"
            )
        if not 0 <= h.queue_id < topic_config.read_queue_nums and h.queue_id != -1:
            raise RemoteError(ResponseCode.INVALID_PARAMETER, f"queueId[{h.queue_id}] is illegal")
        if rt.groups.find(h.consumer_group) is None:
            raise RemoteError(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group [{h.consumer_group}] does not exist",
            )
        num = (
            0
            if pop.polling is None
            else pop.polling.polling_num(h.topic, h.consumer_group, h.queue_id)
        )
        return request.make_response(
            ResponseCode.SUCCESS,
            None,
            ext_fields=to_ext(PollingInfoResponseHeader(polling_num=num)),
        )
