"""The pull consumer: the caller picks queues and offsets, pulls, and stores offsets itself.

Owns: :class:`PullConsumer` (``DefaultMQPullConsumer``: ``fetchSubscribeMessageQueues``,
``pull``/``pullBlockIfNotFound``, ``updateConsumeOffset``, ``fetchConsumeOffset``, ``maxOffset``,
``minOffset``, ``searchOffset``). Pulls carry the SUBSCRIPTION flag with the expression, so no
heartbeat registration is needed (client-flows.md section 4.3).
"""

from __future__ import annotations

from rocketpy.client.instance import ClientInstance
from rocketpy.client.message import MessageQueue
from rocketpy.client.pull_api import (
    FLAG_SUBSCRIPTION,
    FLAG_SUSPEND,
    PullResult,
    broker_addr,
    build_subscription,
    pull_addr,
    pull_message,
    query_consumer_offset,
    queue_offset,
    refresh_pull_route,
    update_consumer_offset,
)
from rocketpy.common.codes import RequestCode
from rocketpy.common.errors import ConnectionClosed, RequestTimeout


class PullConsumer:
    """An asyncio ``DefaultMQPullConsumer``.

    Args:
        group: consumer group (offsets are stored under it).
        namesrv_addr: ``host:port[;host:port...]``.
        request_timeout_s: budget of the offset and route requests.
        instance_name: the part of the client id after ``ip@``.
    """

    def __init__(
        self,
        group: str,
        namesrv_addr: str,
        *,
        request_timeout_s: float = 3.0,
        instance_name: str | None = None,
        poll_namesrv_interval_s: float = 30.0,
    ) -> None:
        self.group = group
        self._client = ClientInstance(
            namesrv_addr,
            instance_name=instance_name,
            request_timeout_s=request_timeout_s,
            poll_namesrv_interval_s=poll_namesrv_interval_s,
            name="pull-consumer",
        )

    @property
    def client_id(self) -> str:
        """``ip@instanceName``."""
        return self._client.client_id

    async def start(self) -> None:
        """Start the route-refresh timer."""
        self._client.start()

    async def shutdown(self) -> None:
        """Stop timers and close connections (idempotent)."""
        await self._client.close()

    async def fetch_queues(self, topic: str) -> list[MessageQueue]:
        """The readable queues of ``topic``, sorted (``fetchSubscribeMessageQueues``).

        Raises:
            ClientError: the topic has no route.
        """
        self._client.check_started()
        return list(await self._client.routes.subscribe_queues(topic))

    async def _addr(self, queue: MessageQueue) -> str:
        if self._client.routes.any_addr(queue.broker_name) is None:
            await self._client.routes.update(queue.topic)
        return broker_addr(self._client, queue)

    async def pull(
        self,
        queue: MessageQueue,
        offset: int,
        max_nums: int = 32,
        expression: str = "*",
        timeout_s: float = 10.0,
        *,
        block_s: float = 0.0,
    ) -> PullResult:
        """Pull up to ``max_nums`` messages of ``queue`` from ``offset``.

        Args:
            queue: the queue.
            offset: first queue offset wanted.
            max_nums: at most this many messages.
            expression: tag expression (``"a || b"`` or ``"*"``); non-matching messages are
                dropped (the broker filters by hash, the client by tag string).
            timeout_s: request deadline.
            block_s: > 0 makes the broker hold the request up to this long when nothing is there
                (``pullBlockIfNotFound``); must be below ``timeout_s``.

        Returns:
            The :class:`PullResult`.

        Raises:
            RemoteError: the broker refused (unknown topic, bad queue id, ...).
            ConnectionClosed, RequestTimeout: transport failures.
        """
        self._client.check_started()
        sub = build_subscription(queue.topic, expression, version=0)
        flag = FLAG_SUBSCRIPTION | (FLAG_SUSPEND if block_s > 0 else 0)
        await self._addr(queue)
        addr, _slave = pull_addr(self._client, queue)  # no COMMIT_OFFSET is ever sent here
        try:
            return await pull_message(
                self._client,
                addr,
                self.group,
                queue,
                offset,
                sub=sub,
                max_nums=max_nums,
                sys_flag=flag,
                commit_offset=0,
                suspend_timeout_ms=int(block_s * 1000),
                timeout_s=timeout_s,
            )
        except (ConnectionClosed, RequestTimeout):
            # The broker may be gone (a failover): the caller's retry uses a fresh route.
            await refresh_pull_route(self._client, queue)
            raise

    async def update_offset(self, queue: MessageQueue, offset: int) -> None:
        """Store ``offset`` (the next offset to consume) for this group on the broker."""
        await self._addr(queue)
        await update_consumer_offset(self._client, self.group, queue, offset)

    async def fetch_offset(self, queue: MessageQueue) -> int:
        """The group's stored offset of ``queue``; -1 when there is none."""
        await self._addr(queue)
        return await query_consumer_offset(self._client, self.group, queue)

    async def max_offset(self, queue: MessageQueue) -> int:
        """GET_MAX_OFFSET: the next offset to be written."""
        await self._addr(queue)
        return await queue_offset(self._client, queue, RequestCode.GET_MAX_OFFSET)

    async def min_offset(self, queue: MessageQueue) -> int:
        """GET_MIN_OFFSET."""
        await self._addr(queue)
        return await queue_offset(self._client, queue, RequestCode.GET_MIN_OFFSET)

    async def search_offset(self, queue: MessageQueue, timestamp_ms: int) -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP: first offset stored at or after ``timestamp_ms``."""
        await self._addr(queue)
        return await queue_offset(
            self._client, queue, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, timestamp_ms
        )
