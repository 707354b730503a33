"""Raw load generation shared by the benchmarks: a pipelined frame driver and an echo server.

Owns: :func:`drive` (keeps N pre-encoded request frames in flight on one connection and times each
reply by its ``opaque``), :func:`pipelined` (the same, count-based, with a protocol client as light
as a reference's), :func:`serve_echo` (a server that writes every byte straight back: no
framing, no decoding, no work -- the loopback ceiling), :class:`Result` and the ``/proc`` RSS and
CPU readers. Must not: decode replies beyond finding the opaque (the driver must cost the same
against the echo server and a daemon, or the ratio means nothing).
"""

from __future__ import annotations

import asyncio
import os
import re
import struct
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import cast

_LEN = struct.Struct(">i")
_OPAQUE = re.compile(rb'"opaque":(-?\d+)')


class Latencies:
    """Latency samples in microseconds, kept as counts per bucket of 9 significant bits (a
    percentile is at most 0.4 % below the sample it stands for): memory and the cost of a
    percentile stay constant however long the run. A list of every sample grew by 50 MB a
    minute in a 25k msg/s soak, the benchmark client slowed as it grew, and sorting a
    minute's window stalled its loop."""

    __slots__ = ("_counts", "count", "max", "total")

    def __init__(self, samples: Iterable[float] = ()) -> None:
        self._counts: dict[int, int] = {}
        self.count = 0
        self.total = 0.0
        self.max = 0.0
        self.add_all(samples)

    def add(self, us: float) -> None:
        """Count one sample."""
        v = int(us)
        shift = v.bit_length() - 9
        key = (v >> shift) << shift if shift > 0 else v
        counts = self._counts
        counts[key] = counts.get(key, 0) + 1
        self.count += 1
        self.total += us
        self.max = max(self.max, us)

    def merge(self, other: Latencies) -> None:
        """Count ``other``'s samples too (cost: its number of buckets)."""
        counts = self._counts
        for key, n in other._counts.items():
            counts[key] = counts.get(key, 0) + n
        self.count += other.count
        self.total += other.total
        self.max = max(self.max, other.max)

    def add_all(self, samples: Iterable[float]) -> None:
        """Count every sample of ``samples``."""
        for us in samples:
            self.add(us)

    def pct(self, q: float) -> float:
        """The ``q`` quantile (0..1): the lower bound of its bucket; 0 with no samples."""
        if not self.count:
            return 0.0
        rank = min(self.count - 1, int(q * self.count))
        seen = 0
        for key in sorted(self._counts):
            seen += self._counts[key]
            if seen > rank:
                return float(key)
        return self.max

    def __len__(self) -> int:
        return self.count


@dataclass(frozen=True, slots=True)
class Result:
    """One measured phase: ``requests`` replies (``messages`` messages) in ``seconds``."""

    label: str
    requests: int
    seconds: float
    latencies_us: Latencies
    messages: int = 0
    failures: int = 0

    @property
    def rate(self) -> float:
        """Requests per second."""
        return self.requests / self.seconds if self.seconds else 0.0

    @property
    def message_rate(self) -> float:
        """Messages per second (``requests`` when a request carries one message)."""
        return (self.messages or self.requests) / self.seconds if self.seconds else 0.0

    def pct(self, q: float) -> float:
        """Latency percentile in microseconds."""
        return self.latencies_us.pct(q)

    def labelled(self, label: str, messages_per_request: int = 1) -> Result:
        """The same figures under another label."""
        return Result(
            label,
            self.requests,
            self.seconds,
            self.latencies_us,
            self.requests * messages_per_request,
            self.failures,
        )


async def read_frame(reader: asyncio.StreamReader) -> bytes:
    """One length-prefixed frame's payload."""
    (length,) = _LEN.unpack(await reader.readexactly(4))
    return await reader.readexactly(length)


def opaque_of(frame: bytes, start: int = 4) -> bytes:
    """The ``opaque`` digits of a JSON-header frame (``start`` = offset of the header length)."""
    header_len = _LEN.unpack_from(frame, start)[0] & 0xFFFFFF
    match = _OPAQUE.search(frame, start + 4, start + 4 + header_len)
    if match is None:
        raise RuntimeError("frame without opaque")
    return match.group(1)


async def drive(
    host: str,
    port: int,
    frames: list[bytes],
    inflight: int,
    seconds: float,
    *,
    count_failures: bool = False,
) -> Result:
    """Keep ``inflight`` requests outstanding on one connection for ``seconds``.

    ``frames`` are whole encoded frames with distinct opaques, cycled; there must be more of them
    than ``inflight``. With ``count_failures`` a reply whose code is not 0 counts as a failure (off
    against the echo server, whose "replies" are the requests).
    """
    if len(frames) <= inflight:
        raise ValueError("need more distinct frames than requests in flight")
    keys = [opaque_of(f, 4) for f in frames]
    reader, writer = await asyncio.open_connection(host, port)
    sent_at: dict[bytes, float] = {}
    latencies: list[float] = []
    failures = 0
    stop_at = time.perf_counter() + seconds
    index = 0

    def send_one() -> None:
        nonlocal index
        slot = index % len(frames)
        index += 1
        sent_at[keys[slot]] = time.perf_counter()
        writer.write(frames[slot])

    start = time.perf_counter()
    for _ in range(inflight):
        send_one()
    await writer.drain()
    while sent_at:
        payload = await asyncio.wait_for(read_frame(reader), 10)
        now = time.perf_counter()
        key = opaque_of(payload, 0)
        sent = sent_at.pop(key, None)
        if sent is None:
            raise RuntimeError("reply with an unknown opaque")
        latencies.append((now - sent) * 1e6)
        if count_failures:
            failures += _code_nonzero(payload)
        if now < stop_at:
            send_one()
            await writer.drain()
    elapsed = time.perf_counter() - start
    writer.close()
    await writer.wait_closed()
    return Result("", len(latencies), elapsed, Latencies(latencies), failures=failures)


_CODE = re.compile(rb'"code":(-?\d+)')


def _code_nonzero(payload: bytes, start: int = 0) -> int:
    """1 when the JSON-header frame's ``code`` is not 0 (``start`` = offset of the header
    length, as for :func:`opaque_of`)."""
    header_len = _LEN.unpack_from(payload, start)[0] & 0xFFFFFF
    match = _CODE.search(payload, start + 4, start + 4 + header_len)
    return 0 if match is None or match.group(1) == b"0" else 1


class _Pipeline(asyncio.Protocol):
    """Keeps ``inflight`` requests outstanding until ``count`` replies arrived, refilling as
    many as each read brought back (the reference hot path's client does the same); times each
    reply by its opaque and counts non-zero response codes."""

    def __init__(self, frames: list[bytes], count: int, inflight: int) -> None:
        self.frames = frames
        self.keys = [opaque_of(f, 4) for f in frames]
        self.count = count
        self.inflight = inflight
        self.sent = 0
        self.received = 0
        self.failures = 0
        self.sent_at: dict[bytes, float] = {}
        self.latencies = Latencies()
        self.buf = b""
        self.done: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        self.transport: asyncio.Transport | None = None
        self.started = 0.0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def start(self) -> None:
        self.started = time.perf_counter()
        self._send(min(self.inflight, self.count))

    def _send(self, n: int) -> None:
        assert self.transport is not None  # noqa: S101 - connected before start()
        now = time.perf_counter()
        out = []
        for _ in range(n):
            slot = self.sent % len(self.frames)
            self.sent += 1
            self.sent_at[self.keys[slot]] = now
            out.append(self.frames[slot])
        self.transport.write(b"".join(out))

    def data_received(self, data: bytes) -> None:
        buf = self.buf + data
        now = time.perf_counter()
        pos, got = 0, 0
        while len(buf) - pos >= 4:
            (total,) = _LEN.unpack_from(buf, pos)
            if len(buf) - pos - 4 < total:
                break
            sent = self.sent_at.pop(opaque_of(buf, pos + 4), None)
            if sent is not None:
                self.latencies.add((now - sent) * 1e6)
            self.failures += _code_nonzero(buf, pos + 4)
            pos += 4 + total
            got += 1
        self.buf = buf[pos:]
        self.received += got
        if self.received >= self.count:
            if not self.done.done():
                self.done.set_result(now)
            return
        more = min(got, self.count - self.sent)
        if more > 0:
            self._send(more)


async def pipelined(
    host: str, port: int, frames: list[bytes], requests: int, inflight: int
) -> Result:
    """``requests`` requests cycled from ``frames`` (distinct opaques) on one connection, kept
    ``inflight`` deep; a reply whose code is not 0 counts as a failure. Unlike :func:`drive`
    (streams, one reply at a time, for a duration) this is a count-based protocol client as
    light as the reference's, so a send benchmark compares servers, not clients."""
    loop = asyncio.get_running_loop()
    transport, pipe = await loop.create_connection(
        lambda: _Pipeline(frames, requests, inflight), host, port
    )
    try:
        pipe.start()
        ended = await asyncio.wait_for(pipe.done, 600)
    finally:
        transport.close()
    return Result("", pipe.received, ended - pipe.started, pipe.latencies, failures=pipe.failures)


class _Echo(asyncio.Protocol):
    """Writes every received byte straight back."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement the interface without subclassing asyncio.Transport.
        self._transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self._transport.write(data)


async def serve_echo(host: str = "127.0.0.1", port: int = 0) -> tuple[asyncio.Server, int]:
    """Start the echo server; returns it and its port."""
    server = await asyncio.get_running_loop().create_server(_Echo, host, port)
    bound: int = server.sockets[0].getsockname()[1]
    return server, bound


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    """Resident set size of ``pid`` in MiB (0 when unknown); ``field`` picks another line of
    ``/proc/<pid>/status`` (``RssAnon``: heap; ``RssFile``: mapped store files in page cache)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    except OSError:
        return 0.0
    return 0.0


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds ``pid`` and its live child processes (a broker's index
    worker) have used (``/proc/<pid>/stat``; 0 when unknown)."""
    total = 0.0
    for one in (pid, *child_pids(pid)):
        try:
            fields = Path(f"/proc/{one}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def child_pids(pid: int) -> list[int]:
    """Live child processes of ``pid`` (``/proc/<pid>/task/*/children``), theirs included."""
    found: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            text = (task / "children").read_text()
            for child in text.split():
                found += [int(child), *child_pids(int(child))]
    except OSError:
        pass
    return found


def memory_summary(pid: int) -> str:
    """``RSS x MB (anon y MB, mapped files z MB)`` of ``pid``."""
    return (
        f"RSS {rss_mb(pid):.1f} MB (anon {rss_mb(pid, 'RssAnon'):.1f} MB, mapped files "
        f"{rss_mb(pid, 'RssFile'):.1f} MB)"
    )
