"""Fixtures for the example_coding tests: real environment sessions (the core's ``local`` environment) and a
stand-in for one task attempt."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from agentcompass.builtin.local_env import LocalProvider
from agentcompass.runtime import (
    EnvironmentSession,
    EnvironmentSpec,
    ExecutionPlan,
    RunResult,
    TaskSpec,
)
from agentcompass_example_coding.benchmark import ExampleCodingBenchmark
from ec_support import REQUEST, Act

OpenEnv = Callable[[], Awaitable[EnvironmentSession]]


@pytest.fixture
async def open_env(tmp_path: Path) -> AsyncIterator[OpenEnv]:
    """An async callable that opens a new ``local`` session; all are closed at teardown."""
    provider = LocalProvider(root=str(tmp_path / "local"))
    await provider.setup([EnvironmentSpec()], run_id="example-coding-test")
    sessions: list[EnvironmentSession] = []

    async def open_local() -> EnvironmentSession:
        session = await provider.open(
            EnvironmentSpec(), run_id="example-coding-test", task_id=f"t{len(sessions)}", base_env={}
        )
        sessions.append(session)
        return session

    try:
        yield open_local
    finally:
        for session in sessions:
            await provider.close(session)
        await provider.teardown()


@pytest.fixture
def attempt(open_env: OpenEnv, tmp_path: Path) -> Callable[..., Awaitable[RunResult]]:
    """``await attempt(bench, task, act)`` runs one task attempt the way the runtime does for a ``fresh``
    benchmark: prepare, act (standing in for the harness), collect in one environment; then evaluate in a new
    one holding the files of ``plan.artifacts_dir`` under ``artifacts/``."""
    counter = iter(range(1_000_000))

    async def run(bench: ExampleCodingBenchmark, task: TaskSpec, act: Act) -> RunResult:
        artifacts_dir = tmp_path / f"artifacts-{next(counter)}"
        plan = ExecutionPlan(
            run_id="example-coding-test",
            task_id=task.task_id,
            harness="test",
            artifacts_dir=str(artifacts_dir),
        )
        env = await open_env()
        prepared = await bench.prepare_task(task, REQUEST, plan, env)
        result = await act(task, prepared, plan, env)
        result = await bench.collect_artifacts(task, prepared, result, REQUEST, plan, env)
        eval_env = await open_env()
        if artifacts_dir.is_dir():
            await eval_env.upload(artifacts_dir, "artifacts")
        return await bench.evaluate(task, prepared, result, REQUEST, plan, eval_env)

    return run
