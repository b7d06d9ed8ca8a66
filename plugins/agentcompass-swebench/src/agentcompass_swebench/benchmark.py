"""``swebench``: SWE-bench instances in their own images, graded by the official ``swebench`` package.

    agentcompass run swebench react openai/MODEL -b dataset=verified.parquet --env docker

Per instance:

* **task** — the problem statement (``-b hints=true`` adds the hints) through ``instruction()``; the category
  is the repository;
* **environment** — the instance's ``image`` (see :mod:`agentcompass_swebench.images`), working directory
  ``/testbed``, the repository at its base commit; no network unless ``-b network=true``;
* **oracle** applies the gold patch with ``git apply``; ``nop`` changes nothing;
* **collect** — the change of ``/testbed`` against the base commit as the artifact ``model.patch``
  (:mod:`agentcompass_swebench.patches`); the run's ``predictions.jsonl`` (official shape) is written from them
  when the run ends;
* **evaluate** — in a fresh environment from the same image, the collected artifacts kept out of the
  repository (``/tmp/agentcompass-artifacts``): the patch applied as the official harness applies it, the
  instance's eval script run under its timeout, its log graded by ``swebench.harness.grading``
  (:mod:`agentcompass_swebench.grading`). ``resolved`` is the primary metric; ``fail_to_pass`` and
  ``pass_to_pass`` are fractions; ``report.json`` (the official report, per test) and ``test_output.txt``
  are artifacts.

No patch, a patch that does not apply, tests that time out or give no results: ``COMPLETED`` with 0 and the
reason in ``artifacts["swebench"]["reason"]``, as upstream counts them. A log the package classifies as an
environment failure: an infrastructure error (``EVAL_ERROR``, retried under ``--retries``). An eval script
that never reaches its tests: ``EVAL_ERROR``.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

from agentcompass.errors import InfrastructureError, UsageError
from agentcompass.runtime import (
    BaseBenchmark,
    EnvironmentSession,
    EnvironmentSpec,
    ExecutionPlan,
    HarnessFreeBenchmark,
    PreparedTask,
    RunRequest,
    RunResult,
    TaskSpec,
    TaskStatus,
)
from agentcompass.runtime.benchmark import EvaluationEnvironmentMode
from agentcompass.runtime.logs import get_logger
from agentcompass.runtime.metrics import MetricContract, make_metric_contract

from agentcompass_swebench import patches
from agentcompass_swebench.dataset import Instance, load_instances
from agentcompass_swebench.grading import Verdict, grade_log, test_counts, timeout_note
from agentcompass_swebench.options import Options
from agentcompass_swebench.predictions import read_predictions

log = get_logger(plugin="swebench")

PRIMARY = "resolved"
CONTRACT = make_metric_contract(
    primary=PRIMARY, scalar=(PRIMARY, "fail_to_pass", "pass_to_pass"),
    labels={PRIMARY: "Resolved", "fail_to_pass": "FAIL_TO_PASS passed", "pass_to_pass": "PASS_TO_PASS kept"},
    binary=True,
    bounds=(0, 1),  # every scalar is a share of tests (or 0/1): no interval leaves [0, 1]
)
#: Files of an attempt's artifacts directory.
MODEL_PATCH = "model.patch"
TEST_OUTPUT = "test_output.txt"
REPORT = "report.json"
EVAL_SCRIPT = "eval.sh"
APPLY_OUTPUT = "apply_output.txt"
#: Where the fresh evaluation environment holds the collected artifacts: outside the repository.
ARTIFACTS_IN_ENV = "/tmp/agentcompass-artifacts"
EVAL_SCRIPT_IN_ENV = "/eval.sh"
TEST_OUTPUT_IN_ENV = "/tmp/agentcompass-test-output.txt"
#: The eval script's time is cut this much short of the evaluate phase's own timeout, so that a script that
#: runs too long ends as a test timeout (graded, as upstream grades it), not as a phase timeout.
EVALUATE_SLACK = 60.0
#: Seconds for each git command (collecting, applying).
GIT_TIMEOUT = 300.0
OUTPUT_TAIL = 2000


class EvalScriptError(RuntimeError):
    """The eval script did not reach its tests: the verifier is broken, not the patch."""


class MissingImage(RuntimeError):
    """The instance's image is not on the engine (the message says how to get it)."""


def _tail(text: str, limit: int = OUTPUT_TAIL) -> str:
    return text if len(text) <= limit else "…" + text[-limit:]


class SWEBench(BaseBenchmark):
    """SWE-bench instances from an official dataset file. Options in the plugin's README."""

    name: ClassVar[str] = "swebench"
    metric_contract: MetricContract = CONTRACT
    evaluation_environment_mode: EvaluationEnvironmentMode = "fresh"
    evaluation_artifacts_path: str = ARTIFACTS_IN_ENV

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.settings = Options.parse(options)
        if self.settings.predictions is not None and not isinstance(self, SWEBenchPredictions):
            raise UsageError("swebench: -b predictions= grades a predictions file under the harness 'none' "
                             "(agentcompass run swebench none ... -b predictions=FILE)")
        self.instances = load_instances(self.settings.dataset, self.settings.split)
        wanted = self.settings.instance_ids
        unknown = [i for i in wanted if i not in self.instances]
        if unknown:
            raise UsageError(f"swebench: -b instance_ids: {', '.join(unknown)} not in {self.settings.dataset} "
                             f"(split {self.settings.split!r})")
        if wanted:
            self.instances = {i: self.instances[i] for i in wanted}
        self._missing: dict[str, str] | None = None  # instance id → how to get its image; filled once

    # -- tasks ---------------------------------------------------------------------------------------------

    def load_tasks(self, req: RunRequest) -> Iterator[TaskSpec]:
        if req.environment == "local" and req.harness:  # a run; ``tasks list`` names no harness
            raise UsageError("swebench runs each instance in its own image with the repository in /testbed: "
                             "use --env docker")
        for instance in self.instances.values():
            yield self._task(instance)

    def _task(self, instance: Instance) -> TaskSpec:
        row = instance.row
        return TaskSpec(
            task_id=instance.instance_id,
            category=instance.repo,
            data={"instruction": self._instruction(instance)},
            metadata={"swebench": {"repo": instance.repo, "base_commit": instance.base_commit,
                                   "version": str(row.get("version")), "image": str(row["image"])}},
        )

    def _instruction(self, instance: Instance) -> str:
        text = str(instance.row["problem_statement"])
        hints = instance.row.get("hints_text")
        if self.settings.hints and isinstance(hints, str) and hints.strip():
            text = f"{text.rstrip()}\n\nHints:\n{hints.strip()}\n"
        return text

    def _instance(self, task: TaskSpec) -> Instance:
        try:
            return self.instances[task.task_id]
        except KeyError:
            raise RuntimeError(f"swebench: unknown instance {task.task_id!r}") from None

    def instruction(self, task: TaskSpec, prepared: PreparedTask) -> str:
        return self._instruction(self._instance(task))

    # -- environment ---------------------------------------------------------------------------------------

    def _image_problems(self, req: RunRequest) -> dict[str, str]:
        """Once per run: every selected instance's image made available where possible; what is missing."""
        if self._missing is None:
            if req.environment != "docker":
                self._missing = {}
            else:
                # the instances the run will open, as the runner selects them (--task-id, then --limit)
                wanted = req.tasks.task_ids
                selected = [i for i in self.instances.values() if not wanted or i.instance_id in wanted]
                selected = selected[: req.tasks.limit] if req.tasks.limit is not None else selected
                refs = {i.instance_id: self.settings.naming.ref(i) for i in selected}
                self._missing = self.settings.images.ensure(selected, refs)
        return self._missing

    def task_timeouts(self, task: TaskSpec, req: RunRequest) -> Mapping[str, float]:
        """The evaluate phase each instance needs: the eval script's timeout (``-b eval_timeout=``, upstream's
        1800 s) plus the slack for applying the patch and grading, so the official test timeout applies as
        declared. An explicit ``--phase-timeout evaluate=`` still wins (and then caps the script)."""
        return {"evaluate": self.settings.eval_timeout + EVALUATE_SLACK}

    def environment_spec(self, task: TaskSpec, req: RunRequest) -> EnvironmentSpec:
        instance = self._instance(task)
        fields: dict[str, Any] = {"image": self.settings.naming.ref(instance), "workdir": patches.TESTBED,
                                  "network": self.settings.network}
        if task.task_id in self._image_problems(req):
            # The run goes on without this image: the task opens the default image and its prepare_task
            # reports the missing one (a PREPARE_ERROR), instead of the whole run stopping at set-up.
            fields["image"] = EnvironmentSpec().image
        if self.settings.memory:
            fields["memory"] = self.settings.memory
        if self.settings.cpus:
            fields["cpus"] = self.settings.cpus
        return EnvironmentSpec(**fields)

    async def prepare_task(
        self, task: TaskSpec, req: RunRequest, plan: ExecutionPlan, env: EnvironmentSession | None = None
    ) -> PreparedTask:
        instance = self._instance(task)
        missing = (self._missing or {}).get(task.task_id)
        if missing:
            raise MissingImage(missing)
        if env is None:
            raise RuntimeError("swebench needs an environment (--env docker)")
        done = await env.exec(["git", "-c", "safe.directory=*", "cat-file", "-e", f"{instance.base_commit}^{{commit}}"],
                              cwd=patches.TESTBED, timeout=GIT_TIMEOUT)
        if done.returncode != 0:
            raise RuntimeError(f"the image has no git repository at {patches.TESTBED} holding the base commit "
                               f"{instance.base_commit[:12]} ({_tail((done.stderr or done.stdout).strip(), 200)})")
        return PreparedTask(task_id=task.task_id, metadata={"base_commit": instance.base_commit})

    # -- oracle --------------------------------------------------------------------------------------------

    async def apply_reference_solution(
        self, task: TaskSpec, prepared: PreparedTask, req: RunRequest, plan: ExecutionPlan,
        env: EnvironmentSession | None = None,
    ) -> RunResult:
        instance = self._instance(task)
        gold = instance.gold_patch
        if gold is None:
            raise RuntimeError(f"instance {instance.instance_id!r} has no gold patch ('patch')")
        assert env is not None
        await env.write_text("/tmp/agentcompass-gold.patch", gold)
        done = await env.exec(["git", "apply", "--verbose", "/tmp/agentcompass-gold.patch"], cwd=patches.TESTBED,
                              timeout=GIT_TIMEOUT)
        if done.returncode != 0:
            raise RuntimeError(f"the gold patch does not apply: {_tail((done.stderr or done.stdout).strip(), 300)}")
        await env.exec(["rm", "-f", "/tmp/agentcompass-gold.patch"], timeout=GIT_TIMEOUT)
        return RunResult(task_id=task.task_id, category=task.category, status=TaskStatus.COMPLETED)

    # -- collect -------------------------------------------------------------------------------------------

    async def collect_artifacts(
        self, task: TaskSpec, prepared: PreparedTask, result: RunResult, req: RunRequest, plan: ExecutionPlan,
        env: EnvironmentSession | None = None,
    ) -> RunResult:
        if env is None:
            return result
        patch = await patches.collect_patch(env, self._instance(task).base_commit, timeout=GIT_TIMEOUT)
        return self._record_patch(result, plan, patch, source="environment")

    def _record_patch(self, result: RunResult, plan: ExecutionPlan, patch: bytes, source: str) -> RunResult:
        directory = Path(plan.artifacts_dir)
        directory.mkdir(parents=True, exist_ok=True)
        (directory / MODEL_PATCH).write_bytes(patch)
        info = {"file": MODEL_PATCH, "bytes": len(patch), "source": source}
        return replace(result, artifacts={**result.artifacts, "model_patch": info})

    # -- evaluate ------------------------------------------------------------------------------------------

    def model_name(self, req: RunRequest) -> str:
        """``model_name_or_path`` of this run's predictions."""
        return self.settings.model_name or f"{req.harness}/{req.model}"

    def _prediction_model(self, task: TaskSpec, req: RunRequest) -> str:
        return self.model_name(req)

    async def evaluate(
        self, task: TaskSpec, prepared: PreparedTask, result: RunResult, req: RunRequest, plan: ExecutionPlan,
        env: EnvironmentSession | None = None,
    ) -> RunResult:
        instance = self._instance(task)
        directory = Path(plan.artifacts_dir)
        patch_file = directory / MODEL_PATCH
        patch = patch_file.read_bytes() if patch_file.is_file() else b""
        if not patch.strip():
            return self._scored(result, Verdict(instance.instance_id), applied=False,
                                reason="no patch: the repository is unchanged")
        if env is None:
            raise RuntimeError("swebench evaluates in a fresh environment; none was given")
        applied = await patches.apply_patch(env, patch, timeout=GIT_TIMEOUT)
        (directory / APPLY_OUTPUT).write_text(applied.output, encoding="utf-8")
        if not applied.applied:
            lines = applied.output.splitlines()
            first = next((line for line in lines if "patch failed" in line or "does not apply" in line),
                         next((line for line in lines if line.startswith("error")), ""))
            return self._scored(result, Verdict(instance.instance_id), applied=False,
                                reason=f"patch did not apply (no command of the official harness applied it)"
                                       f"{': ' + first.strip() if first else ''}")
        spec = instance.test_spec()
        (directory / EVAL_SCRIPT).write_text(spec.eval_script, encoding="utf-8")
        await env.write_text(EVAL_SCRIPT_IN_ENV, spec.eval_script)
        seconds = self._eval_timeout(plan)
        started = time.perf_counter()
        done = await env.exec(["/bin/bash", "-c", f"/bin/bash {EVAL_SCRIPT_IN_ENV} > {TEST_OUTPUT_IN_ENV} 2>&1"],
                              timeout=seconds)
        result = replace(result, timings={**result.timings, "eval_script": round(time.perf_counter() - started, 6)})
        try:
            output = (await env.read_bytes(TEST_OUTPUT_IN_ENV)).decode("utf-8", errors="replace")
        except Exception as exc:
            raise InfrastructureError(f"the eval script's output could not be read back: {exc}") from exc
        if done.timed_out:
            output += timeout_note(seconds)
        (directory / TEST_OUTPUT).write_text(output, encoding="utf-8")
        verdict = await asyncio.to_thread(grade_log, instance, output, patch.decode("utf-8", errors="replace"),
                                          self._prediction_model(task, req))
        (directory / REPORT).write_text(json.dumps({instance.instance_id: verdict.report}, indent=2) + "\n",
                                        encoding="utf-8")
        if verdict.infra_failure is not None:
            raise InfrastructureError(
                f"swebench classifies the test log as an infrastructure failure ({verdict.infra_failure}); "
                f"see {TEST_OUTPUT}"
            )
        if done.timed_out:
            return self._scored(result, verdict, applied=True, reason=f"tests timed out after {seconds:g} s")
        if not verdict.markers:
            raise EvalScriptError(
                f"the eval script ended (exit {done.returncode}) without printing its test-output markers, so "
                f"no test ran: {_tail(output.strip(), 300)!r}"
            )
        reason = None if verdict.tests_ran else "the log holds no test results swebench accepts"
        return self._scored(result, verdict, applied=True, reason=reason)

    def _eval_timeout(self, plan: ExecutionPlan) -> float:
        phase = plan.timeouts.get("evaluate")
        seconds = self.settings.eval_timeout
        if phase is not None and seconds > phase - EVALUATE_SLACK:
            capped = max(phase - EVALUATE_SLACK, phase / 2)
            log.warning("swebench.eval_timeout_capped", eval_timeout=seconds, evaluate_phase=phase, used=capped)
            seconds = capped
        return seconds

    def _scored(self, result: RunResult, verdict: Verdict, *, applied: bool, reason: str | None) -> RunResult:
        summary: dict[str, Any] = {"resolved": verdict.resolved, "patch_applied": applied,
                                   "tests": test_counts(verdict.report)}
        if reason is not None:
            summary["reason"] = reason
        if verdict.report:
            summary["report"] = REPORT
        return replace(result, metrics=verdict.metrics(), artifacts={**result.artifacts, "swebench": summary})


class SWEBenchPredictions(HarnessFreeBenchmark, SWEBench):
    """``swebench`` with ``-b predictions=FILE``: grades the patches of an official predictions file (JSONL or
    JSON) under the harness ``none``, as ``swebench.harness.run_evaluation`` does — no agent runs. The
    instances are those with a prediction; the run environment is left as the image made it, so evaluation
    reuses it."""

    evaluation_environment_mode: EvaluationEnvironmentMode = "reuse"
    required_model_roles: tuple[str, ...] = ()

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        assert self.settings.predictions is not None
        self.predictions = read_predictions(self.settings.predictions, set(self.instances))
        self.instances = {i: inst for i, inst in self.instances.items() if i in self.predictions}

    async def run_task(
        self, task: TaskSpec, prepared: PreparedTask, req: RunRequest, plan: ExecutionPlan,
        env: EnvironmentSession | None = None,
    ) -> RunResult:
        return RunResult(task_id=task.task_id, category=task.category, status=TaskStatus.COMPLETED)

    async def collect_artifacts(
        self, task: TaskSpec, prepared: PreparedTask, result: RunResult, req: RunRequest, plan: ExecutionPlan,
        env: EnvironmentSession | None = None,
    ) -> RunResult:
        prediction = self.predictions[task.task_id]
        patch = (prediction.get("model_patch") or "").encode("utf-8", errors="surrogateescape")
        return self._record_patch(result, plan, patch, source=str(self.settings.predictions))

    def model_name(self, req: RunRequest) -> str:
        names = {str(p.get("model_name_or_path") or "") for p in self.predictions.values()}
        return self.settings.model_name or (names.pop() if len(names) == 1 else "predictions")

    def _prediction_model(self, task: TaskSpec, req: RunRequest) -> str:
        return str(self.predictions[task.task_id].get("model_name_or_path") or self.model_name(req))


def make_swebench(**options: Any) -> SWEBench:
    """The factory registered as ``swebench``: with ``-b predictions=`` the benchmark grades that file under the
    harness ``none`` (:class:`SWEBenchPredictions`, a harness-free benchmark), else agents solve the instances
    (:class:`SWEBench`). The benchmark's kind follows from its options through this factory alone."""
    if options.get("predictions"):
        return SWEBenchPredictions(**options)
    return SWEBench(**options)
