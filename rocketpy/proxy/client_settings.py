"""The gRPC clients the proxy knows, keyed by ``x-mq-client-id``, and the Settings it answers.

Owns: :class:`ClientRegistry` (``GrpcClientSettingsManager``'s settings map plus the last time a
client was heard from, for expiry after ``grpcClientIdleTimeMills``) and the Settings merges of
``GrpcClientSettingsManager`` (proxy.md section 1.4): producers get the proxy's back-off policy,
``max_body_size`` and ``validate_message_type``; consumers get the defaults of a
``SubscriptionGroupConfig`` (batch 32, long polling 20 s, 17 attempts with the default customized
back-off, not FIFO); everyone gets ``metric{on: false}``. Pure: no I/O; the caller passes the
monotonic time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Final

from rocketpy.proxy.backend import GroupSettings
from rocketpy.proxy.config import ProxyConfig
from rocketpy.proxy.pb import definition_pb2 as pb
from rocketpy.proxy.pb import service_pb2 as spb

#: ``CustomizedRetryPolicy``'s default ``next`` (ms): 1s 5s 10s 30s 1m 2m ... 10m 20m 30m 1h 2h.
DEFAULT_CUSTOMIZED_BACKOFF_MS: Final = (
    1000, 5000, 10_000, 30_000, 60_000, 120_000, 180_000, 240_000, 300_000, 360_000, 420_000,
    480_000, 540_000, 600_000, 1_200_000, 1_800_000, 3_600_000, 7_200_000,
)  # fmt: skip
#: ``SubscriptionGroupConfig.retryMaxTimes``'s default.
DEFAULT_RETRY_MAX_TIMES: Final = 16
CONSUMER_BATCH_SIZE: Final = 32  # grpcClientConsumerLongPollingBatchSize
CONSUMER_LONG_POLLING_MS: Final = 20_000  # grpcClientConsumerMaxLongPollingTimeoutMillis


def _duration_ms(ms: int) -> dict[str, int]:
    return {"seconds": ms // 1000, "nanos": (ms % 1000) * 1_000_000}


def producer_settings(settings: pb.Settings, config: ProxyConfig) -> pb.Settings:
    """``mergeProducerData``: the client's settings with the proxy's publishing limits."""
    merged = pb.Settings()
    merged.CopyFrom(settings)
    policy = merged.backoff_policy
    policy.max_attempts = config.grpc_client_producer_max_attempts
    policy.exponential_backoff.CopyFrom(
        pb.ExponentialBackoff(
            initial=_duration_ms(config.grpc_client_producer_backoff_initial_ms),
            max=_duration_ms(config.grpc_client_producer_backoff_max_ms),
            multiplier=float(config.grpc_client_producer_backoff_multiplier),
        )
    )
    merged.publishing.validate_message_type = config.enable_topic_message_type_check
    merged.publishing.max_body_size = config.max_message_size_bytes
    return merged


def consumer_settings(settings: pb.Settings, group: GroupSettings | None = None) -> pb.Settings:
    """``updateClientSettings`` for a consumer: the defaults under the client's own settings
    (``createDefaultConsumerSettingsBuilder().mergeFrom``), then its group's
    ``SubscriptionGroupConfig`` over them (``mergeSubscriptionData``: FIFO =
    ``consumeMessageOrderly``, attempts = ``retryMaxTimes + 1``, whatever the client sent; the
    defaults without one)."""
    group = group or GroupSettings()
    merged = pb.Settings(
        subscription=pb.Subscription(
            receive_batch_size=CONSUMER_BATCH_SIZE,
            long_polling_timeout=_duration_ms(CONSUMER_LONG_POLLING_MS),
        ),
        backoff_policy=pb.RetryPolicy(
            customized_backoff=pb.CustomizedBackoff(
                next=[_duration_ms(ms) for ms in DEFAULT_CUSTOMIZED_BACKOFF_MS]
            ),
        ),
    )
    merged.MergeFrom(settings)
    merged.subscription.fifo = group.consume_message_orderly
    merged.backoff_policy.max_attempts = group.retry_max_times + 1
    return merged


def answer(settings: pb.Settings, config: ProxyConfig) -> pb.Settings:
    """``getClientSettings``: what the proxy sends back for stored ``settings``."""
    if settings.HasField("publishing"):
        out = producer_settings(settings, config)
    else:
        out = pb.Settings()
        out.CopyFrom(settings)
    out.metric.CopyFrom(pb.Metric(on=False))  # mergeMetric, metricCollectorMode OFF
    return out


@dataclass(slots=True)
class ClientState:
    """One client: its stored settings, when it was last heard from (monotonic seconds) and,
    while its Telemetry stream is open, how to write a command to it."""

    client_id: str
    settings: pb.Settings
    last_seen: float
    push: Callable[[spb.TelemetryCommand], None] | None = None

    @property
    def client_type(self) -> int:
        """The ``ClientType`` its settings declared."""
        return int(self.settings.client_type)


class ClientRegistry:
    """Settings by client id (``CLIENT_SETTINGS_MAP``), with idle expiry."""

    def __init__(self, idle_s: float) -> None:
        self._idle_s = idle_s
        self._clients: dict[str, ClientState] = {}

    def update(
        self, client_id: str, settings: pb.Settings, now: float, group: GroupSettings | None = None
    ) -> ClientState:
        """``updateClientSettings``: store what a Telemetry ``settings`` command said (a
        consumer's under its ``group``'s config)."""
        stored = (
            consumer_settings(settings, group) if settings.HasField("subscription") else settings
        )
        old = self._clients.get(client_id)
        state = ClientState(client_id, stored, now, old.push if old else None)
        self._clients[client_id] = state
        return state

    def all(self) -> Iterator[ClientState]:
        """Every known client."""
        return iter(list(self._clients.values()))

    def get(self, client_id: str) -> ClientState | None:
        """The client, if it sent Settings and has not expired or terminated."""
        return self._clients.get(client_id)

    def touch(self, client_id: str, now: float) -> ClientState | None:
        """Note a sign of life (Heartbeat, any RPC); the client, if known."""
        state = self._clients.get(client_id)
        if state is not None:
            state.last_seen = now
        return state

    def remove(self, client_id: str) -> ClientState | None:
        """Forget a client (NotifyClientTermination); the removed state, if it was known."""
        return self._clients.pop(client_id, None)

    def expire(self, now: float) -> list[str]:
        """Drop clients silent for longer than the idle time; their ids."""
        gone = [cid for cid, s in self._clients.items() if now - s.last_seen > self._idle_s]
        for cid in gone:
            del self._clients[cid]
        return gone

    def __len__(self) -> int:
        return len(self._clients)
