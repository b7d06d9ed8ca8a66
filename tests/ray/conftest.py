"""Fixtures of the Ray executor tests: one real two-node Ray cluster per module, on loopback.

The head runs on 127.0.0.2 (4 CPUs, no docker), a worker node on 127.0.0.3 (4 CPUs, ``{"docker": 4}``), each a
``ray start --block`` process with its own ``--temp-dir``, and both are stopped by pid when the module ends.
Both nodes have the ``stream_probe`` test plugin installed (:func:`probe_path`: a ``PYTHONPATH`` to give a
driver that uses it too).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.helpers.cli_processes import ROOT
from tests.helpers.ray_cluster import LocalCluster
from tests.helpers.ray_runs import HEAD_IP, WORKER_IP
from tests.helpers.stream_probe_plugin import install_for_nodes


def probe_path(cluster: LocalCluster) -> str:
    """A ``PYTHONPATH`` with the ``stream_probe`` plugin installed (as the cluster's nodes have it)."""
    return os.pathsep.join([str(install_for_nodes(cluster.root / "probe")), str(ROOT),
                            *filter(None, [os.environ.get("PYTHONPATH")])])


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    ray_cluster = LocalCluster()
    try:
        env = {"PYTHONPATH": probe_path(ray_cluster)}
        ray_cluster.start_head(HEAD_IP, cpus=4, env=env)
        ray_cluster.wait_for(1)  # a worker started before the head registers gives up on a loaded machine
        ray_cluster.add_worker(WORKER_IP, cpus=4, resources={"docker": 4}, env=env)
        ray_cluster.wait_for(2)
        yield ray_cluster
    finally:
        ray_cluster.stop()
