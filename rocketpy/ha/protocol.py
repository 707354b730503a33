"""HA wire codecs (ha.md sections 2 and 3): classic and AutoSwitch frames, sans-I/O parsers.

Owns: every byte layout of the HA stream, the encoders, and incremental readers that accept the
stream in arbitrary chunks and raise :class:`HACodecError` on garbage (unknown state, negative
sizes or offsets, bodies above the limit). Must not: do I/O, log, or keep connection state beyond
the bytes of a partial frame (the drivers in ``classic/`` and ``autoswitch/`` decide what a frame
means). Mirrors ``DefaultHAConnection``/``DefaultHAClient`` (classic) and
``AutoSwitchHAConnection``/``AutoSwitchHAClient`` of apache/rocketmq 5.1.1+. All integers are
big-endian.

Classic (4.9 ``HAService`` and 5.x ``DefaultHAService``, identical):

| message | offset | size | field |
| --- | --- | --- | --- |
| slave report | 0 | 8 | ``slaveMaxOffset`` int64 |
| master frame | 0 | 8 | ``masterPhyOffset`` int64 (heartbeat: the next offset to send) |
| | 8 | 4 | ``bodySize`` int32 (0 = heartbeat) |
| | 12 | n | raw commit-log bytes |

AutoSwitch (5.1.1+; 5.0.0/5.1.0 variants noted):

| message | offset | size | field |
| --- | --- | --- | --- |
| slave HANDSHAKE | 0 | 4 | state = 1 |
| | 4 | 2 | ``isSyncFromLastFile`` int16 |
| | 6 | 2 | ``isAsyncLearner`` int16 |
| | 8 | 8 | ``slaveBrokerId`` int64 (<= 5.1.0: int32 length + UTF-8 address) |
| slave TRANSFER report | 0 | 4 | state = 2 |
| | 4 | 8 | ``slaveMaxOffset`` int64 |
| master HANDSHAKE | 0 | 4 | state = 1 |
| | 4 | 4 | ``bodySize`` = 12 x entries |
| | 8 | 8 | master max physical offset |
| | 16 | 4 | master last epoch (-1: none) |
| | (5.0.0) 20 | 16 | two int64 zeros (the 36-byte common header) |
| | 20 | 12 n | entries: ``epoch`` int32, ``startOffset`` int64, ascending |
| master TRANSFER | 0 | 4 | state = 2 |
| | 4 | 4 | ``bodySize`` (0 = heartbeat) |
| | 8 | 8 | ``offset`` of the first data byte (heartbeat: next offset) |
| | 16 | 4 | ``epoch`` of the data |
| | 20 | 8 | ``epochStartOffset`` |
| | 28 | 8 | ``confirmOffset`` |
| | 36 | n | raw commit-log bytes |
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass
from typing import Final, Generic, TypeVar

from rocketpy.common.errors import CodecError
from rocketpy.store.epoch_entries import EpochEntry

# Upstream's slave read buffer is 4 MiB (DefaultHAClient.READ_MAX_BUFFER_SIZE): a larger frame could
# never complete there, so a larger declared body is garbage, not a slow peer.
MAX_HA_BODY: Final = 4 * 1024 * 1024
MAX_EPOCH_ENTRIES: Final = MAX_HA_BODY // 12
MAX_ADDRESS_LENGTH: Final = 1024

OFFSET_REPORT: Final = struct.Struct(">q")
CLASSIC_HEADER: Final = struct.Struct(">qi")
HANDSHAKE_V511: Final = struct.Struct(">ihhq")
HANDSHAKE_V500_HEAD: Final = struct.Struct(">ihhi")
TRANSFER_REPORT: Final = struct.Struct(">iq")
HANDSHAKE_RESPONSE_HEADER: Final = struct.Struct(">iiqi")
TRANSFER_HEADER: Final = struct.Struct(">iiqiqq")
EPOCH_ENTRY: Final = struct.Struct(">iq")
STATE: Final = struct.Struct(">i")


class HAConnectionState(enum.IntEnum):
    """``HAConnectionState`` ordinals (5.x); AutoSwitch puts them on the wire."""

    READY = 0
    HANDSHAKE = 1
    TRANSFER = 2
    SUSPEND = 3
    SHUTDOWN = 4


class HAVersion(enum.Enum):
    """Which AutoSwitch byte layout a peer speaks."""

    V5_0_0 = "5.0.0"  # address handshake, 36-byte handshake response header
    V5_1_0 = "5.1.0"  # address handshake, 20-byte handshake response header
    V5_1_1 = "5.1.1"  # brokerId handshake, 20-byte handshake response header (current)


class HACodecError(CodecError):
    """HA bytes that cannot be a valid frame; the connection must be dropped."""


def _check_offset(value: int, field: str, at: int) -> int:
    if value < 0:
        raise HACodecError(f"negative {field} {value}", field=field, offset=at)
    return value


def _check_body(size: int, limit: int, at: int) -> int:
    if size < 0 or size > limit:
        raise HACodecError(f"bodySize {size} outside 0..{limit}", field="bodySize", offset=at)
    return size


# -- classic ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ClassicFrame:
    """A master -> slave classic frame; empty ``body`` is a heartbeat."""

    offset: int
    body: bytes


def encode_offset_report(slave_max_offset: int) -> bytes:
    """The slave's 8-byte report (``DefaultHAClient.reportSlaveMaxOffset``)."""
    return OFFSET_REPORT.pack(slave_max_offset)


def encode_classic_frame(offset: int, body: bytes = b"") -> bytes:
    """A 12-byte header plus ``body`` (``DefaultHAConnection.WriteSocketService``)."""
    return CLASSIC_HEADER.pack(offset, len(body)) + body


class OffsetReportReader:
    """Master side: reads 8-byte reports; only the last complete one of a chunk matters."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._consumed = 0

    def feed(self, data: bytes) -> int | None:
        """Add bytes; return the last complete report in them, or None if none completed.

        Raises:
            HACodecError: a negative offset.
        """
        self._buf += data
        whole = len(self._buf) - len(self._buf) % OFFSET_REPORT.size
        if whole == 0:
            return None
        (value,) = OFFSET_REPORT.unpack_from(self._buf, whole - OFFSET_REPORT.size)
        at = self._consumed + whole - OFFSET_REPORT.size
        del self._buf[:whole]
        self._consumed += whole
        return _check_offset(value, "slaveMaxOffset", at)


class ClassicFrameReader:
    """Slave side: splits the master's stream into :class:`ClassicFrame` values."""

    def __init__(self, max_body: int = MAX_HA_BODY) -> None:
        self._buf = bytearray()
        self._max_body = max_body
        self._consumed = 0

    def feed(self, data: bytes) -> list[ClassicFrame]:
        """Add bytes; return every frame they complete, in order.

        Raises:
            HACodecError: a negative offset or a body size outside ``0..max_body``.
        """
        self._buf += data
        frames: list[ClassicFrame] = []
        pos = 0
        while len(self._buf) - pos >= CLASSIC_HEADER.size:
            offset, size = CLASSIC_HEADER.unpack_from(self._buf, pos)
            at = self._consumed + pos
            _check_offset(offset, "masterPhyOffset", at)
            _check_body(size, self._max_body, at + 8)
            end = pos + CLASSIC_HEADER.size + size
            if end > len(self._buf):
                break
            frames.append(ClassicFrame(offset=offset, body=bytes(self._buf[end - size : end])))
            pos = end
        del self._buf[:pos]
        self._consumed += pos
        return frames


# -- AutoSwitch: slave -> master ----------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Handshake:
    """The slave's HANDSHAKE: ``slave_broker_id`` (5.1.1+) or ``slave_address`` (<= 5.1.0)."""

    is_sync_from_last_file: bool = False
    is_async_learner: bool = False
    slave_broker_id: int = 0
    slave_address: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class TransferReport:
    """The slave's 12-byte TRANSFER report (its ack)."""

    slave_max_offset: int


SlaveMessage = Handshake | TransferReport


def encode_handshake(msg: Handshake, version: HAVersion = HAVersion.V5_1_1) -> bytes:
    """``AutoSwitchHAClient.sendHandshakeHeader`` for ``version``."""
    flags = (int(msg.is_sync_from_last_file), int(msg.is_async_learner))
    if version is HAVersion.V5_1_1:
        return HANDSHAKE_V511.pack(HAConnectionState.HANDSHAKE, *flags, msg.slave_broker_id)
    # Java writes String.length() as the length: equal to the UTF-8 size for an ip:port address.
    raw = msg.slave_address.encode()
    return HANDSHAKE_V500_HEAD.pack(HAConnectionState.HANDSHAKE, *flags, len(raw)) + raw


def encode_transfer_report(slave_max_offset: int) -> bytes:
    """``AutoSwitchHAClient.reportSlaveOffset``: state TRANSFER plus the max offset."""
    return TRANSFER_REPORT.pack(HAConnectionState.TRANSFER, slave_max_offset)


M = TypeVar("M")


class _StateMessageReader(Generic[M]):
    """A stream of messages that each start with the 4-byte connection state: buffering and
    the feed loop; subclasses decode one message at a position (``_one``)."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._consumed = 0  # stream offset of ``_buf[0]`` (error messages name it)

    def feed(self, data: bytes) -> list[M]:
        """Add bytes; return every message they complete.

        Raises:
            HACodecError: a message that does not decode (see the subclass).
        """
        self._buf += data
        out: list[M] = []
        pos = 0
        while len(self._buf) - pos >= STATE.size:
            msg, size = self._one(pos)
            if msg is None:
                break
            out.append(msg)
            pos += size
        del self._buf[:pos]
        self._consumed += pos
        return out

    def _one(self, pos: int) -> tuple[M | None, int]:
        """The message at ``pos`` and its size; (None, 0) while incomplete."""
        raise NotImplementedError


class SlaveMessageReader(_StateMessageReader[SlaveMessage]):
    """Master side: splits the slave's stream into handshakes and transfer reports.
    ``feed`` raises HACodecError on an unknown state, a negative offset or a bad address
    length."""

    def __init__(self, version: HAVersion = HAVersion.V5_1_1) -> None:
        super().__init__()
        self._version = version

    def _one(self, pos: int) -> tuple[SlaveMessage | None, int]:
        buf, at = self._buf, self._consumed + pos
        (state,) = STATE.unpack_from(buf, pos)
        avail = len(buf) - pos
        if state == HAConnectionState.TRANSFER:
            if avail < TRANSFER_REPORT.size:
                return None, 0
            _, offset = TRANSFER_REPORT.unpack_from(buf, pos)
            _check_offset(offset, "slaveMaxOffset", at + 4)
            return TransferReport(slave_max_offset=offset), TRANSFER_REPORT.size
        if state != HAConnectionState.HANDSHAKE:
            raise HACodecError(f"unexpected slave state {state}", field="state", offset=at)
        if self._version is HAVersion.V5_1_1:
            if avail < HANDSHAKE_V511.size:
                return None, 0
            _, sync_last, learner, broker_id = HANDSHAKE_V511.unpack_from(buf, pos)
            msg = Handshake(is_sync_from_last_file=sync_last == 1, is_async_learner=learner == 1,
                            slave_broker_id=broker_id)  # fmt: skip
            return msg, HANDSHAKE_V511.size
        if avail < HANDSHAKE_V500_HEAD.size:
            return None, 0
        _, sync_last, learner, length = HANDSHAKE_V500_HEAD.unpack_from(buf, pos)
        if not 0 <= length <= MAX_ADDRESS_LENGTH:
            raise HACodecError(f"address length {length}", field="addressLength", offset=at + 8)
        total = HANDSHAKE_V500_HEAD.size + length
        if avail < total:
            return None, 0
        try:
            address = bytes(buf[pos + HANDSHAKE_V500_HEAD.size : pos + total]).decode()
        except UnicodeDecodeError as e:
            raise HACodecError("address is not UTF-8", field="address", offset=at + 12) from e
        msg = Handshake(is_sync_from_last_file=sync_last == 1, is_async_learner=learner == 1,
                        slave_address=address)  # fmt: skip
        return msg, total


# -- AutoSwitch: master -> slave ----------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class HandshakeResponse:
    """The master's HANDSHAKE answer: its max offset and epoch history (no end offsets)."""

    master_max_offset: int
    last_epoch: int
    entries: tuple[EpochEntry, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class TransferFrame:
    """A master TRANSFER frame; empty ``body`` is a heartbeat."""

    offset: int
    epoch: int
    epoch_start_offset: int
    confirm_offset: int
    body: bytes = b""


MasterMessage = HandshakeResponse | TransferFrame


def encode_handshake_response(
    msg: HandshakeResponse, version: HAVersion = HAVersion.V5_1_1
) -> bytes:
    """``AutoSwitchHAConnection.buildHandshakeBuffer``: header then epoch entries."""
    body = b"".join(EPOCH_ENTRY.pack(e.epoch, e.start_offset) for e in msg.entries)
    state = HAConnectionState.HANDSHAKE
    if version is HAVersion.V5_0_0:
        return (
            TRANSFER_HEADER.pack(state, len(body), msg.master_max_offset, msg.last_epoch, 0, 0)
            + body
        )
    return (
        HANDSHAKE_RESPONSE_HEADER.pack(state, len(body), msg.master_max_offset, msg.last_epoch)
        + body
    )


def encode_transfer_frame(frame: TransferFrame) -> bytes:
    """``AutoSwitchHAConnection.transferData`` header plus the body."""
    header = TRANSFER_HEADER.pack(
        HAConnectionState.TRANSFER, len(frame.body), frame.offset, frame.epoch,
        frame.epoch_start_offset, frame.confirm_offset,
    )  # fmt: skip
    return header + frame.body


class MasterMessageReader(_StateMessageReader[MasterMessage]):
    """Slave side: splits the master's stream into handshake responses and transfer frames.
    ``feed`` raises HACodecError on an unknown state, a bad body size, or negative offsets."""

    def __init__(self, version: HAVersion = HAVersion.V5_1_1, max_body: int = MAX_HA_BODY) -> None:
        super().__init__()
        self._version = version
        self._max_body = max_body

    def _one(self, pos: int) -> tuple[MasterMessage | None, int]:
        buf, at = self._buf, self._consumed + pos
        (state,) = STATE.unpack_from(buf, pos)
        if state == HAConnectionState.TRANSFER:
            return self._transfer(pos, at)
        if state != HAConnectionState.HANDSHAKE:
            raise HACodecError(f"unexpected master state {state}", field="state", offset=at)
        head = TRANSFER_HEADER if self._version is HAVersion.V5_0_0 else HANDSHAKE_RESPONSE_HEADER
        if len(buf) - pos < head.size:
            return None, 0
        _, size, max_offset, last_epoch = HANDSHAKE_RESPONSE_HEADER.unpack_from(buf, pos)
        _check_body(size, self._max_body, at + 4)
        if size % EPOCH_ENTRY.size:
            raise HACodecError(
                f"bodySize {size} is not 12 x entries", field="bodySize", offset=at + 4
            )
        _check_offset(max_offset, "masterMaxOffset", at + 8)
        total = head.size + size
        if len(buf) - pos < total:
            return None, 0
        entries = []
        for at_entry in range(pos + head.size, pos + total, EPOCH_ENTRY.size):
            epoch, start = EPOCH_ENTRY.unpack_from(buf, at_entry)
            _check_offset(start, "startOffset", self._consumed + at_entry + 4)
            entries.append(EpochEntry(epoch=epoch, start_offset=start))
        return HandshakeResponse(master_max_offset=max_offset, last_epoch=last_epoch,
                                 entries=tuple(entries)), total  # fmt: skip

    def _transfer(self, pos: int, at: int) -> tuple[MasterMessage | None, int]:
        buf = self._buf
        if len(buf) - pos < TRANSFER_HEADER.size:
            return None, 0
        _, size, offset, epoch, epoch_start, confirm = TRANSFER_HEADER.unpack_from(buf, pos)
        _check_body(size, self._max_body, at + 4)
        _check_offset(offset, "offset", at + 8)
        _check_offset(epoch_start, "epochStartOffset", at + 20)
        total = TRANSFER_HEADER.size + size
        if len(buf) - pos < total:
            return None, 0
        body = bytes(buf[pos + TRANSFER_HEADER.size : pos + total])
        frame = TransferFrame(offset=offset, epoch=epoch, epoch_start_offset=epoch_start,
                              confirm_offset=confirm, body=body)  # fmt: skip
        return frame, total
