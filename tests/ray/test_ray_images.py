"""Images travel once (``--executor-arg registry=``): a real cluster whose two worker nodes each have a Docker
engine of their own (the driver's is the machine's) (:mod:`tests.helpers.docker_engines`), and a real registry on loopback. With the registry
the task image is built on one node, pushed, and pulled by the other; without it each node builds it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harbor.taskdirs import write_task
from tests.helpers.docker_engine import require_engine
from tests.helpers.docker_engines import ExtraEngine, Registry, can_run_engines
from tests.helpers.ray_cluster import LocalCluster
from tests.helpers.ray_runs import HEAD_IP, log_events, on_cluster, records, run_cli

pytestmark = [pytest.mark.ray, pytest.mark.docker]
NODE_IPS = (HEAD_IP, "127.0.0.6")  # the head node is a docker node too: fewer Ray processes on 2 cores
BASE = "python:3.11-slim"


@pytest.fixture(scope="module")
def engines() -> Iterator[list[ExtraEngine]]:
    require_engine()
    why = can_run_engines()
    if why:
        pytest.skip(why)
    started: list[ExtraEngine] = []
    try:
        for name in ("a", "b"):
            engine = ExtraEngine.start(name)
            started.append(engine)
            engine.load(BASE)
        yield started
    finally:
        for engine in started:
            engine.stop()


@pytest.fixture(scope="module")
def image_cluster(engines: list[ExtraEngine]) -> Iterator[LocalCluster]:
    cluster = LocalCluster()
    try:
        cluster.start_head(HEAD_IP, cpus=2, resources={"docker": 2}, env={"DOCKER_HOST": engines[0].host})
        cluster.add_worker(NODE_IPS[1], cpus=2, resources={"docker": 2}, env={"DOCKER_HOST": engines[1].host})
        cluster.wait_for(2, timeout=300)
        yield cluster
    finally:
        cluster.stop()


def _tasks(root: Path, n: int) -> Path:
    nonce = f"{time.time_ns()}"  # an image no engine has yet
    for i in range(n):
        write_task(root, f"t{i}", instruction="write hi", test="test -f /app/hi\n" + _REWARD,
                   solve="touch /app/hi\n", dockerfile=f"FROM {BASE}\nRUN echo {nonce} > /nonce\nWORKDIR /app\n")
    return root


_REWARD = "if [ $? -eq 0 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi\n"


def _actions(engine: ExtraEngine, since: float) -> list[str]:
    out = engine.docker("events", "--since", f"{since:.0f}", "--until", f"{time.time() + 1:.0f}",
                        "--filter", "type=image", "--format", "{{.Action}}").stdout
    return out.split()


def _run(cluster: LocalCluster, tasks: Path, out: Path, *extra: str) -> None:
    proc = run_cli(cluster, "run", "harbor", "oracle", "mock", "-b", f"path={tasks}", "--env", "docker", "-c", "4",
                   *on_cluster(cluster), *extra, "-o", str(out), timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = records(out / "results.jsonl")
    assert len(results) == 4 and {r["metrics"].get("reward") for r in results} == {1.0}, results
    (finished,) = log_events(out, "ray.finished")
    assert set(finished["attempts_by_node"]) == set(NODE_IPS)  # both nodes ran tasks, so both needed the image


def _task_tags(engine: ExtraEngine) -> set[str]:
    return engine.images("agentcompass-build")


def test_with_a_registry_the_task_image_is_built_by_one_node_and_pulled_by_the_other(
        image_cluster: LocalCluster, engines: list[ExtraEngine], tmp_path: Path) -> None:
    registry = Registry.start()
    try:
        since = time.time() - 1
        _run(image_cluster, _tasks(tmp_path / "tasks", 4), tmp_path / "out",
             "--executor-arg", f"registry={registry.address}")
        actions = [_actions(e, since) for e in engines]
        pushed = [a for a in actions if "push" in a]
        pulled = [a for a in actions if "pull" in a]
        assert len(pushed) == 1 and len(pulled) == 1 and pushed[0] is not pulled[0], actions
        tags = [_task_tags(e) for e in engines]
        assert tags[0] == tags[1] and len(tags[0]) == 1  # the same content key on both engines
        assert registry.repositories() == ["agentcompass-build"]
        # The nodes' image progress reaches the head's log as it happens, naming the node and the image:
        # the build and the push before any task has finished.
        events = [e["event"] for e in records(tmp_path / "out" / "logs.jsonl")]
        (built,) = log_events(tmp_path / "out", "docker.image_built")
        (pushed,) = log_events(tmp_path / "out", "docker.image_pushed")
        (pulled,) = log_events(tmp_path / "out", "docker.image_pulled")
        assert built["node"] == pushed["node"] != pulled["node"], (built, pushed, pulled)
        assert {built["node"], pulled["node"]} == set(NODE_IPS)
        assert pulled["image"] == pushed["image"] == built["image"], (built, pushed, pulled)
        assert pulled["registry"] == pushed["registry"] == registry.address, (pushed, pulled)
        assert max(events.index(n) for n in ("docker.image_built", "docker.image_pushed")
                   ) < events.index("task.finished"), events  # the builder's tasks waited for both
    finally:
        registry.stop()


def test_without_a_registry_each_node_builds_the_task_image(
        image_cluster: LocalCluster, engines: list[ExtraEngine], tmp_path: Path) -> None:
    since = time.time() - 1
    before = [_task_tags(e) for e in engines]
    _run(image_cluster, _tasks(tmp_path / "tasks", 4), tmp_path / "out")
    for engine, had in zip(engines, before, strict=True):
        assert "pull" not in _actions(engine, since) and "push" not in _actions(engine, since)
        assert len(_task_tags(engine) - had) == 1  # built there
    built = log_events(tmp_path / "out", "docker.image_built")
    assert sorted(e["node"] for e in built) == sorted(NODE_IPS), built  # each node said so, in the head's log


def test_a_registry_that_is_not_an_address_is_a_usage_error(image_cluster: LocalCluster, tmp_path: Path) -> None:
    proc = run_cli(image_cluster, "run", "example_coding", "oracle", "mock", "--env", "docker",
                   *on_cluster(image_cluster), "--executor-arg", "registry=http://x/y", "-o", str(tmp_path / "o"))
    assert proc.returncode != 0 and "registry='http://x/y'" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "o").exists()
