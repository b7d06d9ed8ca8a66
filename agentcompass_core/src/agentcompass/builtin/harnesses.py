"""Built-in harnesses: ``none`` (the benchmark drives its own loop), ``nop`` and ``oracle``."""

from __future__ import annotations

from agentcompass.errors import UsageError
from agentcompass.runtime.benchmark import BaseBenchmark, HarnessFreeBenchmark
from agentcompass.runtime.environment import EnvironmentSession
from agentcompass.runtime.harness import BaseHarness
from agentcompass.runtime.types import ExecutionPlan, PreparedTask, RunRequest, RunResult, TaskSpec, TaskStatus


class NoHarness(BaseHarness):
    """``none``: no external harness. The runtime calls ``Benchmark.run_task`` instead of ``run``."""

    name = "none"
    known_options = ()

    def check_compatible(self, benchmark: BaseBenchmark) -> None:
        if not isinstance(benchmark, HarnessFreeBenchmark):
            raise UsageError(f"benchmark {benchmark.name!r} needs an agent harness, not 'none'")

    async def run(self, task, prepared, req, plan, env=None):
        raise RuntimeError("the 'none' harness never runs; the benchmark's run_task does")


class NopHarness(BaseHarness):
    """``nop``: does nothing and reports completion — the floor any agent should beat."""

    name = "nop"
    known_options = ()

    def check_compatible(self, benchmark: BaseBenchmark) -> None:
        # Any benchmark: one that drives its own loop is scored on its untouched state (the loop never runs),
        # which is what ``validate`` asks of every verifier.
        return None

    async def run(
        self, task: TaskSpec, prepared: PreparedTask, req: RunRequest, plan: ExecutionPlan,
        env: EnvironmentSession | None = None,
    ) -> RunResult:
        return RunResult(task_id=task.task_id, category=task.category, status=TaskStatus.COMPLETED)


class OracleHarness(BaseHarness):
    """``oracle``: applies the benchmark's reference solution — the ceiling, and a check of the scorer."""

    name = "oracle"
    known_options = ()

    def check_compatible(self, benchmark: BaseBenchmark) -> None:
        # Unlike agent harnesses, the oracle also runs benchmarks that drive their own loop: their reference
        # solution replaces the loop, which checks the scorer end to end.
        if not benchmark.has_reference_solutions():
            raise UsageError(
                f"benchmark {benchmark.name!r} has no reference solutions, so the 'oracle' harness cannot run "
                "it (a benchmark supports it by implementing apply_reference_solution)"
            )

    async def run(
        self, task: TaskSpec, prepared: PreparedTask, req: RunRequest, plan: ExecutionPlan,
        env: EnvironmentSession | None = None,
    ) -> RunResult:
        if self.benchmark is None:
            raise RuntimeError("the oracle harness runs only after the runtime bound it to a benchmark")
        return await self.benchmark.apply_reference_solution(task, prepared, req, plan, env)
