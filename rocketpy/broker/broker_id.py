"""The persistent broker id flow of a controller-mode broker (controller.md section 9).

Owns: the decision which of ``brokerIdentity`` / ``brokerIdentity-temp`` to trust and the
GET_NEXT_BROKER_ID -> temp file -> APPLY_BROKER_ID -> identity file sequence. Must not: encode
the files (``store/broker_identity.py``) or talk to the controller directly (it calls
:class:`~rocketpy.broker.controller_api.BrokerControllerAPI`). Mirrors
``ReplicasManager.register`` / ``createTempMetadataFile`` / ``applyBrokerId`` /
``registerBrokerToController`` of apache/rocketmq 5.1.1+.

Recovery after a crash at each step (acceptance scenario R-02):

| crash during | files left | next start |
| --- | --- | --- |
| GET_NEXT_BROKER_ID | none | starts over |
| writing the temp file | none (atomic write) | starts over |
| APPLY_BROKER_ID | temp | re-applies the same id and check code (idempotent at the controller) |
| writing the identity file | temp | same as above |
| the final register | identity | skips allocation, registers |

Decided (stricter than upstream): the temp file is deleted only when the controller *refuses*
the id (an error response); after a timeout or a lost connection it is kept, so the retry
applies the same id with the same check code instead of leaking an id the controller may have
committed.
"""

from __future__ import annotations

import structlog

from rocketpy.broker.controller_api import BrokerControllerAPI
from rocketpy.common.errors import RemoteError, RocketPyError
from rocketpy.store.broker_identity import (
    BrokerMetadata,
    MetadataFile,
    TempBrokerMetadata,
    make_register_check_code,
)

log = structlog.get_logger(__name__)


class BrokerIdentityMismatch(RocketPyError):
    """An identity file names another cluster or broker than the configuration; the operator
    must fix the configuration or remove the file (registration stops, no id is allocated)."""

    def __init__(self, path: str, file_value: str, config_value: str) -> None:
        self.path = path
        self.file_value = file_value
        self.config_value = config_value
        super().__init__(
            f"broker identity file {path} holds {file_value!r} but the config says "
            f"{config_value!r}; fix brokerClusterName/brokerName or remove the file"
        )


def _check_names(path: str, cluster: str, broker: str, want: tuple[str, str]) -> None:
    if (cluster, broker) != want:
        raise BrokerIdentityMismatch(path, f"{cluster}#{broker}", f"{want[0]}#{want[1]}")


class BrokerIdAllocator:
    """Obtains this broker's controller id once, reusing the identity files across restarts."""

    def __init__(
        self,
        api: BrokerControllerAPI,
        identity: MetadataFile[BrokerMetadata],
        temp: MetadataFile[TempBrokerMetadata],
        *,
        cluster: str,
        broker: str,
    ) -> None:
        """Args: the controller API, both identity files, and this broker's configured names."""
        self._api = api
        self._identity = identity
        self._temp = temp
        self._names = (cluster, broker)

    async def load_confirmed(self) -> int | None:
        """The id in ``brokerIdentity`` if that file is loaded (step 1).

        Raises:
            BrokerIdentityMismatch: the file names another cluster or broker.
            StoreError: the file is damaged.
        """
        meta = await self._identity.load()
        if meta is None:
            return None
        _check_names(str(self._identity.path), meta.cluster_name, meta.broker_name, self._names)
        return meta.broker_id

    async def obtain(self, leader: str, broker_addr: str, now_ms: int) -> int:
        """Return the confirmed id, allocating and applying one when there is none.

        Args:
            leader: the controller leader's address.
            broker_addr: this broker's ``ip:port`` (part of the register check code).
            now_ms: wall-clock milliseconds for a new check code.

        Raises:
            BrokerIdentityMismatch: a file names another cluster or broker.
            RemotingError: the controller could not be asked or refused; try again later.
            StoreError: a file is damaged.
        """
        confirmed = await self.load_confirmed()
        if confirmed is not None:
            return confirmed
        cluster, broker = self._names
        temp = await self._temp.load()
        if temp is not None:
            _check_names(str(self._temp.path), temp.cluster_name, temp.broker_name, self._names)
        else:
            next_id = await self._api.get_next_broker_id(leader, cluster, broker)
            temp = TempBrokerMetadata(
                cluster_name=cluster,
                broker_name=broker,
                broker_id=next_id,
                register_check_code=make_register_check_code(broker_addr, now_ms),
            )
            await self._temp.persist(temp)
        try:
            await self._api.apply_broker_id(
                leader,
                cluster,
                broker,
                broker_id=temp.broker_id,
                check_code=temp.register_check_code,
            )
        except RemoteError as e:
            log.warning(
                "apply broker id refused, will allocate a new one",
                broker_id=temp.broker_id,
                code=e.code,
                remark=e.remark,
            )
            await self._temp.clear()
            raise
        await self._identity.persist(
            BrokerMetadata(cluster_name=cluster, broker_name=broker, broker_id=temp.broker_id)
        )
        await self._temp.clear()
        log.info("apply broker id success", broker_id=temp.broker_id)
        return temp.broker_id
