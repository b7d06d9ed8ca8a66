"""Conformance checks: the contract rules a plugin must keep, each one awaitable line in a test.

Every check is a plain async function that raises :class:`AssertionError` with a message saying which rule
was broken and how; it returns ``None`` when the plugin conforms. Benchmark checks run the benchmark's phases
in a real session (``local`` unless ``environment=`` or ``env=`` says otherwise)::

    await check_benchmark(MyBenchmark())                    # all of the benchmark checks
    await check_prepare_idempotent(MyBenchmark(), task)     # or one at a time

Environment provider checks are in :mod:`agentcompass.testing.environment_checks`.
"""

from __future__ import annotations

import contextlib
import inspect
import shutil
import tempfile
from collections.abc import AsyncIterator, Sequence
from typing import Any

from agentcompass.errors import describe
from agentcompass.runtime.benchmark import BaseBenchmark, HarnessFreeBenchmark
from agentcompass.runtime.environment import EnvironmentSession
from agentcompass.runtime.types import (
    ExecutionPlan,
    PreparedTask,
    RunRequest,
    RunResult,
    TaskSpec,
    TaskStatus,
)
from agentcompass.testing.host import host_workdir, snapshot
from agentcompass.testing.sessions import TEST_RUN_ID, environment_sessions, open_session

#: The error every deliberately failed result carries.
DELIBERATE_ERROR = "agentcompass.testing: a deliberate failure of an earlier phase"


# -- benchmark checks ----------------------------------------------------------------------------------


def _instance(benchmark: Any) -> BaseBenchmark:
    if isinstance(benchmark, type) and issubclass(benchmark, BaseBenchmark):
        benchmark = benchmark()
    if not isinstance(benchmark, BaseBenchmark):
        raise TypeError(f"not a benchmark: {benchmark!r}")
    return benchmark


def default_request(benchmark: BaseBenchmark, **fields: Any) -> RunRequest:
    """The request the checks use: the benchmark's name, ``none`` or ``nop``, the ``mock`` model."""
    harness = "none" if isinstance(benchmark, HarnessFreeBenchmark) else "nop"
    return RunRequest(benchmark=benchmark.name or type(benchmark).__name__, harness=harness,
                      model="mock").with_options(**fields)


async def first_task(benchmark: BaseBenchmark, request: RunRequest) -> TaskSpec:
    """The benchmark's first task (``load_tasks`` may be sync, async, or an async generator)."""
    loaded: Any = benchmark.load_tasks(request)
    if inspect.isawaitable(loaded):
        loaded = await loaded
    if hasattr(loaded, "__aiter__"):
        async for task in loaded:
            return task
    else:
        for task in loaded:
            return task
    raise AssertionError(f"{type(benchmark).__name__}.load_tasks yielded no task to check")


class _Context:
    """What a benchmark check needs: the benchmark, a task, a request, a plan and (maybe) a session."""

    def __init__(self, benchmark: BaseBenchmark, task: TaskSpec, request: RunRequest, plan: ExecutionPlan,
                 env: EnvironmentSession) -> None:
        self.benchmark, self.task, self.request, self.plan, self.env = benchmark, task, request, plan, env
        self.name = type(benchmark).__name__

    async def prepare(self) -> PreparedTask:
        try:
            prepared = await self.benchmark.prepare_task(self.task, self.request, self.plan, self.env)
        except Exception as exc:
            raise AssertionError(
                f"{self.name}.prepare_task failed on task {self.task.task_id!r}: {describe(exc)}"
            ) from exc
        if not isinstance(prepared, PreparedTask):
            raise AssertionError(f"{self.name}.prepare_task returned {type(prepared).__name__}, not PreparedTask")
        return prepared

    def failed(self, status: TaskStatus = TaskStatus.RUN_ERROR) -> RunResult:
        return RunResult(task_id=self.task.task_id, category=self.task.category, status=status,
                         error=DELIBERATE_ERROR, error_phase="run")

    def completed(self) -> RunResult:
        return RunResult(task_id=self.task.task_id, category=self.task.category, status=TaskStatus.COMPLETED)

    @property
    def evaluation_env(self) -> EnvironmentSession | None:
        return None if self.benchmark.evaluation_environment_mode == "none" else self.env


@contextlib.asynccontextmanager
async def _benchmark_context(benchmark: Any, task: TaskSpec | None, *, env: EnvironmentSession | None,
                             request: RunRequest | None, plan: ExecutionPlan | None, environment: Any,
                             host: Any) -> AsyncIterator[_Context]:
    bench = _instance(benchmark)
    request = request or default_request(bench)
    task = task or await first_task(bench, request)
    artifacts = tempfile.mkdtemp(prefix="agentcompass-check-artifacts-")
    plan = plan or ExecutionPlan(run_id=TEST_RUN_ID, task_id=task.task_id, harness=request.harness,
                                 environment=environment if isinstance(environment, str) else "test",
                                 artifacts_dir=artifacts)
    try:
        if env is not None:
            yield _Context(bench, task, request, plan, env)
        else:
            async with open_session(environment, spec=bench.environment_spec(task, request), host=host,
                                    task_id=task.task_id) as session:
                yield _Context(bench, task, request, plan, session)
    finally:
        shutil.rmtree(artifacts, ignore_errors=True)


async def check_prepare_idempotent(
    benchmark: Any, task: TaskSpec | None = None, *, env: EnvironmentSession | None = None,
    request: RunRequest | None = None, plan: ExecutionPlan | None = None, environment: Any = "local",
    host: Any = None,
) -> None:
    """``prepare_task`` may run twice in one environment (a retry does that): the second call must not fail,
    must return an equal :class:`PreparedTask`, and (where the working directory is visible on the host)
    must leave the same files with the same contents."""
    async with _benchmark_context(benchmark, task, env=env, request=request, plan=plan, environment=environment,
                                  host=host) as ctx:
        first = await ctx.prepare()
        host_dir = await host_workdir(ctx.env)
        before = snapshot(host_dir) if host_dir is not None else None
        try:
            second = await ctx.benchmark.prepare_task(ctx.task, ctx.request, ctx.plan, ctx.env)
        except Exception as exc:
            raise AssertionError(
                f"{ctx.name}.prepare_task is not idempotent: called a second time in the same environment (as "
                f"a retry does) on task {ctx.task.task_id!r}, it raised {describe(exc)}"
            ) from exc
        if second != first:
            raise AssertionError(
                f"{ctx.name}.prepare_task is not idempotent: the second call on task {ctx.task.task_id!r} "
                f"returned a different PreparedTask\n  first:  {first!r}\n  second: {second!r}"
            )
        if host_dir is not None and before is not None:
            after = snapshot(host_dir)
            changed = sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))
            if changed:
                raise AssertionError(
                    f"{ctx.name}.prepare_task is not idempotent: the second call on task {ctx.task.task_id!r} "
                    f"changed files of the environment: {', '.join(changed[:10])}"
                )


async def check_evaluate_keeps_error(
    benchmark: Any, task: TaskSpec | None = None, *, env: EnvironmentSession | None = None,
    request: RunRequest | None = None, plan: ExecutionPlan | None = None, environment: Any = "local",
    host: Any = None, statuses: Sequence[TaskStatus] = (TaskStatus.RUN_ERROR,),
) -> None:
    """``evaluate`` given a result that is not ``COMPLETED`` (a ``RUN_ERROR`` by default) returns it with
    its status and error kept: a crash of the run is never hidden by scoring."""
    async with _benchmark_context(benchmark, task, env=env, request=request, plan=plan, environment=environment,
                                  host=host) as ctx:
        prepared = await ctx.prepare()
        for status in statuses:
            failed = ctx.failed(status)
            try:
                out = await ctx.benchmark.evaluate(ctx.task, prepared, failed, ctx.request, ctx.plan,
                                                   ctx.evaluation_env)
            except Exception as exc:
                raise AssertionError(
                    f"{ctx.name}.evaluate raised on a {status.value} result instead of returning it with its "
                    f"error: {describe(exc)}"
                ) from exc
            if not isinstance(out, RunResult):
                raise AssertionError(f"{ctx.name}.evaluate returned {type(out).__name__}, not RunResult")
            if out.status is not status or out.error != failed.error:
                raise AssertionError(
                    f"{ctx.name}.evaluate overwrote an earlier error: given status={status.value} "
                    f"error={failed.error!r}, it returned status={out.status.value} error={out.error!r}. "
                    "Return a result that is not COMPLETED with its status and error (e.g. "
                    "dataclasses.replace(result, metrics={}))"
                )


async def check_collect_does_not_score(
    benchmark: Any, task: TaskSpec | None = None, *, env: EnvironmentSession | None = None,
    request: RunRequest | None = None, plan: ExecutionPlan | None = None, environment: Any = "local",
    host: Any = None, result: RunResult | None = None,
) -> None:
    """``collect_artifacts`` extracts, never scores: the metrics it returns are the ones it was given (none),
    and a failed result keeps its status and error. ``result`` is the completed run result to collect from
    (default: a bare ``COMPLETED`` one, as after a harness that did nothing)."""
    async with _benchmark_context(benchmark, task, env=env, request=request, plan=plan, environment=environment,
                                  host=host) as ctx:
        prepared = await ctx.prepare()
        for given in (result or ctx.completed(), ctx.failed()):
            try:
                out = await ctx.benchmark.collect_artifacts(ctx.task, prepared, given, ctx.request, ctx.plan,
                                                            ctx.env)
            except Exception as exc:
                hint = "" if result is not None else "; pass result= with a realistic run result"
                raise AssertionError(
                    f"{ctx.name}.collect_artifacts raised on a {given.status.value} result: {describe(exc)}{hint}"
                ) from exc
            if not isinstance(out, RunResult):
                raise AssertionError(f"{ctx.name}.collect_artifacts returned {type(out).__name__}, not RunResult")
            if dict(out.metrics) != dict(given.metrics):
                raise AssertionError(
                    f"{ctx.name}.collect_artifacts scored: given metrics {dict(given.metrics)}, it returned "
                    f"{dict(out.metrics)}. Scoring belongs in evaluate"
                )
            if given.status is not TaskStatus.COMPLETED and (out.status is not given.status
                                                              or out.error != given.error):
                raise AssertionError(
                    f"{ctx.name}.collect_artifacts overwrote an earlier error: given status={given.status.value} "
                    f"error={given.error!r}, it returned status={out.status.value} error={out.error!r}"
                )


async def check_benchmark(
    benchmark: Any, task: TaskSpec | None = None, *, environment: Any = "local", host: Any = None,
    request: RunRequest | None = None, result: RunResult | None = None,
) -> None:
    """Every benchmark check on one task (default: the first), each in a fresh session of ``environment``
    (one provider serves them all, so an instance is fine too)."""
    bench = _instance(benchmark)
    request = request or default_request(bench)
    task = task or await first_task(bench, request)
    spec = bench.environment_spec(task, request)
    async with environment_sessions(environment, specs=[spec], host=host) as sessions:
        common: dict[str, Any] = {"request": request}
        await check_prepare_idempotent(bench, task, env=await sessions.open(spec, task_id=task.task_id), **common)
        await check_collect_does_not_score(bench, task, result=result,
                                           env=await sessions.open(spec, task_id=task.task_id), **common)
        await check_evaluate_keeps_error(bench, task, env=await sessions.open(spec, task_id=task.task_id), **common)


# -- environment checks --------------------------------------------------------------------------------


__all__ = [
    "DELIBERATE_ERROR",
    "check_benchmark",
    "check_collect_does_not_score",
    "check_evaluate_keeps_error",
    "check_prepare_idempotent",
    "default_request",
    "first_task",
]
