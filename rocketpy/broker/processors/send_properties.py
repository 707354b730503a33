"""The properties a send stores: the sender's text plus the broker's additions.

Owns: the fast path that appends the broker's properties (``MSG_REGION``, ``TRACE_ON``,
``CLUSTER``) to the sender's text without decoding it, the decoding path for texts holding a
property the broker reads or replaces, ``UNIQ_KEY`` creation, and the 32 KiB properties limit.
Mirrors the property handling of upstream's ``SendMessageProcessor`` / ``MessageExtBatch``
(message-format.md section 5). Must not: route messages (``send.py`` does).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, cast

from rocketpy.broker.runtime import BrokerRuntime
from rocketpy.broker.timer_hook import TIMER_NEEDLE
from rocketpy.common.message.const import MessageConst
from rocketpy.common.message.properties import (
    MAX_PROPERTIES_BYTES,
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
    decode_properties,
    encode_properties,
    property_value,
    property_values,
)

#: A sender's property text holding one of these goes down the decoding path (the broker reads
#: or replaces them). A substring test: a longer name ending in one only costs the fast path.
_DECODE_NEEDLES: Final = (
    *(
        f"{name}{NAME_VALUE_SEPARATOR}"
        for name in (
            MessageConst.MSG_REGION,
            MessageConst.TRACE_ON,
            MessageConst.CLUSTER,
            MessageConst.POP_CK,
            MessageConst.DELAY,
            MessageConst.TRAN_MSG,
        )
    ),
    TIMER_NEEDLE,  # the timer hook's properties (timer_hook.py)
)


class SendProperties:
    """What a send stores as its properties text."""

    def __init__(self, rt: BrokerRuntime) -> None:
        """Args: ``rt`` the shared broker state."""
        self._rt = rt
        # The properties text the broker appends on the fast path, for the config it was built
        # from (UPDATE_BROKER_CONFIG swaps the config object).
        self._additions: tuple[object, str] = (None, "")

    def base(self, text: str | None) -> dict[str, str]:
        rt = self._rt
        props = decode_properties(text or "")
        props[MessageConst.MSG_REGION] = rt.config.region_id
        props[MessageConst.TRACE_ON] = "true" if rt.config.trace_on else "false"
        props.pop(MessageConst.POP_CK, None)
        props[MessageConst.CLUSTER] = rt.config.broker_cluster_name
        return props

    def ensure_uniq_key(self, props: dict[str, str]) -> str:
        uniq = props.get(MessageConst.UNIQ_KEY)
        if not uniq:
            uniq = self._rt.uniq_ids.create(self._rt.clock.wall_ms())
            props[MessageConst.UNIQ_KEY] = uniq
        return uniq

    def fast(self, text: str | None) -> tuple[str, str] | None:
        """The record's properties without decoding the sender's: its text plus the broker's
        additions, with its UNIQ_KEY; None when the text holds a property the broker reads or
        replaces (or no UNIQ_KEY), which takes the decoding path.

        Both paths store properties that decode to the same map (message-format.md section 3;
        only the order may differ), as upstream's batch appends its additions to each
        message's text (``MessageExtBatch`` encoding).
        """
        text = text or ""
        if _needs_decoding(text):
            return None
        return _added(text, self._current_additions())

    def batch_items(
        self, entries: list[tuple[int, bytes, str]]
    ) -> tuple[list[tuple[int, bytes, str]], list[str]] | None:
        """A batch's items (flag, body, sender's properties text) as they are stored -- their
        texts from :meth:`fast` or, where that declines, decoded with :meth:`batch` -- and
        their UNIQ_KEYs; None when an item's properties pass the 32 KiB limit."""
        run = self._fast_run([sent for _, _, sent in entries])
        if run is not None:
            texts, uniqs = run
            return [(e[0], e[1], text) for e, text in zip(entries, texts, strict=True)], uniqs
        items: list[tuple[int, bytes, str]] = []
        uniqs = []
        for flag, body, sent in entries:
            fast = self.fast(sent)
            if fast is not None:
                text, uniq = fast
            else:
                props = self.batch(sent)
                if too_large(props):
                    return None
                text, uniq = encode_properties(props), props[MessageConst.UNIQ_KEY]
            items.append((flag, body, text))
            uniqs.append(uniq)
        return items, uniqs

    def _fast_run(self, texts: list[str]) -> tuple[list[str], list[str]] | None:
        """:meth:`fast` for each of a batch's texts, their scan for the decoding path's
        properties made once over all of them: the records' properties and UNIQ_KEYs, or
        None when a text needs more (then each goes through :meth:`fast`)."""
        if _needs_decoding("".join(texts)):  # a name cut across two texts: a false alarm
            return None
        uniqs = property_values(texts, MessageConst.UNIQ_KEY)
        if None in uniqs:
            return None
        return _appended(texts, self._current_additions()), cast("list[str]", uniqs)

    def _current_additions(self) -> str:
        """What the fast path appends, for the current config."""
        cfg = self._rt.config
        built_for, additions = self._additions
        if built_for is not cfg:
            trace = "true" if cfg.trace_on else "false"
            additions = encode_properties(
                {
                    MessageConst.MSG_REGION: cfg.region_id,
                    MessageConst.TRACE_ON: trace,
                    MessageConst.CLUSTER: cfg.broker_cluster_name,
                }
            )
            self._additions = (cfg, additions)
        return additions

    def batch(self, text: str) -> dict[str, str]:
        """A batch item's properties, decoded, with the broker's additions where the message
        has none (CLUSTER always) and a UNIQ_KEY."""
        rt = self._rt
        props = decode_properties(text)
        props.setdefault(MessageConst.MSG_REGION, rt.config.region_id)
        props.setdefault(MessageConst.TRACE_ON, "true" if rt.config.trace_on else "false")
        props[MessageConst.CLUSTER] = rt.config.broker_cluster_name
        self.ensure_uniq_key(props)
        return props


def _needs_decoding(text: str) -> bool:
    """Whether ``text`` may hold a property the broker reads or replaces (the decoding path)."""
    for needle in _DECODE_NEEDLES:  # noqa: SIM110 -- per send: a generator costs more
        if needle in text:
            return True
    return False


def _added(text: str, additions: str) -> tuple[str, str] | None:
    """``text`` with the broker's ``additions`` appended, and its UNIQ_KEY; None without one."""
    uniq = property_value(text, MessageConst.UNIQ_KEY)
    if uniq is None:
        return None
    if text and not text.endswith(PROPERTY_SEPARATOR):
        text += PROPERTY_SEPARATOR
    return text + additions, uniq


def _appended(texts: list[str], additions: str) -> list[str]:
    """:func:`_added`'s texts for a batch's ``texts``, in one comprehension."""
    tail = PROPERTY_SEPARATOR + additions
    return [
        text + additions if not text or text[-1] == PROPERTY_SEPARATOR else text + tail
        for text in texts
    ]


def too_large(props: Mapping[str, str]) -> bool:
    """True when ``props`` encode to more than the 32 KiB limit."""
    # A character is at most 4 UTF-8 bytes: short properties (every usual send) need no encode.
    chars = sum(map(len, props)) + sum(map(len, props.values())) + 2 * len(props)
    if chars * 4 <= MAX_PROPERTIES_BYTES:
        return False
    return len(encode_properties(dict(props)).encode("utf-8")) > MAX_PROPERTIES_BYTES
