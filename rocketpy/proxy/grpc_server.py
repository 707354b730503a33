"""The proxy daemon: a ``grpc.aio`` server of ``apache.rocketmq.v2.MessagingService``.

Owns: :class:`ProxyService` (start: the backend, the gRPC port, the client-expiry, producer
heartbeat and auto-renew loops; stop: refuse new calls, let in-flight ones finish within
``grpcShutdownTimeSeconds``, stop the loops and the backend), the Telemetry stream (Settings in,
replies and check-backs out), the method table (built from the service descriptor, so every RPC of
the contract is served: the implemented ones by :class:`MessagingActivity` and, for consumption,
:class:`~rocketpy.proxy.consume.ConsumerActivity`, every other one with a
NOT_IMPLEMENTED ``status`` and gRPC OK, proxy.md section 2), reading the call metadata into a
:class:`CallContext` (blank ``x-mq-client-id`` -> CLIENT_ID_REQUIRED) and the one place where
:class:`ProxyError` and unexpected exceptions become the response's ``status``. Mirrors
``GrpcMessagingApplication`` and ``GrpcServer``. Must not: import the broker.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, Final

import grpc
import structlog
from google.protobuf.message import Message

from rocketpy.common.aio import TaskSet, periodic
from rocketpy.common.logging import DEFAULT_LOG_DIR
from rocketpy.proxy.backend import MessagingBackend
from rocketpy.proxy.config import ProxyConfig
from rocketpy.proxy.consume import ConsumerActivity
from rocketpy.proxy.consume_stream import receive_stream
from rocketpy.proxy.messaging import CallContext, MessagingActivity
from rocketpy.proxy.metrics import ProxyMetrics, ProxyMetricsManager
from rocketpy.proxy.pb import definition_pb2 as pb
from rocketpy.proxy.pb import service_pb2 as spb
from rocketpy.proxy.status import ProxyError, status
from rocketpy.proxy.transaction_service import PRODUCER_HEARTBEAT_S

log = structlog.get_logger(__name__)

SERVICE: Final = spb.DESCRIPTOR.services_by_name["MessagingService"]
#: How often silent clients are looked for (``GrpcClientSettingsManager`` runs every 5 s).
EXPIRY_SCAN_S: Final = 5.0

Context = grpc.aio.ServicerContext[Any, Any]
Unary = Callable[[Any, CallContext], Awaitable[Message]]


def call_context(context: Context) -> CallContext:
    """The call's ``x-mq-*`` metadata and peer.

    Raises:
        ProxyError: CLIENT_ID_REQUIRED when ``x-mq-client-id`` is blank.
    """
    meta: dict[str, str] = {}
    for key, value in context.invocation_metadata() or ():
        meta[str(key)] = value if isinstance(value, str) else value.decode(errors="replace")
    client_id = meta.get("x-mq-client-id", "")
    if not client_id.strip():
        raise ProxyError(pb.Code.CLIENT_ID_REQUIRED, "client id cannot be empty")
    peer = context.peer() or ""  # "ipv4:127.0.0.1:5555" / "ipv6:[::1]:5555"
    host = peer.split(":", 1)[1].rsplit(":", 1)[0].strip("[]") if ":" in peer else ""
    return CallContext(
        client_id=client_id,
        remote_host=host,
        language=meta.get("x-mq-language", ""),
        client_version=meta.get("x-mq-client-version", ""),
        time_remaining_s=context.time_remaining(),
    )


def _response_class(name: str) -> type[Message]:
    cls: type[Message] = getattr(spb, SERVICE.methods_by_name[name].output_type.name)
    return cls


def _request_class(name: str) -> type[Message]:
    cls: type[Message] = getattr(spb, SERVICE.methods_by_name[name].input_type.name)
    return cls


@functools.cache
def _code_name(code: int) -> str:
    """``Code`` enum name of ``code`` (its number when the enum does not know it)."""
    try:
        return pb.Code.Name(code)
    except ValueError:
        return str(code)


def _failed(name: str, code: pb.Code, message: str) -> Message:
    """The response of ``name`` carrying only a non-OK ``status``."""
    response = _response_class(name)()
    response.status.CopyFrom(status(code, message))  # type: ignore[attr-defined]
    return response


class ProxyService:
    """``mqproxy``: the gRPC server over a backend.

    Args:
        config: the proxy's settings.
        backend: the brokers (``ClusterBackend`` for ``proxyMode=cluster``).
        metrics_dir: where the metrics dumps go when ``metricsDumpDir`` is blank.
    """

    def __init__(
        self, config: ProxyConfig, backend: MessagingBackend, *, metrics_dir: Path | None = None
    ) -> None:
        self.config = config
        self.backend = backend
        self.metrics = ProxyMetrics()
        self.metrics_manager = ProxyMetricsManager(
            config, self.metrics, address=lambda: self.address,
            default_dump_dir=metrics_dir or DEFAULT_LOG_DIR / "metrics",
        )  # fmt: skip
        self.port = 0
        self.activity: MessagingActivity | None = None
        self.consumer: ConsumerActivity | None = None
        self._server: grpc.aio.Server | None = None
        self._stop = asyncio.Event()
        self._tasks = TaskSet("proxy")

    @property
    def address(self) -> str:
        """``host:port`` the gRPC server listens on."""
        return f"{self.config.bind_address}:{self.port}"

    async def start(self) -> None:
        """Start the backend, bind the gRPC port, start serving and the expiry loop.

        Raises:
            OSError: the port cannot be bound (the backend is stopped again).
        """
        await self.backend.start()
        try:
            await self._serve()
            await self.metrics_manager.start()
        except BaseException:
            if self._server is not None:
                await self._server.stop(0)
                self._server = None
            await self.backend.stop()
            raise
        self._tasks.spawn(
            periodic(EXPIRY_SCAN_S, self._expire, stop=self._stop, name="proxy/client-expiry"),
            name="proxy/client-expiry",
        )
        self._tasks.spawn(
            periodic(
                PRODUCER_HEARTBEAT_S, self._producer_heartbeat, stop=self._stop,
                name="proxy/producer-heartbeat",
            ),
            name="proxy/producer-heartbeat",
        )  # fmt: skip
        if self.consumer is not None:
            renew_s = self.config.renew_schedule_period_ms / 1000
            self._tasks.spawn(
                periodic(renew_s, self.consumer.renew_due, stop=self._stop, name="proxy/renew"),
                name="proxy/renew",
            )
        log.info("grpc server start successfully", address=self.address)

    async def _serve(self) -> None:
        size = self.config.grpc_max_inbound_message_size_bytes
        # so_reuseport off: a second proxy on a taken port must fail, not share it.
        server = grpc.aio.server(
            options=[("grpc.max_receive_message_length", size), ("grpc.so_reuseport", 0)]
        )
        address = f"{self.config.bind_address}:{self.config.grpc_server_port}"
        try:
            self.port = server.add_insecure_port(address)
        except RuntimeError as e:  # grpcio raises RuntimeError when it cannot bind
            raise OSError(f"cannot bind the gRPC port {address}: {e}") from e
        if self.port == 0:
            raise OSError(f"cannot bind the gRPC port {address}")
        self.activity = MessagingActivity(self.config, self.backend, self.port)
        self.consumer = ConsumerActivity.create(self.config, self.backend, self.activity.clients)
        server.add_generic_rpc_handlers((self._handlers(self.activity, self.consumer),))
        await server.start()
        self._server = server

    async def _expire(self) -> None:
        if self.activity is not None:
            for client_id in self.activity.expire_clients():
                log.info("client expired", client_id=client_id)
                if self.consumer is not None:
                    await self.consumer.release_client(client_id)

    async def _producer_heartbeat(self) -> None:
        if self.activity is not None:
            await self.activity.transactions.heartbeat()

    async def stop(self) -> None:
        """Stop accepting calls, let in-flight ones finish, stop the loop and the backend."""
        self._stop.set()
        server, self._server = self._server, None
        if server is not None:
            await server.stop(self.config.grpc_shutdown_time_s)
            log.info("grpc server stopped")
        await self._tasks.cancel_all()
        if self.consumer is not None:
            await self.consumer.stop()
        await self.metrics_manager.stop()
        await self.backend.stop()

    def _handlers(
        self, activity: MessagingActivity, consumer: ConsumerActivity
    ) -> grpc.GenericRpcHandler:
        implemented: dict[str, Unary] = {
            "QueryRoute": activity.query_route,
            "Heartbeat": activity.heartbeat,
            "SendMessage": activity.send_message,
            "QueryAssignment": activity.query_assignment,
            "NotifyClientTermination": consumer.on_termination(activity.notify_client_termination),
            "EndTransaction": activity.end_transaction,
            **consumer.unary_rpcs(),
        }
        table: dict[str, grpc.RpcMethodHandler[Any, Any]] = {}
        for method in SERVICE.methods:
            name = method.name
            deserialize = _request_class(name).FromString
            serialize = _response_class(name).SerializeToString
            if name == "Telemetry":
                table[name] = grpc.stream_stream_rpc_method_handler(
                    self._telemetry, deserialize, serialize
                )
            elif name == "ReceiveMessage":
                table[name] = grpc.unary_stream_rpc_method_handler(
                    self._timed_stream(name, receive_stream(consumer, call_context)),
                    deserialize, serialize,
                )  # fmt: skip
            elif method.server_streaming:
                table[name] = grpc.unary_stream_rpc_method_handler(
                    self._unimplemented_stream(name), deserialize, serialize
                )
            else:
                fn = implemented.get(name)
                behaviour = self._unary(name, fn) if fn else self._unimplemented(name)
                table[name] = grpc.unary_unary_rpc_method_handler(
                    self._timed(name, behaviour), deserialize, serialize
                )
        return grpc.method_handlers_generic_handler(SERVICE.full_name, table)

    def _timed(
        self, name: str, handle: Callable[[Any, Context], Awaitable[Message]]
    ) -> Callable[[Any, Context], Awaitable[Message]]:
        """``handle`` counted in :attr:`metrics` under ``name`` and its response's code."""
        observe = self.metrics.observe

        async def timed(request: Any, context: Context) -> Message:
            started = time.perf_counter()
            response = await handle(request, context)
            code = _code_name(response.status.code)  # type: ignore[attr-defined]
            observe(name, code, (time.perf_counter() - started) * 1000)
            return response

        return timed

    def _timed_stream(
        self, name: str, handle: Callable[[Any, Context], AsyncIterator[Message]]
    ) -> Callable[[Any, Context], AsyncIterator[Message]]:
        """A server-streaming ``handle`` counted once per call, under the code of the
        ``status`` it sent (OK when it sent none)."""
        observe = self.metrics.observe

        async def timed(request: Any, context: Context) -> AsyncIterator[Message]:
            started = time.perf_counter()
            code = "OK"
            try:
                async for response in handle(request, context):
                    if response.WhichOneof("content") == "status":
                        code = _code_name(response.status.code)  # type: ignore[attr-defined]
                    yield response
            finally:
                observe(name, code, (time.perf_counter() - started) * 1000)

        return timed

    @staticmethod
    def _unary(name: str, fn: Unary) -> Callable[[Any, Context], Awaitable[Message]]:
        async def handle(request: Any, context: Context) -> Message:
            try:
                return await fn(request, call_context(context))
            except ProxyError as e:
                return _failed(name, e.code, e.message)
            except Exception as e:  # the RPC's boundary: the client gets a status, not a reset
                log.exception("rpc failed", rpc=name)
                return _failed(name, pb.Code.INTERNAL_SERVER_ERROR, f"{type(e).__name__}: {e}")

        return handle

    @staticmethod
    def _unimplemented(name: str) -> Callable[[Any, Context], Awaitable[Message]]:
        async def handle(request: Any, context: Context) -> Message:
            return _failed(
                name, pb.Code.NOT_IMPLEMENTED, f"{name} is not implemented by rocketpy yet"
            )

        return handle

    @staticmethod
    def _unimplemented_stream(name: str) -> Callable[[Any, Context], AsyncIterator[Message]]:
        async def handle(request: Any, context: Context) -> AsyncIterator[Message]:
            yield _failed(
                name, pb.Code.NOT_IMPLEMENTED, f"{name} is not implemented by rocketpy yet"
            )

        return handle

    async def _telemetry(
        self, requests: AsyncIterator[spb.TelemetryCommand], context: Context
    ) -> AsyncIterator[spb.TelemetryCommand]:
        """``ClientActivity.telemetry``: answer each Settings with the merged settings (a
        producer's transactional topics are then registered with the brokers); while the stream
        is open the client's state can push commands on it (transaction check-backs). Other
        commands (thread stack traces, verify results) are acknowledged by silence."""
        activity = self.activity
        assert activity is not None  # noqa: S101 - handlers exist only after start()
        try:
            call = call_context(context)
        except ProxyError as e:
            yield spb.TelemetryCommand(status=status(e.code, e.message))
            return
        outbox: asyncio.Queue[spb.TelemetryCommand | Exception | None] = asyncio.Queue()
        reader = asyncio.create_task(self._read_telemetry(activity, call, requests, outbox))
        try:
            while (item := await outbox.get()) is not None:
                if isinstance(item, ValueError):
                    await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(item))
                if isinstance(item, Exception):
                    yield spb.TelemetryCommand(
                        status=status(pb.Code.INTERNAL_SERVER_ERROR, str(item))
                    )
                    continue
                yield item
        finally:
            reader.cancel()
            state = activity.clients.get(call.client_id)
            if state is not None and state.push == outbox.put_nowait:
                state.push = None

    async def _read_telemetry(
        self, activity: MessagingActivity, call: CallContext,
        requests: AsyncIterator[spb.TelemetryCommand],
        outbox: asyncio.Queue[spb.TelemetryCommand | Exception | None],
    ) -> None:  # fmt: skip
        """The stream's reading half: Settings in, replies (or the error to answer) out."""
        try:
            async for command in requests:
                if not command.HasField("settings"):
                    continue
                try:
                    reply = await activity.telemetry_settings(command.settings, call)
                except ValueError as e:
                    outbox.put_nowait(e)
                    return
                except ProxyError as e:
                    outbox.put_nowait(RuntimeError(e.message))
                    continue
                state = activity.clients.get(call.client_id)
                if state is not None:
                    state.push = outbox.put_nowait
                outbox.put_nowait(reply)
                if command.settings.HasField("publishing"):
                    await activity.transactions.on_producer_settings(command.settings)
        except grpc.aio.AioRpcError:
            pass  # the client went away
        except Exception:  # the stream's boundary: logged, the stream ends
            log.exception("telemetry stream failed", client_id=call.client_id)
        finally:
            outbox.put_nowait(None)
