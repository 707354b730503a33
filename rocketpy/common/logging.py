"""Logging set-up: structlog over stdlib logging, readable console, JSON lines in files.

Owns: the one place handlers are configured (called once from ``cli/``). Console output goes to
stderr in structlog's readable format; each daemon also writes JSON lines to
``<log_dir>/<name>.log`` (default ``~/logs/rocketmqlogs/``, as upstream's logback files) through a
queue listener thread, so the event loop never waits on a log file. Must not: be called from library
code.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import logging.handlers
import queue
import sys
from pathlib import Path

import structlog

DEFAULT_LOG_DIR = Path.home() / "logs" / "rocketmqlogs"

_listener: logging.handlers.QueueListener | None = None


#: Records waiting for the listener thread at most; more are dropped and counted.
LOG_QUEUE_SIZE = 10_000
#: Records a shutdown still writes: the newest (the shutdown's own lines among them). Writing a
#: full queue of flood warnings took 5-6 s of a broker's SIGTERM on a busy machine.
SHUTDOWN_KEEP = 1_000


class BoundedQueueHandler(logging.handlers.QueueHandler):
    """Queue the record untouched (the stock ``prepare`` formats it to a string, which would
    destroy structlog's event dict before the listener's formatters see it), never block and
    never grow: when the listener falls behind (a flood of warnings on a slow disk) records
    are dropped and counted, and the next record that fits is preceded by a warning saying how
    many were lost. A shutdown then writes at most the newest ``SHUTDOWN_KEEP`` records."""

    def __init__(self, q: queue.Queue[logging.LogRecord]) -> None:
        super().__init__(q)
        self.dropped = 0  # since the last "log records dropped" warning
        self.dropped_total = 0

    def prepare(self, record: logging.LogRecord) -> logging.LogRecord:
        return record

    def enqueue(self, record: logging.LogRecord) -> None:
        q = self.queue
        try:
            if self.dropped:
                q.put_nowait(
                    _warning(f"log records dropped: {self.dropped} (the log queue was full)")
                )
                self.dropped = 0
            q.put_nowait(record)
        except queue.Full:
            self.dropped += 1
            self.dropped_total += 1


def _warning(message: str) -> logging.LogRecord:
    return logging.makeLogRecord(
        {"name": __name__, "levelno": logging.WARNING, "levelname": "WARNING", "msg": message}
    )


def trim_backlog(q: queue.Queue[logging.LogRecord], keep: int) -> int:
    """Drop the oldest queued records until at most ``keep`` are left (the listener thread may
    be taking records meanwhile); return how many were dropped, after queueing a warning that
    says so."""
    dropped = 0
    while q.qsize() > keep:
        try:
            q.get_nowait()
        except queue.Empty:
            break
        q.task_done()
        dropped += 1
    if dropped:
        with contextlib.suppress(queue.Full):
            q.put_nowait(
                _warning(f"log records dropped at shutdown: {dropped} (the log was behind)")
            )
    return dropped


class _Listener(logging.handlers.QueueListener):
    """A listener whose stop writes only the newest :data:`SHUTDOWN_KEEP` records still queued
    and waits for room for its sentinel in the bounded queue (the stock ``put_nowait`` would
    raise while the queue is full)."""

    def stop(self) -> None:
        trim_backlog(self.queue, SHUTDOWN_KEEP)  # type: ignore[arg-type]
        super().stop()

    def enqueue_sentinel(self) -> None:
        self.queue.put(self._sentinel, timeout=10)  # type: ignore[attr-defined]


def _capture_exc_info(
    _logger: object, _name: str, event_dict: structlog.types.EventDict
) -> structlog.types.EventDict:
    """Resolve ``exc_info=True`` (``log.exception``) to the exception being handled, in the
    thread that logs: the queue listener's thread, which formats the record, has none."""
    if event_dict.get("exc_info") is True:
        event_dict["exc_info"] = sys.exc_info()
    return event_dict


def _one_line(
    _logger: object, _name: str, event_dict: structlog.types.EventDict
) -> structlog.types.EventDict:
    """Console lines stay one line: an exception shows as ``cause=<type>: <message>`` (the
    traceback goes to the JSON log only)."""
    exc_info = event_dict.pop("exc_info", None)
    event_dict.pop("exception", None)
    if isinstance(exc_info, tuple) and exc_info[1] is not None and "cause" not in event_dict:
        event_dict["cause"] = f"{type(exc_info[1]).__name__}: {exc_info[1]}"
    return event_dict


def _shared_processors() -> list[structlog.types.Processor]:
    return [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=False),
    ]


def setup_logging(
    name: str,
    *,
    log_dir: Path | None = None,
    level: str = "INFO",
    console: bool = True,
    max_bytes: int = 128 * 1024 * 1024,
    backup_count: int = 10,
) -> Path:
    """Configure structlog and stdlib logging for one daemon process.

    Args:
        name: file stem, e.g. ``namesrv`` -> ``namesrv.log``.
        log_dir: directory for the JSON-lines file; created if missing.
        level: minimum level name.
        console: also log readable lines to stderr.
        max_bytes: rotate the file at this size.
        backup_count: rotated files kept.

    Returns:
        The path of the JSON-lines log file.
    """
    global _listener  # noqa: PLW0603 - one listener per process, owned here
    directory = log_dir if log_dir is not None else DEFAULT_LOG_DIR
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.log"
    shared = _shared_processors()
    structlog.configure(
        processors=[
            *shared,
            _capture_exc_info,
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    file_handler = logging.handlers.RotatingFileHandler(
        path, maxBytes=max_bytes, backupCount=backup_count, encoding="utf-8"
    )
    file_handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.format_exc_info,
                structlog.processors.JSONRenderer(),
            ],
            foreign_pre_chain=shared,
        )
    )
    handlers: list[logging.Handler] = [file_handler]
    if console:
        console_handler = logging.StreamHandler(sys.stderr)
        console_handler.setFormatter(
            structlog.stdlib.ProcessorFormatter(
                processors=[
                    structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                    _one_line,
                    structlog.dev.ConsoleRenderer(colors=False),
                ],
                foreign_pre_chain=shared,
            )
        )
        handlers.append(console_handler)
    q: queue.Queue[logging.LogRecord] = queue.Queue(LOG_QUEUE_SIZE)
    root = logging.getLogger()
    root.handlers.clear()
    root.addHandler(BoundedQueueHandler(q))
    root.setLevel(level.upper())
    if _listener is not None:
        _listener.stop()
    _listener = _Listener(q, *handlers, respect_handler_level=False)
    _listener.start()
    atexit.register(shutdown_logging)
    return path


def shutdown_logging() -> None:
    """Drain the queue and close the handlers (idempotent)."""
    global _listener  # noqa: PLW0603
    if _listener is not None:
        _listener.stop()
        for handler in _listener.handlers:
            handler.close()
        _listener = None
