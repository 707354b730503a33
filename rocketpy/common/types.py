"""Typed integers that must never be mixed up (STYLE.md section 7).

Owns: the ``typing.NewType`` aliases shared across packages. Convert explicitly at the boundary
where a plain ``int`` comes in (a decoded header, a file); never do arithmetic across two kinds.
Mirrors the typed epochs of mxsm/rocketmq-rust ``rocketmq-store-api/src/ha_contract.rs``.
Also Java's integer ranges. Pure: no imports beyond ``typing``.
"""

from __future__ import annotations

from typing import Final, NewType

#: Java's ``int`` and ``long``: the ranges a wire header or a record field can carry.
JAVA_INT_MIN: Final = -(1 << 31)
JAVA_INT_MAX: Final = (1 << 31) - 1
JAVA_LONG_MIN: Final = -(1 << 63)
JAVA_LONG_MAX: Final = (1 << 63) - 1

#: A Raft term (DLedger ``currTerm`` / ``ledgerEndTerm``); 0 before any election.
Term = NewType("Term", int)
#: A Raft log index (DLedger ``ledgerEndIndex``); 1-based here, 0 means "empty log".
LogIndex = NewType("LogIndex", int)
#: The controller's ``masterEpoch`` of a broker-set; 0 before the first election.
MasterEpoch = NewType("MasterEpoch", int)
#: The controller's ``syncStateSetEpoch`` of a broker-set; 0 before the first election.
SyncStateSetEpoch = NewType("SyncStateSetEpoch", int)
#: A broker's controller-assigned id (``brokerId``, 1-based; 0 = master on the NameServer).
BrokerId = NewType("BrokerId", int)
