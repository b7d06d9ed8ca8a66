"""Fixtures for the example_coding tests: real environment sessions and real task attempts, both from the
plugin test kit (``agentcompass.testing``)."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from agentcompass.runtime import EnvironmentSession, RunResult, TaskSpec
from agentcompass.testing import environment_sessions, run_benchmark
from agentcompass_example_coding.benchmark import ExampleCodingBenchmark

OpenEnv = Callable[[], Awaitable[EnvironmentSession]]


@pytest.fixture
async def open_env() -> AsyncIterator[OpenEnv]:
    """An async callable that opens a new session of the ``local`` environment; all are closed at teardown."""
    async with environment_sessions("local", run_id="example-coding-test") as sessions:
        yield sessions.open


@pytest.fixture
def environment() -> str:
    """The environment ``attempt`` runs in (the docker tests override it)."""
    return "local"


@pytest.fixture
def attempt(environment: str, tmp_path: Path) -> Callable[..., Awaitable[RunResult]]:
    """``await attempt(bench, task, act)`` runs one task attempt through the real lifecycle (the kit's
    ``run_benchmark``): prepare, ``act`` as the harness (a harness name, or an async function with
    ``BaseHarness.run``'s arguments), collect; then evaluate in a fresh environment holding what was
    collected. Returns the task's final result."""
    counter = itertools.count()

    async def run(bench: ExampleCodingBenchmark, task: TaskSpec, act: Any) -> RunResult:
        outcome = await run_benchmark(bench, act, environment=environment, task_ids=[task.task_id],
                                      run_dir=tmp_path / f"run-{next(counter)}")
        assert outcome.summary["environment"] == environment
        return outcome.result(task.task_id)

    return run
