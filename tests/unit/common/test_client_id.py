"""The client unique id's layout, field by field, as ``MessageClientIDSetter.createUniqID``."""

from __future__ import annotations

import time

from rocketpy.common.message.client_id import UniqIdGenerator

_NOW_MS = 1_700_000_000_000


def _local_month_start_ms(now_ms: int, months_on: int = 0) -> int:
    """00:00 local time on the 1st of ``now_ms``'s month (``months_on`` later), by mktime."""
    t = time.localtime(now_ms / 1000)
    return int(time.mktime((t.tm_year, t.tm_mon + months_on, 1, 0, 0, 0, 0, 0, -1)) * 1000)


def test_uniq_id_fields_match_upstream_layout() -> None:
    """1. A generator for 10.0.0.5, pid 0x12345, seed -2. 2. Two ids at one instant.
    Expected: address, pid's low 16 bits, the seed as an unsigned int, ms since the local
    month start, counter 0 then 1."""
    gen = UniqIdGenerator("10.0.0.5", 0x12345, -2)
    first, second = gen.create(_NOW_MS), gen.create(_NOW_MS)
    diff = f"{_NOW_MS - _local_month_start_ms(_NOW_MS):08X}"
    assert first == "0A000005" + "2345" + "FFFFFFFE" + diff + "0000"  # ip pid seed time counter
    assert second == first[:-4] + "0001"


def test_uniq_id_counter_wraps_as_a_java_short() -> None:
    """1. Take 65,537 ids. Expected: the last counter is 0 again (16 bits, as ``(short)``)."""
    gen = UniqIdGenerator("10.0.0.5", 1, 1)
    ids = [gen.create(_NOW_MS) for _ in range(65_537)]
    assert ids[-2].endswith("FFFF")
    assert ids[-1].endswith("0000")


def test_uniq_id_without_ipv4_uses_the_fake_address() -> None:
    """1. A generator for an IPv6 address. Expected: the address field is the low 4 bytes of the
    creation time (``createFakeIP``)."""
    gen = UniqIdGenerator("::1", 1, 1, now_ms=0x1122334455)
    assert gen.create(_NOW_MS).startswith("22334455")


def test_uniq_id_time_restarts_each_month() -> None:
    """1. An id at the first ms of next month. Expected: its time field is 0."""
    gen = UniqIdGenerator("10.0.0.5", 1, 1)
    gen.create(_NOW_MS)
    assert gen.create(_local_month_start_ms(_NOW_MS, 1))[20:28] == "00000000"
