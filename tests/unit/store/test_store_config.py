"""MessageStoreConfig keys, defaults and derived paths."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocketpy.common.errors import ConfigError
from rocketpy.store.config import FlushDiskType, MessageStoreConfig


def test_store_config_defaults_match_upstream() -> None:
    """1. Build with no values. Expected: store.md section 11 defaults."""
    cfg = MessageStoreConfig.build({})
    assert cfg.mapped_file_size_commit_log == 1073741824
    assert cfg.mapped_file_size_consume_queue == 6000000
    assert cfg.flush_disk_type is FlushDiskType.ASYNC_FLUSH
    assert (cfg.flush_interval_commit_log, cfg.flush_commit_log_least_pages) == (500, 4)
    assert cfg.sync_flush_timeout == 5000
    assert cfg.max_message_size == 4194304
    assert cfg.message_index_enable is True
    assert cfg.file_reserved_time == 72
    assert cfg.commit_log_dir == Path.home() / "store" / "commitlog"


def test_store_config_properties_file_and_paths(tmp_path: Path) -> None:
    """1. Load a .properties text with upstream keys. Expected: values parsed, paths derived."""
    text = (
        f"storePathRootDir={tmp_path}\nflushDiskType=SYNC_FLUSH\nmappedFileSizeCommitLog=65536\n"
        f"storePathCommitLog={tmp_path / 'cl'}\n"
    )
    cfg, unknown = MessageStoreConfig.load(file_text=text, env={})
    assert unknown == []
    assert cfg.flush_disk_type is FlushDiskType.SYNC_FLUSH
    assert cfg.mapped_file_size_commit_log == 65536
    assert cfg.commit_log_dir == tmp_path / "cl"
    assert cfg.consume_queue_dir == tmp_path / "consumequeue"
    assert cfg.abort_path == tmp_path / "abort"


def test_store_config_bad_flush_type() -> None:
    """1. Build with flushDiskType=FAST. Expected: ConfigError naming the key."""
    with pytest.raises(ConfigError, match="flushDiskType"):
        MessageStoreConfig.build({"flushDiskType": "FAST"})


@pytest.mark.parametrize("value", ["25", "4;x", "", "-1", "04;24"])
def test_store_config_delete_when_refuses_what_is_not_an_hour(value: str) -> None:
    """1. Build the config with deleteWhen=<value>. Expected: ConfigError naming the key and
    what is allowed (upstream silently never deletes on such a value)."""
    with pytest.raises(ConfigError, match=r"deleteWhen=.*hours 00-23"):
        MessageStoreConfig.build({"deleteWhen": value})


def test_store_config_delete_when_takes_hours() -> None:
    """1. Build with deleteWhen=04 and 04;16. Expected: accepted as given."""
    for value in ("04", "04;16", "0;23"):
        assert MessageStoreConfig.build({"deleteWhen": value}).delete_when == value
