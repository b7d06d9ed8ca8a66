"""Helpers shared by the example_coding tests (imported by module name: pytest puts this directory on
``sys.path``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from agentcompass.runtime import (
    EnvironmentSession,
    ExecutionPlan,
    PreparedTask,
    RunRequest,
    RunResult,
    TaskSpec,
    TaskStatus,
)
from agentcompass_example_coding import tasks as task_data
from agentcompass_example_coding.benchmark import ExampleCodingBenchmark

ROOT = Path(__file__).resolve().parents[2]
REQUEST = RunRequest(benchmark="example_coding", harness="test", model="mock")
TASK_IDS = ("fizzbuzz", "roman", "is_palindrome", "word_count", "flatten", "merge_intervals")

#: Plays the harness in ``attempt``: ``BaseHarness.run``'s arguments, returns the run's result.
Act = Callable[[TaskSpec, PreparedTask, RunRequest, ExecutionPlan, EnvironmentSession], Awaitable[RunResult]]


def task(task_id: str, bench: ExampleCodingBenchmark | None = None) -> TaskSpec:
    bench = bench or ExampleCodingBenchmark()
    return next(t for t in bench.load_tasks(REQUEST) if t.task_id == task_id)


def completed(spec: TaskSpec) -> RunResult:
    return RunResult(task_id=spec.task_id, category=spec.category, status=TaskStatus.COMPLETED)


def writes(text: str) -> Act:
    """An 'agent' that writes ``solution.py`` and finishes normally."""

    async def act(spec: TaskSpec, prepared: PreparedTask, req: RunRequest, plan: ExecutionPlan,
                  env: EnvironmentSession) -> RunResult:
        await env.write_text("solution.py", text)
        return completed(spec)

    return act


async def writes_the_reference(spec: TaskSpec, prepared: PreparedTask, req: RunRequest, plan: ExecutionPlan,
                               env: EnvironmentSession) -> RunResult:
    """An 'agent' that writes the task's reference solution, as a file, like any agent."""
    await env.write_text("solution.py", task_data.by_id(spec.task_id).reference_solution)
    return completed(spec)


#: The built-in ``nop`` harness: does nothing.
does_nothing = "nop"


def oracle(bench: ExampleCodingBenchmark) -> str:
    """The built-in ``oracle`` harness (the runtime binds it to ``bench``)."""
    return "oracle"


def agentcompass_command() -> list[str] | None:
    """The workspace's ``agentcompass`` console script (what ``uv run agentcompass`` runs), if installed."""
    script = Path(sys.executable).with_name("agentcompass")
    return [str(script)] if script.exists() else None


def agentcompass(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run ``agentcompass ARGS`` from the repository root with every installed plugin."""
    argv = agentcompass_command() or [sys.executable, "-m", "agentcompass.cli.main"]
    return subprocess.run(
        [*argv, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={k: v for k, v in os.environ.items() if k != "AGENTCOMPASS_LOAD_PLUGINS"},
    )


def results(run_dir: Path) -> list[dict[str, Any]]:
    """The records of ``results.jsonl``."""
    return [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines() if line.strip()]
