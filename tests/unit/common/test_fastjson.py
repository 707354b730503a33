"""fastjson-compatible JSON: compact and pretty output per serializer, lenient reading."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketpy.common.errors import CodecError
from rocketpy.common.fastjson import (
    Bean,
    BeanKey,
    JavaSet,
    dumps,
    loads,
    quote,
    quote_integer_keys,
)


def test_fastjson_bean_sorted_nulls_omitted() -> None:
    """A bean writes its fields sorted by name and leaves out None fields (SortField)."""
    bean = Bean(writeQueueNums=4, topicName="T", order=False, attributes={}, missing=None)
    assert dumps(bean) == '{"attributes":{},"order":false,"topicName":"T","writeQueueNums":4}'


def test_fastjson_map_keeps_order_and_unquotes_int_keys() -> None:
    """A map keeps insertion order; integer keys are written without quotes."""
    assert dumps({"b": 1, "a": 2}) == '{"b":1,"a":2}'
    assert dumps({0: "10.0.0.1:10911", 1: "10.0.0.2:10911"}) == (
        '{0:"10.0.0.1:10911",1:"10.0.0.2:10911"}'
    )


def test_fastjson_pretty_bean_map_list() -> None:
    """1. Pretty-print a bean holding a string map, an int map and a list.
    Expected: TAB indentation; newline before string-keyed entries only; int-keyed map gets the
    newline before its closing brace only (MapSerializer); list items each on a line."""
    value = Bean(
        offsetTable={"T@g": {0: 250, 1: 251}},
        items=[1, 2],
        empty={},
        noItems=[],
    )
    expected = (
        "{\n"
        '\t"empty":{},\n'
        '\t"items":[\n'
        "\t\t1,\n"
        "\t\t2\n"
        "\t],\n"
        '\t"noItems":[],\n'
        '\t"offsetTable":{\n'
        '\t\t"T@g":{0:250,1:251\n'
        "\t\t}\n"
        "\t}\n"
        "}"
    )
    assert dumps(value, pretty=True) == expected


def test_fastjson_pretty_set_stays_compact() -> None:
    """Sets go through CollectionCodec, which ignores PrettyFormat."""
    assert dumps(Bean(s={"b", "a"}), pretty=True) == '{\n\t"s":["a","b"]\n}'


def test_fastjson_pretty_set_of_beans() -> None:
    """A JavaSet adds no breaks itself but its bean items stay pretty, at the set's indent
    (CollectionCodec does not increment the indent)."""
    value = Bean(s=JavaSet([Bean(a=1), Bean(b=2)]))
    assert dumps(value, pretty=True) == '{\n\t"s":[{\n\t\t"a":1\n\t},{\n\t\t"b":2\n\t}]\n}'
    assert dumps(value) == '{"s":[{"a":1},{"b":2}]}'


def test_fastjson_quote_escapes() -> None:
    """Short escapes for quote, backslash and \\b\\t\\n\\f\\r; \\uXXXX upper-case for other
    controls and U+007F..U+009F; non-ASCII and '/' unchanged."""
    assert quote('a"b\\c\n\t') == '"a\\"b\\\\c\\n\\t"'
    assert quote("\x01\x0b\x7f\x9f") == '"\\u0001\\u000B\\u007F\\u009F"'
    assert quote("été/x") == '"été/x"'


_ESCAPED = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\t": "\\t",
    "\n": "\\n",
    "\f": "\\f",
    "\r": "\\r",
}


def test_fastjson_quote_every_code_point_below_u0800() -> None:
    """Each of U+0000..U+07FF alone and between letters: escaped exactly when it is a short
    escape, a C0 control, DEL or a C1 control (the no-escape fast path must not skip one)."""
    for code in range(0x800):
        ch = chr(code)
        if ch in _ESCAPED:
            want = _ESCAPED[ch]
        elif code < 0x20 or 0x7F <= code < 0xA0:
            want = f"\\u{code:04X}"
        else:
            want = ch
        assert quote(ch) == f'"{want}"', hex(code)
        assert quote(f"ab{ch}cd") == f'"ab{want}cd"', hex(code)


def test_fastjson_dumps_rejects_unknown_types() -> None:
    """A float (not part of any RocketMQ body) is refused rather than guessed."""
    with pytest.raises(TypeError, match="float"):
        dumps(Bean(x=1.5))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"brokerAddrs":{0:"a",1:"b"}}', {"brokerAddrs": {"0": "a", "1": "b"}}),
        ('{"t":{0:250,1:251\n\t\t}}', {"t": {"0": 250, "1": 251}}),
        ("{ -1 : 2 }", {"-1": 2}),
        ('{"k":[1,2,{3:4}]}', {"k": [1, 2, {"3": 4}]}),
        ('{"s":"{0:1}"}', {"s": "{0:1}"}),  # inside a string: untouched
        ('{"s":"a\\",1:"}', {"s": 'a",1:'}),  # escaped quote does not end the string
        ('{"0":1}', {"0": 1}),
    ],
)
def test_fastjson_loads_lenient(text: str, expected: Any) -> None:
    """Unquoted integer keys parse as if quoted; strings and arrays are left alone."""
    assert loads(text) == expected


def test_fastjson_loads_errors() -> None:
    """Broken JSON and broken UTF-8 raise CodecError with an offset."""
    with pytest.raises(CodecError, match="offset="):
        loads('{"a":')
    with pytest.raises(CodecError, match="UTF-8"):
        loads(b'{"a":"\xff"}')


def test_fastjson_quote_integer_keys_only_keys() -> None:
    """Numbers that are values (after ':' or in arrays) keep their form."""
    assert quote_integer_keys('{1:2,"a":[3,4]}') == '{"1":2,"a":[3,4]}'


_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1), st.text(max_size=8)
)
_json = st.recursive(
    _scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.text(max_size=6), children, max_size=4),
        st.dictionaries(st.integers(-1000, 1000), children, max_size=4),
    ),
    max_leaves=20,
)


def _normalize(value: Any) -> Any:
    """What a reader sees: int keys become strings, None map values disappear."""
    if isinstance(value, dict):
        return {str(k): _normalize(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_normalize(v) for v in value]
    return value


@given(_json, st.booleans())
def test_fastjson_round_trip(value: Any, pretty: bool) -> None:
    """loads(dumps(v)) == v (modulo int keys as strings and skipped null map values); the text
    is also standard JSON once integer keys are quoted."""
    text = dumps(value, pretty=pretty)
    assert loads(text) == _normalize(value)
    assert json.loads(quote_integer_keys(text)) == _normalize(value)


def test_fastjson_map_with_bean_keys() -> None:
    """A Map<MessageQueue, Long> (ResetOffsetBody, ConsumeStats) writes each key as an object,
    as fastjson's MapSerializer does for non-String keys."""
    key = BeanKey(topic="T", queueId=0, brokerName="b")
    assert dumps(Bean(offsetTable={key: 7})) == (
        '{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:7}}'
    )
    assert {key: 1}[BeanKey(brokerName="b", queueId=0, topic="T")] == 1


def _quote_char_by_char(text: str) -> str:
    """fastjson's escaping written out per character: what :func:`quote`'s fast path skips."""
    short = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f",
             "\r": "\\r"}  # fmt: skip
    out = []
    for ch in text:
        if ch in short:
            out.append(short[ch])
        elif ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0:
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def test_fastjson_quote_every_char_below_0x300_as_fastjson() -> None:
    """Strings with nothing to escape take a fast path; every character decides it rightly."""
    for code in range(0x300):
        text = f"a{chr(code)}b"
        assert quote(text) == _quote_char_by_char(text), hex(code)


@given(st.text(max_size=30))
def test_fastjson_quote_matches_the_per_char_rule(text: str) -> None:
    assert quote(text) == _quote_char_by_char(text)
