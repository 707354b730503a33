"""The running broker's configuration as GET_BROKER_CONFIG / UPDATE_BROKER_CONFIG see it.

Owns: rendering every key (broker, remoting, store) and validating a live update before the
service applies it. Must not: reach into the service: it gets what it reads and the update to
apply as callables. Mirrors the config part of ``BrokerController`` (``getConfiguration``,
``updateConfig``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from rocketpy.broker.config import BrokerConfig
from rocketpy.broker.processors.broker_config import BrokerConfigAccess
from rocketpy.common.errors import ConfigError
from rocketpy.remoting.protocol.body.config_shapes import DataVersion


class ServiceConfigAccess(BrokerConfigAccess):
    """:class:`BrokerConfigAccess` over the service's current settings."""

    def __init__(
        self,
        *,
        config: Callable[[], BrokerConfig],
        store_properties: Callable[[], Mapping[str, str]],
        version: Callable[[], DataVersion],
        apply: Callable[[BrokerConfig], None],
    ) -> None:
        """Args:
        config: the current broker settings.
        store_properties: the store's settings as upstream keys and values.
        version: the configuration's data version (bumped by ``apply``).
        apply: applies validated new settings to the running broker.
        """
        self._config = config
        self._store_properties = store_properties
        self._version = version
        self._apply = apply

    def render(self) -> dict[str, str]:
        out = dict(self._config().to_properties())
        out.update(self._store_properties())
        return out

    @property
    def data_version(self) -> DataVersion:
        return self._version()

    @property
    def black_list(self) -> frozenset[str]:
        return frozenset(k for k in self._config().config_black_list.split(";") if k)

    def update(self, values: Mapping[str, str]) -> None:
        known = BrokerConfig.keys()
        unknown = sorted(k for k in values if k not in known)
        if unknown:
            raise ConfigError(
                unknown[0], values[unknown[0]], "not a broker key that can be updated live"
            )
        self._apply(self._config().with_updates(values))
