"""The push consumer: subscriptions, rebalance, long-polling pulls, listener calls, offsets.

Owns: :class:`PushConsumer` (``DefaultMQPushConsumer`` in CLUSTERING mode with
``DefaultMQPushConsumerImpl``, ``RebalancePushImpl`` and
``ConsumeMessageOrderlyService``). Its tasks, all owned by the client's TaskSet and cancelled on
shutdown: rebalance (every ``rebalance_interval_s`` and on NOTIFY_CONSUMER_IDS_CHANGED), one
long-polling pull loop per assigned queue, offset persistence (``persist_offset_interval_s``),
heartbeat and route refresh (:class:`ClientInstance`), the listener workers
(:class:`ConsumeConcurrentlyService`), and in orderly mode the LOCK_BATCH_MQ
renewal and one consume loop per queue. Spec: client-flows.md sections 3, 4 and 6.
"""

from __future__ import annotations

import asyncio
import enum
import time
from typing import Final

import structlog

from rocketpy.client.consume_service import (
    ConsumeConcurrentlyService,
    ConsumeOrderlyStatus,
    ConsumeStatus,
    Listener,
    restore_topic,
)
from rocketpy.client.instance import ClientInstance
from rocketpy.client.message import MessageExt, MessageQueue
from rocketpy.client.mq_lock import lock_batch, unlock_batch
from rocketpy.client.offset_store import RemoteBrokerOffsetStore
from rocketpy.client.pull_api import (
    FLAG_COMMIT_OFFSET,
    FLAG_SUSPEND,
    PullStatus,
    broker_addr,
    build_subscription,
    pull_addr,
    pull_message,
    query_consumer_offset,
    queue_offset,
    refresh_pull_route,
)
from rocketpy.client.rebalance import ProcessQueue, allocate_averagely
from rocketpy.common.codes import RequestCode
from rocketpy.common.errors import ClientError, RemotingError
from rocketpy.common.message.const import MessageConst
from rocketpy.remoting.protocol.body.broker import decode_consumer_list
from rocketpy.remoting.protocol.body.heartbeat import ConsumerData, SubscriptionData
from rocketpy.remoting.protocol.command import RemotingCommand
from rocketpy.remoting.protocol.headers.base import to_ext
from rocketpy.remoting.protocol.headers.broker import (
    ConsumerSendMsgBackRequestHeader,
    GroupRequestHeader,
)
from rocketpy.remoting.transport.dispatch import RequestContext

log = structlog.get_logger(__name__)

RETRY_GROUP_TOPIC_PREFIX: Final = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX: Final = "%DLQ%"


class ConsumeFromWhere(enum.Enum):
    """Where a group with no committed offset starts (``ConsumeFromWhere``)."""

    CONSUME_FROM_LAST_OFFSET = "CONSUME_FROM_LAST_OFFSET"
    CONSUME_FROM_FIRST_OFFSET = "CONSUME_FROM_FIRST_OFFSET"
    CONSUME_FROM_TIMESTAMP = "CONSUME_FROM_TIMESTAMP"


class PushConsumer:
    """An asyncio ``DefaultMQPushConsumer`` (clustering).

    Args:
        group: consumer group.
        namesrv_addr: ``host:port[;host:port...]``.
        consume_from_where: start point of a queue the group has no offset for.
        consume_timestamp_ms: the start time for ``CONSUME_FROM_TIMESTAMP``.
        max_reconsume_times: deliveries before the broker moves a message to ``%DLQ%group``.
        delay_level_when_next_consume: 0 = broker decides (3 + reconsume times), -1 = DLQ.
        pull_batch_size: ``maxMsgNums`` of each pull.
        consume_message_batch_max_size: messages per listener call.
        consume_concurrency: listener calls in flight at once (``consumeThreadMax``).
        pull_threshold_for_queue: stop pulling a queue holding this many unconsumed messages.
        suspend_timeout_s: how long the broker may hold a pull (long polling).
        pull_delay_on_error_s: pause after a failed pull.
    """

    def __init__(
        self,
        group: str,
        namesrv_addr: str,
        *,
        consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        consume_timestamp_ms: int | None = None,
        max_reconsume_times: int = 16,
        delay_level_when_next_consume: int = 0,
        pull_batch_size: int = 32,
        consume_message_batch_max_size: int = 1,
        consume_concurrency: int = 20,
        pull_threshold_for_queue: int = 1000,
        suspend_timeout_s: float = 15.0,
        pull_delay_on_error_s: float = 3.0,
        rebalance_interval_s: float = 20.0,
        persist_offset_interval_s: float = 5.0,
        heartbeat_interval_s: float = 30.0,
        poll_namesrv_interval_s: float = 30.0,
        lock_interval_s: float = 20.0,
        suspend_current_queue_s: float = 1.0,
        request_timeout_s: float = 3.0,
        instance_name: str | None = None,
    ) -> None:
        self.group = group
        self.consume_from_where = consume_from_where
        self.consume_timestamp_ms = consume_timestamp_ms or (
            time.time_ns() // 1_000_000 - 1_800_000
        )
        self.max_reconsume_times = max_reconsume_times
        self.delay_level_when_next_consume = delay_level_when_next_consume
        self.pull_batch_size = pull_batch_size
        self.consume_message_batch_max_size = consume_message_batch_max_size
        self.pull_threshold_for_queue = pull_threshold_for_queue
        self.suspend_timeout_s = suspend_timeout_s
        self.pull_delay_on_error_s = pull_delay_on_error_s
        self._rebalance_interval_s = rebalance_interval_s
        self._persist_interval_s = persist_offset_interval_s
        self._lock_interval_s = lock_interval_s
        self._suspend_current_queue_s = suspend_current_queue_s
        self._client = ClientInstance(
            namesrv_addr,
            instance_name=instance_name,
            request_timeout_s=request_timeout_s,
            poll_namesrv_interval_s=poll_namesrv_interval_s,
            heartbeat_interval_s=heartbeat_interval_s,
            name="push-consumer",
        )
        self._client.consumer_data = self._consumer_data
        self._client.register(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, self._on_ids_changed)
        self._retry_topic = RETRY_GROUP_TOPIC_PREFIX + group
        self._subs: dict[str, SubscriptionData] = {}
        self._listener: Listener | None = None
        self._orderly = False
        self._pqs: dict[MessageQueue, ProcessQueue] = {}
        self._offsets = RemoteBrokerOffsetStore(self._client, group)
        self._concurrently = ConsumeConcurrentlyService(
            group=group,
            retry_topic=self._retry_topic,
            concurrency=consume_concurrency,
            batch_max_size=consume_message_batch_max_size,
            send_back=lambda m: self._send_back(m, self.delay_level_when_next_consume),
            stop_event=self._client.stop_event,
        )
        self._rebalance_now = asyncio.Event()
        self._started = False

    # -- public API ------------------------------------------------------------------------------

    @property
    def client_id(self) -> str:
        """``ip@instanceName``."""
        return self._client.client_id

    def subscribe(self, topic: str, expression: str = "*") -> None:
        """Consume ``topic`` messages whose tag matches ``expression`` (``"a || b"`` or ``"*"``).
        After start the brokers learn it with the next heartbeat, sent at once."""
        self._subs[topic] = build_subscription(topic, expression)
        if self._started:
            self._client.tasks.spawn(self._after_subscription_change(), name="resubscribe")

    def unsubscribe(self, topic: str) -> None:
        """Stop consuming ``topic``; its queues are released (offsets committed) at once."""
        self._subs.pop(topic, None)
        if self._started:
            self._client.tasks.spawn(self._after_subscription_change(), name="unsubscribe")

    def register_listener(self, listener: Listener, *, orderly: bool = False) -> None:
        """Set the message listener.

        Args:
            listener: ``async def listener(msgs) -> ConsumeStatus`` (concurrent) or
                ``-> ConsumeOrderlyStatus`` (orderly).
            orderly: one queue at a time, in queue order, under a broker lock (LOCK_BATCH_MQ).
        """
        self._listener = listener
        self._orderly = orderly

    def assigned_queues(self) -> list[MessageQueue]:
        """The queues this consumer holds now (sorted)."""
        return sorted(self._pqs)

    async def start(self) -> None:
        """Fetch routes, heartbeat, rebalance, and start every background task.

        Raises:
            ClientError: no listener registered, or no subscription.
        """
        if self._listener is None:
            raise ClientError("messageListener is null")
        if not self._subs:
            raise ClientError("subscription is empty")
        if self._started:
            return
        self._subs.setdefault(self._retry_topic, build_subscription(self._retry_topic, "*"))
        self._started = True
        self._client.start()
        await self._fetch_routes()
        await self._client.heartbeat_all()
        tasks = self._client.tasks
        if not self._orderly:
            self._concurrently.start(self._listener)
        tasks.spawn(self._rebalance_loop(), name=f"{self.group}/rebalance")
        self._client.every(self._persist_interval_s, self._persist_offsets, "persist-offsets")
        if self._orderly:
            self._client.every(self._lock_interval_s, self._lock_all, "lock-mq")
        self._rebalance_now.set()

    async def shutdown(self, timeout_s: float = 5.0) -> None:
        """Stop pulling, let running listeners finish (bounded), commit offsets, unlock orderly
        queues, UNREGISTER_CLIENT, close connections. Idempotent."""
        if not self._started or self._client.stop_event.is_set():
            return
        self._client.stop_event.set()
        for pq in self._pqs.values():
            pq.dropped = True
            if pq.task is not None:
                pq.task.cancel()
        await self._concurrently.wait_idle(timeout_s)
        await self._concurrently.cancel()
        mqs = list(self._pqs)
        await self._offsets.persist_all(mqs)
        if self._orderly:
            await self._unlock(mqs)
        await self._client.unregister_all(None, self.group)
        await self._client.close()

    # -- heartbeat / notifications ---------------------------------------------------------------

    def _consumer_data(self) -> tuple[ConsumerData, ...]:
        return (
            ConsumerData(
                group_name=self.group,
                consume_from_where=self.consume_from_where.value,
                subscription_data_set=tuple(self._subs.values()),
            ),
        )

    async def _on_ids_changed(self, ctx: RequestContext, request: RemotingCommand) -> None:
        """NOTIFY_CONSUMER_IDS_CHANGED (oneway): rebalance now."""
        log.info(
            "receive broker's notification, the consumer group changed, rebalance immediately",
            group=request.ext("consumerGroup"),
            broker=ctx.channel.peer,
        )
        self._rebalance_now.set()

    async def _after_subscription_change(self) -> None:
        await self._fetch_routes()
        await self._client.heartbeat_all()
        self._rebalance_now.set()

    async def _fetch_routes(self) -> None:
        for topic in list(self._subs):
            try:
                await self._client.routes.update(topic)
            except (ClientError, RemotingError) as e:
                log.warning("updateTopicRouteInfoFromNameServer failed", topic=topic, error=str(e))

    # -- rebalance -------------------------------------------------------------------------------

    async def _rebalance_loop(self) -> None:
        stop = self._client.stop_event
        while not stop.is_set():
            try:
                async with asyncio.timeout(self._rebalance_interval_s):
                    await self._rebalance_now.wait()
            except TimeoutError:
                pass
            self._rebalance_now.clear()
            if stop.is_set():
                return
            try:
                await self.rebalance()
            except (ClientError, RemotingError) as e:
                log.warning("doRebalance failed", group=self.group, error=str(e))

    async def rebalance(self) -> None:
        """One ``doRebalance`` pass over every subscribed topic (also run by the timer)."""
        await self._client.heartbeat_all(only_new=True)
        for topic in list(self._subs):
            mqs = self._client.routes.subscribe.get(topic)
            if not mqs:
                try:
                    await self._client.routes.update(topic)
                except (ClientError, RemotingError) as e:
                    log.info("doRebalance, no route yet", topic=topic, error=str(e))
                mqs = self._client.routes.subscribe.get(topic)
                await self._client.heartbeat_all(only_new=True)
            if not mqs:
                continue
            cids = await self._consumer_ids(mqs[0])
            if not cids:
                continue
            mine = allocate_averagely(sorted(mqs), sorted(cids), self.client_id)
            await self._update_process_queues(topic, set(mine))
        for mq in [mq for mq in self._pqs if mq.topic not in self._subs]:
            await self._drop(mq)

    async def _consumer_ids(self, mq: MessageQueue) -> tuple[str, ...]:
        response = await self._client.invoke_ok(
            broker_addr(self._client, mq),
            RequestCode.GET_CONSUMER_LIST_BY_GROUP,
            to_ext(GroupRequestHeader(consumer_group=self.group)),
        )
        return decode_consumer_list(response.body)

    async def _update_process_queues(self, topic: str, mine: set[MessageQueue]) -> None:
        for mq in [mq for mq in self._pqs if mq.topic == topic and mq not in mine]:
            await self._drop(mq)
        for mq in sorted(mine - set(self._pqs)):
            if self._orderly and not await self._lock_one(mq):
                log.info("doRebalance, add a new mq failed, because lock failed", mq=str(mq))
                continue
            offset = await self._compute_pull_from_where(mq)
            pq = ProcessQueue(mq, offset, self.pull_threshold_for_queue)
            if self._orderly:
                pq.locked, pq.last_lock_s = True, time.monotonic()
            self._offsets.update(mq, offset, increase_only=False)
            pq.offset_cell = self._offsets.cell(mq)
            self._pqs[mq] = pq
            loop = self._pull_loop(pq) if not self._orderly else self._orderly_queue(pq)
            pq.task = self._client.tasks.spawn(
                loop, name=f"{self.group}/pull/{mq.topic}/{mq.queue_id}"
            )
            log.info("doRebalance, add a new mq", group=self.group, mq=str(mq), offset=offset)

    async def _drop(self, mq: MessageQueue) -> None:
        """``removeUnnecessaryMessageQueue``: stop, commit the offset, forget, unlock."""
        pq = self._pqs.pop(mq)
        pq.dropped = True
        if pq.task is not None:
            pq.task.cancel()
        await self._offsets.persist(mq)
        self._offsets.remove(mq)
        if self._orderly:
            try:
                async with asyncio.timeout(1.0):
                    await pq.consume_lock.acquire()
                pq.consume_lock.release()
            except TimeoutError:
                pass
            await self._unlock([mq])
        log.info("doRebalance, remove unnecessary mq", group=self.group, mq=str(mq))

    async def _compute_pull_from_where(self, mq: MessageQueue) -> int:
        """``RebalancePushImpl.computePullFromWhere``."""
        offset = await query_consumer_offset(self._client, self.group, mq)
        if offset >= 0:
            return offset
        retry = mq.topic.startswith(RETRY_GROUP_TOPIC_PREFIX)
        where = self.consume_from_where
        if where is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET or (
            retry and where is ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
        ):
            return 0
        if where is ConsumeFromWhere.CONSUME_FROM_TIMESTAMP and not retry:
            return await queue_offset(
                self._client, mq, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, self.consume_timestamp_ms
            )
        return await queue_offset(self._client, mq, RequestCode.GET_MAX_OFFSET)

    # -- pulling ---------------------------------------------------------------------------------

    async def _pause(self, seconds: float) -> None:
        try:
            async with asyncio.timeout(seconds):
                await self._client.stop_event.wait()
        except TimeoutError:
            pass

    async def _route_moved(self, mq: MessageQueue, failed_addr: str | None) -> bool:
        """After a failed pull: back to the master, re-fetch the topic's route now (shared,
        rate-limited); True when ``mq`` is now served from another address (a failover: pull
        there at once)."""
        routes = self._client.routes
        before = routes.subscribe.get(mq.topic)
        await refresh_pull_route(self._client, mq)
        if routes.subscribe.get(mq.topic) != before:
            self._rebalance_now.set()  # queues came or went: reassign them now, not in 20 s
        try:
            return pull_addr(self._client, mq)[0] != failed_addr
        except ClientError:
            return False

    async def _pull_loop(self, pq: ProcessQueue) -> None:
        """Long-poll one queue until it is dropped (``DefaultMQPushConsumerImpl.pullMessage``)."""
        mq = pq.mq
        errors = 0  # consecutive failed pulls: the pause after one grows to pull_delay_on_error
        while not pq.dropped:
            if not pq.space.is_set():
                await pq.space.wait()
                continue
            if self._orderly and not pq.lock_valid():
                await self._pause(self.pull_delay_on_error_s)
                continue
            sub = self._subs.get(mq.topic)
            if sub is None:
                return
            commit = self._offsets.read(mq)
            flag = FLAG_SUSPEND | (FLAG_COMMIT_OFFSET if commit > 0 else 0)
            addr: str | None = None
            try:
                addr, slave = pull_addr(self._client, mq)
                if slave:
                    flag &= ~FLAG_COMMIT_OFFSET
                result = await pull_message(
                    self._client,
                    addr,
                    self.group,
                    mq,
                    pq.next_offset,
                    sub=sub,
                    max_nums=self.pull_batch_size,
                    sys_flag=flag,
                    commit_offset=max(commit, 0),
                    suspend_timeout_ms=int(self.suspend_timeout_s * 1000),
                    timeout_s=self.suspend_timeout_s + 15.0,
                )
            except (RemotingError, ClientError) as e:
                log.warning("execute the pull request exception", mq=str(mq), error=str(e))
                errors += 1
                if not await self._route_moved(mq, addr):
                    await self._pause(min(self.pull_delay_on_error_s, 0.05 * 2**errors))
                continue
            errors = 0
            if pq.dropped:
                return
            if result.status is PullStatus.OFFSET_ILLEGAL:
                log.warning(
                    "the pull request offset illegal", mq=str(mq), next=result.next_begin_offset
                )
                self._offsets.update(mq, result.next_begin_offset, increase_only=False)
                await self._drop(mq)
                self._rebalance_now.set()
                return
            pq.next_offset = result.next_begin_offset
            if result.msgs:
                pq.put(result.msgs)
                self._submit(pq, result.msgs)
            elif not len(pq):
                # correctTagsOffset: nothing held, the whole range was filtered or empty.
                self._offsets.update(mq, result.next_begin_offset, increase_only=True)

    # -- concurrent consumption -----------------------------------------------------------------

    def _submit(self, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        if not self._orderly:  # else the queue's orderly loop takes them from the process queue
            self._concurrently.submit(pq, msgs)

    async def _call_listener(
        self, pq: ProcessQueue, msgs: list[MessageExt]
    ) -> ConsumeStatus | ConsumeOrderlyStatus | None:
        """One orderly listener call; None when the listener raised."""
        assert self._listener is not None  # noqa: S101 - start() checked it
        if pq.mq.topic == self._retry_topic:
            msgs = [restore_topic(m, self._retry_topic) for m in msgs]
        try:
            return await self._listener(msgs)
        except asyncio.CancelledError:
            raise
        except Exception:
            # The listener is user code: a failure means "consume later", as in Java.
            log.exception("consumeMessage exception", group=self.group)
            return None

    async def _send_back(self, msg: MessageExt, delay_level: int) -> bool:
        """CONSUMER_SEND_MSG_BACK to the broker that stored ``msg``; False when it failed."""
        addr = self._client.routes.master_addr(msg.broker_name) or self._client.routes.any_addr(
            msg.broker_name
        )
        if addr is None:
            return False
        header = ConsumerSendMsgBackRequestHeader(
            offset=msg.commit_log_offset,
            group=self.group,
            delay_level=delay_level,
            origin_msg_id=msg.msg_id,
            origin_topic=msg.properties.get(MessageConst.RETRY_TOPIC, msg.topic),
            unit_mode=False,
            max_reconsume_times=self.max_reconsume_times,
            bname=msg.broker_name,
        )
        ext = to_ext(header)
        try:
            await self._client.invoke_ok(addr, RequestCode.CONSUMER_SEND_MSG_BACK, ext)
        except (RemotingError, ClientError) as e:
            log.warning("sendMessageBack exception", msg_id=msg.msg_id, error=str(e))
            return False
        return True

    async def _persist_offsets(self) -> None:
        await self._offsets.persist_all(list(self._pqs))

    # -- orderly consumption --------------------------------------------------------------------

    async def _orderly_queue(self, pq: ProcessQueue) -> None:
        """The pull loop and the in-order consume loop of one locked queue."""
        consume = self._client.tasks.spawn(self._orderly_consume(pq), name="consume-orderly")
        try:
            await self._pull_loop(pq)
        finally:
            consume.cancel()

    async def _orderly_consume(self, pq: ProcessQueue) -> None:
        """``ConsumeMessageOrderlyService.ConsumeRequest``: one batch at a time, in offset order."""
        while not pq.dropped:
            await pq.has_msgs.wait()
            if not pq.lock_valid():
                await self._pause(self._suspend_current_queue_s)
                continue
            async with pq.consume_lock:
                if pq.dropped:
                    return
                msgs = pq.first(max(1, self.consume_message_batch_max_size))
                if not msgs:
                    continue
                status = await self._call_listener(pq, msgs)
                if status is ConsumeOrderlyStatus.SUCCESS or self._give_up(pq, msgs):
                    offset = pq.remove(msgs)
                    if offset >= 0 and not pq.dropped:
                        pq.offset_cell.advance(offset)
                    continue
            await self._pause(self._suspend_current_queue_s)

    def _give_up(self, pq: ProcessQueue, msgs: list[MessageExt]) -> bool:
        """Count a failed orderly attempt; after ``max_reconsume_times`` the batch goes to the
        DLQ (``checkReconsumeTimes``) and is treated as consumed."""
        for m in msgs:
            pq.reconsume[m.queue_offset] = pq.reconsume.get(m.queue_offset, 0) + 1
        if max(pq.reconsume[m.queue_offset] for m in msgs) <= self.max_reconsume_times:
            return False
        for m in msgs:
            self._client.tasks.spawn(self._send_back(m, -1), name="orderly-dlq")
        return True

    async def _lock_one(self, mq: MessageQueue) -> bool:
        return mq in await lock_batch(self._client, self.group, [mq])

    async def _lock_all(self) -> None:
        """``RebalanceImpl.lockAll``: renew the locks of every held queue, per broker."""
        by_broker: dict[str, list[MessageQueue]] = {}
        for mq in self._pqs:
            by_broker.setdefault(mq.broker_name, []).append(mq)
        for mqs in by_broker.values():
            locked = await lock_batch(self._client, self.group, mqs)
            now = time.monotonic()
            for mq in mqs:
                pq = self._pqs.get(mq)
                if pq is not None:
                    pq.locked = mq in locked
                    if pq.locked:
                        pq.last_lock_s = now

    async def _unlock(self, mqs: list[MessageQueue]) -> None:
        await unlock_batch(self._client, self.group, mqs)


__all__: list[str] = [
    "ConsumeFromWhere",
    "ConsumeOrderlyStatus",
    "ConsumeStatus",
    "Listener",
    "PushConsumer",
]
