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
from agentcompass_example_coding.benchmark import ExampleCodingBenchmark

ROOT = Path(__file__).resolve().parents[2]
REQUEST = RunRequest(benchmark="example_coding", harness="test", model="mock")
TASK_IDS = ("fizzbuzz", "roman", "is_palindrome", "word_count", "flatten", "merge_intervals")

#: Plays the harness in ``attempt``: gets the prepared task and the live environment, returns the run's result.
Act = Callable[[TaskSpec, PreparedTask, ExecutionPlan, EnvironmentSession], Awaitable[RunResult]]


def task(task_id: str, bench: ExampleCodingBenchmark | None = None) -> TaskSpec:
    bench = bench or ExampleCodingBenchmark()
    return next(t for t in bench.load_tasks(REQUEST) if t.task_id == task_id)


def completed(spec: TaskSpec) -> RunResult:
    return RunResult(task_id=spec.task_id, category=spec.category, status=TaskStatus.COMPLETED)


def writes(text: str) -> Act:
    """An 'agent' that writes ``solution.py`` and finishes normally."""

    async def act(spec: TaskSpec, prepared: PreparedTask, plan: ExecutionPlan, env: EnvironmentSession):
        await env.write_text("solution.py", text)
        return completed(spec)

    return act


async def does_nothing(spec: TaskSpec, prepared: PreparedTask, plan: ExecutionPlan, env: EnvironmentSession):
    """The ``nop`` harness's behaviour."""
    return completed(spec)


def oracle(bench: ExampleCodingBenchmark) -> Act:
    """The ``oracle`` harness's behaviour."""

    async def act(spec: TaskSpec, prepared: PreparedTask, plan: ExecutionPlan, env: EnvironmentSession):
        return await bench.apply_reference_solution(spec, prepared, REQUEST, plan, env)

    return act


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
