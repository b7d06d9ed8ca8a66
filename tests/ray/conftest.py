"""Fixtures of the Ray executor tests: one real two-node Ray cluster per module, on loopback.

The head runs on 127.0.0.2 (4 CPUs, no docker), a worker node on 127.0.0.3 (4 CPUs, ``{"docker": 4}``), each a
``ray start --block`` process with its own ``--temp-dir``, and both are stopped by pid when the module ends.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.helpers.ray_cluster import LocalCluster
from tests.helpers.ray_runs import HEAD_IP, WORKER_IP


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    ray_cluster = LocalCluster()
    try:
        ray_cluster.start_head(HEAD_IP, cpus=4)
        ray_cluster.add_worker(WORKER_IP, cpus=4, resources={"docker": 4})
        ray_cluster.wait_for(2)
        yield ray_cluster
    finally:
        ray_cluster.stop()
