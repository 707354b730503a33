"""RotatingJsonLinesWriter: append JSON objects, one per line, to size- and count-bounded files.

Owns: the files ``<dir>/<prefix>.<seq:010d>.jsonl``. A new writer never appends to a file an
earlier process left (it may end in a torn line); it starts at the next sequence number. A file
is closed and a new one opened when the next line would take it past ``max_file_bytes`` (a line
larger than that gets a file of its own); after each rotation the oldest files of this prefix are
deleted until at most ``max_files`` remain. So the directory holds at most
``max_files * max(max_file_bytes, longest line)`` bytes of this prefix.

Blocking file I/O: callers on the event loop run :meth:`write` on their own thread or executor
(STYLE.md section 5). One writer per prefix and directory; not thread-safe (use one thread).
Closed files are never rewritten, so readers may consume them while the writer runs. Mirrors the
idea of logback's ``SizeAndTimeBasedRollingPolicy`` that upstream uses for its metrics log.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import IO, Any

import orjson

from rocketpy.common.errors import ConfigError

_SUFFIX = ".jsonl"


class RotatingJsonLinesWriter:
    """Bounded JSON-lines files under one directory."""

    def __init__(
        self, directory: Path, *, prefix: str, max_file_bytes: int, max_files: int
    ) -> None:
        """Args: ``directory`` (created on first write), ``prefix`` of the file names,
        ``max_file_bytes`` per file, ``max_files`` kept (>= 1).

        Raises:
            ConfigError: a bound below 1 or a prefix with a path separator.
        """
        if max_file_bytes < 1:
            raise ConfigError("metricsDumpFileMaxBytes", max_file_bytes, "must be >= 1")
        if max_files < 1:
            raise ConfigError("metricsDumpFileMaxCount", max_files, "must be >= 1")
        if not prefix or "/" in prefix or os.sep in prefix:
            raise ConfigError("metricsDumpPrefix", prefix, "must be a plain file-name prefix")
        self.directory = directory
        self.prefix = prefix
        self.max_file_bytes = max_file_bytes
        self.max_files = max_files
        self._pattern = re.compile(re.escape(prefix) + r"\.(\d{10})" + re.escape(_SUFFIX) + "$")
        self._file: IO[bytes] | None = None
        self._size = 0
        self._seq = -1

    def files(self) -> list[Path]:
        """This prefix's files, oldest first."""
        if not self.directory.is_dir():
            return []
        found = [(int(m.group(1)), p) for p in self.directory.iterdir() if (m := self._match(p))]
        return [p for _, p in sorted(found)]

    def _match(self, path: Path) -> re.Match[str] | None:
        return self._pattern.match(path.name)

    def _open_next(self) -> IO[bytes]:
        if self._file is not None:
            self._file.close()
        existing = self.files()
        if self._seq < 0:
            last = self._match(existing[-1]) if existing else None
            self._seq = int(last.group(1)) if last else -1
        self._seq += 1
        path = self.directory / f"{self.prefix}.{self._seq:010d}{_SUFFIX}"
        self._file = path.open("ab")
        self._size = 0
        existing.append(path)
        for old in existing[: max(0, len(existing) - self.max_files)]:
            old.unlink(missing_ok=True)
        return self._file

    def write(self, record: dict[str, Any]) -> int:
        """Append ``record`` as one line and flush it to the OS; return the line's size.

        Raises:
            OSError: the directory or file cannot be written.
        """
        line = orjson.dumps(record) + b"\n"
        file = self._file
        if file is None:
            self.directory.mkdir(parents=True, exist_ok=True)
            file = self._open_next()
        elif self._size > 0 and self._size + len(line) > self.max_file_bytes:
            file = self._open_next()
        file.write(line)
        file.flush()
        self._size += len(line)
        return len(line)

    def close(self) -> None:
        """Close the current file (idempotent); a later :meth:`write` starts a new file."""
        if self._file is not None:
            self._file.close()
            self._file = None
