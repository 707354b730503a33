"""Suite-wide fixtures: uvloop switch and a guard that fails a test on unhandled loop exceptions."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from typing import Any

import pytest

if os.environ.get("ROCKETPY_TEST_UVLOOP") == "1":
    import uvloop

    @pytest.fixture(scope="session")
    def event_loop_policy() -> asyncio.AbstractEventLoopPolicy:
        return uvloop.EventLoopPolicy()


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
