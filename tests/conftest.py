"""Suite-wide fixtures: uvloop switch and a guard that fails a test on unhandled loop exceptions."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

# CI has 2 shared cores: a property's examples are checked, not timed (timing is for benchmarks).
settings.register_profile("rocketpy", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("rocketpy")

if os.environ.get("ROCKETPY_TEST_UVLOOP") == "1":
    import uvloop

    def pytest_asyncio_loop_factories(
        config: pytest.Config, item: pytest.Item
    ) -> Mapping[str, Callable[[], asyncio.AbstractEventLoop]]:
        """Run every async test on uvloop (``make test-uvloop``), as the daemons run."""
        return {"uvloop": uvloop.new_event_loop}


@pytest.fixture(autouse=True)
async def _loop_exception_guard() -> AsyncIterator[None]:
    """Fail the test if the loop reports an exception nobody handled (asyncpg's _testbase does
    this)."""
    loop = asyncio.get_running_loop()
    errors: list[dict[str, Any]] = []

    def handler(lp: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        errors.append(context)
        lp.default_exception_handler(context)

    loop.set_exception_handler(handler)
    yield
    loop.set_exception_handler(None)
    if errors:
        pytest.fail(f"unhandled exception in event loop: {errors[0]}")
