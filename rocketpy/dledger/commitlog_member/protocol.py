"""DLedger 0.3.1.2's peer bodies as fastjson 1.2.x writes them (dledger-commitlog.md section 2.2).

Owns: the request/response dataclasses of every code the 0.3.1.2 server answers (METADATA,
APPEND, GET, VOTE, HEART_BEAT, PUSH, LEADERSHIP_TRANSFER), ``DLedgerResponseCode``,
``VoteResponse.RESULT``, ``PushEntryRequest.Type``, and pure ``encode_*``/``decode_*``
functions. Mirrors ``io.openmessaging.storage.dledger.protocol.*`` and ``DLedgerEntry`` JSON.
Must not: do I/O or decide anything (the elector, pusher and member do).

fastjson rules reproduced: keys sorted by name, no whitespace, enums as their names, ``null``
fields omitted, ``byte[]`` as base64, and getter-derived extras written (``PushEntryRequest``'s
``batch``, ``count``, ``firstEntryIndex``, ``lastEntryIndex``). Every body carries the
``RequestOrResponse`` base: ``group``, ``remoteId`` (the receiver), ``localId`` (the sender),
``leaderId``, ``term`` (default -1) and ``code`` (default 200, requests too). The ``peers`` map
of METADATA is written in sorted key order (a Java ``HashMap`` of ``n0..n9`` iterates so).
Decoding ignores unknown keys and takes upstream's defaults for missing ones, as fastjson does.
"""

from __future__ import annotations

import base64
import binascii
import operator
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum, IntEnum
from typing import Any, Final, TypeVar

import orjson

from rocketpy.common.errors import CodecError
from rocketpy.common.fastjson import Bean, dumps
from rocketpy.store.dledger_log.entry import BODY_OFFSET, DLedgerEntry

SUCCESS_CODE: Final = 200


class DLedgerResponseCode(IntEnum):
    """``DLedgerResponseCode`` (0.3.1.2): the outcome carried in a body's ``code``."""

    UNKNOWN = -1
    SUCCESS = 200
    TIMEOUT = 300
    METADATA_ERROR = 301
    NETWORK_ERROR = 302
    UNSUPPORTED = 303
    UNKNOWN_GROUP = 400
    UNKNOWN_MEMBER = 401
    UNEXPECTED_MEMBER = 402
    EXPIRED_TERM = 403
    NOT_LEADER = 404
    NOT_FOLLOWER = 405
    INCONSISTENT_STATE = 406
    INCONSISTENT_TERM = 407
    INCONSISTENT_INDEX = 408
    INCONSISTENT_LEADER = 409
    INDEX_OUT_OF_RANGE = 410
    UNEXPECTED_ARGUMENT = 411
    REPEATED_REQUEST = 412
    REPEATED_PUSH = 413
    DISK_ERROR = 414
    DISK_FULL = 415
    TERM_NOT_READY = 416
    FALL_BEHIND_TOO_MUCH = 417
    TAKE_LEADERSHIP_FAILED = 418
    INDEX_LESS_THAN_LOCAL_BEGIN = 419
    REQUEST_WITH_EMPTY_BODYS = 420
    PUSH_REQUEST_IS_FULL = 421
    INTERNAL_ERROR = 500
    TERM_CHANGED = 501
    WAIT_QUORUM_ACK_TIMEOUT = 502
    LEADER_PENDING_FULL = 503
    ILLEGAL_MEMBER_STATE = 504
    LEADER_NOT_READY = 505
    LEADER_TRANSFERRING = 506


def code_name(code: int) -> str:
    """The name of ``code`` (``valueOf``: UNKNOWN when not listed)."""
    try:
        return DLedgerResponseCode(code).name
    except ValueError:
        return DLedgerResponseCode.UNKNOWN.name


class VoteResult(Enum):
    """``VoteResponse.RESULT``, written by name."""

    UNKNOWN = "UNKNOWN"
    ACCEPT = "ACCEPT"
    REJECT_UNKNOWN_LEADER = "REJECT_UNKNOWN_LEADER"
    REJECT_UNEXPECTED_LEADER = "REJECT_UNEXPECTED_LEADER"
    REJECT_EXPIRED_VOTE_TERM = "REJECT_EXPIRED_VOTE_TERM"
    REJECT_ALREADY_VOTED = "REJECT_ALREADY_VOTED"
    REJECT_ALREADY_HAS_LEADER = "REJECT_ALREADY_HAS_LEADER"
    REJECT_TERM_NOT_READY = "REJECT_TERM_NOT_READY"
    REJECT_TERM_SMALL_THAN_LEDGER = "REJECT_TERM_SMALL_THAN_LEDGER"
    REJECT_EXPIRED_LEDGER_TERM = "REJECT_EXPIRED_LEDGER_TERM"
    REJECT_SMALL_LEDGER_END_INDEX = "REJECT_SMALL_LEDGER_END_INDEX"
    REJECT_TAKING_LEADERSHIP = "REJECT_TAKING_LEADERSHIP"


class PushType(Enum):
    """``PushEntryRequest.Type``, written by name."""

    APPEND = "APPEND"
    COMMIT = "COMMIT"
    COMPARE = "COMPARE"
    TRUNCATE = "TRUNCATE"


@dataclass(frozen=True, slots=True, kw_only=True)
class Base:
    """``RequestOrResponse``: the fields every body has."""

    group: str | None = None
    remote_id: str | None = None
    local_id: str | None = None
    leader_id: str | None = None
    term: int = -1
    code: int = SUCCESS_CODE


@dataclass(frozen=True, slots=True, kw_only=True)
class MetadataRequest(Base):
    """METADATA (50000)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MetadataResponse(Base):
    """Every peer id -> address, and the leader as this member knows it."""

    peers: Mapping[str, str] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class AppendEntryRequest(Base):
    """APPEND (50001): one body for the leader to append."""

    body: bytes | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class AppendEntryResponse(Base):
    """The appended entry's index and pos (-1 when refused)."""

    index: int = -1
    pos: int = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class GetEntriesRequest(Base):
    """GET (50002): the entry at ``begin_index``."""

    begin_index: int | None = None
    max_size: int = 0
    index_list: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class GetEntriesResponse(Base):
    """Zero or one entry."""

    entries: tuple[DLedgerEntry, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class VoteRequest(Base):
    """VOTE (51001): ``leader_id`` is the candidate."""

    ledger_end_index: int = -1
    ledger_end_term: int = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class VoteResponse(Base):
    """Base copied from the request; ``term`` is the voter's."""

    vote_result: VoteResult = VoteResult.UNKNOWN


@dataclass(frozen=True, slots=True, kw_only=True)
class HeartBeatRequest(Base):
    """HEART_BEAT (51002): base fields only (no commit index in 0.3.1.2)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class HeartBeatResponse(Base):
    """Base fields only."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PushEntryRequest(Base):
    """PUSH (51004). ``entry`` for a single push, ``batch_entry`` for a batch (then
    ``total_size`` is the sum of their sizes)."""

    type: PushType = PushType.APPEND
    commit_index: int = -1
    entry: DLedgerEntry | None = None
    batch_entry: tuple[DLedgerEntry, ...] = ()
    total_size: int = 0

    @property
    def is_batch(self) -> bool:
        """``isBatch``."""
        return bool(self.batch_entry)

    @property
    def count(self) -> int:
        """``getCount``."""
        if self.batch_entry:
            return len(self.batch_entry)
        return 1 if self.entry is not None else 0

    @property
    def first_entry_index(self) -> int:
        """``getFirstEntryIndex`` (-1 without entries)."""
        if self.batch_entry:
            return self.batch_entry[0].index
        return self.entry.index if self.entry is not None else -1

    @property
    def last_entry_index(self) -> int:
        """``getLastEntryIndex`` (-1 without entries)."""
        if self.batch_entry:
            return self.batch_entry[-1].index
        return self.entry.index if self.entry is not None else -1

    def entries(self) -> tuple[DLedgerEntry, ...]:
        """The pushed entries in order, whatever the shape."""
        if self.batch_entry:
            return self.batch_entry
        return (self.entry,) if self.entry is not None else ()


@dataclass(frozen=True, slots=True, kw_only=True)
class PushEntryResponse(Base):
    """``index`` is the request's first entry index (None for COMMIT); the follower's range."""

    index: int | None = None
    begin_index: int = 0
    end_index: int = 0
    count: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class LeadershipTransferRequest(Base):
    """LEADERSHIP_TRANSFER (51005)."""

    transfer_id: str | None = None
    transferee_id: str | None = None
    take_leadership_ledger_index: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class LeadershipTransferResponse(Base):
    """Base fields only."""


Body = (
    MetadataRequest
    | MetadataResponse
    | AppendEntryRequest
    | AppendEntryResponse
    | GetEntriesRequest
    | GetEntriesResponse
    | VoteRequest
    | VoteResponse
    | HeartBeatRequest
    | HeartBeatResponse
    | PushEntryRequest
    | PushEntryResponse
    | LeadershipTransferRequest
    | LeadershipTransferResponse
)

_E = TypeVar("_E", bound=Enum)
_B = TypeVar("_B", bound=Base)

# -- encoding ---------------------------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def entry_to_json(entry: DLedgerEntry) -> Bean:
    """``DLedgerEntry`` as fastjson writes it (getters: body, bodyCrc, chainCrc, channel, index,
    magic, pos, size, term)."""
    return Bean(
        {
            "body": _b64(entry.body),
            "bodyCrc": entry.body_crc,
            "chainCrc": entry.chain_crc,
            "channel": entry.channel,
            "index": entry.index,
            "magic": entry.magic,
            "pos": entry.pos,
            "size": entry.size,
            "term": entry.term,
        }
    )


def _base_json(b: Base) -> dict[str, Any]:
    return {
        "code": b.code,
        "group": b.group,
        "leaderId": b.leader_id,
        "localId": b.local_id,
        "remoteId": b.remote_id,
        "term": b.term,
    }


def _extra_json(b: Body) -> dict[str, Any]:  # noqa: PLR0911 - one arm per body type
    if isinstance(b, MetadataResponse):
        return {"peers": None if b.peers is None else dict(sorted(b.peers.items()))}
    if isinstance(b, AppendEntryRequest):
        return {"body": None if b.body is None else _b64(b.body)}
    if isinstance(b, AppendEntryResponse):
        return {"index": b.index, "pos": b.pos}
    if isinstance(b, GetEntriesRequest):
        return {
            "beginIndex": b.begin_index,
            "maxSize": b.max_size,
            "indexList": None if b.index_list is None else list(b.index_list),
        }
    if isinstance(b, GetEntriesResponse):
        return {"entries": [entry_to_json(e) for e in b.entries]}
    if isinstance(b, VoteRequest):
        return {"ledgerEndIndex": b.ledger_end_index, "ledgerEndTerm": b.ledger_end_term}
    if isinstance(b, VoteResponse):
        return {"voteResult": b.vote_result.value}
    if isinstance(b, PushEntryRequest):
        return {
            "batch": b.is_batch,
            "batchEntry": [entry_to_json(e) for e in b.batch_entry],
            "commitIndex": b.commit_index,
            "count": b.count,
            "entry": None if b.entry is None else entry_to_json(b.entry),
            "firstEntryIndex": b.first_entry_index,
            "lastEntryIndex": b.last_entry_index,
            "totalSize": b.total_size,
            "type": b.type.value,
        }
    if isinstance(b, PushEntryResponse):
        return {
            "beginIndex": b.begin_index,
            "count": b.count,
            "endIndex": b.end_index,
            "index": b.index,
        }
    if isinstance(b, LeadershipTransferRequest):
        return {
            "takeLeadershipLedgerIndex": b.take_leadership_ledger_index,
            "transferId": b.transfer_id,
            "transfereeId": b.transferee_id,
        }
    return {}


def encode_body(body: Body) -> bytes:
    """``JSON.toJSONBytes(body)``: a bean (sorted keys, nulls left out), compact, UTF-8, through
    :func:`rocketpy.common.fastjson.dumps` (fastjson's string escapes)."""
    return dumps(Bean(_base_json(body) | _extra_json(body))).encode("utf-8")


# -- decoding ---------------------------------------------------------------------------------


def _load(buf: bytes | memoryview) -> dict[str, Any]:
    try:
        doc = orjson.loads(buf)  # bodies of every peer request and response: the hot path
    except orjson.JSONDecodeError as e:
        raise CodecError(f"body is not JSON: {e}", field="body") from e
    if not isinstance(doc, dict):
        raise CodecError("body is not a JSON object", field="body")
    return doc


def _int(doc: Mapping[str, Any], key: str, default: int) -> int:
    value = doc.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise CodecError(f"{key} is not an integer: {value!r}", field=key)
    return value


def _opt_int(doc: Mapping[str, Any], key: str) -> int | None:
    return None if doc.get(key) is None else _int(doc, key, 0)


def _str(doc: Mapping[str, Any], key: str) -> str | None:
    value = doc.get(key)
    if value is not None and not isinstance(value, str):
        raise CodecError(f"{key} is not a string: {value!r}", field=key)
    return value


def _bytes(doc: Mapping[str, Any], key: str) -> bytes | None:
    value = _str(doc, key)
    if value is None:
        return None
    try:
        return binascii.a2b_base64(value, strict_mode=True)  # what b64decode(validate=True) runs
    except binascii.Error as e:
        raise CodecError(f"{key} is not base64: {e}", field=key) from e


#: The fields of an entry a leader always writes (fastjson's getters), read in one step.
_ENTRY_FIELDS: Final = operator.itemgetter(
    "body", "index", "term", "pos", "magic", "channel", "chainCrc", "bodyCrc", "size"
)


def entry_from_json(doc: Any) -> DLedgerEntry:
    """A ``DLedgerEntry`` from its JSON object; ``size`` must agree with the body.

    Raises:
        CodecError: not an object, a field of the wrong type, or a size mismatch.
    """
    # Every entry of a push comes here (a batch push carries dozens): when all nine fields
    # are there with the right types, one lookup and one type test each; anything else (a
    # field left out, a null, a wrong type) takes the checked path below, which says what.
    if type(doc) is dict:
        try:
            b64, index, term, pos, magic, channel, chain_crc, body_crc, size = _ENTRY_FIELDS(doc)
        except KeyError:
            pass
        else:
            if type(b64) is str and (
                type(index) is type(term) is type(pos) is type(magic) is type(channel)
                is type(chain_crc) is type(body_crc) is type(size) is int
            ):  # fmt: skip
                try:
                    body = binascii.a2b_base64(b64, strict_mode=True)
                except binascii.Error as e:
                    raise CodecError(f"body is not base64: {e}", field="body") from e
                if size != BODY_OFFSET + len(body):
                    raise CodecError(f"entry size {size} != 48 + body {len(body)}", field="size")
                return DLedgerEntry(index, term, pos, body, magic, channel, chain_crc, body_crc)
    return _entry_from_json_checked(doc)


def _entry_from_json_checked(doc: Any) -> DLedgerEntry:
    if not isinstance(doc, dict):
        raise CodecError("entry is not a JSON object", field="entry")
    body = _bytes(doc, "body") or b""
    entry = DLedgerEntry(
        index=_int(doc, "index", 0),
        term=_int(doc, "term", 0),
        pos=_int(doc, "pos", 0),
        body=body,
        magic=_int(doc, "magic", 0),
        channel=_int(doc, "channel", 0),
        chain_crc=_int(doc, "chainCrc", 0),
        body_crc=_int(doc, "bodyCrc", 0),
    )
    size = _int(doc, "size", entry.size)
    if size != entry.size:
        raise CodecError(f"entry size {size} != 48 + body {len(body)}", field="size")
    return entry


def _base_kwargs(doc: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "group": _str(doc, "group"),
        "remote_id": _str(doc, "remoteId"),
        "local_id": _str(doc, "localId"),
        "leader_id": _str(doc, "leaderId"),
        "term": _int(doc, "term", -1),
        "code": _int(doc, "code", SUCCESS_CODE),
    }


def _enum(doc: Mapping[str, Any], key: str, kind: type[_E], default: _E) -> _E:
    value = doc.get(key)
    if value is None:
        return default
    try:
        return kind(value)
    except ValueError as e:
        raise CodecError(f"{key} {value!r} is not a {kind.__name__}", field=key) from e


def _entries(doc: Mapping[str, Any], key: str) -> tuple[DLedgerEntry, ...]:
    value = doc.get(key)
    if value is None:
        return ()
    if not isinstance(value, list):
        raise CodecError(f"{key} is not a list", field=key)
    return tuple([entry_from_json(e) for e in value])  # a batch push's entries: no generator


def decode_body(buf: bytes | memoryview, kind: type[_B]) -> _B:
    """``JSON.parseObject(buf, kind)``.

    Raises:
        CodecError: not JSON, or a field of the wrong type.
    """
    doc = _load(buf)
    base = _base_kwargs(doc)
    result: Base
    if kind is MetadataResponse:
        peers = doc.get("peers")
        if peers is not None and not (
            isinstance(peers, dict) and all(isinstance(v, str) for v in peers.values())
        ):
            raise CodecError("peers is not a string map", field="peers")
        result = MetadataResponse(**base, peers=peers)
    elif kind is AppendEntryRequest:
        result = AppendEntryRequest(**base, body=_bytes(doc, "body"))
    elif kind is AppendEntryResponse:
        result = AppendEntryResponse(**base, index=_int(doc, "index", -1), pos=_int(doc, "pos", -1))
    elif kind is GetEntriesRequest:
        raw_list = doc.get("indexList")
        index_list = None if raw_list is None else tuple(int(i) for i in raw_list)
        result = GetEntriesRequest(
            **base,
            begin_index=_opt_int(doc, "beginIndex"),
            max_size=_int(doc, "maxSize", 0),
            index_list=index_list,
        )
    elif kind is GetEntriesResponse:
        result = GetEntriesResponse(**base, entries=_entries(doc, "entries"))
    elif kind is VoteRequest:
        result = VoteRequest(
            **base,
            ledger_end_index=_int(doc, "ledgerEndIndex", -1),
            ledger_end_term=_int(doc, "ledgerEndTerm", -1),
        )
    elif kind is VoteResponse:
        result = VoteResponse(
            **base, vote_result=_enum(doc, "voteResult", VoteResult, VoteResult.UNKNOWN)
        )
    elif kind is PushEntryRequest:
        entry = doc.get("entry")
        result = PushEntryRequest(
            **base,
            type=_enum(doc, "type", PushType, PushType.APPEND),
            commit_index=_int(doc, "commitIndex", -1),
            entry=None if entry is None else entry_from_json(entry),
            batch_entry=_entries(doc, "batchEntry"),
            total_size=_int(doc, "totalSize", 0),
        )
    elif kind is PushEntryResponse:
        result = PushEntryResponse(
            **base,
            index=_opt_int(doc, "index"),
            begin_index=_int(doc, "beginIndex", 0),
            end_index=_int(doc, "endIndex", 0),
            count=_int(doc, "count", 0),
        )
    elif kind is LeadershipTransferRequest:
        result = LeadershipTransferRequest(
            **base,
            transfer_id=_str(doc, "transferId"),
            transferee_id=_str(doc, "transfereeId"),
            take_leadership_ledger_index=_int(doc, "takeLeadershipLedgerIndex", 0),
        )
    else:
        result = kind(**base)
    assert isinstance(result, kind)  # noqa: S101 - each arm builds ``kind``
    return result
