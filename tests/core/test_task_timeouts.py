"""``BaseBenchmark.task_timeouts``: a task's own phase timeouts over the run's defaults, below what the user
gives explicitly (``--timeout``, ``--phase-timeout``); a bad declaration is the benchmark's error."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from agentcompass.errors import PluginError
from agentcompass.resolve import phase_timeouts
from agentcompass.runtime import BaseBenchmark, RunRequest, RunResult, TaskSpec, TaskStatus
from agentcompass.runtime.phases import DEFAULT_TIMEOUTS
from agentcompass.testing import run_benchmark
from hypothesis import given
from hypothesis import strategies as st

PHASES = sorted(DEFAULT_TIMEOUTS)
seconds = st.floats(min_value=0.1, max_value=1e5, allow_nan=False)


class Declaring(BaseBenchmark):
    """Two tasks; ``short`` declares a 0.5 s run phase (or ``declared``), ``long`` nothing."""

    name = "declaring"
    declared: dict[str, Any] = {"run": 0.5}

    def load_tasks(self, req: RunRequest):  # type: ignore[no-untyped-def]
        yield TaskSpec(task_id="short", data={"instruction": "wait"})
        yield TaskSpec(task_id="long", data={"instruction": "wait"})

    def task_timeouts(self, task: TaskSpec, req: RunRequest) -> dict[str, Any]:
        return dict(self.declared) if task.task_id == "short" else {}

    async def evaluate(self, task, prepared, result, req, plan, env=None):  # type: ignore[no-untyped-def]
        return RunResult(task_id=task.task_id, metrics={"score": 1.0})


async def slow_agent(task, prepared, req, plan, env):  # type: ignore[no-untyped-def]
    await asyncio.sleep(1.0)
    return RunResult(task_id=task.task_id, status=TaskStatus.COMPLETED)


async def test_a_declared_timeout_applies_to_its_task_only(tmp_path: Path) -> None:
    run = await run_benchmark(Declaring, slow_agent, run_dir=tmp_path / "run")
    short, long = run.result("short"), run.result("long")
    assert short.status is TaskStatus.RUN_ERROR and "0.5" in (short.error or ""), short
    assert long.status is TaskStatus.COMPLETED, long


@pytest.mark.parametrize("explicit", [{"timeout": 5.0}, {"phase_timeouts": {"run": 5.0}}])
async def test_an_explicit_timeout_wins_over_the_declared_one(tmp_path: Path, explicit: dict[str, Any]) -> None:
    run = await run_benchmark(Declaring, slow_agent, run_dir=tmp_path / "run", **explicit)
    assert run.result("short").status is TaskStatus.COMPLETED, run.result("short").error


@pytest.mark.parametrize("bad", [{"verify": 10.0}, {"run": -1.0}, {"run": float("nan")}, {"run": "10"}])
async def test_a_bad_declaration_names_the_benchmark_and_task(tmp_path: Path, bad: dict[str, Any]) -> None:
    class Bad(Declaring):
        declared = bad

    with pytest.raises(PluginError, match="task 'short'"):
        await run_benchmark(Bad, slow_agent, run_dir=tmp_path / "run")


@given(declared=st.dictionaries(st.sampled_from(PHASES), seconds), given_=st.dictionaries(st.sampled_from(PHASES), seconds),
       timeout=st.none() | seconds)
def test_precedence_defaults_then_declared_then_timeout_then_phase_timeout(
    declared: dict[str, float], given_: dict[str, float], timeout: float | None
) -> None:
    req = RunRequest(benchmark="b", harness="h", model="m").with_options(phase_timeouts=given_, timeout=timeout)
    merged = phase_timeouts(req, declared)
    for phase in PHASES:
        if phase in given_:
            expected = given_[phase]
        elif phase == "run" and timeout is not None:
            expected = timeout
        else:
            expected = declared.get(phase, DEFAULT_TIMEOUTS[phase])
        assert merged[phase] == expected
