"""Typed custom headers and their one conversion to and from ``extFields``.

Owns: :func:`wire` (declares a header field's upstream name and whether it is mandatory),
:func:`to_ext` (and :func:`ext_encoder`, its form for per-message requests) and :func:`from_ext`.
Mirrors ``RemotingCommand.makeCustomHeaderToNet`` and ``decodeCommandCustomHeader`` (spec
remoting.md section 4): values travel as strings; integers in decimal; booleans ``true``/``false``
(decoding as Java's ``Boolean.parseBoolean``); ``None`` fields are omitted. Project rule: a
missing mandatory field raises :class:`MissingHeaderField` (answered as SYSTEM_ERROR naming the
field); a value that does not parse raises :class:`CodecError` naming it.

A header is a frozen, slotted, keyword-only dataclass whose fields are declared with :func:`wire`::

    @dataclass(frozen=True, slots=True, kw_only=True)
    class GetRouteInfoRequestHeader:
        topic: str = wire("topic")                                  # mandatory
        accept_standard_json_only: bool | None = wire("acceptStandardJsonOnly", default=None)
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, Final, TypeVar, Union, cast

from rocketpy.common.errors import CodecError
from rocketpy.common.types import JAVA_INT_MAX, JAVA_INT_MIN, JAVA_LONG_MAX, JAVA_LONG_MIN

_MISSING: Final = dataclasses.MISSING
T = TypeVar("T")

#: Header fields upstream declares ``Integer``/``int`` (every other integer field is a ``Long``):
#: ``Integer.parseInt`` refuses what does not fit 32 bits, so we do too. Unchecked, a
#: ``readQueueNums`` of 2**40 created a topic with that many queues and a ``queueId`` of 2**33
#: was answered as an empty queue.
JAVA_INT_FIELDS: Final = frozenset(
    {
        "addTopicCount",
        "bodyCrc32",
        "commitOrRollback",
        "defaultTopicQueueNums",
        "delayLevel",
        "electionPriority",
        "epoch",
        "flag",
        "forbiddenType",
        "groupSysFlag",
        "masterEpoch",
        "maxMsgBytes",
        "maxMsgNums",
        "maxNum",
        "maxReconsumeTimes",
        "newSyncStateSetEpoch",
        "perm",
        "queueId",
        "readQueueNums",
        "reconsumeTimes",
        "syncStateSetEpoch",
        "sysFlag",
        "topicSysFlag",
        "totalTopicNum",
        "wipeTopicCount",
        "writeQueueNums",
    }
)


class MissingHeaderField(CodecError):
    """A mandatory custom header field is absent (upstream: "the custom field <x> is null")."""

    def __init__(self, name: str) -> None:
        super().__init__(f"the custom field <{name}> is null", field=name)


def wire(name: str, *, default: Any = _MISSING) -> Any:
    """Declare a header field: ``name`` is the upstream Java field name (the extFields key).

    Args:
        name: extFields key.
        default: the value when absent; no default makes the field mandatory.
    """
    return dataclasses.field(default=default, metadata={"wire": name})


def _parse_bool(text: str) -> bool:
    return text.strip().lower() == "true"


def _parse_int(text: str) -> int:
    value = int(text.strip())
    if not JAVA_LONG_MIN <= value <= JAVA_LONG_MAX:
        raise ValueError(f"{value} is beyond Java's long")
    return value


def _parse_float(text: str) -> float:
    return float(text.strip())


def _identity(text: str) -> str:
    return text


_PARSERS: Final[dict[type, Callable[[str], Any]]] = {
    bool: _parse_bool,
    int: _parse_int,
    float: _parse_float,
    str: _identity,
}


def _render(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _base_type(hint: Any) -> type:
    origin = typing.get_origin(hint)
    if origin is Union or origin is types.UnionType:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1:
            return _base_type(args[0])
    if isinstance(hint, type) and hint in _PARSERS:
        return hint
    raise TypeError(f"unsupported header field type {hint!r}")


_Spec = tuple[str, str, Callable[[str], Any], bool]  # attr, wire name, parser, mandatory
_SPECS: dict[type, tuple[_Spec, ...]] = {}


def _specs(cls: type) -> tuple[_Spec, ...]:
    cached = _SPECS.get(cls)
    if cached is not None:
        return cached
    hints = typing.get_type_hints(cls)
    out: list[_Spec] = []
    for f in dataclasses.fields(cls):
        name = f.metadata.get("wire")
        if name is None:
            continue
        mandatory = f.default is _MISSING and f.default_factory is _MISSING
        out.append((f.name, name, _PARSERS[_base_type(hints[f.name])], mandatory))
    specs = tuple(out)
    _SPECS[cls] = specs
    return specs


def to_ext(header: object) -> dict[str, str]:
    """The ``extFields`` of a typed header: every non-None field as a string."""
    ext: dict[str, str] = {}
    for attr, name, _parser, _mandatory in _specs(type(header)):
        value = getattr(header, attr)
        if value is not None:
            ext[name] = _render(value)
    return ext


#: How a compiled encoder renders a value of each field type inline (what :func:`_render` does).
_INLINE_RENDER: Final[dict[Callable[[str], Any], str]] = {
    _parse_bool: "'true' if {v} else 'false'",
    _parse_int: "str({v})",
    _parse_float: "_render({v})",
    _identity: "{v}",
}


def ext_encoder(template: object, fields: tuple[str, ...]) -> Callable[..., dict[str, str]]:
    """An ``extFields`` encoder for a request made per message (SEND_MESSAGE_V2), where building
    a frozen header and running :func:`to_ext` would cost more than the send: ``to_ext(template)``
    is rendered once, and a call renders only ``fields``, given positionally in that order, over
    a copy of it. ``encode(*values) == to_ext(dataclasses.replace(template, **dict(zip(fields,
    values))))`` for values of the fields' declared types (None is not one: what is absent stays
    in the template).

    Raises:
        TypeError: a name in ``fields`` is not a wire field of the template's class.
    """
    specs = {attr: (name, parser) for attr, name, parser, _ in _specs(type(template))}
    unknown = [f for f in fields if f not in specs]
    if unknown:
        raise TypeError(f"{type(template).__name__} has no wire fields {unknown}")
    lines = [f"def encode({', '.join(fields)}):", "    _ext = _base.copy()"]
    for attr in fields:
        name, parser = specs[attr]
        lines.append(f"    _ext[{name!r}] = {_INLINE_RENDER[parser].format(v=attr)}")
    lines.append("    return _ext")
    namespace: dict[str, Any] = {"_base": to_ext(template), "_render": _render}
    exec("\n".join(lines), namespace)  # noqa: S102 - generated from the dataclass fields only
    encoder: Callable[..., dict[str, str]] = namespace["encode"]
    return encoder


def from_ext(cls: type[T], ext: Mapping[str, str] | None) -> T:
    """Decode ``ext`` into a typed header of class ``cls``.

    Raises:
        MissingHeaderField: a mandatory field is absent.
        CodecError: a present value does not parse as the field's type.
    """
    decoder = _DECODERS.get((cls, None))
    if decoder is None:
        decoder = _compile_decoder(cls, None)
    return cast(T, decoder(ext or _EMPTY))


def ext_decoder(
    cls: type[T], keys: tuple[str, ...] | None = None
) -> Callable[[Mapping[str, str]], T]:
    """The decoder :func:`from_ext` (``keys`` None) or :func:`from_ext_keys` uses for ``cls``,
    for a caller that decodes per message and keeps it (no lookup per call; give it
    :data:`EMPTY_EXT` for absent ``extFields``)."""
    decoder = _DECODERS.get((cls, keys))
    if decoder is None:
        decoder = _compile_decoder(cls, keys)
    return cast(Callable[[Mapping[str, str]], T], decoder)


def from_ext_keys(cls: type[T], keys: tuple[str, ...], ext: Mapping[str, str] | None) -> T:
    """Like :func:`from_ext`, but field ``i`` of ``cls`` is read from ``ext[keys[i]]`` -- one
    class decoded from another wire shape (SEND_MESSAGE_V2's ``a``..``n`` into V1's fields)."""
    decoder = _DECODERS.get((cls, keys))
    if decoder is None:
        decoder = _compile_decoder(cls, keys)
    return cast(T, decoder(ext or _EMPTY))


_EMPTY: Final[Mapping[str, str]] = types.MappingProxyType({})
#: No ``extFields``, for an :func:`ext_decoder`.
EMPTY_EXT: Final = _EMPTY
_DECODERS: dict[tuple[type, tuple[str, ...] | None], Callable[[Mapping[str, str]], Any]] = {}


def _settable(cls: type, attrs: list[str]) -> bool:
    """Whether an instance of dataclass ``cls`` is fully built by storing ``attrs``: not
    frozen, no ``__post_init__``, and its init fields are exactly ``attrs``."""
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or params.frozen or hasattr(cls, "__post_init__"):
        return False
    return [f.name for f in dataclasses.fields(cls) if f.init] == attrs


#: The decimal text of the small numbers most header fields hold, and their values (what
#: ``int`` gives for them, all within Java's int).
_SMALL_INTS: Final = {str(n): n for n in range(-1, 1024)}
#: The boolean texts Java clients write, and their values (what ``_parse_bool`` gives).
_BOOLS: Final = {"true": True, "false": False}


def _compile_decoder(cls: type, keys: tuple[str, ...] | None) -> Callable[[Mapping[str, str]], Any]:
    """Generate a straight-line decoder for ``cls`` (as dataclasses generates ``__init__``): the
    send path decodes a header per message, and the generic loop cost more than the send.

    Integers convert inline with ``int(raw)`` (which ignores surrounding whitespace exactly as
    ``_parse_int``'s ``strip`` does) and must fit Java's long, as ``Long.parseLong`` demands:
    an id of 2**64 once reached the controller's msgpack event encoder and failed there with a
    traceback. Fields in :data:`JAVA_INT_FIELDS` must fit Java's int. Booleans convert inline as
    ``_parse_bool``; absent optional fields take the dataclass default. The instance is built
    by storing the fields into a new one when that is all ``__init__`` would do, else with one
    keyword call.
    """
    specs = _specs(cls)
    if keys is not None and len(keys) != len(specs):
        raise TypeError(f"{cls.__name__} has {len(specs)} wire fields, got {len(keys)} keys")
    defaults = {f.name: f for f in dataclasses.fields(cls)}
    namespace: dict[str, Any] = {
        "cls": cls,
        "Missing": MissingHeaderField,
        "CodecError": CodecError,
        "LO": JAVA_LONG_MIN,
        "HI": JAVA_LONG_MAX,
        "ILO": JAVA_INT_MIN,
        "IHI": JAVA_INT_MAX,
        "SMALL": _SMALL_INTS,
        "BOOLS": _BOOLS,
    }
    lines = ["def decode(fields):", "    get = fields.get"]
    args: list[str] = []
    for i, (attr, name, parser, mandatory) in enumerate(specs):
        key = keys[i] if keys is not None else name
        if mandatory:
            # A subscript, not a get() call: a present field (the usual case) costs no call.
            lines += [
                "    try:",
                f"        v{i} = fields[{key!r}]",
                "    except KeyError:",
                f"        raise Missing({key!r}) from None",
                f"    if v{i} is None: raise Missing({key!r})",
            ]
        else:
            lines.append(f"    v{i} = get({key!r})")
            field = defaults[attr]
            if field.default is _MISSING:  # a default_factory
                namespace[f"f{i}"] = field.default_factory
                lines.append(f"    if v{i} is None: v{i} = f{i}()")
            else:
                namespace[f"d{i}"] = field.default
                lines.append(f"    if v{i} is None: v{i} = d{i}")
            lines.append("    else:")
        indent = "    " if mandatory else "        "
        if parser is _parse_bool:
            # The usual texts by lookup; any other spelling as _parse_bool reads it.
            lines += [
                f"{indent}b = BOOLS.get(v{i})",
                f"{indent}v{i} = v{i}.strip().lower() == 'true' if b is None else b",
            ]
        elif parser is not _identity:
            convert = f"int(v{i})" if parser is _parse_int else f"p{i}(v{i})"
            lo, hi = ("ILO", "IHI") if name in JAVA_INT_FIELDS else ("LO", "HI")
            namespace[f"p{i}"] = parser
            if parser is _parse_int:
                # Small numbers (queue ids, flags, counts) by lookup; the rest parsed.
                lines += [
                    f"{indent}n = SMALL.get(v{i})",
                    f"{indent}if n is not None:",
                    f"{indent}    v{i} = n",
                    f"{indent}else:",
                ]
                indent += "    "
            lines += [
                f"{indent}try:",
                f"{indent}    v{i} = {convert}",
                *(
                    [f"{indent}    if not {lo} <= v{i} <= {hi}: raise ValueError(v{i})"]
                    if parser is _parse_int
                    else []
                ),
                f"{indent}except ValueError as e:",
                f"{indent}    raise CodecError(",
                f"{indent}        f'bad value {{v{i}!r}} for header field', field={key!r}",
                f"{indent}    ) from e",
            ]
        elif not mandatory:
            lines.append(f"{indent}pass")
        args.append(f"{attr}=v{i}")
    if _settable(cls, [attr for attr, _, _, _ in specs]):
        # Every field is a wire field and __init__ only stores them: stored straight into a
        # new instance, without the keyword call (a send decodes 14 fields per message).
        namespace["new"] = object.__new__
        lines.append("    o = new(cls)")
        lines += [f"    o.{arg.replace('=', ' = ')}" for arg in args]
        lines.append("    return o")
    else:
        lines.append(f"    return cls({', '.join(args)})")
    exec("\n".join(lines), namespace)  # noqa: S102 - generated from the dataclass fields only
    decoder: Callable[[Mapping[str, str]], Any] = namespace["decode"]
    _DECODERS[(cls, keys)] = decoder
    return decoder
