"""Controller events: what a request decided, replicated through Raft and applied everywhere.

Owns: the event dataclasses of controller.md section 5 and their msgpack codec (one Raft entry
carries the events of one request). Must not: apply anything (``ReplicasInfoManager.apply``).
Mirrors ``controller/.../impl/event/*Event.java`` and ``EventType``; upstream serializes each
event as a 2-byte type id plus fastjson, we use msgpack with a leading format version
(STYLE.md section 6):

| position | value |
| --- | --- |
| 0 | format version (1) |
| 1 | array of events, each ``[type id, field...]`` in the field order of its dataclass |

Sets of broker ids travel sorted, so equal events encode to equal bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from enum import IntEnum
from typing import Any, ClassVar, Final

import msgpack

from rocketpy.common.errors import CodecError

FORMAT_VERSION: Final = 1


class EventType(IntEnum):
    """Upstream ``EventType`` ids."""

    ALTER_SYNC_STATE_SET_EVENT = 1
    APPLY_BROKER_ID_EVENT = 2
    ELECT_MASTER_EVENT = 3
    READ_EVENT = 4
    CLEAN_BROKER_DATA_EVENT = 5
    UPDATE_BROKER_ADDRESS = 6


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterSyncStateSetEvent:
    """Replace the SyncStateSet of ``broker_name`` (``syncStateSetEpoch + 1``)."""

    TYPE: ClassVar[EventType] = EventType.ALTER_SYNC_STATE_SET_EVENT
    broker_name: str
    new_sync_state_set: frozenset[int]


@dataclass(frozen=True, slots=True, kw_only=True)
class ApplyBrokerIdEvent:
    """Give ``new_broker_id`` to the broker at ``broker_address`` (creates the broker-set)."""

    TYPE: ClassVar[EventType] = EventType.APPLY_BROKER_ID_EVENT
    cluster_name: str
    broker_name: str
    broker_address: str
    register_check_code: str
    new_broker_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ElectMasterEvent:
    """A new master (``new_master_elected``) or none (master cleared, ``masterEpoch + 1``)."""

    TYPE: ClassVar[EventType] = EventType.ELECT_MASTER_EVENT
    new_master_elected: bool
    broker_name: str
    new_master_broker_id: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ReadEvent:
    """No-op (``isProcessReadEvent``)."""

    TYPE: ClassVar[EventType] = EventType.READ_EVENT


@dataclass(frozen=True, slots=True, kw_only=True)
class CleanBrokerDataEvent:
    """Remove a whole broker-set (``None``/empty ids) or the listed ids."""

    TYPE: ClassVar[EventType] = EventType.CLEAN_BROKER_DATA_EVENT
    broker_name: str
    broker_id_set_to_clean: frozenset[int] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateBrokerAddressEvent:
    """A registered broker came back with another address."""

    TYPE: ClassVar[EventType] = EventType.UPDATE_BROKER_ADDRESS
    cluster_name: str
    broker_name: str
    broker_address: str
    broker_id: int


Event = (
    AlterSyncStateSetEvent
    | ApplyBrokerIdEvent
    | ElectMasterEvent
    | ReadEvent
    | CleanBrokerDataEvent
    | UpdateBrokerAddressEvent
)

_CLASSES: Final[dict[int, type[Any]]] = {
    int(c.TYPE): c
    for c in (
        AlterSyncStateSetEvent,
        ApplyBrokerIdEvent,
        ElectMasterEvent,
        ReadEvent,
        CleanBrokerDataEvent,
        UpdateBrokerAddressEvent,
    )
}


def _to_wire(value: Any) -> Any:
    if isinstance(value, frozenset):
        return sorted(value)
    return value


def _check(value: Any, expected: str, where: str) -> Any:
    ok = {
        "str": isinstance(value, str),
        "int": isinstance(value, int) and not isinstance(value, bool),
        "bool": isinstance(value, bool),
        "int | None": value is None or (isinstance(value, int) and not isinstance(value, bool)),
        "frozenset[int]": isinstance(value, list),
        "frozenset[int] | None": value is None or isinstance(value, list),
    }.get(expected)
    if not ok:
        raise CodecError(f"expected {expected}, got {value!r}", field=where)
    if isinstance(value, list):
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            raise CodecError("expected broker ids", field=where)
        return frozenset(value)
    return value


def event_to_wire(event: Event) -> list[Any]:
    """``[type id, field...]``."""
    return [int(event.TYPE), *(_to_wire(getattr(event, f.name)) for f in fields(event))]


def event_from_wire(items: Any, where: str = "event") -> Event:
    """Decode ``[type id, field...]``; raises CodecError naming the field."""
    if not isinstance(items, list) or not items or not isinstance(items[0], int):
        raise CodecError("expected [type, field...]", field=where)
    cls = _CLASSES.get(items[0])
    if cls is None:
        raise CodecError(f"unknown event type {items[0]}", field=where)
    names = fields(cls)
    if len(items) - 1 != len(names):
        raise CodecError(f"{cls.__name__} expects {len(names)} fields", field=where)
    kwargs = {
        f.name: _check(v, str(f.type), f"{cls.__name__}.{f.name}")
        for f, v in zip(names, items[1:], strict=True)
    }
    event: Event = cls(**kwargs)
    return event


def encode_events(events: Sequence[Event]) -> bytes:
    """The payload of one Raft entry: ``[FORMAT_VERSION, [event...]]``."""
    packed: bytes = msgpack.packb([FORMAT_VERSION, [event_to_wire(e) for e in events]])
    return packed


def decode_events(data: bytes) -> list[Event]:
    """Inverse of :func:`encode_events`; raises CodecError."""
    try:
        items = msgpack.unpackb(data, raw=False, strict_map_key=True)
    except (ValueError, msgpack.UnpackException) as e:
        raise CodecError(f"not a msgpack event batch: {e}", field="events") from e
    if not isinstance(items, list) or len(items) != 2 or not isinstance(items[1], list):
        raise CodecError("expected [version, [event...]]", field="events")
    if items[0] != FORMAT_VERSION:
        raise CodecError(f"unsupported format version {items[0]!r}", field="events.version")
    return [event_from_wire(e, f"events[{i}]") for i, e in enumerate(items[1])]
