"""SEND_MESSAGE (10), SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320), CONSUMER_SEND_MSG_BACK (36).

Owns: the send path from a decoded request to its answer (the checks of ``msgCheck`` are in
``send_check.py``, the properties in ``send_properties.py``, a batch's messages in
``send_batch.py``, where a message goes -- retry topics, delays, timers -- in
``send_route.py``), the send lane
(:meth:`SendMessageProcessor.send_run_nowait`: the single sends of one read stored together,
one batch per queue, and answered together), and mapping store results to response codes.
Mirrors ``broker/processor/SendMessageProcessor`` and ``AbstractSendMessageProcessor``
(client-flows.md sections 2.3, 2.4, 6.1; message-format.md section 5).

Transactional half messages (``TRAN_MSG=true``) go to ``RMQ_SYS_TRANS_HALF_TOPIC`` through
``rocketpy/broker/transaction/util.py`` (NO_PERMISSION with ``rejectTransactionMessage=true``).
Decided: a batch stores each message's own properties plus the broker-added ones
(message-format.md section 5, the recommended form; not upstream issue #9416's behaviour).
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from time import perf_counter
from typing import Any, Final, Literal

import structlog

from rocketpy.broker import topic_validator as tv
from rocketpy.broker.message_type_check import check_topic_message_type
from rocketpy.broker.processors.put_answer import answer_when_put
from rocketpy.broker.processors.put_status import STORED_CODES, put_failure
from rocketpy.broker.processors.send_answer import SendAnswers
from rocketpy.broker.processors.send_back import consumer_send_msg_back
from rocketpy.broker.processors.send_batch import batch_to_store
from rocketpy.broker.processors.send_check import MessageCheck, queue_count
from rocketpy.broker.processors.send_properties import SendProperties, too_large
from rocketpy.broker.processors.send_route import SendRoute, int_prop
from rocketpy.broker.runtime import BrokerRuntime
from rocketpy.broker.timer_hook import TimerRefusal
from rocketpy.broker.transaction.util import half_route
from rocketpy.common.codes import RequestCode, ResponseCode
from rocketpy.common.errors import RemoteError
from rocketpy.common.message.const import MessageConst
from rocketpy.common.message.properties import (
    encode_properties,
    property_value,
    waits_for_store,
)
from rocketpy.common.message.record import MULTI_TAGS_FLAG, Address
from rocketpy.remoting.protocol.body.config_shapes import (
    TopicConfig,
    TopicFilterType,
)
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.protocol.frame import decode_frame
from rocketpy.remoting.protocol.headers.broker import SendMessageRequestHeader, decode_send_header
from rocketpy.remoting.transport.dispatch import (
    Deferred,
    NowaitProcessor,
    NowaitResult,
    Processor,
    RequestContext,
    RunProcessor,
)
from rocketpy.store.commit_log.put_types import (
    Appender,
    MessageBatch,
    MessageToStore,
    PutResult,
)

log = structlog.get_logger(__name__)

REJECT_REQUEST_REMARK: Final = "[REJECTREQUEST]system busy, start flow control for a while"


#: A send's answer: at once (a command or its frame), a coroutine, or a Deferred settled once
#: the store's replicas acknowledged (DLedger's quorum).
_Answer = RemotingCommand | bytes | Awaitable[RemotingCommand] | Deferred


#: The send lane's topics whose sends passed the checks in one read: config, queue count.
_Checked = dict[str, tuple[TopicConfig, int]]


class _Lane(enum.Enum):
    """What the send lane makes of a request it leaves to be sent alone (nothing was done)."""

    ALONE = 0


@functools.lru_cache(maxsize=4096)  # a handful of peers send every message
def _parse_host(peer: str) -> tuple[str, int]:
    host, _, port = peer.rpartition(":")
    host = host.strip("[]")
    return (host or "127.0.0.1", int(port) if port.isdigit() else 0)


class SendMessageProcessor:
    """Message sends and consumer send-backs."""

    def __init__(self, rt: BrokerRuntime) -> None:
        """Args: ``rt`` the shared broker state."""
        self._rt = rt
        self._msg_check = MessageCheck(rt)
        self._props = SendProperties(rt)
        self._answers = SendAnswers()
        #: Where a message is stored: retry topics, delays, timers (``send_route.py``).
        self.route = SendRoute(rt)

    def handlers(self) -> Mapping[int, Processor]:
        """Request code -> processor."""
        return {
            RequestCode.SEND_MESSAGE: self.send_message,
            RequestCode.SEND_MESSAGE_V2: self.send_message,
            RequestCode.SEND_BATCH_MESSAGE: self.send_message,
            RequestCode.CONSUMER_SEND_MSG_BACK: self.consumer_send_msg_back,
        }

    def nowait_handlers(self) -> Mapping[int, NowaitProcessor]:
        """Request code -> synchronous form of its processor (:meth:`send_message_nowait`)."""
        return {
            RequestCode.SEND_MESSAGE: self.send_message_nowait,
            RequestCode.SEND_MESSAGE_V2: self.send_message_nowait,
            RequestCode.SEND_BATCH_MESSAGE: self.send_message_nowait,
        }

    def run_handlers(self) -> Mapping[int, RunProcessor]:
        """Request code -> run form of its processor (:meth:`send_run_nowait`)."""
        return {
            RequestCode.SEND_MESSAGE: self.send_run_nowait,
            RequestCode.SEND_MESSAGE_V2: self.send_run_nowait,
        }

    # -- helpers shared with the schedule service ----------------------------------------

    def illegal_remark(self) -> str:
        """The MESSAGE_ILLEGAL remark (``handlePutMessageResult``)."""
        return (
            "the message is illegal, maybe msg body or properties length not matched. msg body "
            f"length limit {self._rt.max_message_size}B, msg properties length limit 32KB."
        )

    # -- SEND_MESSAGE / V2 / BATCH ----------------------------------------------------------

    async def send_message(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand | None:
        """``processRequest`` for the three send codes; records the request's latency (decode to
        response, rejected sends included) in the send-latency histogram."""
        pending = self.send_message_nowait(ctx, request)
        result: RemotingCommand | bytes | None
        if isinstance(pending, _ANSWERS):
            result = pending
        elif isinstance(pending, Deferred):
            result = await pending.wait()
        else:
            result = await pending
        if isinstance(result, bytes):  # the answer's frame
            return decode_frame(memoryview(result)[4:])
        return result

    def send_message_nowait(self, ctx: RequestContext, request: RemotingCommand) -> _Answer:
        """:meth:`send_message` answered without awaiting when the store can append without
        waiting (a single message, ASYNC_FLUSH, no replicas to wait for, room in the segment):
        a stored send's answer as its whole frame (``send_answer.py``), a refusal as a command;
        otherwise the coroutine that finishes the send."""
        started = perf_counter()
        result = self._send_message(ctx, request, started)
        if isinstance(result, _ANSWERS):
            self._rt.metrics.record_send_latency((perf_counter() - started) * 1000.0)
        return result

    def send_run_nowait(
        self, ctx: RequestContext, requests: Sequence[RemotingCommand], out: list[NowaitResult]
    ) -> None:
        """The send lane: the single sends of one read answered as :meth:`send_message_nowait`
        would, their records written together (one batch per queue: ``Appender.run``), the
        store's checks made once, the reput woken once and one latency observation (their
        answers go out together at the end of the read). It stops at the first request it
        cannot answer at once: a batch, one whose properties the broker must read or change
        (retry topics, delays, transactions, timers), one whose checks raise (alone, it gets
        its error answer), or one the store cannot append now (a new segment, replicas to wait
        for, SYNC_FLUSH: the appender is then None and the lane takes nothing)."""
        rt = self._rt
        put = rt.store.nowait_appender()
        if put is None:
            return
        started = perf_counter()
        # In request order: an answer made without the store, or None for the next of msgs.
        answers: list[_Answer | None] = []
        msgs: list[MessageToStore] = []
        uniqs: list[str] = []
        topics: _Checked = {}
        born = _parse_host(ctx.channel.peer)  # one sender for the whole read
        for request in requests:
            try:
                checked = self._checked(ctx, request, topics)
                if isinstance(checked, RemotingCommand):  # refused
                    answers.append(checked)
                    continue
                header, topic_config, batch = checked
                if batch:
                    break
                built = self._message(request, header, topic_config, born, lane=True)
            except Exception:  # noqa: BLE001 - alone, it is answered with its error
                break  # (the sends before it are stored and answered first)
            if built is _Lane.ALONE:
                break
            if isinstance(built, RemotingCommand):
                answers.append(built)
            else:
                msgs.append(built[0])
                uniqs.append(built[1])
                answers.append(None)
        try:
            self._stored_run(requests, answers, msgs, uniqs, put, out)
        finally:
            rt.store.appended()
            if out:
                rt.metrics.record_send_latency((perf_counter() - started) * 1000.0, len(out))

    def _stored_run(  # noqa: PLR0917 -- the lane's lists, positional
        self,
        requests: Sequence[RemotingCommand],
        answers: list[_Answer | None],
        msgs: list[MessageToStore],
        uniqs: list[str],
        put: Appender,
        out: list[NowaitResult],
    ) -> None:
        """Store the lane's ``msgs`` and add the answers, in request order, up to the first
        message the store could not take at once (that request and the rest go alone)."""
        stored = put.run(msgs, uniqs) if msgs else []
        if stored:
            self._rt.stats.inc_put(len(stored))
        if stored is None:  # one by one, as far as they append at once
            results: list[PutResult] = []
            for msg in msgs:
                result = put.one(msg)
                if result is None:
                    break
                results.append(result)
        config, frame = self._rt.config, self._answers.frame
        sizes: dict[tuple[str, int], list[int]] = {}  # the run's stored body sizes by queue
        k = 0
        for request, answer in zip(requests, answers, strict=False):
            if answer is not None:
                out.append(answer)
                continue
            msg, uniq = msgs[k], uniqs[k]
            if stored is None:
                if k == len(results):
                    return
                self._record_one(msg, results[k].stored)
                out.append(self._put_frame(request, results[k], msg.queue_id, uniq))
            else:
                queue = sizes.get((msg.topic, msg.queue_id))
                if queue is None:
                    sizes[msg.topic, msg.queue_id] = [len(msg.body)]
                else:
                    queue.append(len(msg.body))
                msg_id, queue_offset = stored[k]
                out.append(frame(config, request.opaque, ResponseCode.SUCCESS, msg_id,
                                 msg.queue_id, queue_offset, uniq))  # fmt: skip
            k += 1
        for (topic, queue_id), queue in sizes.items():
            self._rt.metrics.record_puts(topic, queue_id, queue)

    def _send_message(
        self, ctx: RequestContext, request: RemotingCommand, started: float
    ) -> _Answer:
        """One send, outside the lane."""
        checked = self._checked(ctx, request)
        if isinstance(checked, RemotingCommand):
            return checked
        header, topic_config, batch = checked
        if batch:
            return self._send_batch(ctx, request, header, topic_config, started)
        built = self._message(
            request, header, topic_config, _parse_host(ctx.channel.peer), lane=False
        )
        if isinstance(built, RemotingCommand):
            return built
        if built is _Lane.ALONE:
            raise AssertionError("a send without the lane was left alone")
        msg, uniq = built
        result = self._rt.store.put_message_nowait(msg)
        if result is not None:  # the hot path: appended, nothing to wait for
            self._record_one(msg, result.stored)
            return self._put_frame(request, result, msg.queue_id, uniq)
        return self._answer_put(
            msg,
            lambda: self._put_one(request, msg, msg.queue_id, uniq),
            lambda put: self._stored_frame(request, msg, put, msg.queue_id, uniq),
            started,
        )

    def _checked(
        self, ctx: RequestContext, request: RemotingCommand, topics: _Checked | None = None
    ) -> tuple[SendMessageRequestHeader, TopicConfig, bool] | RemotingCommand:
        """One send past ``msgCheck``: its header, topic config and whether it is a batch
        (``_send_batch`` decodes its body), or the refusal. ``topics``: the send lane's record
        of the topics whose sends passed the checks in its read, which hold for the whole read
        (no await between its sends); a later send to one is only checked for its queue id."""
        rt = self._rt
        header = decode_send_header(request.code, request.ext_fields)
        batch = request.code == RequestCode.SEND_BATCH_MESSAGE or bool(header.batch)
        if topics is not None:
            passed = topics.get(header.topic)
            if passed is not None and header.queue_id < passed[1]:
                return header, passed[0], batch
        if rt.is_slave:
            return request.make_response(ResponseCode.SYSTEM_BUSY, REJECT_REQUEST_REMARK)
        start_accept = rt.config.start_accept_send_request_time_stamp
        if start_accept > 0 and rt.clock.wall_ms() < start_accept:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR,
                f"broker unable to service, until {rt.config.start_accept_send_request_time_stamp}",
                ext_fields=self._ext(),
            )
        try:
            typed = rt.config.enable_topic_message_type_check
            if typed:  # a check per message: the topic is not recorded
                check_topic_message_type(rt.topics, header)
            topic_config = self._msg_check.check(ctx, header)
            if topics is not None and not typed:
                topics[header.topic] = (topic_config, queue_count(topic_config))
        except RemoteError as e:
            return request.make_response(e.code, e.remark, ext_fields=self._ext())
        return header, topic_config, batch

    def _ext(self) -> dict[str, str]:
        """The extFields every send response carries."""
        return self._answers.ext(self._rt.config)

    async def _timed(
        self, pending: Coroutine[Any, Any, RemotingCommand], started: float
    ) -> RemotingCommand:
        try:
            return await pending
        finally:
            self._record_latency(started)

    def _record_latency(self, started: float) -> None:
        self._rt.metrics.record_send_latency((perf_counter() - started) * 1000.0)

    def _pick_queue(self, h: SendMessageRequestHeader, topic_config: TopicConfig) -> int:
        """The queue the send names, or a random writable one for queue id -1."""
        if h.queue_id >= 0:
            return h.queue_id
        return self._rt.rng.randrange(max(1, topic_config.write_queue_nums))

    def _message(
        self,
        request: RemotingCommand,
        h: SendMessageRequestHeader,
        topic_config: TopicConfig,
        born_host: Address,
        lane: bool,
    ) -> tuple[MessageToStore, str] | RemotingCommand | Literal[_Lane.ALONE]:
        """The message a checked single send from ``born_host`` stores and its UNIQ_KEY, or
        the refusal; ALONE for the lane (``lane``) where the send needs more than the lane
        does."""
        rt = self._rt
        body = request.body or b""
        if len(body) > rt.max_message_size:
            return self._illegal(request)
        queue_id = self._pick_queue(h, topic_config)
        fast = None if tv.is_retry_topic(h.topic) else self._props.fast(h.properties)
        if fast is not None:
            topic, sys_flag = h.topic, _sys_flag(h.sys_flag, topic_config)
            text, uniq = fast
        elif lane:
            return _Lane.ALONE
        else:
            routed = self._decoded_route(request, h, queue_id, topic_config)
            if isinstance(routed, RemotingCommand):
                return routed
            topic, queue_id, sys_flag, text, uniq = routed
        # Positional (per message): topic, queue id, body, flag, sys flag, born timestamp and
        # host, reconsume times, prepared offset, properties, wait_store -- the lane runs only
        # where no put waits (its appender is None otherwise).
        msg = MessageToStore(
            topic, queue_id, body, h.flag, sys_flag, h.born_timestamp,
            born_host, h.reconsume_times or 0, 0, text,
            lane or waits_for_store(property_value(text, MessageConst.WAIT)),
        )  # fmt: skip
        return msg, uniq

    def _answer_put(
        self,
        what: MessageToStore | MessageBatch,
        slow: Callable[[], Coroutine[Any, Any, RemotingCommand]],
        answer: Callable[[PutResult], RemotingCommand | bytes],
        started: float,
    ) -> _Answer:
        """The answer to a put the store could not make at once: appended now with its
        acknowledgement pending (``put_then``: answered from the call that settles it, no
        coroutine, no future), else ``slow()``."""
        deferred, on_result = answer_when_put(
            answer, functools.partial(self._record_latency, started)
        )
        result = self._rt.store.put_then(what, on_result)
        if result is False:
            return self._timed(slow(), started)
        if isinstance(result, PutResult):
            return answer(result)
        return deferred

    def _decoded_route(
        self,
        request: RemotingCommand,
        h: SendMessageRequestHeader,
        queue_id: int,
        topic_config: TopicConfig,
    ) -> tuple[str, int, int, str, str] | RemotingCommand:
        """Where and how a message is stored when its properties must be read or changed (retry
        topics, delays, broker-added names in the sender's text): (topic, queue id, sys flag,
        properties text, UNIQ_KEY), or the refusal."""
        rt = self._rt
        props = self._props.base(h.properties)
        if too_large(props):
            return self._illegal(request)
        reconsume = h.reconsume_times or 0
        try:
            topic, queue_id, topic_config = self.route.retry_and_dlq(
                request.version, h, props, queue_id, topic_config
            )
        except RemoteError as e:
            return request.make_response(e.code, e.remark, ext_fields=self._ext())
        uniq = self._props.ensure_uniq_key(props)
        tran = props.get(MessageConst.TRAN_MSG, "").lower() == "true"
        sys_flag = _sys_flag(h.sys_flag, topic_config)
        if tran and not (reconsume > 0 and int_prop(props, MessageConst.DELAY) > 0):
            if not rt.config.reject_transaction_message:  # a half message (transaction/util.py)
                topic, queue_id, sys_flag = half_route(topic, queue_id, sys_flag, props)
                return topic, queue_id, sys_flag, encode_properties(props), uniq
            return request.make_response(
                ResponseCode.NO_PERMISSION,
                f"the broker[{rt.config.broker_ip1}] sending transaction message is forbidden",
                ext_fields=self._ext(),
            )
        routed = self.route.schedule_route(topic, queue_id, sys_flag, props)
        if isinstance(routed, TimerRefusal):
            return request.make_response(routed.code, routed.remark, ext_fields=self._ext())
        topic, queue_id = routed
        return topic, queue_id, sys_flag, encode_properties(props), uniq

    def _illegal(self, request: RemotingCommand) -> RemotingCommand:
        return request.make_response(
            ResponseCode.MESSAGE_ILLEGAL, self.illegal_remark(), ext_fields=self._ext()
        )

    async def _put_one(
        self, request: RemotingCommand, msg: MessageToStore, queue_id: int, uniq: str
    ) -> RemotingCommand:
        result = await self._rt.store.put_message(msg)
        self._record_one(msg, result.stored)
        return self._put_response(request, result, queue_id, uniq)

    def _stored_frame(
        self,
        request: RemotingCommand,
        msg: MessageToStore,
        result: PutResult,
        queue_id: int,
        uniq: str,
    ) -> RemotingCommand | bytes:
        """The answer to a send the store acknowledged later (DLedger's quorum), as its frame:
        the template of the synchronous path, not a command through the header encoder."""
        self._record_one(msg, result.stored)
        return self._put_frame(request, result, queue_id, uniq)

    def _record_one(self, msg: MessageToStore, stored: bool) -> None:
        if stored:
            rt = self._rt
            rt.stats.inc_put()
            rt.metrics.record_put(msg.topic, msg.queue_id, len(msg.body))

    def _send_batch(
        self,
        ctx: RequestContext,
        request: RemotingCommand,
        h: SendMessageRequestHeader,
        topic_config: TopicConfig,
        started: float,
    ) -> _Answer:
        rt = self._rt
        batch = batch_to_store(
            rt, self._props, request, h, self._pick_queue(h, topic_config),
            _sys_flag(h.sys_flag, topic_config), _parse_host(ctx.channel.peer),
            self.illegal_remark(),
        )  # fmt: skip
        if isinstance(batch, str):
            return request.make_response(
                ResponseCode.MESSAGE_ILLEGAL, batch, ext_fields=self._ext()
            )
        uniqs = batch.uniqs or []
        result = rt.store.put_batch_nowait(batch)
        if result is not None:
            self._record_batch(batch, result)
            return self._put_frame(request, result, batch.queue_id, ",".join(uniqs))
        return self._answer_put(
            batch,
            lambda: self._put_batch(request, batch, uniqs),
            lambda put: self._stored_batch(request, batch, put, uniqs),
            started,
        )

    async def _put_batch(
        self, request: RemotingCommand, batch: MessageBatch, uniqs: list[str]
    ) -> RemotingCommand:
        result = await self._rt.store.put_batch(batch)
        return self._stored_batch(request, batch, result, uniqs)

    def _stored_batch(
        self, request: RemotingCommand, batch: MessageBatch, result: PutResult, uniqs: list[str]
    ) -> RemotingCommand:
        self._record_batch(batch, result)
        return self._put_response(request, result, batch.queue_id, ",".join(uniqs))

    def _record_batch(self, batch: MessageBatch, result: PutResult) -> None:
        if result.stored:
            rt = self._rt
            rt.stats.inc_put(len(batch.items))
            sizes = [len(body) for _, body, _ in batch.items]
            rt.metrics.record_puts(batch.topic, batch.queue_id, sizes)

    def _put_response(
        self, request: RemotingCommand, result: PutResult, queue_id: int, uniq: str
    ) -> RemotingCommand:
        """``handlePutMessageResult``."""
        code = STORED_CODES.get(result.status)
        if code is None:
            return self._put_refused(request, result)
        return self._answers.command(
            self._rt.config, request, code, result.msg_id, queue_id, result.queue_offset, uniq
        )

    def _put_frame(
        self, request: RemotingCommand, result: PutResult, queue_id: int, uniq: str
    ) -> RemotingCommand | bytes:
        """:meth:`_put_response`, a stored send's answer encoded as its frame."""
        code = STORED_CODES.get(result.status)
        if code is None:
            return self._put_refused(request, result)
        return self._answers.frame(
            self._rt.config, request.opaque, code, result.msg_id, queue_id, result.queue_offset,
            uniq,
        )  # fmt: skip

    def _put_refused(self, request: RemotingCommand, result: PutResult) -> RemotingCommand:
        failure = put_failure(result.status, self.illegal_remark())
        return request.make_response(failure[0], failure[1], ext_fields=self._ext())

    # -- CONSUMER_SEND_MSG_BACK ---------------------------------------------------------

    async def consumer_send_msg_back(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """``consumerSendMsgBack`` (:mod:`.send_back`)."""
        return await consumer_send_msg_back(self._rt, self.route.apply_delay, request)


#: What a send answers at once: a command, or a stored send's whole frame.
_ANSWERS: Final = (bytes, RemotingCommand)


def _sys_flag(sent: int, topic_config: TopicConfig) -> int:
    """The sender's sys flag, with MULTI_TAGS for a topic of that filter type."""
    if topic_config.topic_filter_type == TopicFilterType.MULTI_TAG:
        return sent | MULTI_TAGS_FLAG
    return sent
