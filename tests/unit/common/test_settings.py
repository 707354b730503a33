"""Settings precedence, error lines and -p rendering."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

import pytest
from pydantic import Field

from rocketpy.common.errors import ConfigError
from rocketpy.common.settings import RocketSettings


class _Sample(RocketSettings):
    listen_port: int = Field(9876, alias="listenPort", ge=0, le=65535)
    cluster_test: bool = Field(False, alias="clusterTest")
    home: str = Field("", alias="rocketmqHome")

    _upstream_env: ClassVar[Mapping[str, str]] = {"ROCKETMQ_HOME": "rocketmqHome"}


def test_settings_precedence_cli_env_file_default() -> None:
    """Command line beats environment beats file beats default; unknown file keys are reported."""
    s, unknown = _Sample.load(
        file_text="listenPort=1\nclusterTest=true\nbogus=1\n",
        env={"ROCKETPY_listenPort": "2", "ROCKETMQ_HOME": "/opt/rmq"},
        overrides={"listenPort": "3"},
    )
    assert (s.listen_port, s.cluster_test, s.home) == (3, True, "/opt/rmq")
    assert unknown == ["bogus"]


def test_settings_bad_value_names_key_value_and_rule() -> None:
    """A bad value raises ConfigError whose message names the upstream key and the value."""
    with pytest.raises(ConfigError) as info:
        _Sample.load(file_text="listenPort=abc\n")
    assert info.value.key == "listenPort"
    assert "'abc'" in str(info.value)


def test_settings_to_properties_uses_upstream_keys() -> None:
    """-p output lists upstream keys with Java-style booleans."""
    s = _Sample.build({"clusterTest": True})
    assert s.to_properties() == {"listenPort": "9876", "clusterTest": "true", "rocketmqHome": ""}
