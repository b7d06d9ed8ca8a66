"""Benchmarks own tasks and scoring.

Lifecycle of a task attempt (the runtime drives it and owns the environment)::

    prepare_task → run (Harness.run, or Benchmark.run_task under the `none` harness)
                 → collect_artifacts → evaluate
"""

from __future__ import annotations

from collections.abc import AsyncIterable, Iterable, Mapping
from typing import Any, ClassVar, Literal

from agentcompass.runtime.environment import EnvironmentSession
from agentcompass.runtime.metrics import MetricContract, make_metric_contract
from agentcompass.runtime.types import (
    EnvironmentSpec,
    ExecutionPlan,
    PreparedTask,
    RunRequest,
    RunResult,
    TaskSpec,
)

EvaluationEnvironmentMode = Literal["none", "reuse", "fresh"]


class BaseBenchmark:
    """Base class of every benchmark.

    Class attributes:

    * ``name`` — the id users type; the registered name wins when they differ.
    * ``metric_contract`` — what ``evaluate`` puts into ``RunResult.metrics``.
    * ``evaluation_environment_mode`` — ``"none"``: ``evaluate`` gets ``env=None`` and the run environment
      closes after collection; ``"reuse"``: ``evaluate`` runs in the task's environment; ``"fresh"``: a new
      environment from the same spec, holding the files ``collect_artifacts`` saved into
      ``plan.artifacts_dir`` under ``artifacts/`` (see ``evaluation_artifacts_path``).
    * ``required_model_roles`` — roles that must be configured (``"agent"``, ``"user"``, ``"judge"``).
    * ``evaluate_needs_live_environment`` — ``evaluate`` reads state that only the task's live environment holds
      (not the collected artifacts nor the result), so ``agentcompass evaluate`` refuses to score a finished run
      again. When False (the default), a re-scored ``reuse`` benchmark gets a fresh environment with the
      collected artifacts under ``artifacts/``, as ``fresh`` does.
    * ``evaluation_artifacts_path`` — where a fresh evaluation environment holds the collected artifacts: relative
      to its working directory (the default, ``"artifacts"``) or absolute. A benchmark that grades the working
      directory itself (a repository at a commit) sets an absolute path outside it, so nothing collected lands
      inside what is graded.
    * ``metric_contract`` may also be the name of a registered contract (``"score"``, ``"reward"``, ...).
    """

    name: ClassVar[str] = ""
    # Class attributes a benchmark may also set per instance (from its options), hence not ClassVar.
    metric_contract: MetricContract | str = make_metric_contract(primary="score", scalar=("score",))
    evaluation_environment_mode: EvaluationEnvironmentMode = "none"
    required_model_roles: tuple[str, ...] = ("agent",)
    evaluate_needs_live_environment: bool = False
    evaluation_artifacts_path: str = "artifacts"

    def __init__(self, **options: Any) -> None:
        """``options`` come from ``--benchmark-arg key=value``. Reject unknown ones with
        :class:`~agentcompass.errors.UsageError`."""
        self.options = options

    def load_tasks(self, req: RunRequest) -> Iterable[TaskSpec] | AsyncIterable[TaskSpec]:
        """Yield the benchmark's tasks (may be an async generator)."""
        raise NotImplementedError(f"{type(self).__name__} must implement load_tasks()")

    def environment_spec(self, task: TaskSpec, req: RunRequest) -> EnvironmentSpec:
        """The environment a task runs in. Default: ``python:3.11-slim``, no network."""
        return EnvironmentSpec()

    def task_timeouts(self, task: TaskSpec, req: RunRequest) -> Mapping[str, float]:
        """Seconds per phase this task declares (``run``, ``evaluate``, ``prepare``, ``collect``,
        ``environment``, ``close``), over the run's defaults: for tasks that say how long they may take (Harbor's
        ``[agent] timeout_sec`` and ``[verifier] timeout_sec``). ``--timeout`` and ``--phase-timeout``, when
        given, still win. Called once per task before the run starts. Default: none."""
        return {}

    async def prepare_task(
        self, task: TaskSpec, req: RunRequest, plan: ExecutionPlan, env: EnvironmentSession | None = None
    ) -> PreparedTask:
        """Place the task's material in the environment. Must be idempotent: a retry calls it again."""
        return PreparedTask(task_id=task.task_id)

    def instruction(self, task: TaskSpec, prepared: PreparedTask) -> str:
        """What the agent must do, as text: what agent harnesses (``react``, ``command``) hand to the model or
        the agent program. Called after ``prepare_task``.

        Default: ``task.data["instruction"]``, else ``task.data["prompt"]`` (a non-empty string). Override it
        when the instruction lives elsewhere (a file, ``prepared.metadata``). Never put hidden tests or
        reference solutions into it.

        :raises NotImplementedError: the task states no instruction (neither key is set).
        """
        for key in ("instruction", "prompt"):
            value = task.data.get(key)
            if isinstance(value, str) and value.strip():
                return value
        raise NotImplementedError(
            f"benchmark {self.name or type(self).__name__!r} states no instruction for task {task.task_id!r}: "
            "its data has no non-empty 'instruction' or 'prompt', and the benchmark does not implement "
            "instruction(task, prepared)"
        )

    async def next_step(
        self,
        task: TaskSpec,
        prepared: PreparedTask,
        result: RunResult,
        req: RunRequest,
        plan: ExecutionPlan,
        env: EnvironmentSession | None = None,
    ) -> PreparedTask | None:
        """After the harness's run completed or failed (``result.status`` ``COMPLETED`` or ``RUN_ERROR``; a
        harness that raised is a ``RUN_ERROR`` here): ``None`` (the default) ends the run phase; a
        :class:`PreparedTask` runs the harness again, in the same environment, with it — a multi-step task's next
        step, whose instruction :meth:`instruction` gives for that ``prepared``. The benchmark may verify the
        finished step here (its time counts in the run phase's). The attempt keeps the first failed run's status
        and error, whatever the later steps do. The last ``prepared`` is the one ``evaluate`` gets."""
        return None

    async def collect_artifacts(
        self,
        task: TaskSpec,
        prepared: PreparedTask,
        result: RunResult,
        req: RunRequest,
        plan: ExecutionPlan,
        env: EnvironmentSession | None = None,
    ) -> RunResult:
        """Extract submissions from the environment into ``result`` (and ``plan.artifacts_dir``).
        Never scores."""
        return result

    async def evaluate(
        self,
        task: TaskSpec,
        prepared: PreparedTask,
        result: RunResult,
        req: RunRequest,
        plan: ExecutionPlan,
        env: EnvironmentSession | None = None,
    ) -> RunResult:
        """Score ``result`` into ``metrics``. A result that is not ``COMPLETED`` keeps its status and
        error (the runtime enforces this); a crash here becomes ``EVAL_ERROR``."""
        raise NotImplementedError(f"{type(self).__name__} must implement evaluate()")

    # Optional: benchmarks with reference solutions support the `oracle` harness.
    async def apply_reference_solution(
        self,
        task: TaskSpec,
        prepared: PreparedTask,
        req: RunRequest,
        plan: ExecutionPlan,
        env: EnvironmentSession | None = None,
    ) -> RunResult:
        """Apply the task's reference solution in the environment, as an agent would, and return the
        run's result. Implement it to make the ``oracle`` harness available."""
        raise NotImplementedError

    @classmethod
    def has_reference_solutions(cls) -> bool:
        return cls.apply_reference_solution is not BaseBenchmark.apply_reference_solution


class HarnessFreeBenchmark(BaseBenchmark):
    """A benchmark that drives its own multi-role loop (user simulator, domain state machine).

    Run it with the ``none`` harness; ``run_task`` replaces ``Harness.run``. It must not create or close the
    environment, and it must not score: ``evaluate`` does.
    """

    async def run_task(
        self,
        task: TaskSpec,
        prepared: PreparedTask,
        req: RunRequest,
        plan: ExecutionPlan,
        env: EnvironmentSession | None = None,
    ) -> RunResult:
        raise NotImplementedError(f"{type(self).__name__} must implement run_task()")
