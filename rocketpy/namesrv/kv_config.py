"""The NameServer's KV store: namespace -> key -> value, persisted to ``kvConfigPath``.

Owns: the table and its file ``{"configTable":{...}}`` (namesrv.md section 7). Mirrors
``KVConfigManager``. Writes go through :class:`LatestWinsWriter` on an executor, so the loop never
waits on the disk and a burst of changes costs one write of the newest state.
"""

from __future__ import annotations

from concurrent.futures import Executor
from pathlib import Path

import structlog

from rocketpy.common import fastjson
from rocketpy.common.atomic_file import LatestWinsWriter, read_with_backup
from rocketpy.common.errors import CodecError
from rocketpy.common.fastjson import Bean

log = structlog.get_logger(__name__)


def _parse(text: bytes) -> dict[str, dict[str, str]] | None:
    if not text.strip():
        return None
    obj = fastjson.loads(text)
    table = obj.get("configTable") if isinstance(obj, dict) else None
    if not isinstance(table, dict):
        raise CodecError("kvConfig.json has no configTable object", field="configTable")
    return {
        str(ns): {str(k): str(v) for k, v in kv.items()}
        for ns, kv in table.items()
        if isinstance(kv, dict)
    }


class KVConfigManager:
    """Namespaced key/value configuration."""

    def __init__(self, path: Path, executor: Executor) -> None:
        self._path = path
        self._table: dict[str, dict[str, str]] = {}
        self._writer = LatestWinsWriter(path, executor)

    def load(self) -> None:
        """Read the file (blocking; call at start-up, off the loop)."""
        loaded = read_with_backup(self._path, _parse)
        if loaded is not None:
            self._table = loaded.value
            log.info("load KV config table", path=str(self._path), namespaces=len(self._table))

    async def _persist(self) -> None:
        body = fastjson.dumps(Bean(configTable=self._table), pretty=True)
        await self._writer.write(body.encode())

    async def put(self, namespace: str, key: str, value: str) -> None:
        """Set one value and persist."""
        self._table.setdefault(namespace, {})[key] = value
        log.info("putKVConfig", namespace=namespace, key=key, value=value)
        await self._persist()

    async def delete(self, namespace: str, key: str) -> None:
        """Remove one value (and an emptied namespace) and persist."""
        table = self._table.get(namespace)
        if table is not None and table.pop(key, None) is not None:
            if not table:
                del self._table[namespace]
            log.info("deleteKVConfig", namespace=namespace, key=key)
            await self._persist()

    def get(self, namespace: str, key: str) -> str | None:
        """One value or None."""
        return self._table.get(namespace, {}).get(key)

    def namespace(self, namespace: str) -> dict[str, str] | None:
        """A copy of one namespace, or None when absent."""
        table = self._table.get(namespace)
        return None if table is None else dict(table)
