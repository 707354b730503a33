"""Broker identity files: not-loaded cases, damage, atomic persist without .bak, clear."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rocketpy.common.errors import CodecError, StoreError
from rocketpy.store.broker_identity import (
    BrokerMetadata,
    TempBrokerMetadata,
    broker_identity_path,
    broker_metadata_file,
    decode_broker_metadata,
    decode_temp_broker_metadata,
    encode_broker_metadata,
    temp_broker_identity_path,
    temp_broker_metadata_file,
)


@pytest.mark.parametrize(
    "content",
    [b"", b"DefaultCluster#broker-a", b"#broker-a#1", b"DefaultCluster##1", b"a#b#"],
)
def test_broker_identity_not_loaded(content: bytes) -> None:
    """Missing or empty fields read as "not loaded" (isLoaded false), not as an error."""
    assert decode_broker_metadata(content) is None


def test_broker_identity_temp_needs_check_code() -> None:
    """A temp file without its check code is not loaded; extra fields are ignored as upstream
    (split then index)."""
    assert decode_temp_broker_metadata(b"c#b#2") is None
    assert decode_temp_broker_metadata(b"c#b#2##") is None
    assert decode_broker_metadata(b"c#b#2#x;1") == BrokerMetadata(
        cluster_name="c", broker_name="b", broker_id=2
    )


def test_broker_identity_codec_errors() -> None:
    """A non-numeric id is a CodecError; a '#' inside a field cannot be encoded."""
    with pytest.raises(CodecError, match="brokerId"):
        decode_broker_metadata(b"c#b#one")
    with pytest.raises(CodecError, match="may not contain"):
        encode_broker_metadata(BrokerMetadata(cluster_name="c#1", broker_name="b", broker_id=1))


def test_broker_identity_paths(tmp_path: Path) -> None:
    """Default <root>/brokerIdentity, the storePathBrokerIdentity override, and '-temp'."""
    assert broker_identity_path(tmp_path) == tmp_path / "brokerIdentity"
    assert broker_identity_path(tmp_path, "/x/id") == Path("/x/id")
    assert temp_broker_identity_path(tmp_path / "brokerIdentity") == (
        tmp_path / "brokerIdentity-temp"
    )


async def test_broker_identity_persist_load_clear(tmp_path: Path) -> None:
    """1. Registration step 3: write the temp file. 2. Step 4 success: write brokerIdentity,
    clear the temp file. 3. Reload both.
    Expected: exact file content, no .bak files, temp gone, identity reloads."""
    identity_path = broker_identity_path(tmp_path)
    identity = broker_metadata_file(identity_path)
    temp = temp_broker_metadata_file(temp_broker_identity_path(identity_path))
    async with asyncio.timeout(5):
        assert await identity.load() is None
        await temp.persist(
            TempBrokerMetadata(
                cluster_name="DefaultCluster",
                broker_name="broker-a",
                broker_id=2,
                register_check_code="10.0.0.2:10911;1700000000000",
            )
        )
        loaded_temp = await temp.load()
        assert loaded_temp is not None
        await identity.persist(
            BrokerMetadata(
                cluster_name=loaded_temp.cluster_name,
                broker_name=loaded_temp.broker_name,
                broker_id=loaded_temp.broker_id,
            )
        )
        await identity.persist(
            BrokerMetadata(cluster_name="DefaultCluster", broker_name="broker-a", broker_id=2)
        )
        await temp.clear()
        assert await temp.load() is None
    assert identity_path.read_bytes() == b"DefaultCluster#broker-a#2"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["brokerIdentity"]
    assert identity.load_sync() == BrokerMetadata(
        cluster_name="DefaultCluster", broker_name="broker-a", broker_id=2
    )


def test_broker_identity_damaged_file_is_store_error(tmp_path: Path) -> None:
    """A damaged brokerIdentity is a StoreError naming the file, never a silent new id."""
    path = broker_identity_path(tmp_path)
    path.write_bytes(b"DefaultCluster#broker-a#x")
    with pytest.raises(StoreError, match="brokerIdentity"):
        broker_metadata_file(path).load_sync()
