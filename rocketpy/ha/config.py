"""HA settings: the replication keys of upstream's ``MessageStoreConfig`` (ha.md sections 2-3).

Owns: the keys the HA services and the SYNC_MASTER send path read, with upstream names and
defaults. They live here, not in ``rocketpy.store.config``, because only the HA layer and the broker
read them; the broker loads this class from the same .properties file as the store's keys (as
``BrokerStartup`` fills one ``MessageStoreConfig``). Must not: read the environment.

Deviation: ``haReconnectInterval`` is rocketpy's own key; upstream hard-codes the slave's 5 s wait
before reconnecting (``DefaultHAClient.run``), tests need it short.
"""

from __future__ import annotations

from pydantic import Field

from rocketpy.common.settings import RocketSettings


class HAConfig(RocketSettings):
    """Effective HA configuration. Sizes are bytes, intervals milliseconds."""

    ha_listen_port: int = Field(10912, alias="haListenPort", ge=0, le=65535)
    ha_master_address: str | None = Field(None, alias="haMasterAddress")
    ha_send_heartbeat_interval_ms: int = Field(5000, alias="haSendHeartbeatInterval", ge=1)
    ha_housekeeping_interval_ms: int = Field(20000, alias="haHousekeepingInterval", ge=1)
    ha_transfer_batch_size_bytes: int = Field(32768, alias="haTransferBatchSize", ge=1)
    ha_max_gap_not_in_sync_bytes: int = Field(256 * 1024 * 1024, alias="haMaxGapNotInSync", ge=0)
    ha_flow_control_enable: bool = Field(False, alias="haFlowControlEnable")
    max_ha_transfer_byte_in_second: int = Field(
        100 * 1024 * 1024, alias="maxHaTransferByteInSecond", ge=1
    )
    ha_reconnect_interval_ms: int = Field(5000, alias="haReconnectInterval", ge=1)
    # SYNC_MASTER send path (ha.md section 2.4) and AutoSwitch (section 3.8).
    in_sync_replicas: int = Field(1, alias="inSyncReplicas", ge=1)
    min_in_sync_replicas: int = Field(1, alias="minInSyncReplicas", ge=1)
    total_replicas: int = Field(1, alias="totalReplicas", ge=1)
    all_ack_in_sync_state_set: bool = Field(False, alias="allAckInSyncStateSet")
    enable_auto_in_sync_replicas: bool = Field(False, alias="enableAutoInSyncReplicas")
    slave_timeout_ms: int = Field(3000, alias="slaveTimeout", ge=1)
    ha_max_time_slave_not_catchup_ms: int = Field(15000, alias="haMaxTimeSlaveNotCatchup", ge=1)
    sync_from_last_file: bool = Field(False, alias="syncFromLastFile")
    async_learner: bool = Field(False, alias="asyncLearner")

    @property
    def valid_master_address(self) -> str | None:
        """``haMasterAddress`` when it is usable (upstream: at least 6 characters)."""
        addr = self.ha_master_address
        return addr if addr is not None and len(addr.strip()) >= 6 else None
