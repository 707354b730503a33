"""Golden bytes of brokerIdentity / brokerIdentity-temp (controller.md section 9)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from rocketpy.store.broker_identity import (
    BrokerMetadata,
    TempBrokerMetadata,
    decode_broker_metadata,
    decode_temp_broker_metadata,
    encode_broker_metadata,
    encode_temp_broker_metadata,
    make_register_check_code,
)
from tests.helpers.golden import load_hex

HERE = Path(__file__).parent / "broker_identity"


def test_broker_identity_golden() -> None:
    """encode == golden and decode(golden) == value for brokerIdentity."""
    golden = load_hex(HERE / "identity.hex")
    value = BrokerMetadata(cluster_name="DefaultCluster", broker_name="broker-a", broker_id=1)
    assert encode_broker_metadata(value) == golden == b"DefaultCluster#broker-a#1"
    assert decode_broker_metadata(golden) == value


def test_broker_identity_temp_golden() -> None:
    """encode == golden and decode(golden) == value for brokerIdentity-temp."""
    golden = load_hex(HERE / "identity_temp.hex")
    value = TempBrokerMetadata(
        cluster_name="DefaultCluster",
        broker_name="broker-a",
        broker_id=2,
        register_check_code=make_register_check_code("10.0.0.2:10911", 1_700_000_000_000),
    )
    assert encode_temp_broker_metadata(value) == golden
    assert decode_temp_broker_metadata(golden) == value


_field = st.text(
    alphabet=st.characters(exclude_characters="#\r\n", exclude_categories=("Cs",)), min_size=1
)


@given(_field, _field, st.integers(-(2**63) + 1, 2**63 - 1), _field)
def test_broker_identity_round_trip(cluster: str, broker: str, broker_id: int, code: str) -> None:
    """decode(encode(v)) == v for both files."""
    meta = BrokerMetadata(cluster_name=cluster, broker_name=broker, broker_id=broker_id)
    assert decode_broker_metadata(encode_broker_metadata(meta)) == meta
    temp = TempBrokerMetadata(
        cluster_name=cluster, broker_name=broker, broker_id=broker_id, register_check_code=code
    )
    assert decode_temp_broker_metadata(encode_temp_broker_metadata(temp)) == temp
