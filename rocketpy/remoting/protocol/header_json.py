"""JSON header encoding (serialize type 0), tolerant on input, Java-shaped on output.

Owns: the JSON text of a RemotingCommand header. Mirrors fastjson's output of ``RemotingCommand``
(remoting.md section 2.1: keys alphabetical, compact, null members omitted,
``serializeTypeCurrentRPC``) and accepts every client shape of section 2.2: numeric strings for
numbers, ``language`` as a name or an ordinal (an unknown name decodes to -1, "no language"),
``extFields`` values of any scalar JSON type (numbers in decimal text, booleans lowercase),
surrounding whitespace, unknown keys ignored. Pure.
"""

from __future__ import annotations

from typing import Any, Final

import orjson

from rocketpy.common.codes import LanguageCode
from rocketpy.common.errors import CodecError
from rocketpy.common.types import JAVA_INT_MAX, JAVA_INT_MIN
from rocketpy.remoting.protocol.command import RemotingCommand

#: language value when a header names a language we do not know.
UNKNOWN_LANGUAGE: Final = -1
_NAMES: Final = {c.value: c.name for c in LanguageCode}
_BY_NAME: Final = {c.name: c.value for c in LanguageCode}


def encode_header(cmd: RemotingCommand) -> bytes:
    """The compact JSON header Java would write for ``cmd`` (extFields values always strings)."""
    obj: dict[str, Any] = {"code": cmd.code}
    if cmd.ext_fields is not None:
        obj["extFields"] = cmd.ext_fields
    obj["flag"] = cmd.flag
    obj["language"] = _NAMES.get(cmd.language, "JAVA")
    obj["opaque"] = cmd.opaque
    if cmd.remark is not None:
        obj["remark"] = cmd.remark
    obj["serializeTypeCurrentRPC"] = "JSON"
    obj["version"] = cmd.version
    return orjson.dumps(obj)


def _int(obj: dict[str, Any], key: str, default: int = 0) -> int:
    value = obj.get(key, default)
    if isinstance(value, bool):
        raise CodecError(f"{key} must be a number, got {value!r}", field=key)
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    elif value is None:
        return default
    raise CodecError(f"{key} must be a number, got {value!r}", field=key)


def _language(value: Any) -> int:
    if isinstance(value, str):
        name = value.strip()
        if name in _BY_NAME:
            return _BY_NAME[name]
        try:
            return int(name)
        except ValueError:
            return UNKNOWN_LANGUAGE
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return UNKNOWN_LANGUAGE


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return orjson.dumps(value).decode()


def _ext_fields(value: Any) -> dict[str, str] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise CodecError("extFields must be an object", field="extFields")
    try:
        "".join(value.values())  # per request: the all-str check in C (a join of str only)
    except TypeError:
        return {str(k): _text(v) for k, v in value.items() if v is not None}
    return value  # Java/Go clients: JSON object keys are str already, values all strings


def decode_header(data: bytes | bytearray | memoryview) -> RemotingCommand:
    """Parse a JSON header from any known client.

    Raises:
        CodecError: not JSON, not an object, or a numeric field that is not a number.
    """
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError as e:
        raise CodecError(f"header is not JSON: {e}", field="header") from e
    if not isinstance(obj, dict):
        raise CodecError("header is not a JSON object", field="header")
    if "code" not in obj:
        raise CodecError("header has no code", field="code")
    get = obj.get
    # The common shapes (Java/Go: ints are ints, language a known name) without the generic
    # helpers; anything else goes through them (a header decodes per request).
    code, version, opaque, flag = get("code"), get("version", 0), get("opaque", 0), get("flag", 0)
    if type(code) is not int:
        code = _int(obj, "code")
    if type(version) is not int:
        version = _int(obj, "version")
    if type(opaque) is not int:
        opaque = _int(obj, "opaque")
    if type(flag) is not int:
        flag = _int(obj, "flag")
    if not (
        JAVA_INT_MIN <= code <= JAVA_INT_MAX
        and JAVA_INT_MIN <= opaque <= JAVA_INT_MAX
        and JAVA_INT_MIN <= flag <= JAVA_INT_MAX
        and JAVA_INT_MIN <= version <= JAVA_INT_MAX
    ):
        # Java's RemotingCommand holds them in ints: fastjson refuses the header.
        raise CodecError(f"header integer out of int range: code={code} opaque={opaque} "
                         f"flag={flag} version={version}", field="header")  # fmt: skip
    lang = get("language")
    language = _BY_NAME.get(lang) if type(lang) is str else None
    if language is None:
        language = _language(lang)
    remark = get("remark")
    if remark is not None and type(remark) is not str:
        remark = _text(remark)
    ext = get("extFields")
    return RemotingCommand.decoded(
        code, language, version, opaque, flag, remark, None if ext is None else _ext_fields(ext)
    )
