"""ExampleCodingBenchmark: write ``solution.py`` implementing one function; hidden tests score it.

An ordinary (harness-driven) benchmark:

* ``prepare_task`` writes ``PROMPT.md`` into the task environment (the prompt is also
  ``TaskSpec.data["prompt"]``, and what ``instruction()`` gives agent harnesses such as ``react``);
* the harness (an agent, or the built-in ``oracle`` / ``nop``) writes — or not — ``solution.py``;
* ``collect_artifacts`` downloads ``solution.py`` into ``plan.artifacts_dir``; it never scores;
* ``evaluate`` runs in a *fresh* environment holding the submission as ``artifacts/solution.py``, copies the
  verifier and the hidden tests in, and turns the verifier's JSON report into ``score`` (1.0 when every hidden
  test passes) and ``tests_passed_fraction``.
"""

from __future__ import annotations

import ast
import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

from agentcompass.errors import UsageError
from agentcompass.runtime import (
    BaseBenchmark,
    EnvironmentSession,
    ExecutionPlan,
    PreparedTask,
    RunRequest,
    RunResult,
    TaskSpec,
    TaskStatus,
)
from agentcompass.runtime.benchmark import EvaluationEnvironmentMode
from agentcompass.runtime.metrics import MetricContract, make_metric_contract

from agentcompass_example_coding import tasks
from agentcompass_example_coding.tasks import PROMPT_FILE, SOLUTION_FILE

#: Where the fresh evaluation environment holds the collected submission (the runtime places every file of
#: ``plan.artifacts_dir`` under ``artifacts/``).
SUBMISSION_PATH = f"artifacts/{SOLUTION_FILE}"
VERIFIER_FILE = "run_tests.py"
HIDDEN_TESTS_FILE = "hidden_tests.py"

DEFAULT_TEST_TIMEOUT = 10.0
#: Slack per verifier child process (interpreter start-up) and for the whole verifier run.
_PER_PROCESS_SLACK = 5.0
_VERIFIER_SLACK = 30.0

VALID_OPTIONS = ("categories", "test_timeout")


class ExampleCodingBenchmark(BaseBenchmark):
    """Six small Python coding tasks (math, strings, lists) with hidden tests and reference solutions.

    Options (``--benchmark-arg key=value``):

    * ``categories`` — comma-separated categories to keep (default: all);
    * ``test_timeout`` — seconds each hidden test may run (default 10); a submission that exceeds it
      fails that test.
    """

    name: ClassVar[str] = "example_coding"
    evaluation_environment_mode: EvaluationEnvironmentMode = "fresh"
    metric_contract: MetricContract = make_metric_contract(
        primary="score",
        scalar=("score", "tests_passed_fraction"),
        labels={"score": "Solved (all hidden tests pass)", "tests_passed_fraction": "Hidden tests passed"},
        bounds=(0, 1),
        binary=True,  # score is 1 when every hidden test passes: pass@k / pass^k over trials
    )

    def __init__(self, **options: Any) -> None:
        unknown = sorted(set(options) - set(VALID_OPTIONS))
        if unknown:
            raise UsageError(
                f"unknown option(s) {', '.join(repr(o) for o in unknown)} for benchmark {self.name!r}; "
                f"valid options: {', '.join(VALID_OPTIONS)}"
            )
        super().__init__(**options)
        self.categories = _parse_categories(options.get("categories"))
        self.test_timeout = _parse_timeout(options.get("test_timeout", DEFAULT_TEST_TIMEOUT))

    # -- tasks ---------------------------------------------------------------------------------------

    def load_tasks(self, req: RunRequest) -> Iterator[TaskSpec]:
        """Yield the tasks (``req.tasks.task_ids`` / ``req.tasks.limit`` are applied by the runtime)."""
        _ = req
        for task in tasks.load_all():
            if self.categories is not None and task.category not in self.categories:
                continue
            yield TaskSpec(
                task_id=task.task_id,
                category=task.category,
                data={
                    "prompt": task.prompt,
                    "entry_point": task.entry_point,
                    "signature": task.signature,
                    "solution_file": SOLUTION_FILE,
                },
                metadata={"language": "python"},
            )

    async def prepare_task(
        self, task: TaskSpec, req: RunRequest, plan: ExecutionPlan, env: EnvironmentSession | None = None
    ) -> PreparedTask:
        """Write ``PROMPT.md`` into the working directory. Idempotent: it only (re)writes that file and
        leaves whatever the agent wrote alone."""
        _ = req, plan
        env = _require(env, "prepare_task")
        await env.write_text(PROMPT_FILE, str(task.data["prompt"]))
        return PreparedTask(
            task_id=task.task_id,
            metadata={"prompt_file": PROMPT_FILE, "solution_file": SOLUTION_FILE},
        )

    def instruction(self, task: TaskSpec, prepared: PreparedTask) -> str:
        """The task's prompt (also in ``PROMPT.md``), for agent harnesses: write ``solution.py`` in the
        working directory. The hidden tests and the reference solution are never part of it."""
        _ = prepared
        return str(task.data["prompt"])

    async def apply_reference_solution(
        self,
        task: TaskSpec,
        prepared: PreparedTask,
        req: RunRequest,
        plan: ExecutionPlan,
        env: EnvironmentSession | None = None,
    ) -> RunResult:
        """Write the known-good ``solution.py``, as an agent would (the ``oracle`` harness calls this)."""
        _ = prepared, req, plan
        env = _require(env, "apply_reference_solution")
        await env.write_text(SOLUTION_FILE, tasks.by_id(task.task_id).reference_solution)
        return RunResult(task_id=task.task_id, category=task.category, status=TaskStatus.COMPLETED)

    # -- collection and scoring ----------------------------------------------------------------------

    async def collect_artifacts(
        self,
        task: TaskSpec,
        prepared: PreparedTask,
        result: RunResult,
        req: RunRequest,
        plan: ExecutionPlan,
        env: EnvironmentSession | None = None,
    ) -> RunResult:
        """Download ``solution.py`` into ``plan.artifacts_dir`` when the agent wrote one. Never scores; a
        missing file is not an error, just no submission."""
        _ = task, prepared, req
        env = _require(env, "collect_artifacts")
        check = await env.exec(["test", "-f", SOLUTION_FILE], timeout=60)
        if check.returncode == 1 and not check.timed_out:
            return replace(result, artifacts={**result.artifacts, "submitted": False, "files": []})
        if check.returncode != 0:
            raise RuntimeError(f"could not check for {SOLUTION_FILE}: {_detail(check.stderr, check.stdout)}")
        if not plan.artifacts_dir:
            raise RuntimeError("plan.artifacts_dir is not set; cannot save the submission")
        target = Path(plan.artifacts_dir) / SOLUTION_FILE
        target.parent.mkdir(parents=True, exist_ok=True)
        await env.download(SOLUTION_FILE, target)
        data = target.read_bytes()
        return replace(
            result,
            artifacts={
                **result.artifacts,
                "submitted": True,
                "files": [SOLUTION_FILE],
                "solution_sha256": hashlib.sha256(data).hexdigest(),
                "solution_bytes": len(data),
            },
        )

    async def evaluate(
        self,
        task: TaskSpec,
        prepared: PreparedTask,
        result: RunResult,
        req: RunRequest,
        plan: ExecutionPlan,
        env: EnvironmentSession | None = None,
    ) -> RunResult:
        """Run the hidden tests against ``artifacts/solution.py`` in the fresh evaluation environment.

        A result that is not ``COMPLETED`` is returned as it is, without metrics. No submission, or one that
        fails to import, crashes or loops (each hidden test has ``test_timeout`` seconds) scores 0. A failure
        of the verifier itself (it crashes, times out as a whole, or prints no valid report) raises, and the
        runtime records the task as ``EVAL_ERROR`` — a verifier bug must never look like a bad submission.
        """
        _ = prepared, req, plan
        if result.status is not TaskStatus.COMPLETED or result.error:
            return replace(result, metrics={})
        env = _require(env, "evaluate")
        coding_task = tasks.by_id(task.task_id)
        await env.write_text(VERIFIER_FILE, tasks.verifier_source())
        await env.write_text(HIDDEN_TESTS_FILE, coding_task.hidden_tests)
        run = await env.exec(
            [
                "python3",
                VERIFIER_FILE,
                "--tests",
                HIDDEN_TESTS_FILE,
                "--submission",
                SUBMISSION_PATH,
                "--timeout",
                repr(self.test_timeout),
            ],
            timeout=self._verifier_timeout(coding_task.hidden_tests),
        )
        if run.timed_out:
            raise RuntimeError("the example_coding verifier timed out")  # → EVAL_ERROR
        if run.returncode != 0:  # → EVAL_ERROR
            detail = _detail(run.stderr, run.stdout)
            raise RuntimeError(f"the example_coding verifier failed (exit {run.returncode}): {detail}")
        report = _parse_report(run.stdout)  # raises on an unparseable report → EVAL_ERROR
        passed, total = report["passed"], report["total"]
        return replace(
            result,
            artifacts={
                **result.artifacts,
                "evaluation": {
                    "submitted": report["submitted"],
                    "passed": passed,
                    "total": total,
                    "failures": {t["name"]: t["error"] for t in report["tests"] if not t["passed"]},
                },
            },
            metrics={"score": 1.0 if passed == total else 0.0, "tests_passed_fraction": passed / total},
        )

    def _verifier_timeout(self, hidden_tests: str) -> float:
        # One import preflight plus one child per hidden test, each bounded by test_timeout.
        n_tests = sum(
            isinstance(node, ast.FunctionDef) and node.name.startswith("test_") for node in ast.parse(hidden_tests).body
        )
        return (n_tests + 1) * (self.test_timeout + _PER_PROCESS_SLACK) + _VERIFIER_SLACK


def _require(env: EnvironmentSession | None, phase: str) -> EnvironmentSession:
    if env is None:
        raise RuntimeError(f"example_coding needs an environment in {phase}")
    return env


def _detail(*texts: str) -> str:
    for text in texts:
        if text and text.strip():
            return text.strip()[-2000:]
    return "(no output)"


def _parse_report(stdout: str) -> Mapping[str, Any]:
    """The verifier's report: the last non-empty line of its stdout, a JSON object."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    if not lines:
        raise RuntimeError("the example_coding verifier printed no report")
    try:
        report = json.loads(lines[-1])
    except json.JSONDecodeError as exc:
        raise RuntimeError(f"the example_coding verifier printed an unparseable report: {exc}") from exc
    if not (
        isinstance(report, dict)
        and isinstance(report.get("passed"), int)
        and isinstance(report.get("total"), int)
        and isinstance(report.get("tests"), list)
        and isinstance(report.get("submitted"), bool)
        and 0 <= report["passed"] <= report["total"]
        and report["total"] > 0
    ):
        raise RuntimeError(f"the example_coding verifier printed an invalid report: {lines[-1][:500]}")
    return report


def _parse_categories(value: Any) -> frozenset[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        names = [v.strip() for v in value.split(",") if v.strip()]
    elif isinstance(value, list | tuple | set | frozenset):
        names = [str(v).strip() for v in value]
    else:
        raise UsageError(f"option 'categories' must be a comma-separated list, got {value!r}")
    known = sorted({t.category for t in tasks.load_all()})
    bad = sorted(set(names) - set(known))
    if bad or not names:
        raise UsageError(
            f"option 'categories': unknown or empty {', '.join(repr(b) for b in bad) or repr(value)}; "
            f"known categories: {', '.join(known)}"
        )
    return frozenset(names)


def _parse_timeout(value: Any) -> float:
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise UsageError(f"option 'test_timeout' must be a number of seconds, got {value!r}") from None
    if not 0 < seconds <= 3600:
        raise UsageError(f"option 'test_timeout' must be between 0 and 3600 seconds, got {value!r}")
    return seconds
