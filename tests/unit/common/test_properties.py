"""Java .properties parsing and rendering as upstream config files use it."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rocketpy.common.properties import parse_properties, render_properties


def test_properties_parse_upstream_broker_conf() -> None:
    """1. Parse a conf in upstream's style (comments, spaces around '=', continuation). 2. Check
    values."""
    text = (
        "# Licensed to the Apache Software Foundation\n"
        "brokerClusterName = DefaultCluster\n"
        "brokerName=broker-a\n"
        "! bang comment\n"
        "brokerId: 0\n"
        "namesrvAddr=127.0.0.1:9876;\\\n"
        "    127.0.0.1:9877\n"
        "deleteWhen 04\n"
        "storePathRootDir=C:\\\\store\n"
    )
    assert parse_properties(text) == {
        "brokerClusterName": "DefaultCluster",
        "brokerName": "broker-a",
        "brokerId": "0",
        "namesrvAddr": "127.0.0.1:9876;127.0.0.1:9877",
        "deleteWhen": "04",
        "storePathRootDir": "C:\\store",
    }


def test_properties_unicode_escape_and_empty_value() -> None:
    """A \\uXXXX escape decodes; a key with no value maps to the empty string."""
    assert parse_properties("a=\\u00e9t\\u00e9\nb=\n") == {"a": "été", "b": ""}


@given(
    st.dictionaries(
        st.text(st.characters(blacklist_categories=("Cs", "Cc", "Zs")), min_size=1).filter(
            lambda k: k.lstrip()[:1] not in ("#", "!") and k.strip() == k
        ),
        st.text(st.characters(blacklist_categories=("Cs",))).map(str.strip),
    )
)
def test_properties_round_trip(values: dict[str, str]) -> None:
    """render then parse gives back the same mapping."""
    assert parse_properties(render_properties(values)) == values
