"""One SparkSession (local[2], UTC) shared by every Spark test of the run.

Skips the module's tests with the reason when pyspark or Java is missing.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """The shared session; stopped when the test run ends."""
    pytest.importorskip("pyspark", reason="pyspark is not installed: make test-spark installs it")
    if shutil.which("java") is None:
        pytest.skip("java is not on PATH: Spark needs a JRE 17+")
    from pyspark.sql import SparkSession  # noqa: PLC0415 - only when Spark is available

    session = (
        SparkSession.builder.master("local[2]")
        .appName("rocketpy-tests")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
