"""What a warm run (every image built already) asks of the engine before its containers start: each base image
is inspected once however many build contexts name it, and an engine that cannot limit storage (``docker
info``: overlay2 on ext4, as here) gets no create with ``--storage-opt`` that it would refuse — one warning,
every container started without the limit at its first try."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest
from agentcompass.testing import run_benchmark
from agentcompass_docker.engine import Engine, storage_limits
from agentcompass_docker.images import Images
from agentcompass_docker.options import DockerOptions
from hypothesis import given
from hypothesis import strategies as st

from tests.harbor.taskdirs import REWARD_BY_EXIT, write_task
from tests.helpers.docker_engine import require_engine

BASE = "python:3.11-slim"


@given(st.sampled_from(["extfs", "ext4", "btrfs", "tmpfs", "xfs", "XFS", ""]),
       st.sampled_from(["overlay2", "btrfs", "zfs", "vfs", "devicemapper", ""]),
       st.lists(st.tuples(st.text(max_size=8), st.text(max_size=8)), max_size=3))
def test_storage_limits_from_the_storage_driver(backing: str, driver: str, other: list[tuple[str, str]]) -> None:
    status = [list(pair) for pair in other if pair[0] != "Backing Filesystem"]
    if backing:
        status.append(["Backing Filesystem", backing])
    verdict = storage_limits(driver, status)
    if driver == "overlay2" and backing and backing.lower() != "xfs":
        assert verdict is False  # overlay2 limits storage only on xfs: known to be refused
    else:
        assert verdict is None  # cannot be told from info: the first create finds out


def test_storage_limits_tolerates_odd_driver_status() -> None:
    assert storage_limits("overlay2", [["Backing Filesystem"], ("Supports d_type", "true"), []]) is None
    assert storage_limits("overlay2", [("Backing Filesystem", "extfs", "extra")]) is False


@pytest.mark.docker
def test_a_base_named_by_many_contexts_is_inspected_once(tmp_path: Path) -> None:
    require_engine()
    engine = Engine(DockerOptions.parse({}))
    images = Images(engine, DockerOptions.parse({}))
    asked: list[str] = []
    lock = threading.Lock()
    real = engine.docker.image.inspect

    def spying(ref: Any, *args: Any, **kwargs: Any) -> Any:
        with lock:
            asked.append(str(ref))
        return real(ref, *args, **kwargs)

    engine.docker.image.inspect = spying  # type: ignore[method-assign]
    contexts = []
    for i in range(5):
        context = tmp_path / f"ctx{i}"
        context.mkdir()
        (context / "Dockerfile").write_text(f"FROM {BASE}\nRUN echo {i}\n")
        contexts.append(context)

    async def plan_all() -> list[Any]:
        return await asyncio.gather(*(engine.call(images._plan_build, c, "Dockerfile", {}) for c in contexts))

    try:
        plans = asyncio.run(plan_all())
    finally:
        engine.shutdown()
    assert asked.count(BASE) == 1, asked
    assert len({p.bases[BASE] for p in plans}) == 1 and plans[0].bases[BASE].startswith("sha256:")
    assert len({p.tag for p in plans}) == 5  # each context still has its own tag (inspected once each)


@pytest.mark.docker
async def test_storage_limits_this_engine_refuses_are_not_tried(tmp_path: Path) -> None:
    require_engine()
    engine = Engine(DockerOptions.parse({}))
    try:
        await engine.check()
    finally:
        engine.shutdown()
    if engine.storage_limits is not False:
        pytest.skip("this engine may limit storage: nothing is refused")
    root = tmp_path / "tasks"
    for i in range(3):
        write_task(root, f"small-disk-{i}", instruction="Write `ok` to /app/ok.txt.",
                   test="grep -qx ok /app/ok.txt\n" + REWARD_BY_EXIT, solve="echo ok > /app/ok.txt\n",
                   dockerfile=f"FROM {BASE}\nWORKDIR /app\n", toml="[environment]\nstorage_mb = 512\n")
    run = await run_benchmark("harbor", "oracle", environment="docker", benchmark_args={"path": str(root)},
                              environment_args={"prestart": "0"}, concurrency=3, run_dir=tmp_path / "run")
    assert [r.metrics.get("reward") for r in run.results] == [1.0, 1.0, 1.0]
    warnings = [e for e in run.jsonl("logs.jsonl") if e.get("event") == "docker.storage_limit_unsupported"]
    assert len(warnings) == 1, warnings  # said once, before any create: none tried with the limit
    assert "--storage-opt" not in warnings[0]["error"]  # not the engine's refusal of a create
