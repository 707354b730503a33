"""``python -m rocketpy.tools.bench_features --quick`` (``make bench-features``) end to end.

Checks the shape of the closing summary and that nothing went missing, never the speed."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.processes import REPO, bin_env

pytestmark = pytest.mark.process

_RATE = (
    r"\s+([\d,]+) msg/s\s+p50\s+[\d.]+ ms\s+p99\s+[\d.]+ ms\s+failed (\d+)"
    r"\s+broker CPU/msg\s+[\d.]+ us"
)


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def _find(pattern: str, text: str) -> re.Match[str]:
    found = re.search(pattern, text)
    assert found is not None, f"{pattern!r} not in:\n{text}"
    return found


@pytest.mark.timeout(300)  # the run itself has 240 s; about 50 s on an idle machine
def test_bench_features_quick_summary(tmp_path: Path) -> None:
    """1. Run ``bench_features --quick`` (it starts its own NameServer and broker with scaled-down
    delay levels). 2. Read the summary after the ``== rocketpy feature benchmark`` line.
    Expected: exit 0; plain and transactional send lines with rates, no failures and the
    transactional ratio to plain sends; every committed message arrived; push and POP lines over
    the same message count with POP's ratio to push and nothing missing; the timer phase's send
    rate with its ratio, RSS before/pending/after and lateness with every timer delivered; and 18
    delay-level lines, each delivering all it sent with none early and none held back."""
    out = subprocess.run(
        [sys.executable, "-m", "rocketpy.tools.bench_features", "--quick"],
        capture_output=True, text=True, timeout=240, env=bin_env(tmp_path / "logs"), cwd=REPO,
        check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    _, sep, summary = out.stdout.partition("== rocketpy feature benchmark:")
    assert sep, out.stdout[-3000:] + out.stderr[-3000:]

    plain = _find(r"plain Producer\.send \(8 in flight\)" + _RATE + r"\n", summary)
    txn = _find(
        r"TransactionProducer half \+ commit \(8 in flight\)" + _RATE
        + r"\s+[\d.]+% of plain sends,\s+[\d.]+x its CPU/msg\n", summary,
    )  # fmt: skip
    for res in (plain, txn):
        assert _int(res.group(1)) > 0
        assert res.group(2) == "0"
    committed = _find(r"committed ([\d,]+): arrived ([\d,]+), missing 0, not committed", summary)
    assert _int(committed.group(1)) > 0
    assert committed.group(1) == committed.group(2)

    push = _find(r"PushConsumer pull of ([\d,]+) \(from start\)" + _RATE, summary)
    pop = _find(
        r"SimpleConsumer POP receive\+ack of ([\d,]+) \(4 loops\)"
        + _RATE
        + r"\s+[\d.]+% of push,\s+[\d.]+x its CPU/msg",
        summary,
    )
    m = push.group(1)
    assert _int(m) > 0
    assert pop.group(1) == m
    assert pop.group(3) == "0"
    assert f"pulled {m} of {m} (missing 0), popped+acked {m} of {m} (missing 0)" in summary

    vs_plain = r"\s+broker CPU/msg\s+[\d.]+ us\s+[\d.]+% of plain sends,\s+[\d.]+x its CPU/msg"
    timer_rate = _find(r"timer sends\s+([\d,]+) msg/s" + vs_plain, summary)
    assert _int(timer_rate.group(1)) > 0
    _find(r"broker RSS before [\d.]+ MB, timers pending [\d.]+ MB \([+-][\d.]+\), after", summary)
    _find(r"lateness p50 \d+ ms, p99 \d+ ms, max \d+ ms; delivered 300 of 300, missing 0", summary)

    _find(r"delayed sends\s+[\d,]+ msg/s" + vs_plain, summary)
    assert summary.count("broker CPU/msg all-in over the phase") == 2
    levels = re.findall(
        r"level\s+(\d+) \(\s+\d+ s\): delivered 5 of 5, missing 0, early 0, lateness", summary
    )
    assert levels == [str(i) for i in range(1, 19)], summary
    assert "messageDelayLevel for this bench: 1s 1s" in summary
    assert "levels held back (p99 lateness over 1000 ms or missing): none" in summary
