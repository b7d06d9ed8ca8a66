"""``BaseBenchmark.next_step`` after a failed harness run: the benchmark sees the failure (a ``RUN_ERROR`` the
harness returned, or one it raised) and may go on to the next step; the attempt keeps that first failure's
status and error, whatever the later steps do. A benchmark without steps is unchanged (``next_step`` is
``None``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentcompass.runtime import BaseBenchmark, PreparedTask, RunResult, TaskSpec, TaskStatus
from agentcompass.runtime.metrics import make_metric_contract
from agentcompass.testing import run_benchmark


class TwoSteps(BaseBenchmark):
    """One task in two steps; ``next_step`` records the status of each run it is handed."""

    name = "two-steps"
    metric_contract = make_metric_contract("score")

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.handed: list[tuple[int, str]] = []

    def load_tasks(self, req):  # type: ignore[no-untyped-def]
        return [TaskSpec(task_id="t", data={"instruction": "go"})]

    async def prepare_task(self, task, req, plan, env=None):  # type: ignore[no-untyped-def]
        return PreparedTask(task_id=task.task_id, metadata={"step": 0})

    async def next_step(self, task, prepared, result, req, plan, env=None):  # type: ignore[no-untyped-def]
        step = int(prepared.metadata["step"])
        self.handed.append((step, result.status.value))
        return PreparedTask(task_id=task.task_id, metadata={"step": 1}) if step == 0 else None

    async def evaluate(self, task, prepared, result, req, plan, env=None):  # type: ignore[no-untyped-def]
        return result


def failing_first(how: str):  # type: ignore[no-untyped-def]
    async def run(task, prepared, req, plan, env) -> RunResult:  # type: ignore[no-untyped-def]
        if int(prepared.metadata["step"]) == 0:
            if how == "raise":
                raise ValueError("step zero crashed")
            return RunResult(task_id=task.task_id, status=TaskStatus.RUN_ERROR, error="step zero gave up")
        return RunResult(task_id=task.task_id, status=TaskStatus.COMPLETED)

    return run


async def test_a_returned_failure_is_handed_on_and_stands(tmp_path: Path) -> None:
    bench = TwoSteps()
    run = await run_benchmark(bench, failing_first("return"), run_dir=tmp_path / "run")
    assert bench.handed == [(0, "RUN_ERROR"), (1, "COMPLETED")]
    result = run.result("t")
    assert result.status is TaskStatus.RUN_ERROR and result.error == "step zero gave up"
    assert result.error_phase == "run"


async def test_a_raised_failure_is_handed_on_as_a_run_error_and_stands(tmp_path: Path) -> None:
    bench = TwoSteps()
    run = await run_benchmark(bench, failing_first("raise"), run_dir=tmp_path / "run")
    assert bench.handed == [(0, "RUN_ERROR"), (1, "COMPLETED")]
    result = run.result("t")
    assert result.status is TaskStatus.RUN_ERROR and "step zero crashed" in result.error
    assert result.attempt == 1  # a plugin's own bug: not retried
