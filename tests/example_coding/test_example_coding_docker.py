"""example_coding in the ``docker`` environment: the verifier's guards hold inside a container too.

Needs a running Docker engine with the local ``python:3.11-slim`` image (``.ci/docker-up.sh``); skipped
otherwise, with the reason, by the engine check the docker tests share (not by how the CLI happens to fail).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest
from agentcompass.errors import EnvironmentUnavailable
from agentcompass.plugins import load_plugins
from agentcompass.runtime import EnvironmentSession, EnvironmentSpec, TaskStatus
from agentcompass_example_coding import tasks as task_data
from agentcompass_example_coding.benchmark import ExampleCodingBenchmark
from ec_support import REQUEST, TASK_IDS, agentcompass, does_nothing, results, task, writes

from tests.helpers.docker_engine import require_engine

pytestmark = pytest.mark.docker

RUN_ID = "example-coding-docker-test"


@pytest.fixture
def docker_available() -> None:
    """Skips unless the docker environment is registered and a Docker engine with the test image answers."""
    if "docker" not in load_plugins().names("environment"):
        pytest.skip("no docker environment is registered")
    require_engine()


@pytest.fixture
async def open_env(docker_available: None) -> AsyncIterator:
    """Overrides conftest's ``open_env``: sessions of the registered ``docker`` environment."""
    provider = load_plugins().factory("environment", "docker")()
    try:
        await provider.setup([EnvironmentSpec()], run_id=RUN_ID)
    except EnvironmentUnavailable as exc:  # the engine answered the check but not the provider: a real failure
        pytest.fail(f"the docker environment cannot start although the engine answers: {exc}")
    sessions: list[EnvironmentSession] = []

    async def open_docker() -> EnvironmentSession:
        session = await provider.open(EnvironmentSpec(), run_id=RUN_ID, task_id=f"t{len(sessions)}", base_env={})
        sessions.append(session)
        return session

    try:
        yield open_docker
    finally:
        for session in sessions:
            await provider.close(session)
        await provider.teardown()


@pytest.fixture
def environment(open_env) -> str:
    """Overrides conftest's ``environment``: ``attempt`` runs in the registered ``docker`` environment
    (``open_env`` above skips the test when there is none)."""
    return "docker"


async def test_reference_solutions_pass_in_docker(attempt) -> None:
    bench = ExampleCodingBenchmark()
    out = await asyncio.gather(
        *(
            attempt(bench, spec, writes(task_data.by_id(spec.task_id).reference_solution))
            for spec in bench.load_tasks(REQUEST)
        )
    )
    assert [r.metrics for r in out] == [{"score": 1.0, "tests_passed_fraction": 1.0}] * len(out)


@pytest.mark.parametrize(
    ("source", "fraction"),
    [
        (None, 0.0),  # no submission
        ("def roman(n):\n    while True:\n        pass\n", 0.0),
        ("while True:\n    pass\n", 0.0),
        ("import os\nos._exit(0)\n", 0.0),
        ("x = 'a' * (1 << 33)\n", 0.0),
        (
            task_data.by_id("roman").reference_solution
            + "\n_real = roman\n\ndef roman(n):\n    while n == 3999:\n        pass\n    return _real(n)\n",
            3 / 5,
        ),
    ],
)
async def test_bad_submissions_in_docker(attempt, source: str | None, fraction: float) -> None:
    bench = ExampleCodingBenchmark(test_timeout="2")
    act = does_nothing if source is None else writes(source)
    result = await attempt(bench, task("roman", bench), act)
    assert result.status is TaskStatus.COMPLETED
    assert result.metrics == {"score": 0.0, "tests_passed_fraction": pytest.approx(fraction)}


@pytest.mark.parametrize(("harness", "score"), [("oracle", 1.0), ("nop", 0.0)])
def test_cli_run_in_docker(docker_available: None, tmp_path, harness: str, score: float) -> None:
    run_dir = tmp_path / harness
    proc = agentcompass("run", "example_coding", harness, "mock", "--env", "docker", "--json", "-o", str(run_dir))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["status_counts"] == {"COMPLETED": len(TASK_IDS)}
    assert [r["metrics"]["score"] for r in results(run_dir)] == [score] * len(TASK_IDS)
