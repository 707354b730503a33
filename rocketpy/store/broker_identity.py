"""The controller-mode broker's persistent id: ``brokerIdentity`` and ``brokerIdentity-temp``.

Owns: the text codec of both files and a small driver that reads them and replaces them
atomically off the loop. Must not: decide the registration flow (``broker/replicas_manager.py``
does, controller.md section 9). Mirrors ``store/ha/autoswitch/BrokerMetadata``,
``TempBrokerMetadata`` and ``MetadataFile``; paths from ``MessageStoreConfig
.getStorePathBrokerIdentity`` (``<storePathRootDir>/brokerIdentity`` unless
``storePathBrokerIdentity`` is set) and ``ReplicasManager`` (``<that path>-temp``).

| file | content: one line, no newline, fields joined by ``#`` |
| --- | --- |
| ``brokerIdentity`` | ``<clusterName>#<brokerName>#<brokerId>`` |
| ``brokerIdentity-temp`` | ``<clusterName>#<brokerName>#<brokerId>#<registerCheckCode>`` |

The check code is ``<brokerAddr>;<epochMillis>``. Examples: ``DefaultCluster#broker-a#1`` and
``DefaultCluster#broker-a#2#10.0.0.2:10911;1700000000000``.

Upstream writes by deleting the file and then ``string2File`` (so no ``.bak`` ever exists); here
the file is replaced atomically, also without a ``.bak``. "Loaded" means every field is non-empty
(``isLoaded``): a file with an empty field reads as absent, as upstream.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Generic, TypeVar

import structlog

from rocketpy.common.atomic_file import LatestWinsWriter
from rocketpy.common.errors import CodecError, StoreError

log = structlog.get_logger(__name__)

T = TypeVar("T")

BROKER_IDENTITY_FILE: Final = "brokerIdentity"
TEMP_SUFFIX: Final = "-temp"
_SEPARATOR: Final = "#"
_JAVA_LONG: Final = re.compile(r"[+-]?[0-9]+")
_LONG_MAX: Final = 2**63 - 1


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerMetadata:
    """Content of ``brokerIdentity``: the id the controller assigned to this broker."""

    cluster_name: str
    broker_name: str
    broker_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class TempBrokerMetadata:
    """Content of ``brokerIdentity-temp``: an id obtained but not yet applied."""

    cluster_name: str
    broker_name: str
    broker_id: int
    register_check_code: str


def make_register_check_code(broker_addr: str, now_ms: int) -> str:
    """``<brokerAddr>;<epochMillis>`` (``ReplicasManager.createTempMetadataFile``)."""
    return f"{broker_addr};{now_ms}"


def _join(fields: list[str]) -> bytes:
    for value in fields:
        if _SEPARATOR in value or "\n" in value or "\r" in value:
            raise CodecError(
                f"broker identity field may not contain '#' or a newline: {value!r}",
                field="brokerIdentity",
            )
    return _SEPARATOR.join(fields).encode("utf-8")


def _split(data: bytes, needed: int) -> list[str] | None:
    """``dataStr.split("#")`` (trailing empty parts dropped); None if too few fields."""
    try:
        parts = data.decode("utf-8").split(_SEPARATOR)
    except UnicodeDecodeError as e:
        raise CodecError(
            "broker identity is not UTF-8", field="brokerIdentity", offset=e.start
        ) from e
    while parts and not parts[-1]:
        parts.pop()
    if len(parts) < needed:
        return None
    return parts


def _broker_id(text: str) -> int:
    if not _JAVA_LONG.fullmatch(text) or abs(int(text)) > _LONG_MAX:
        raise CodecError(f"brokerId is not a long: {text!r}", field="brokerId")
    return int(text)


def encode_broker_metadata(value: BrokerMetadata) -> bytes:
    """``BrokerMetadata.encodeToStr``.

    Raises:
        CodecError: a field contains ``#`` or a newline.
    """
    return _join([value.cluster_name, value.broker_name, str(value.broker_id)])


def decode_broker_metadata(data: bytes) -> BrokerMetadata | None:
    """``BrokerMetadata.decodeFromStr``; None when not "loaded" (a field missing or empty).

    Raises:
        CodecError: not UTF-8, or a brokerId that is not a number.
    """
    parts = _split(data, 3)
    if parts is None or not parts[0] or not parts[1]:
        return None
    return BrokerMetadata(
        cluster_name=parts[0], broker_name=parts[1], broker_id=_broker_id(parts[2])
    )


def encode_temp_broker_metadata(value: TempBrokerMetadata) -> bytes:
    """``TempBrokerMetadata.encodeToStr``.

    Raises:
        CodecError: a field contains ``#`` or a newline.
    """
    return _join(
        [value.cluster_name, value.broker_name, str(value.broker_id), value.register_check_code]
    )


def decode_temp_broker_metadata(data: bytes) -> TempBrokerMetadata | None:
    """``TempBrokerMetadata.decodeFromStr``; None when not "loaded".

    Raises:
        CodecError: not UTF-8, or a brokerId that is not a number.
    """
    parts = _split(data, 4)
    if parts is None or not parts[0] or not parts[1] or not parts[3]:
        return None
    return TempBrokerMetadata(
        cluster_name=parts[0],
        broker_name=parts[1],
        broker_id=_broker_id(parts[2]),
        register_check_code=parts[3],
    )


def broker_identity_path(store_root: Path, store_path_broker_identity: str | None = None) -> Path:
    """``getStorePathBrokerIdentity``: the override if set, else ``<root>/brokerIdentity``."""
    if store_path_broker_identity:
        return Path(store_path_broker_identity)
    return store_root / BROKER_IDENTITY_FILE


def temp_broker_identity_path(identity_path: Path) -> Path:
    """``<identity path>-temp``."""
    return identity_path.with_name(identity_path.name + TEMP_SUFFIX)


class MetadataFile(Generic[T]):
    """One identity file: load, persist (atomic, no ``.bak``), clear. I/O runs on the executor."""

    def __init__(
        self,
        path: Path,
        *,
        encode: Callable[[T], bytes],
        decode: Callable[[bytes], T | None],
        executor: Executor | None = None,
    ) -> None:
        """Args: ``path`` the file; ``encode``/``decode`` the codec; ``executor`` for I/O."""
        self.path = path
        self._encode = encode
        self._decode = decode
        self._executor = executor
        self._writer = LatestWinsWriter(path, executor, keep_backup=False)

    def load_sync(self) -> T | None:
        """Read the file (``readFromFile``). Blocks.

        Returns:
            The value, or None if the file is missing, empty or not "loaded".

        Raises:
            StoreError: the content is damaged (names the file); the operator must fix or
                delete it rather than have the broker silently register under a new id.
        """
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return None
        try:
            return self._decode(data)
        except CodecError as e:
            raise StoreError(f"cannot read broker identity file {self.path}: {e}") from e

    async def load(self) -> T | None:
        """:meth:`load_sync` on the executor."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, self.load_sync)

    async def persist(self, value: T) -> None:
        """Replace the file with ``value`` (``updateAndPersist``); returns when durable.

        Raises:
            CodecError: a field contains ``#``.
            OSError: the disk refused; the previous content stays loadable.
        """
        data = self._encode(value)
        await self._writer.write(data)
        log.info("persist broker identity", path=str(self.path), content=data.decode("utf-8"))

    async def clear(self) -> None:
        """Delete the file (``MetadataFile.clear``)."""
        await self._writer.write(None)


def broker_metadata_file(
    path: Path, executor: Executor | None = None
) -> MetadataFile[BrokerMetadata]:
    """The ``brokerIdentity`` file at ``path``."""
    return MetadataFile(
        path, encode=encode_broker_metadata, decode=decode_broker_metadata, executor=executor
    )


def temp_broker_metadata_file(
    path: Path, executor: Executor | None = None
) -> MetadataFile[TempBrokerMetadata]:
    """The ``brokerIdentity-temp`` file at ``path``."""
    return MetadataFile(
        path,
        encode=encode_temp_broker_metadata,
        decode=decode_temp_broker_metadata,
        executor=executor,
    )
