"""RotatingJsonLinesWriter: rotation by size, bounded file count, restart never appends."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rocketpy.common.errors import ConfigError
from rocketpy.common.rotating_jsonl import RotatingJsonLinesWriter


def _lines(paths: list[Path]) -> list[dict[str, int]]:
    return [json.loads(line) for p in paths for line in p.read_text().splitlines()]


def test_rotating_jsonl_rotates_by_size_and_keeps_max_files(tmp_path: Path) -> None:
    """1. Writer with 100-byte files, at most 3 files. 2. Write 40 records of ~20 bytes.
    Expected: every file <= 100 bytes; exactly 3 files remain; they hold the newest records,
    in order, each line a whole JSON object."""
    writer = RotatingJsonLinesWriter(tmp_path, prefix="m", max_file_bytes=100, max_files=3)
    for i in range(40):
        writer.write({"seq": i, "pad": "x"})
    writer.close()
    files = writer.files()
    assert len(files) == 3
    assert all(p.stat().st_size <= 100 for p in files)
    seqs = [r["seq"] for r in _lines(files)]
    assert seqs == list(range(40 - len(seqs), 40))
    assert len(seqs) >= 9  # 3 full-ish files of 4-5 lines each


def test_rotating_jsonl_total_bytes_bounded(tmp_path: Path) -> None:
    """1. 1 KiB files, 2 kept. 2. Write 5,000 records.
    Expected: the directory never holds more than 2 files / 2 KiB of this prefix."""
    writer = RotatingJsonLinesWriter(tmp_path, prefix="m", max_file_bytes=1024, max_files=2)
    for i in range(5000):
        writer.write({"seq": i})
        if i % 500 == 0:
            assert len(writer.files()) <= 2
    writer.close()
    assert sum(p.stat().st_size for p in writer.files()) <= 2048


def test_rotating_jsonl_oversized_line_gets_own_file(tmp_path: Path) -> None:
    """1. 50-byte files. 2. Write a small record, a 200-byte record, a small record.
    Expected: three files; the big record alone in the middle one."""
    writer = RotatingJsonLinesWriter(tmp_path, prefix="m", max_file_bytes=50, max_files=10)
    writer.write({"a": 1})
    writer.write({"big": "y" * 200})
    writer.write({"a": 2})
    writer.close()
    files = writer.files()
    assert [len(p.read_text().splitlines()) for p in files] == [1, 1, 1]
    assert json.loads(files[1].read_text())["big"] == "y" * 200


def test_rotating_jsonl_restart_starts_a_new_file(tmp_path: Path) -> None:
    """1. Write one record and close. 2. Append a torn half-line to that file (crash). 3. A new
    writer writes one record.
    Expected: the new record is in a new file with a higher sequence; the torn file untouched;
    another prefix in the same directory is not counted or deleted."""
    (tmp_path / "other.0000000000.jsonl").write_text("{}\n")
    first = RotatingJsonLinesWriter(tmp_path, prefix="m", max_file_bytes=1000, max_files=1)
    first.write({"n": 1})
    first.close()
    old = first.files()[0]
    with old.open("a") as f:
        f.write('{"n": 2, "tor')
    second = RotatingJsonLinesWriter(tmp_path, prefix="m", max_file_bytes=1000, max_files=2)
    second.write({"n": 3})
    second.close()
    files = second.files()
    assert files[0] == old
    assert files[1].name == "m.0000000001.jsonl"
    assert json.loads(files[1].read_text()) == {"n": 3}
    assert (tmp_path / "other.0000000000.jsonl").exists()


@pytest.mark.parametrize(
    ("prefix", "max_bytes", "max_files"), [("m", 0, 1), ("m", 10, 0), ("a/b", 10, 1), ("", 10, 1)]
)
def test_rotating_jsonl_rejects_bad_bounds(
    tmp_path: Path, prefix: str, max_bytes: int, max_files: int
) -> None:
    """1. Build a writer with a zero bound or a bad prefix. Expected: ConfigError."""
    with pytest.raises(ConfigError):
        RotatingJsonLinesWriter(
            tmp_path, prefix=prefix, max_file_bytes=max_bytes, max_files=max_files
        )
