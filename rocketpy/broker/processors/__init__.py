"""Request processors of the broker, one request family per module (STYLE.md section 9), and
:func:`build_registry`, which routes every request code to its processor through the family's
:class:`~rocketpy.broker.request_gate.RequestGate` (upstream: one thread pool per family).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from rocketpy.broker.processors.admin import AdminProcessor
from rocketpy.broker.processors.broker_config import BrokerConfigAccess, BrokerConfigProcessor
from rocketpy.broker.processors.client_manage import ClientManageProcessor
from rocketpy.broker.processors.consumer_manage import ConsumerManageProcessor
from rocketpy.broker.processors.lock import LockProcessor
from rocketpy.broker.processors.pull import PullMessageProcessor
from rocketpy.broker.processors.query import QueryMessageProcessor
from rocketpy.broker.processors.send import SendMessageProcessor
from rocketpy.broker.request_gate import RequestGate, gated, gated_nowait, gated_run
from rocketpy.broker.runtime import BrokerRuntime
from rocketpy.remoting.protocol.body.config_shapes import DelayOffsetTable
from rocketpy.remoting.transport.dispatch import Processor, ProcessorRegistry


def build_registry(
    rt: BrokerRuntime,
    *,
    send: SendMessageProcessor,
    pull: PullMessageProcessor,
    delay_offsets: Callable[[], DelayOffsetTable],
    config_access: BrokerConfigAccess,
) -> ProcessorRegistry:
    """Every broker request code, gated by its family (send, pull, query, client manage,
    consumer manage, admin).

    Args:
        rt: the shared broker state (``rt.config`` sizes the gates).
        send: the send processor (shared with the schedule service).
        pull: the pull processor (shared with the long-polling service).
        delay_offsets: the schedule service's progress.
        config_access: live broker configuration for GET/UPDATE_BROKER_CONFIG.
    """
    cfg = rt.config
    fast_fail = cfg.broker_fast_failure_enable

    def gate(name: str, nums: int, capacity: int, wait_ms: int | None = None) -> RequestGate:
        made = RequestGate(
            name,
            max_concurrency=nums,
            max_waiting=capacity,
            max_wait_ms=wait_ms if fast_fail else None,
        )
        rt.gates[name] = made
        return made

    families: list[tuple[RequestGate, Mapping[int, Processor]]] = [
        (
            gate(
                "send",
                cfg.send_message_thread_pool_nums,
                cfg.send_thread_pool_queue_capacity,
                cfg.wait_time_mills_in_send_queue,
            ),
            send.handlers(),
        ),
        (
            gate(
                "pull",
                cfg.pull_message_thread_pool_nums,
                cfg.pull_thread_pool_queue_capacity,
                cfg.wait_time_mills_in_pull_queue,
            ),
            pull.handlers(),
        ),
        (
            gate(
                "query",
                cfg.query_message_thread_pool_nums,
                cfg.query_thread_pool_queue_capacity,
            ),
            QueryMessageProcessor(rt).handlers(),
        ),
        (
            gate(
                "client",
                cfg.client_manage_thread_pool_nums,
                cfg.client_manager_thread_pool_queue_capacity,
            ),
            ClientManageProcessor(rt).handlers(),
        ),
        (
            gate(
                "consumer",
                cfg.consumer_manage_thread_pool_nums,
                cfg.consumer_manager_thread_pool_queue_capacity,
            ),
            {**ConsumerManageProcessor(rt).handlers(), **LockProcessor(rt).handlers()},
        ),
        (
            gate(
                "admin",
                cfg.admin_broker_thread_pool_nums,
                cfg.admin_broker_thread_pool_queue_capacity,
            ),
            {
                **AdminProcessor(rt, delay_offsets=delay_offsets).handlers(),
                **BrokerConfigProcessor(config_access).handlers(),
            },
        ),
    ]
    registry = ProcessorRegistry()
    nowait = send.nowait_handlers()
    runs = send.run_handlers()
    for family_gate, handlers in families:
        for code, processor in handlers.items():
            fast = nowait.get(code)
            run = runs.get(code)
            registry.register(
                code,
                gated(family_gate, processor),
                nowait=None if fast is None else gated_nowait(family_gate, fast, processor),
                run=None if run is None else gated_run(family_gate, run),
            )
    return registry
