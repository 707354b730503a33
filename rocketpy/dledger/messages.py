"""Raft (DLedger-shaped) values and messages, and their msgpack codec.

Owns: the log :class:`Entry`, :class:`HardState`, :class:`SnapshotMeta`/:class:`Snapshot`, the
vote results and candidate reactions of DLedger (``VoteResponse.RESULT``/``ParseResult``), the
peer messages exchanged by :mod:`rocketpy.dledger.core`, and :func:`encode_message` /
:func:`decode_message`. Must not: do I/O or know how messages travel (``transport.py``).

Mirrors openmessaging/dledger ``protocol/VoteRequest``, ``VoteResponse``, ``HeartBeatRequest``,
``HeartBeatResponse``, ``PushEntryRequest``/``PushEntryResponse`` (here an etcd-style
prev-index/prev-term append), ``InstallSnapshotRequest`` and ``LeadershipTransferRequest``
(the "take leadership" message sent by the leader to the transferee). The wire format is ours
(STYLE.md section 6: internal formats are msgpack with a leading format version):

| position | value | meaning |
| --- | --- | --- |
| 0 | int | :data:`FORMAT_VERSION` (1) |
| 1 | int | :class:`MessageType` |
| 2.. | per type | the dataclass fields in declaration order |

Entries travel as ``[term, index, kind, data]``, snapshot meta as ``[index, term]``, enums as
ints, ``None`` as nil.

Indices are 1-based; index 0 with term 0 is the empty-log sentinel (DLedger uses -1/-1).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from enum import IntEnum
from typing import Any, ClassVar, Final, Self, TypeVar

import msgpack

from rocketpy.common.errors import CodecError
from rocketpy.common.types import LogIndex, Term

FORMAT_VERSION: Final = 1
#: Term 0 and index 0: the empty-log sentinel and the defaults below.
NO_TERM: Final = Term(0)
NO_INDEX: Final = LogIndex(0)
_E = TypeVar("_E", bound=IntEnum)


class EntryKind(IntEnum):
    """What a log entry carries."""

    NORMAL = 0  # state-machine data (a batch of controller events)
    NOOP = 1  # the empty entry a new leader appends (DLedgerController's "empty event")


class VoteResult(IntEnum):
    """DLedger ``VoteResponse.RESULT`` (seed 001), in upstream order."""

    UNKNOWN = 0
    ACCEPT = 1
    REJECT_UNKNOWN_LEADER = 2
    REJECT_UNEXPECTED_LEADER = 3
    REJECT_EXPIRED_VOTE_TERM = 4
    REJECT_ALREADY_VOTED = 5
    REJECT_ALREADY_HAS_LEADER = 6
    REJECT_TERM_NOT_READY = 7
    REJECT_TERM_SMALL_THAN_LEDGER = 8
    REJECT_EXPIRED_LEDGER_TERM = 9
    REJECT_SMALL_LEDGER_END_INDEX = 10
    REJECT_TAKING_LEADERSHIP = 11


class ParseResult(IntEnum):
    """DLedger ``VoteResponse.ParseResult``: how a candidate reacts to one round of votes."""

    WAIT_TO_REVOTE = 0
    REVOTE_IMMEDIATELY = 1
    PASSED = 2
    WAIT_TO_VOTE_NEXT = 3


class ResponseCode(IntEnum):
    """The subset of ``DLedgerResponseCode`` our peer messages use (upstream values)."""

    UNKNOWN = -1
    SUCCESS = 200
    UNKNOWN_MEMBER = 401
    UNEXPECTED_MEMBER = 402
    EXPIRED_TERM = 403
    INCONSISTENT_STATE = 406  # append rejected: the follower lacks (prev_index, prev_term)
    INCONSISTENT_LEADER = 409
    TERM_NOT_READY = 416


class MessageType(IntEnum):
    """Position 1 of every encoded message."""

    VOTE = 1
    VOTE_RESPONSE = 2
    HEARTBEAT = 3
    HEARTBEAT_RESPONSE = 4
    APPEND = 5
    APPEND_RESPONSE = 6
    INSTALL_SNAPSHOT = 7
    INSTALL_SNAPSHOT_RESPONSE = 8
    TAKE_LEADERSHIP = 9


@dataclass(frozen=True, slots=True, kw_only=True)
class Entry:
    """One log entry (DLedger ``DLedgerEntry``: term, index, body)."""

    term: Term
    index: LogIndex
    kind: EntryKind = EntryKind.NORMAL
    data: bytes = b""

    def to_wire(self) -> list[Any]:
        """``[term, index, kind, data]``."""
        return [self.term, self.index, int(self.kind), self.data]

    @classmethod
    def from_wire(cls, value: Any, field: str = "entry") -> Entry:
        """Decode ``[term, index, kind, data]``; raises CodecError naming ``field``."""
        items = _list(value, field, 4)
        return cls(
            term=Term(_int(items[0], f"{field}.term")),
            index=LogIndex(_int(items[1], f"{field}.index")),
            kind=_enum(EntryKind, items[2], f"{field}.kind"),
            data=_bytes(items[3], f"{field}.data"),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class HardState:
    """What must be durable before a vote or an append is acknowledged.

    ``term`` and ``vote`` are DLedger's ``currterm`` file (``currTerm``, ``voteLeader``);
    ``commit`` is etcd's addition, so a restarted node re-applies exactly the committed prefix.
    """

    term: Term = NO_TERM
    vote: str | None = None
    commit: LogIndex = NO_INDEX


@dataclass(frozen=True, slots=True, kw_only=True)
class SnapshotMeta:
    """The last log position a snapshot covers."""

    index: LogIndex = NO_INDEX
    term: Term = NO_TERM

    def to_wire(self) -> list[Any]:
        """``[index, term]``."""
        return [self.index, self.term]

    @classmethod
    def from_wire(cls, value: Any, field: str = "snapshot") -> SnapshotMeta:
        """Decode ``[index, term]``."""
        items = _list(value, field, 2)
        return cls(
            index=LogIndex(_int(items[0], f"{field}.index")),
            term=Term(_int(items[1], f"{field}.term")),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Snapshot:
    """State-machine bytes as of ``meta`` (supplied by the state machine, opaque here)."""

    meta: SnapshotMeta = SnapshotMeta()
    data: bytes = b""


# ---------------------------------------------------------------------------------------------
# field decoders


def _list(value: Any, field: str, size: int | None = None) -> list[Any]:
    if not isinstance(value, list):
        raise CodecError(f"expected an array, got {type(value).__name__}", field=field)
    if size is not None and len(value) != size:
        raise CodecError(f"expected {size} items, got {len(value)}", field=field)
    return value


def _int(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise CodecError(f"expected an integer, got {type(value).__name__}", field=field)
    return value


def _str(value: Any, field: str) -> str:
    if not isinstance(value, str):
        raise CodecError(f"expected a string, got {type(value).__name__}", field=field)
    return value


def _opt_str(value: Any, field: str) -> str | None:
    return None if value is None else _str(value, field)


def _bytes(value: Any, field: str) -> bytes:
    if not isinstance(value, bytes):
        raise CodecError(f"expected bytes, got {type(value).__name__}", field=field)
    return value


def _enum(cls: type[_E], value: Any, field: str) -> _E:
    raw = _int(value, field)
    try:
        return cls(raw)
    except ValueError as e:
        raise CodecError(f"unknown {cls.__name__} {raw}", field=field) from e


def _entries(value: Any, field: str) -> tuple[Entry, ...]:
    return tuple(Entry.from_wire(v, f"{field}[{i}]") for i, v in enumerate(_list(value, field)))


_Decoder = Callable[[Any, str], Any]
_ENCODERS: Final[dict[str, Callable[[Any], Any]]] = {
    "entries": lambda v: [e.to_wire() for e in v],
    "meta": lambda v: v.to_wire(),
}


def _dec_term(v: Any, f: str) -> Term:
    return Term(_int(v, f))


def _dec_index(v: Any, f: str) -> LogIndex:
    return LogIndex(_int(v, f))


class _Wire:
    """Positional msgpack encoding of a message dataclass (see the module docstring)."""

    __slots__ = ()
    TYPE: ClassVar[MessageType]
    WIRE: ClassVar[tuple[_Decoder, ...]]  # one decoder per dataclass field, in order

    def to_wire(self) -> list[Any]:
        """``[FORMAT_VERSION, TYPE, field...]``."""
        out: list[Any] = [FORMAT_VERSION, int(self.TYPE)]
        for f in fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            encoder = _ENCODERS.get(f.name)
            if encoder is not None:
                value = encoder(value)
            elif isinstance(value, IntEnum):
                value = int(value)
            out.append(value)
        return out

    @classmethod
    def from_wire(cls, items: Sequence[Any]) -> Self:
        """Decode the fields after the version and type; raises CodecError naming the field."""
        names = [f.name for f in fields(cls)]  # type: ignore[arg-type]
        if len(items) != len(names):
            raise CodecError(
                f"{cls.__name__} expects {len(names)} fields, got {len(items)}", field=cls.__name__
            )
        kwargs = {
            name: decode(value, f"{cls.__name__}.{name}")
            for name, decode, value in zip(names, cls.WIRE, items, strict=True)
        }
        return cls(**kwargs)


@dataclass(frozen=True, slots=True, kw_only=True)
class VoteRequest(_Wire):
    """DLedger ``VoteRequest``: the candidate (``leaderId``) asks for a vote in ``term``.

    ``vote_round`` numbers the candidate's rounds so stale responses are not counted twice.
    """

    TYPE: ClassVar[MessageType] = MessageType.VOTE
    WIRE: ClassVar[tuple[_Decoder, ...]] = (_str, _str, _dec_term, _dec_term, _dec_index, _int)
    from_id: str
    to_id: str
    term: Term
    ledger_end_term: Term
    ledger_end_index: LogIndex
    vote_round: int


@dataclass(frozen=True, slots=True, kw_only=True)
class VoteResponse(_Wire):
    """DLedger ``VoteResponse``: ``term`` is the voter's term (its ledger end term for
    REJECT_TERM_SMALL_THAN_LEDGER); ``request_term``/``vote_round`` echo the request."""

    TYPE: ClassVar[MessageType] = MessageType.VOTE_RESPONSE
    WIRE: ClassVar[tuple[_Decoder, ...]] = (
        _str,
        _str,
        _dec_term,
        _dec_term,
        _int,
        lambda v, f: _enum(VoteResult, v, f),
    )
    from_id: str
    to_id: str
    term: Term
    request_term: Term
    vote_round: int
    result: VoteResult


@dataclass(frozen=True, slots=True, kw_only=True)
class HeartbeatRequest(_Wire):
    """DLedger ``HeartBeatRequest``; ``commit_index`` = min(follower match, leader commit)."""

    TYPE: ClassVar[MessageType] = MessageType.HEARTBEAT
    WIRE: ClassVar[tuple[_Decoder, ...]] = (_str, _str, _dec_term, _dec_index, _int)
    from_id: str
    to_id: str
    term: Term
    commit_index: LogIndex
    beat_round: int


@dataclass(frozen=True, slots=True, kw_only=True)
class HeartbeatResponse(_Wire):
    """DLedger ``HeartBeatResponse`` (codes SUCCESS, EXPIRED_TERM, INCONSISTENT_LEADER,
    TERM_NOT_READY, UNKNOWN_MEMBER, UNEXPECTED_MEMBER)."""

    TYPE: ClassVar[MessageType] = MessageType.HEARTBEAT_RESPONSE
    WIRE: ClassVar[tuple[_Decoder, ...]] = (
        _str,
        _str,
        _dec_term,
        _int,
        lambda v, f: _enum(ResponseCode, v, f),
    )
    from_id: str
    to_id: str
    term: Term
    beat_round: int
    code: ResponseCode


@dataclass(frozen=True, slots=True, kw_only=True)
class AppendRequest(_Wire):
    """Leader -> follower entries after (``prev_index``, ``prev_term``); may be empty (a probe).

    DLedger's pusher uses APPEND/COMPARE/TRUNCATE push types; this is the Raft-paper
    consistency check instead, with the same effect (the follower's log ends up a prefix of
    the leader's).
    """

    TYPE: ClassVar[MessageType] = MessageType.APPEND
    WIRE: ClassVar[tuple[_Decoder, ...]] = (
        _str,
        _str,
        _dec_term,
        _dec_index,
        _dec_term,
        _entries,
        _dec_index,
    )
    from_id: str
    to_id: str
    term: Term
    prev_index: LogIndex
    prev_term: Term
    entries: tuple[Entry, ...]
    commit_index: LogIndex


@dataclass(frozen=True, slots=True, kw_only=True)
class AppendResponse(_Wire):
    """SUCCESS: the follower's log matches the leader's up to ``index``. INCONSISTENT_STATE:
    it lacks ``index`` (= the request's prev_index); ``hint`` is its last index."""

    TYPE: ClassVar[MessageType] = MessageType.APPEND_RESPONSE
    WIRE: ClassVar[tuple[_Decoder, ...]] = (
        _str,
        _str,
        _dec_term,
        lambda v, f: _enum(ResponseCode, v, f),
        _dec_index,
        _dec_index,
    )
    from_id: str
    to_id: str
    term: Term
    code: ResponseCode
    index: LogIndex
    hint: LogIndex


@dataclass(frozen=True, slots=True, kw_only=True)
class InstallSnapshotRequest(_Wire):
    """Leader -> a follower too far behind: the whole snapshot in one message."""

    TYPE: ClassVar[MessageType] = MessageType.INSTALL_SNAPSHOT
    WIRE: ClassVar[tuple[_Decoder, ...]] = (
        _str,
        _str,
        _dec_term,
        SnapshotMeta.from_wire,
        _bytes,
    )
    from_id: str
    to_id: str
    term: Term
    meta: SnapshotMeta
    data: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class InstallSnapshotResponse(_Wire):
    """SUCCESS with ``index`` = the follower's commit index after handling the snapshot."""

    TYPE: ClassVar[MessageType] = MessageType.INSTALL_SNAPSHOT_RESPONSE
    WIRE: ClassVar[tuple[_Decoder, ...]] = (
        _str,
        _str,
        _dec_term,
        lambda v, f: _enum(ResponseCode, v, f),
        _dec_index,
    )
    from_id: str
    to_id: str
    term: Term
    code: ResponseCode
    index: LogIndex


@dataclass(frozen=True, slots=True, kw_only=True)
class TakeLeadershipRequest(_Wire):
    """DLedger ``LeadershipTransferRequest`` sent by the leader to the caught-up transferee:
    campaign now in ``term + 1`` (``handleTakeLeadership``)."""

    TYPE: ClassVar[MessageType] = MessageType.TAKE_LEADERSHIP
    WIRE: ClassVar[tuple[_Decoder, ...]] = (_str, _str, _dec_term, _dec_index)
    from_id: str
    to_id: str
    term: Term
    ledger_end_index: LogIndex


Message = (
    VoteRequest
    | VoteResponse
    | HeartbeatRequest
    | HeartbeatResponse
    | AppendRequest
    | AppendResponse
    | InstallSnapshotRequest
    | InstallSnapshotResponse
    | TakeLeadershipRequest
)

_BY_TYPE: Final[dict[int, type[_Wire]]] = {
    int(cls.TYPE): cls
    for cls in (
        VoteRequest,
        VoteResponse,
        HeartbeatRequest,
        HeartbeatResponse,
        AppendRequest,
        AppendResponse,
        InstallSnapshotRequest,
        InstallSnapshotResponse,
        TakeLeadershipRequest,
    )
}


def encode_message(message: Message) -> bytes:
    """msgpack of ``[FORMAT_VERSION, type, field...]``."""
    packed: bytes = msgpack.packb(message.to_wire(), use_bin_type=True)
    return packed


def unpack(buf: bytes | memoryview, what: str) -> Any:
    """msgpack-decode one value, turning every decoder failure into a CodecError."""
    try:
        return msgpack.unpackb(bytes(buf), raw=False, strict_map_key=True)
    except (ValueError, msgpack.UnpackException) as e:
        raise CodecError(f"not a msgpack {what}: {e}", field=what) from e


def check_version(items: list[Any], what: str) -> None:
    """Raise CodecError unless ``items[0]`` is :data:`FORMAT_VERSION`."""
    if not items:
        raise CodecError("empty array", field=f"{what}.version")
    version = _int(items[0], f"{what}.version")
    if version != FORMAT_VERSION:
        raise CodecError(f"unsupported format version {version}", field=f"{what}.version")


def decode_message(buf: bytes | memoryview) -> Message:
    """Decode one peer message.

    Raises:
        CodecError: not msgpack, wrong version, unknown type, or a field of the wrong shape.
    """
    items = _list(unpack(buf, "message"), "message")
    check_version(items, "message")
    if len(items) < 2:
        raise CodecError("missing message type", field="message.type")
    kind = _int(items[1], "message.type")
    cls = _BY_TYPE.get(kind)
    if cls is None:
        raise CodecError(f"unknown message type {kind}", field="message.type")
    decoded: Message = cls.from_wire(items[2:])  # type: ignore[assignment]
    return decoded


def encode_entry(entry: Entry) -> bytes:
    """One log record payload: msgpack ``[FORMAT_VERSION, term, index, kind, data]``."""
    packed: bytes = msgpack.packb([FORMAT_VERSION, *entry.to_wire()], use_bin_type=True)
    return packed


def decode_entry(buf: bytes | memoryview) -> Entry:
    """Inverse of :func:`encode_entry`; raises CodecError."""
    items = _list(unpack(buf, "entry"), "entry", 5)
    check_version(items, "entry")
    return Entry.from_wire(items[1:], "entry")
