"""The leader's APPEND pushes written straight to JSON text, each entry encoded once per term of
office (dledger-commitlog.md section 2.2; issue 22's send-rate aim).

Owns: :func:`entry_fragment` (one ``DLedgerEntry`` as fastjson writes it), :func:`encode_append`
(a whole APPEND ``PushEntryRequest``, single or batch, from such fragments) and
:class:`PushFragments`, the leader's bounded cache of the fragments of its newest entries, filled
when an entry is appended and read by every follower's dispatcher. The bytes are exactly what
:func:`~rocketpy.dledger.commitlog_member.protocol.encode_body` writes for the same request
(fastjson's sorted keys, nulls left out, getter extras); ``tests/unit/dledger/commitlog_member``
checks that. Mirrors no upstream class: Java builds the request object and fastjson encodes
it per push; here an entry pushed to two followers is base64-encoded and formatted once.
Must not: decide what to push (:mod:`.pusher`) or decode anything (:mod:`.protocol`).
"""

from __future__ import annotations

import binascii
from collections.abc import Sequence
from typing import Final

from rocketpy.common.fastjson import quote
from rocketpy.store.dledger_log.entry import BODY_OFFSET, DLedgerEntry
from rocketpy.store.dledger_log.store import DLedgerLogStore

#: Fragments kept by :class:`PushFragments`: well beyond what a pipelined follower that keeps
#: up has in flight (``maxPendingSize`` pushes of a few entries); a follower further behind
#: reads its entries from the log as before.
MAX_CACHED_FRAGMENTS: Final = 16384


def entry_fragment(entry: DLedgerEntry) -> str:
    """``entry`` as fastjson writes a ``DLedgerEntry`` (getters sorted, body in base64)."""
    return _fragment(
        _b64(entry.body), entry.index, entry.term, entry.pos, entry.size, entry.magic,
        entry.channel, entry.chain_crc, entry.body_crc,
    )  # fmt: skip


def _b64(data: bytes | bytearray) -> str:
    """Standard base64 with padding, what ``base64.b64encode`` writes, in one step fewer."""
    return binascii.b2a_base64(data, newline=False).decode("ascii")


def _fragment(  # noqa: PLR0917 - the entry's nine fields, positional for speed
    b64: str, index: int, term: int, pos: int, size: int,
    magic: int = 1, channel: int = 0, chain_crc: int = 0, body_crc: int = 0,
) -> str:  # fmt: skip
    return (
        f'{{"body":"{b64}","bodyCrc":{body_crc},"chainCrc":{chain_crc},"channel":{channel},'
        f'"index":{index},"magic":{magic},"pos":{pos},"size":{size},"term":{term}}}'
    )


def _own_fragment(b64: str, index: int, term: int, pos: int, size: int) -> str:
    """:func:`_fragment` of an entry this leader appended (magic 1, channel and CRCs 0): the
    constant fields are part of the template."""
    return (
        f'{{"body":"{b64}","bodyCrc":0,"chainCrc":0,"channel":0,"index":{index},"magic":1,'
        f'"pos":{pos},"size":{size},"term":{term}}}'
    )


def _field(name: str, value: str | None) -> str:
    return "" if value is None else f'"{name}":{quote(value)},'


def encode_append(
    *,
    group: str | None,
    local_id: str | None,
    remote_id: str | None,
    leader_id: str | None,
    term: int,
    commit_index: int,
    fragments: Sequence[str],
    first_index: int,
    last_index: int,
    total_size: int,
    batch: bool,
) -> bytes:
    """An APPEND ``PushEntryRequest`` body: ``fragments`` (from :func:`entry_fragment`) as
    ``batchEntry`` when ``batch``, else the one fragment as ``entry`` (``batchEntry`` empty);
    ``first_index``/``last_index`` are the first and last entry's index."""
    if batch:
        head = f'{{"batch":true,"batchEntry":[{",".join(fragments)}],"code":200,'
        single = ""
    else:
        head = '{"batch":false,"batchEntry":[],"code":200,'
        single = f'"entry":{fragments[0]},'
    text = (
        f'{head}"commitIndex":{commit_index},"count":{len(fragments)},{single}'
        f'"firstEntryIndex":{first_index},{_field("group", group)}"lastEntryIndex":{last_index},'
        f"{_field('leaderId', leader_id)}{_field('localId', local_id)}"
        f'{_field("remoteId", remote_id)}"term":{term},"totalSize":{total_size},"type":"APPEND"}}'
    )
    return text.encode()


class PushFragments:
    """The fragments of the entries this leader appended in its current term of office, by
    index; entries it did not append this term (or that fell out of the cache) are read from
    the log and encoded on demand. Within one term of office nothing below the leader's end
    changes, so a term change is the only invalidation needed."""

    def __init__(self, store: DLedgerLogStore, capacity: int = MAX_CACHED_FRAGMENTS) -> None:
        self._store = store
        self._capacity = capacity
        self._term = -1
        #: index -> (pos, size, fragment). A leader appends contiguous indexes within its
        #: term, so the entry ``capacity`` below each new one is the one to drop (a plain
        #: dict, and no search for its oldest key).
        self._by_index: dict[int, tuple[int, int, str]] = {}

    def appended(  # noqa: PLR0917 - positional: once per entry
        self, office_term: int, index: int, term: int, pos: int, size: int,
        body: bytes | bytearray | None = None,
    ) -> None:  # fmt: skip
        """Encode the entry just written at ``index`` (``pos``, ``size``) in ``office_term``:
        from ``body`` when the caller has the body exactly as written, else read back."""
        if office_term != self._term:
            self._term, self._by_index = office_term, {}
        raw = (
            body
            if body is not None
            else self._store.data.read(pos + BODY_OFFSET, size - BODY_OFFSET)
        )
        if raw is None:
            return
        cache = self._by_index
        cache[index] = (pos, size, _own_fragment(_b64(raw), index, term, pos, size))
        cache.pop(index - self._capacity, None)

    def table(self, office_term: int) -> dict[int, tuple[int, int, str]]:
        """The cached (pos, size, fragment) by index of ``office_term`` (valid until the next
        :meth:`appended` or :meth:`get`); a miss is for :meth:`get`."""
        if office_term != self._term:
            self._term, self._by_index = office_term, {}
        return self._by_index

    def get(self, office_term: int, index: int) -> tuple[int, int, str]:
        """(pos, size, fragment) of entry ``index``.

        Raises:
            DLedgerStoreError: the log has no such entry.
        """
        if office_term == self._term:
            hit = self._by_index.get(index)
            if hit is not None:
                return hit
        else:
            self._term, self._by_index = office_term, {}
        entry = self._store.get(index)
        return entry.pos, entry.size, entry_fragment(entry)
