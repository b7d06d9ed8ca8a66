"""The per-task lifecycle: one attempt of one task, as a validated state machine.

::

    PENDING → PREPARING → RUNNING → COLLECTING → EVALUATING → FINISHED
                  ↓           ↓          ↓            ↓
            PREPARE_ERROR  RUN_ERROR  RUN_ERROR    EVAL_ERROR

The runtime owns the environment: it is opened before ``prepare_task`` and closed after the last phase that
needs it, on every path. Execution and scoring stay apart: a crash in ``evaluate`` is ``EVAL_ERROR`` and
never hides a ``RUN_ERROR``; a result that is not ``COMPLETED`` keeps its status and error to the end.

Why one module past 300 lines: it is one state machine, and its phases read top to bottom in
:meth:`TaskAttempt._phases`; split, a reader would have to jump between files to follow one attempt.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

import attrs

from agentcompass.errors import InfrastructureError, describe
from agentcompass.models.access import ModelAccess
from agentcompass.models.metering import CallRecord, MeteredModel, TaskMeter
from agentcompass.runtime.benchmark import BaseBenchmark, HarnessFreeBenchmark
from agentcompass.runtime.environment import EnvironmentProvider, EnvironmentSession
from agentcompass.runtime.executor import AttemptOutcome, AttemptSpec, Rescore
from agentcompass.runtime.harness import BaseHarness
from agentcompass.runtime.models import ModelError
from agentcompass.runtime.phases import PHASE_NAMES, TRANSITIONS, IllegalTransition, Phase
from agentcompass.runtime.types import ExecutionPlan, PreparedTask, RunRequest, RunResult, TaskSpec, TaskStatus
from agentcompass.serialization import unstructure

T = TypeVar("T")


@attrs.define
class AttemptContext:
    """The live side of a run that every attempt in this process uses.

    :param request: the run's request.
    :param benchmark: the benchmark instance.
    :param harness: the harness instance, or ``None`` when the benchmark drives its own loop.
    :param provider: the environment provider.
    :param models: grants each attempt its model clients and gateway endpoints.
    :param artifacts_root: ``(task_id, trial, attempt) -> directory`` for ``plan.artifacts_dir``.
    :param environment_slots: bounds live environments (``--max-environments``), or ``None``.
    :param on_transition: called on every phase change ``(spec, previous, new)``.
    :param on_model_call: called with ``(spec, record)`` as each model call of an attempt ends (the
        :class:`~agentcompass.models.metering.CallRecord` its trajectory keeps); ``None`` when nothing observes
        model calls.
    """

    request: RunRequest
    benchmark: BaseBenchmark
    harness: BaseHarness | None
    provider: EnvironmentProvider
    models: ModelAccess
    artifacts_root: Callable[[str, int, int], Path]
    environment_slots: asyncio.Semaphore | None = None
    on_transition: Callable[[AttemptSpec, Phase, Phase], None] = lambda spec, prev, new: None
    on_model_call: Callable[[AttemptSpec, CallRecord], None] | None = None
    #: Where a re-scored attempt's recorded artifacts are: ``(task_id, trial, attempt) -> directory``.
    source_artifacts: Callable[[str, int, int], Path] | None = None
    #: Sessions open right now, closed by the runner's teardown if an attempt could not close them.
    live_sessions: set[EnvironmentSession] = attrs.field(factory=set)
    #: The meter of every attempt in flight, by ``AttemptSpec.key``, until its outcome carries its calls: what
    #: an attempt that never reports an outcome (cancelled, crashed) is recorded with.
    live_meters: dict[tuple[str, int, int], TaskMeter] = attrs.field(factory=dict)


@attrs.define
class AttemptMachine:
    """The phase of one task attempt. Every transition is validated and reported to ``on_transition``."""

    task_id: str
    attempt: int
    on_transition: Callable[[Phase, Phase], None] = lambda prev, new: None
    phase: Phase = Phase.PENDING
    history: list[Phase] = attrs.field(factory=lambda: [Phase.PENDING])

    def advance(self, new: Phase) -> None:
        if new not in TRANSITIONS[self.phase]:
            raise IllegalTransition(f"task {self.task_id!r}: {self.phase.value} → {new.value} is not allowed")
        previous, self.phase = self.phase, new
        self.history.append(new)
        self.on_transition(previous, new)


class _PhaseFailed(Exception):
    """Ends an attempt early with an error status."""

    def __init__(self, status: TaskStatus, failure: Failure) -> None:
        super().__init__(failure.message)
        self.status, self.error, self.retryable = status, failure.message, failure.retryable


async def _within(seconds: float | None, awaitable: Awaitable[T]) -> T:
    async with asyncio.timeout(seconds):
        return await awaitable


@dataclass(frozen=True)
class Failure:
    """A phase that raised, classified: its message, and whether the attempt is worth a retry."""

    message: str
    retryable: bool


def classify(what: str, exc: BaseException, seconds: float | None) -> Failure:
    """The one classifier of phase failures. Timeouts and infrastructure failures are worth a retry; a model
    error names the model call; anything else is the plugin's own failure, not retried."""
    if isinstance(exc, TimeoutError):
        return Failure(f"{what} timed out after {seconds}s", True)
    if isinstance(exc, ModelError):
        return Failure(f"model call failed: {exc}", False)
    return Failure(f"{what} failed: {describe(exc)}", isinstance(exc, InfrastructureError))


def _check_result(value: Any, task: TaskSpec, phase: str) -> RunResult:
    if not isinstance(value, RunResult):
        raise TypeError(f"{phase} returned {type(value).__name__}, not a RunResult")
    if value.task_id != task.task_id:
        raise ValueError(f"{phase} returned a result for task {value.task_id!r}, not {task.task_id!r}")
    return value


class TaskAttempt:
    """Runs one attempt of one task through the phases. Use :meth:`execute`."""

    def __init__(self, ctx: AttemptContext, spec: AttemptSpec) -> None:
        self.ctx, self.attempt_spec = ctx, spec
        self.task, self.attempt, self.spec, self.timeouts = spec.task, spec.attempt, spec.environment, spec.timeouts
        task, attempt = spec.task, spec.attempt
        self.machine = AttemptMachine(
            task.task_id, attempt, lambda prev, new: ctx.on_transition(spec, prev, new)
        )
        self.prepared: PreparedTask | None = None
        self.meter = ctx.models.open_meter(spec, ctx.on_model_call)
        self.timings: dict[str, float] = {}
        self._sessions: list[EnvironmentSession] = []

    # -- environments --------------------------------------------------------------------------------

    async def _open_environment(self, base_env: Mapping[str, str]) -> EnvironmentSession:
        ctx = self.ctx
        await ctx.provider.ready(self.spec)  # its image, say: bounded by the provider, not the environment phase
        slots = ctx.environment_slots
        if slots is not None:
            await slots.acquire()
        try:
            session = await _within(
                self.timeouts.get("environment"),
                ctx.provider.open(
                    self.spec, run_id=self.attempt_spec.run_id, task_id=self.task.task_id, base_env=base_env
                ),
            )
        except BaseException:
            if slots is not None:
                slots.release()
            raise
        self._sessions.append(session)
        ctx.live_sessions.add(session)
        return session

    async def _close_environment(self, session: EnvironmentSession) -> None:
        if session not in self._sessions:
            return
        self._sessions.remove(session)
        ctx = self.ctx
        try:
            # Shielded: a cancelled task still closes what it opened.
            await asyncio.shield(_within(self.timeouts.get("close"), ctx.provider.close(session)))
        except Exception:
            pass  # the runner's teardown removes whatever is left
        finally:
            ctx.live_sessions.discard(session)
            if ctx.environment_slots is not None:
                ctx.environment_slots.release()

    async def _close_all(self) -> None:
        for session in list(self._sessions):
            await self._close_environment(session)

    # -- phases --------------------------------------------------------------------------------------

    def _timed(self, name: str, started: float) -> None:
        self.timings[name] = round(time.perf_counter() - started, 6)

    async def execute(self) -> AttemptOutcome:
        ctx, task = self.ctx, self.task
        started = time.perf_counter()
        granted = ctx.models.grant(self.meter)
        endpoints = granted.endpoints
        metered = {role: MeteredModel(c, role, self.meter) for role, c in granted.clients.items()}
        spec = self.attempt_spec
        artifacts_dir = ctx.artifacts_root(task.task_id, spec.trial, self.attempt)
        plan = ExecutionPlan(
            run_id=spec.run_id,
            task_id=task.task_id,
            attempt=self.attempt,
            trial=spec.trial,
            seed=spec.seed,
            harness=ctx.request.harness,
            environment=ctx.request.environment,
            artifacts_dir=str(artifacts_dir),
            timeouts=dict(self.timeouts),
            model_endpoints=endpoints,
            models=metered,
        )
        base_env = dict(self.attempt_spec.gateway_env)
        if "agent" in endpoints:
            base_env.update(endpoints["agent"].env())
        result: RunResult
        retryable = False
        ctx.live_meters[spec.key] = self.meter
        try:
            try:
                if spec.rescore is not None:
                    result, retryable = await self._rescore(spec.rescore, plan, base_env, artifacts_dir)
                else:
                    result, retryable = await self._phases(plan, base_env, artifacts_dir)
            except _PhaseFailed as failed:
                result = RunResult(
                    task_id=task.task_id,
                    category=task.category,
                    status=failed.status,
                    error=failed.error,
                    error_phase=PHASE_NAMES.get(self.machine.phase, "prepare"),
                )
                retryable = failed.retryable
            self.machine.advance(Phase.FINISHED)
        except asyncio.CancelledError:
            if self.machine.phase is not Phase.FINISHED:
                self.machine.advance(Phase.FINISHED)
            raise
        finally:
            granted.revoke()
            await self._close_all()
        # Calls still open (an agent's, through the gateway, when a timeout stopped its harness) end here.
        self.meter.cut_open_calls("the attempt ended before the call did")
        ctx.live_meters.pop(spec.key, None)
        self.timings["total"] = round(time.perf_counter() - started, 6)
        result = replace(
            result,
            attempt=self.attempt,
            trial=spec.trial,
            seed=spec.seed,
            category=result.category if result.category is not None else task.category,
            timings={**result.timings, **self.timings},
            usage={**result.usage, **({"models": self.meter.totals()} if self.meter.calls else {})},
        )
        unfinished, worth_retrying = self.meter.unfinished()
        if unfinished:
            retryable = worth_retrying
        return AttemptOutcome(result, retryable, tuple(unstructure(c) for c in self.meter.calls), self.prepared,
                              unfinished)

    async def _phases(
        self, plan: ExecutionPlan, base_env: dict[str, str], artifacts_dir: Path
    ) -> tuple[RunResult, bool]:
        ctx, task, req, bench = self.ctx, self.task, self.ctx.request, self.ctx.benchmark
        timeouts = self.timeouts

        # PREPARING: environment start and prepare_task.
        self.machine.advance(Phase.PREPARING)
        t0 = time.perf_counter()
        try:
            env = await self._open_environment(base_env)
        except Exception as exc:
            raise _PhaseFailed(TaskStatus.PREPARE_ERROR, _environment_failure(exc, timeouts)) from None
        try:
            prepared = await _within(timeouts.get("prepare"), bench.prepare_task(task, req, plan, env))
            if not isinstance(prepared, PreparedTask):
                raise TypeError(f"prepare_task returned {type(prepared).__name__}, not a PreparedTask")
            self.prepared = prepared
        except Exception as exc:
            failure = classify("prepare_task", exc, timeouts.get("prepare"))
            raise _PhaseFailed(TaskStatus.PREPARE_ERROR, failure) from None
        self._timed("prepare", t0)

        # RUNNING: the harness, or the benchmark's own loop.
        self.machine.advance(Phase.RUNNING)
        t0 = time.perf_counter()
        retryable = False
        try:
            if ctx.harness is None:
                assert isinstance(bench, HarnessFreeBenchmark)
                running = bench.run_task(task, prepared, req, plan, env)
                result = _check_result(await _within(timeouts.get("run"), running), task, "run")
            else:
                result, retryable = await self._harness_run(prepared, plan, env)
            # A multi-step task: the harness runs again, in the same environment, for each step the benchmark
            # gives (BaseBenchmark.next_step), each within the run phase's timeout. A step whose harness run
            # failed (RUN_ERROR) is handed to next_step too, which may verify it and go on, as Harbor does; the
            # attempt keeps that first failure as its status.
            failed: RunResult | None = None
            while ctx.harness is not None and result.status in (TaskStatus.COMPLETED, TaskStatus.RUN_ERROR):
                failed = failed or (result if result.status is TaskStatus.RUN_ERROR else None)
                step = await _within(timeouts.get("run"), bench.next_step(task, prepared, result, req, plan, env))
                if step is None:
                    break
                prepared = self.prepared = step
                result, again = await self._harness_run(prepared, plan, env)
                retryable = retryable if failed else again
            if failed is not None and result is not failed:
                result = replace(result, status=failed.status, error=failed.error, error_phase="run", metrics={})
        except Exception as exc:
            failure = classify("run", exc, timeouts.get("run"))
            retryable = failure.retryable
            result = self._error(TaskStatus.RUN_ERROR, failure.message, "run")
        else:
            if result.status is not TaskStatus.COMPLETED and result.error_phase is None:
                result = replace(result, error_phase="run")
        self._timed("run", t0)
        result = self.meter.settle(result)  # a budget's refusal (LIMIT_REACHED) or a fatal model error
        retryable = retryable and not (self.meter.limit_reached or self.meter.fatal_error)

        # COLLECTING: extract submissions; a crash here is an execution failure, not a scoring one.
        self.machine.advance(Phase.COLLECTING)
        t0 = time.perf_counter()
        try:
            collected = _check_result(
                await _within(
                    timeouts.get("collect"), bench.collect_artifacts(task, prepared, result, req, plan, env)
                ),
                task,
                "collect_artifacts",
            )
            result = self._keep_error(result, collected)
        except Exception as exc:
            failure = classify("collect_artifacts", exc, timeouts.get("collect"))
            if result.status is TaskStatus.COMPLETED:  # an earlier error stands, and decides on retrying
                retryable = failure.retryable
                result = self._error(TaskStatus.RUN_ERROR, failure.message, "collect", base=result)
        self._timed("collect", t0)

        # EVALUATING, in no environment, the same one, or a fresh one holding the artifacts.
        mode = bench.evaluation_environment_mode
        if mode != "reuse":
            await self._close_environment(env)
        return await self._evaluate(plan, base_env, prepared, result, retryable, env if mode == "reuse" else None,
                                    artifacts_dir)

    async def _harness_run(self, prepared: PreparedTask, plan: ExecutionPlan, env: EnvironmentSession
                           ) -> tuple[RunResult, bool]:
        """One run of the harness within the run phase's timeout, and whether its failure is worth a retry: a
        harness that raised (or ran out of time) is a ``RUN_ERROR`` result here, so a multi-step benchmark's
        ``next_step`` sees it."""
        assert self.ctx.harness is not None
        try:
            running = self.ctx.harness.run(self.task, prepared, self.ctx.request, plan, env)
            return _check_result(await _within(self.timeouts.get("run"), running), self.task, "run"), False
        except Exception as exc:
            failure = classify("run", exc, self.timeouts.get("run"))
            return self._error(TaskStatus.RUN_ERROR, failure.message, "run"), failure.retryable

    async def _evaluate(
        self, plan: ExecutionPlan, base_env: dict[str, str], prepared: PreparedTask, result: RunResult,
        retryable: bool, env: EnvironmentSession | None, artifacts_dir: Path,
    ) -> tuple[RunResult, bool]:
        """The evaluate phase: in ``env`` when given, else in no environment (mode ``none``) or in a fresh one
        holding the collected artifacts at ``evaluation_artifacts_path`` (mode ``fresh``)."""
        task, req, bench, timeouts = self.task, self.ctx.request, self.ctx.benchmark, self.timeouts
        self.machine.advance(Phase.EVALUATING)
        t0 = time.perf_counter()
        eval_env = env
        opening = env is None and bench.evaluation_environment_mode != "none"
        try:
            if opening:
                eval_env = await self._open_environment(base_env)
                if artifacts_dir.is_dir():  # noqa: ASYNC240 - one stat
                    await eval_env.upload(artifacts_dir, bench.evaluation_artifacts_path)
            evaluated = _check_result(
                await _within(
                    timeouts.get("evaluate"), bench.evaluate(task, prepared, result, req, plan, eval_env)
                ),
                task,
                "evaluate",
            )
            result = self._keep_error(result, evaluated)
        except Exception as exc:
            if opening and eval_env is None:
                failure = _environment_failure(exc, timeouts, "evaluation environment")
            else:
                failure = classify("evaluate", exc, timeouts.get("evaluate"))
            if result.status is TaskStatus.COMPLETED:
                retryable = failure.retryable
                result = self._error(TaskStatus.EVAL_ERROR, failure.message, "evaluate", base=result)
        self._timed("evaluate", t0)
        return result, retryable

    async def _rescore(
        self, rescore: Rescore, plan: ExecutionPlan, base_env: dict[str, str], artifacts_dir: Path
    ) -> tuple[RunResult, bool]:
        """``agentcompass evaluate``: the recorded result scored again by the benchmark as installed now, in a
        fresh environment holding the recorded artifacts (unless the benchmark evaluates in none). A result that
        was not ``COMPLETED`` keeps its status and error, unscored."""
        self.prepared = rescore.prepared
        source = rescore.result
        if source.status is not TaskStatus.COMPLETED:
            return replace(source, metrics={}), False
        source_dir = self.ctx.source_artifacts(self.task.task_id, source.trial, source.attempt) \
            if self.ctx.source_artifacts else None
        if source_dir is not None and source_dir.is_dir():
            await asyncio.to_thread(shutil.copytree, source_dir, artifacts_dir, dirs_exist_ok=True)
        unscored = replace(source, metrics={}, timings={})
        return await self._evaluate(plan, base_env, rescore.prepared, unscored, False, None, artifacts_dir)

    def _error(
        self, status: TaskStatus, error: str, phase: str, base: RunResult | None = None
    ) -> RunResult:
        if base is None:
            return RunResult(
                task_id=self.task.task_id, category=self.task.category, status=status, error=error,
                error_phase=phase,
            )
        return replace(base, status=status, error=error, error_phase=phase, metrics={})

    @staticmethod
    def _keep_error(before: RunResult, after: RunResult) -> RunResult:
        """A later phase may add to a failed result but never change its status or error."""
        if before.status is TaskStatus.COMPLETED:
            return after
        if after.status is before.status and after.error == before.error and after.error_phase:
            return after
        return replace(after, status=before.status, error=before.error, error_phase=before.error_phase)


def _environment_failure(exc: BaseException, timeouts: Mapping[str, float | None], what: str = "environment"
                         ) -> Failure:
    """An environment that did not start is the infrastructure's failure: always worth a retry."""
    if isinstance(exc, TimeoutError):
        return Failure(f"{what} did not start within {timeouts.get('environment')}s", True)
    return Failure(f"{what} failed to start: {describe(exc)}", True)
