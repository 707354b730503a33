"""Base for every daemon's settings: pydantic-settings with upstream camelCase keys as aliases.

Owns: precedence (command line > environment > ``-c`` .properties file > defaults), the bad-value
message (one line naming key, value and what is allowed), unknown-key detection, and ``-p``
rendering. Component settings live in ``<component>/config.py`` and subclass
:class:`RocketSettings`. Environment variables are ``ROCKETPY_<upstreamKey>`` (e.g.
``ROCKETPY_listenPort``) plus the upstream names a class lists in ``_upstream_env``
(``ROCKETMQ_HOME``, ``NAMESRV_ADDR``). Must not: read ``os.environ`` itself; ``cli/`` passes the
environment in.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Self

from pydantic import ValidationError
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from rocketpy.common.errors import ConfigError
from rocketpy.common.properties import parse_properties

ENV_PREFIX = "ROCKETPY_"


class RocketSettings(BaseSettings):
    """Frozen settings whose field aliases are upstream config keys."""

    model_config = SettingsConfigDict(
        frozen=True, populate_by_name=True, extra="ignore", validate_default=True
    )

    _upstream_env: ClassVar[Mapping[str, str]] = {}

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Only explicit values: :meth:`load` merges the sources in upstream's precedence."""
        return (init_settings,)

    @classmethod
    def keys(cls) -> dict[str, str]:
        """Upstream key -> field name."""
        return {(f.alias or name): name for name, f in cls.model_fields.items()}

    @classmethod
    def load(
        cls,
        *,
        file_text: str | None = None,
        env: Mapping[str, str] | None = None,
        overrides: Mapping[str, Any] | None = None,
    ) -> tuple[Self, list[str]]:
        """Build settings from a .properties text, an environment and command-line overrides.

        Args:
            file_text: contents of the ``-c`` file, if any.
            env: the process environment (``cli/`` passes ``os.environ``).
            overrides: upstream key -> value from the command line.

        Returns:
            The settings and the list of unknown keys found in the file (to warn about).

        Raises:
            ConfigError: a value does not validate; names the key, the value and what is allowed.
        """
        known = cls.keys()
        merged: dict[str, Any] = {}
        unknown: list[str] = []
        if file_text:
            for key, value in parse_properties(file_text).items():
                if key in known:
                    merged[key] = value
                else:
                    unknown.append(key)
        for key in known:
            if env is None:
                break
            if (ENV_PREFIX + key) in env:
                merged[key] = env[ENV_PREFIX + key]
        for env_name, key in cls._upstream_env.items():
            if env is not None and env_name in env and key not in (overrides or {}):
                merged.setdefault(key, env[env_name])
        for key, value in (overrides or {}).items():
            if value is not None:
                merged[key] = value
        return cls.build(merged), unknown

    @classmethod
    def build(cls, values: Mapping[str, Any]) -> Self:
        """Validate ``values`` (keyed by upstream key or field name) into settings.

        Raises:
            ConfigError: as :meth:`load`.
        """
        try:
            return cls(**dict(values))
        except ValidationError as e:
            err = e.errors()[0]
            loc = str(err["loc"][0]) if err["loc"] else "?"
            field = cls.model_fields.get(loc)
            key = (field.alias or loc) if field is not None else loc
            raise ConfigError(key, err.get("input"), err["msg"]) from e

    def to_properties(self) -> dict[str, str]:
        """Upstream key -> value text, in declaration order, as ``-p`` prints it."""
        out: dict[str, str] = {}
        for name, field in type(self).model_fields.items():
            value = getattr(self, name)
            if isinstance(value, bool):
                text = "true" if value else "false"
            elif value is None:
                text = ""
            else:
                text = str(value)
            out[field.alias or name] = text
        return out

    def with_updates(self, values: Mapping[str, Any]) -> Self:
        """A copy with ``values`` (upstream keys) applied and re-validated."""
        current: dict[str, Any] = {
            (f.alias or n): getattr(self, n) for n, f in type(self).model_fields.items()
        }
        current.update(values)
        return type(self).build(current)
