"""Build the controller's Raft member (``rocketpy.dledger.node.RaftNode``) from its config.

Owns: the mapping from ``ControllerConfig`` keys to ``NodeConfig`` (group, self id, peers, store
path, timings). Mirrors the DLedger set-up in ``DLedgerController``'s constructor. Must not: start
anything (the service does).
"""

from __future__ import annotations

from rocketpy.controller.config import ControllerConfig
from rocketpy.controller.pipeline import RaftNodeApi
from rocketpy.controller.state_machine import ControllerStateMachine
from rocketpy.dledger.node import NodeConfig, RaftNode


def make_raft_node(config: ControllerConfig, state_machine: ControllerStateMachine) -> RaftNodeApi:
    """The Raft node of this controller, applying committed entries to ``state_machine``."""
    return RaftNode(
        NodeConfig(
            group=config.group(),
            self_id=config.controller_dleger_self_id,
            peers=config.peers(),
            store_path=config.store_path(),
            heartbeat_interval_ms=config.heartbeat_interval_ms,
            election_timeout_ms=config.election_timeout_ms,
        ),
        state_machine,
    )
