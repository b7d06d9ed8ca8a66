"""``[environment] gpus``, ``gpu_types`` and ``storage_mb``: a device request and a storage limit, honoured where
the engine can, and a task needing GPUs on a machine without them (this one) a ``PREPARE_ERROR`` that says so,
never a run on the CPU — on ``local`` and under real ``docker``."""

from __future__ import annotations

from pathlib import Path

import pytest
from agentcompass.runtime import RunRequest, TaskStatus
from agentcompass.testing import run_benchmark
from agentcompass_harbor.benchmark import HarborBenchmark
from agentcompass_harbor.gpus import matching
from hypothesis import given
from hypothesis import strategies as st

from tests.harbor.taskdirs import REWARD_BY_EXIT, write_task
from tests.helpers.docker_engine import require_engine

SIMPLE = "FROM python:3.11-slim\nWORKDIR /app\n"


def resource_tasks(root: Path) -> Path:
    for name, toml in (("needs-gpu", "[environment]\ngpus = 1\n"),
                       ("needs-h100", '[environment]\ngpus = 2\ngpu_types = ["H100", "A100"]\n'),
                       ("small-disk", "[environment]\nstorage_mb = 512\n"),
                       ("plain", "")):
        write_task(root, name, instruction="Write `ok` to /app/ok.txt.", test="grep -qx ok /app/ok.txt\n" + REWARD_BY_EXIT,
                   solve="echo ok > /app/ok.txt\n", dockerfile=SIMPLE, toml=toml)
    return root


def test_gpus_and_storage_become_the_environments_request(tmp_path: Path) -> None:
    bench = HarborBenchmark(path=str(resource_tasks(tmp_path / "tasks")))
    req = RunRequest(benchmark="harbor", harness="nop", model="mock", environment="docker")
    specs = {t.task_id: bench.environment_spec(t, req) for t in bench.load_tasks(req)}
    assert specs["needs-gpu"].gpus == 1 and specs["needs-h100"].gpus == 2 and specs["plain"].gpus is None
    assert specs["small-disk"].storage == "512m" and specs["plain"].storage is None
    recorded = {t.task_id: t.metadata["harbor"]["unsupported"] for t in bench.load_tasks(req)}
    assert not any("gpus" in u or "storage" in u for us in recorded.values() for u in us)


async def test_a_task_needing_gpus_is_a_prepare_error_on_local(tmp_path: Path) -> None:
    run = await run_benchmark("harbor", "oracle", benchmark_args={"path": str(resource_tasks(tmp_path / "t"))},
                              run_dir=tmp_path / "run", task_ids=["needs-gpu", "needs-h100", "plain"])
    gpu, h100 = run.result("needs-gpu"), run.result("needs-h100")
    assert gpu.status is TaskStatus.PREPARE_ERROR and h100.status is TaskStatus.PREPARE_ERROR
    assert "needs 1 GPU(s) ([environment] gpus = 1)" in gpu.error and "has none" in gpu.error
    assert "of type H100 or A100" in h100.error
    assert run.result("plain").metrics["reward"] == 1.0


@pytest.mark.docker
async def test_gpus_and_storage_under_docker(tmp_path: Path) -> None:
    require_engine()
    run = await run_benchmark("harbor", "oracle", environment="docker",
                              benchmark_args={"path": str(resource_tasks(tmp_path / "t"))},
                              run_dir=tmp_path / "run", task_ids=["needs-gpu", "small-disk", "plain"])
    gpu = run.result("needs-gpu")
    assert gpu.status is TaskStatus.PREPARE_ERROR, gpu.error
    assert "asks for 1 GPU(s) and this docker engine has none" in gpu.error
    # This engine (overlay2 on ext4) cannot limit storage: the task runs without, and the log says so.
    assert run.result("small-disk").metrics["reward"] == 1.0
    assert run.result("plain").metrics["reward"] == 1.0
    logged = "".join(p.read_text(errors="replace") for p in run.run_dir.rglob("*.jsonl"))
    logged += "".join(p.read_text(errors="replace") for p in run.run_dir.rglob("*.log"))
    assert "docker.storage_limit_unsupported" in logged


@given(st.lists(st.sampled_from(["NVIDIA H100 80GB HBM3", "Tesla T4", "NVIDIA A100-SXM4-40GB"]), max_size=4),
       st.lists(st.sampled_from(["H100", "a100", "T4"]), max_size=2, unique=True))
def test_gpu_types_match_by_name(names: list[str], types: list[str]) -> None:
    usable = matching(names, types)
    if not types:
        assert usable == names
    else:
        assert all(any(t.lower() in n.lower() for t in types) for n in usable)
        assert len(usable) == sum(1 for n in names if any(t.lower() in n.lower() for t in types))
