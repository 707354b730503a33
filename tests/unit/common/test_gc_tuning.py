"""tune_gc: what a broker does to the cyclic collector once it is up."""

from __future__ import annotations

import gc

from rocketpy.common.aio import GC_GEN0_THRESHOLD, tune_gc


def test_freezes_the_heap_and_raises_the_young_threshold() -> None:
    before = gc.get_threshold()
    try:
        tune_gc()
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold() == (GC_GEN0_THRESHOLD, before[1], before[2])
    finally:  # the test process keeps collecting as before
        gc.unfreeze()
        gc.set_threshold(*before)
