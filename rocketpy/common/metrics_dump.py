"""MetricsDumpService: every ``metricsDumpInterval`` append one metrics record to rotating
JSON-lines files under ``metricsDumpDir``.

Owns: the dump task and a one-thread executor that serializes and writes (the event loop only
builds the record dict, which is fresh each time, so the thread shares nothing with the loop). At
most one write is in flight: a slow disk delays the next record, it never queues records or
blocks a send. On stop a last record is written so the final interval is not lost. Must not:
decide what a record holds (the broker's ``metrics.build_dump_record``, the controller's
``controller.metrics.build_controller_dump_record``). rocketpy's own addition; upstream logs
metrics through logback (``metricsExporterType=LOG``) instead.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import structlog

from rocketpy.common.rotating_jsonl import RotatingJsonLinesWriter

log = structlog.get_logger(__name__)

#: Builds one record on the event loop.
RecordSource = Callable[[], dict[str, Any]]


class MetricsDumpService:
    """Periodic metrics dumps; ``start``/``stop`` like every service."""

    def __init__(
        self,
        source: RecordSource,
        *,
        directory: Path,
        prefix: str,
        interval_ms: int,
        max_file_bytes: int,
        max_files: int,
        name: str,
    ) -> None:
        """Args: ``source`` builds a record; ``directory``/``prefix`` name the files;
        ``interval_ms`` between records; ``max_file_bytes``/``max_files`` bound the disk use;
        ``name`` prefixes the task and thread names.

        Raises:
            ConfigError: a bound below 1.
        """
        self._source = source
        self._writer = RotatingJsonLinesWriter(
            directory, prefix=prefix, max_file_bytes=max_file_bytes, max_files=max_files
        )
        self._interval_s = interval_ms / 1000
        self._name = name
        self._executor: ThreadPoolExecutor | None = None
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        #: Records written since start.
        self.records_written = 0

    @property
    def directory(self) -> Path:
        """Where the files go."""
        return self._writer.directory

    async def start(self) -> None:
        """Start the dump loop; the first record is written one interval from now."""
        if self._task is not None:
            return
        self._stop.clear()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"{self._name}-dump")
        self._task = asyncio.get_running_loop().create_task(
            self._loop(), name=f"{self._name}/metrics-dump"
        )
        log.info("metrics dump started", dir=str(self.directory), interval_s=self._interval_s)

    async def _loop(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._interval_s):
                    await self._stop.wait()
            if self._stop.is_set():
                return
            await self.dump_once()

    async def dump_once(self) -> None:
        """Build one record now and write it on the dump thread (errors are logged)."""
        executor = self._executor
        if executor is None:
            return
        record = self._source()
        try:
            await asyncio.get_running_loop().run_in_executor(executor, self._writer.write, record)
        except OSError as e:
            log.warning("metrics dump write failed", dir=str(self.directory), error=repr(e))
            return
        self.records_written += 1

    async def stop(self, timeout_s: float = 5.0) -> None:
        """Stop the loop, write a last record, close the file. Idempotent."""
        task, self._task = self._task, None
        if task is None:
            return
        self._stop.set()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await task
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        executor = self._executor
        if executor is None:
            return
        try:
            async with asyncio.timeout(timeout_s):
                await self.dump_once()
                await asyncio.get_running_loop().run_in_executor(executor, self._writer.close)
        finally:
            self._executor = None
            executor.shutdown(wait=False)
