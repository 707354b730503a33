"""A real ``mqnamesrv`` + ``mqbroker`` pair for client tests, and unique topic/group names."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path

from tests.helpers.processes import Daemon, start_broker, start_namesrv

# Short delay levels so retry/delay tests run in seconds (level 3 is the first retry's level).
FAST_DELAY_LEVELS = "messageDelayLevel=1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s\n"
_names = itertools.count(1)


@dataclass
class Cluster:
    """A running namesrv + broker."""

    namesrv: Daemon
    namesrv_addr: str
    broker: Daemon
    broker_addr: str

    def stop(self) -> None:
        """SIGTERM both; assert clean exits."""
        broker_rc = self.broker.stop()
        namesrv_rc = self.namesrv.stop()
        assert broker_rc == 0, self.broker.output()
        assert namesrv_rc == 0, self.namesrv.output()


def unique(prefix: str) -> str:
    """A topic or group name no other test of the session uses."""
    return f"{prefix}_{next(_names)}"


def start_cluster(tmp: Path, broker_extra: str = "") -> Cluster:
    """Start a namesrv and one broker (broker-a) under ``tmp``."""
    namesrv, ns_addr = start_namesrv(tmp)
    try:
        broker, addr = start_broker(tmp, ns_addr, extra=FAST_DELAY_LEVELS + broker_extra)
    except BaseException:
        namesrv.stop()
        raise
    return Cluster(namesrv, ns_addr, broker, addr)
