"""Values shared by the classic and AutoSwitch services and their callers.

Owns: :class:`ReplicaStatus`, the outcome of the send path's replication step. Pure.
"""

from __future__ import annotations

import enum


class ReplicaStatus(enum.Enum):
    """Outcome of ``handle_ha`` (``PutMessageStatus`` names, so the broker maps them by value)."""

    PUT_OK = "PUT_OK"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    IN_SYNC_REPLICAS_NOT_ENOUGH = "IN_SYNC_REPLICAS_NOT_ENOUGH"
