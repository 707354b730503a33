"""ConfigFile: persist atomically with .bak, load/reload, crash safety, .bak fallback."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from rocketpy.broker.config_files import (
    consumer_offset_file,
    delay_offset_file,
    subscription_group_file,
    topics_file,
    topics_path,
)
from rocketpy.common.atomic_file import backup_path, temp_path
from rocketpy.common.errors import StoreError
from rocketpy.remoting.protocol.body.config_shapes import (
    ConsumerOffsetTable,
    DataVersion,
    DelayOffsetTable,
    SubscriptionGroupConfig,
    SubscriptionGroupTable,
    TopicConfig,
    TopicConfigSerializeWrapper,
    encode_topics,
)


def _topics(counter: int, *names: str) -> TopicConfigSerializeWrapper:
    return TopicConfigSerializeWrapper(
        topic_config_table={n: TopicConfig(topic_name=n) for n in names},
        data_version=DataVersion(timestamp=1_700_000_000_000 + counter, counter=counter),
    )


async def test_config_file_persist_and_reload(tmp_path: Path) -> None:
    """1. A fresh store has no topics.json (load -> None). 2. Persist v1 then v2 on an
    executor. 3. Reload through a new handle.
    Expected: config/topics.json holds v2 in fastjson pretty form, topics.json.bak holds v1,
    the reload gives v2 from the main file."""
    with ThreadPoolExecutor(max_workers=1) as executor:
        async with asyncio.timeout(5):
            handle = topics_file(tmp_path, executor)
            assert await handle.load() is None
            await handle.persist(_topics(1, "A"))
            await handle.persist(_topics(2, "A", "B"))
            loaded = await topics_file(tmp_path, executor).load()
    path = topics_path(tmp_path)
    assert path == tmp_path / "config" / "topics.json"
    assert path.read_text() == encode_topics(_topics(2, "A", "B"))
    assert backup_path(path).read_text() == encode_topics(_topics(1, "A"))
    assert loaded is not None
    assert (loaded.value, loaded.from_backup) == (_topics(2, "A", "B"), False)


async def test_config_file_crash_between_temp_and_rename(tmp_path: Path) -> None:
    """1. Persist v1. 2. Simulate a crash after writing the temp file of v2 (half of it) and
    before the rename. 3. Load.
    Expected: v1 loads from the main file; the temp file is cleaned up."""
    handle = topics_file(tmp_path)
    async with asyncio.timeout(5):
        await handle.persist(_topics(1, "A"))
    path = topics_path(tmp_path)
    temp_path(path).write_text(encode_topics(_topics(2, "A", "B"))[:40])
    loaded = handle.load_sync()
    assert loaded is not None
    assert loaded.value == _topics(1, "A")
    assert not temp_path(path).exists()


async def test_config_file_truncated_main_falls_back_to_bak(tmp_path: Path) -> None:
    """1. Persist v1 and v2. 2. A Java broker crashed mid-rewrite (5.x rewrites in place):
    topics.json is cut in half. 3. Load, then persist v3.
    Expected: v1 from topics.json.bak; the damaged file is kept as topics.json.corrupt; the
    next persist keeps v1 as the backup (not the damaged bytes)."""
    handle = topics_file(tmp_path)
    path = topics_path(tmp_path)
    async with asyncio.timeout(5):
        await handle.persist(_topics(1, "A"))
        await handle.persist(_topics(2, "A", "B"))
        path.write_text(path.read_text()[:60])
        loaded = handle.load_sync()
        assert loaded is not None
        assert (loaded.value, loaded.from_backup) == (_topics(1, "A"), True)
        assert (path.parent / "topics.json.corrupt").exists()
        await handle.persist(_topics(3, "C"))
    assert backup_path(path).read_text() == encode_topics(_topics(1, "A"))


def test_config_file_both_damaged(tmp_path: Path) -> None:
    """Main and .bak both damaged -> StoreError naming both files."""
    path = topics_path(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text("{")
    backup_path(path).write_text('{"topicConfigTable":7}')
    with pytest.raises(StoreError, match=r"topics\.json .*topics\.json\.bak"):
        topics_file(tmp_path).load_sync()


def test_config_file_reads_java_written_consumer_offsets(tmp_path: Path) -> None:
    """A consumerOffset.json as a Java broker writes it (unquoted ids, odd line break) loads."""
    path = tmp_path / "config" / "consumerOffset.json"
    path.parent.mkdir(parents=True)
    path.write_text(
        '{\n\t"offsetTable":{\n\t\t"TopicTest@group1":{0:250,1:251\n\t\t}\n\t}\n}',
        encoding="utf-8",
    )
    loaded = consumer_offset_file(tmp_path).load_sync()
    assert loaded is not None
    assert loaded.value == ConsumerOffsetTable(offset_table={"TopicTest@group1": {0: 250, 1: 251}})


async def test_config_file_all_four_round_trip(tmp_path: Path) -> None:
    """Each of the four files persists and reloads to an equal value."""
    version = DataVersion(timestamp=5, counter=1)
    async with asyncio.timeout(5):
        offsets = consumer_offset_file(tmp_path)
        await offsets.persist(
            ConsumerOffsetTable(offset_table={"T@g": {3: 9}}, data_version=version)
        )
        delay = delay_offset_file(tmp_path)
        await delay.persist(DelayOffsetTable(offset_table={1: 4}, data_version=version))
        groups = subscription_group_file(tmp_path)
        await groups.persist(
            SubscriptionGroupTable(
                subscription_group_table={"g": SubscriptionGroupConfig(group_name="g")},
                data_version=version,
            )
        )
        loaded = [await offsets.load(), await delay.load(), await groups.load()]
    assert [x.value.data_version if x else None for x in loaded] == [version] * 3
    assert sorted(p.name for p in (tmp_path / "config").iterdir()) == [
        "consumerOffset.json",
        "delayOffset.json",
        "subscriptionGroup.json",
    ]
