"""The example_interactive benchmark: the spec's benchmark-driven execution, made real.

``prepare_task`` copies the standard-library runner package and a request file into the task environment;
``run_task`` runs ``python3 -m example_interactive.runner run`` there (the agent model is reached through the
run's gateway, whose ``OPENAI_*`` variables the runtime sets in every exec); ``evaluate`` replays the task's
golden actions on the initial database with the same domain code and gives reward 1.0 iff the agent's final
database equals the golden one (tau2-bench's DB check).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import replace
from importlib import resources
from typing import Any, ClassVar

from agentcompass.errors import UsageError
from agentcompass.runtime import (
    EnvironmentSession,
    ExecutionPlan,
    HarnessFreeBenchmark,
    PreparedTask,
    RunRequest,
    RunResult,
    TaskSpec,
    TaskStatus,
)
from agentcompass.runtime.metrics import MetricContract, make_metric_contract
from agentcompass.runtime.options import positive_int

PACKAGE = "example_interactive"
#: Where prepare_task puts things, relative to the environment's working directory.
PACKAGE_DIR = PACKAGE
IO_DIR = "example_interactive_run"
REQUEST_PATH = f"{IO_DIR}/request.json"
RESULT_PATH = f"{IO_DIR}/result.json"

DEFAULT_MAX_TURNS = 30
DEFAULT_TIMEOUT_SECONDS = 600.0


def _plain(value: Any) -> Any:
    """``value`` with every mapping a dict and every sequence a list, ready for ``json.dumps``."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _positive_float(name: str, value: Any) -> float:
    try:
        number = float(str(value).strip())
    except ValueError:
        raise UsageError(f"benchmark option {name!r} must be a positive number, got {value!r}") from None
    if not number > 0 or number == float("inf"):
        raise UsageError(f"benchmark option {name!r} must be a positive number, got {value!r}")
    return number


def load_task_file() -> dict[str, Any]:
    """The packaged ``tasks.json``."""
    return json.loads(resources.files(PACKAGE).joinpath("tasks.json").read_text(encoding="utf-8"))


class ExampleInteractiveBenchmark(HarnessFreeBenchmark):
    """A task-management support domain with a scripted user; reward = the final-database check.

    Options (``--benchmark-arg key=value``):

    * ``max_turns`` — agent model calls per task (default 30);
    * ``timeout`` — seconds the runner may take per task (default 600);
    * ``category`` — only tasks of these categories (comma-separated: create, update, policy, multi-step).
    """

    name: ClassVar[str] = "example_interactive"
    evaluation_environment_mode = "reuse"
    metric_contract: MetricContract = make_metric_contract(
        primary="score",
        scalar=("score",),
        labels={"score": "Reward"},
        binary=True,  # reward 1 iff the final database is the golden one: pass@k / pass^k over trials
    )
    OPTIONS: ClassVar[tuple[str, ...]] = ("max_turns", "timeout", "category")

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        unknown = sorted(set(options) - set(self.OPTIONS))
        if unknown:
            raise UsageError(
                f"unknown option(s) for benchmark {self.name!r}: {', '.join(unknown)}; "
                f"valid options: {', '.join(self.OPTIONS)}"
            )
        self.max_turns = positive_int("benchmark option", "max_turns", options.get("max_turns", DEFAULT_MAX_TURNS))
        self.timeout = _positive_float("timeout", options.get("timeout", DEFAULT_TIMEOUT_SECONDS))
        raw_categories = options.get("category")
        self.categories: tuple[str, ...] | None = None
        if raw_categories is not None:
            if isinstance(raw_categories, str):
                raw_categories = raw_categories.split(",")
            self.categories = tuple(c.strip() for c in raw_categories if str(c).strip())
            if not self.categories:
                raise UsageError("benchmark option 'category' names no category")

    # -- tasks ------------------------------------------------------------------------------------

    def load_tasks(self, req: RunRequest) -> Iterator[TaskSpec]:
        _ = req
        from example_interactive.runner import resolve_task

        doc = load_task_file()
        known = sorted({t["category"] for t in doc["tasks"]})
        if self.categories is not None:
            bad = sorted(set(self.categories) - set(known))
            if bad:
                raise UsageError(
                    f"unknown category {', '.join(map(repr, bad))} for benchmark {self.name!r}; "
                    f"categories: {', '.join(known)}"
                )
        for raw in doc["tasks"]:
            if self.categories is not None and raw["category"] not in self.categories:
                continue
            task = resolve_task(raw, doc["default_db"])
            yield TaskSpec(
                task_id=raw["id"],
                category=raw["category"],
                data=task,
                metadata={"description": raw.get("description", "")},
            )

    # -- lifecycle --------------------------------------------------------------------------------

    async def prepare_task(
        self, task: TaskSpec, req: RunRequest, plan: ExecutionPlan, env: EnvironmentSession | None = None
    ) -> PreparedTask:
        """Write the runner package and the request file. Overwrites the same files with the same content,
        so a retry can call it again; the runner removes a stale result before it starts."""
        _ = req, plan
        if env is None:
            raise RuntimeError("example_interactive requires an EnvironmentSession")
        from example_interactive import RUNNER_FILES

        package = resources.files(PACKAGE)
        for name in RUNNER_FILES:
            await env.write_text(f"{PACKAGE_DIR}/{name}", package.joinpath(name).read_text(encoding="utf-8"))
        request = {
            "task_id": task.task_id,
            "task": _plain(task.data),
            "max_turns": self.max_turns,
        }
        await env.write_text(REQUEST_PATH, json.dumps(request, indent=1, ensure_ascii=False))
        return PreparedTask(
            task_id=task.task_id,
            metadata={
                "official_runner": {
                    "package_dir": PACKAGE_DIR,
                    "request_path": REQUEST_PATH,
                    "result_path": RESULT_PATH,
                    "timeout_seconds": self.timeout,
                }
            },
        )

    async def run_task(
        self,
        task: TaskSpec,
        prepared: PreparedTask,
        req: RunRequest,
        plan: ExecutionPlan,
        env: EnvironmentSession | None = None,
    ) -> RunResult:
        _ = req, plan
        if env is None:
            raise RuntimeError("example_interactive requires an EnvironmentSession")
        return await self._run_runner("run", task, prepared, env)

    async def apply_reference_solution(
        self,
        task: TaskSpec,
        prepared: PreparedTask,
        req: RunRequest,
        plan: ExecutionPlan,
        env: EnvironmentSession | None = None,
    ) -> RunResult:
        """The golden actions, replayed by the runner in the environment (no model)."""
        _ = req, plan
        if env is None:
            raise RuntimeError("example_interactive requires an EnvironmentSession")
        return await self._run_runner("oracle", task, prepared, env)

    async def _run_runner(
        self, command: str, task: TaskSpec, prepared: PreparedTask, env: EnvironmentSession
    ) -> RunResult:
        runner = prepared.metadata["official_runner"]
        execution = await env.exec(
            [
                "python3",
                "-m",
                "example_interactive.runner",
                command,
                "--request",
                runner["request_path"],
                "--output",
                runner["result_path"],
            ],
            timeout=runner["timeout_seconds"],
        )
        if execution.returncode != 0 or execution.timed_out:
            detail = (execution.stderr or execution.stdout).strip()
            if execution.timed_out:
                detail = f"official runner timed out after {runner['timeout_seconds']}s" + (
                    f": {detail}" if detail else ""
                )
            return RunResult(
                task_id=task.task_id,
                category=task.category,
                status=TaskStatus.RUN_ERROR,
                error=detail or "official runner failed",
            )

        payload = json.loads(await env.read_text(runner["result_path"]))
        return RunResult(
            task_id=task.task_id,
            category=task.category,
            status=TaskStatus.COMPLETED,
            final_answer=payload.get("final_answer"),
            artifacts={"official_result": payload},
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
        """Reward 1.0 iff the final database equals the golden one (the golden actions replayed on the
        initial database with the same domain code), else 0.0."""
        _ = prepared, req, plan
        if result.status != TaskStatus.COMPLETED or result.error:
            return replace(result, metrics={})
        if env is None:
            raise RuntimeError("evaluation requires the task Environment")
        from example_interactive.domain import db_diff, db_equal, db_hash, replay

        payload = result.artifacts["official_result"]
        final_db = payload["final_db"]
        golden_db = replay(_plain(task.data["initial_db"]), _plain(task.data.get("golden_actions") or [])).snapshot()
        match = db_equal(final_db, golden_db)
        evaluation = {
            "db_match": match,
            "golden_db_hash": db_hash(golden_db),
            "final_db_hash": db_hash(final_db),
            "db_diff": db_diff(golden_db, final_db)[:20],
            "termination": payload.get("termination"),
            "turns": payload.get("turns"),
        }
        return replace(
            result,
            metrics={"score": 1.0 if match else 0.0},
            artifacts={**result.artifacts, "evaluation": evaluation},
        )
