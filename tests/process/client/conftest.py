"""One real ``mqnamesrv`` + ``mqbroker`` pair shared by a test module (start-up costs ~1 s each);
tests isolate themselves by using their own topics and groups."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.helpers.cluster import Cluster, start_cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A namesrv + broker for the whole module."""
    c = start_cluster(tmp_path_factory.mktemp("cluster"))
    try:
        yield c
    finally:
        c.stop()
