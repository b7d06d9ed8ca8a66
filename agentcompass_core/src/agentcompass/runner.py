"""The runner: resolves a request into plugins, schedules task attempts, retries, resumes, records.

Library entry point::

    outcome = await Runner(host, request, run_dir=Path("runs/x")).run()

Everything is checked before the first task starts (names, harness/benchmark fit, model roles, environment
availability), so bad input never leaves half a run behind. Ctrl-C and SIGTERM stop scheduling, cancel the
tasks in flight, close every environment and keep every finished result.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import signal
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs

from agentcompass import __version__
from agentcompass.errors import AgentCompassError, PluginError, ResultsError, UsageError
from agentcompass.lifecycle import (
    DEFAULT_TIMEOUTS,
    AttemptContext,
    AttemptOutcome,
    ModelAccess,
    Phase,
    describe,
    run_attempt,
)
from agentcompass.models.roles import build_clients, model_ids, role_models, spent_usd
from agentcompass.plugins import PluginHost
from agentcompass.redaction import Redactor
from agentcompass.results.run_dir import LOGS, RunDirectory
from agentcompass.runtime.benchmark import BaseBenchmark, HarnessFreeBenchmark
from agentcompass.runtime.environment import EnvironmentProvider
from agentcompass.runtime.harness import BaseHarness
from agentcompass.runtime.metrics import MetricContract, aggregate
from agentcompass.runtime.models import ModelClient
from agentcompass.runtime.types import EnvironmentSpec, RunRequest, RunResult, TaskSpec, TaskStatus
from agentcompass.serialization import request_from_json, unstructure

NO_HARNESS = "none"
PHASE_TIMEOUT_NAMES = frozenset(DEFAULT_TIMEOUTS)


def new_run_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6]


def construct_plugin(kind: str, name: str, factory: Callable[..., Any], options: Mapping[str, Any]) -> Any:
    try:
        return factory(**options)
    except AgentCompassError:
        raise
    except (TypeError, ValueError) as exc:
        raise UsageError(f"{kind} {name!r} rejected its arguments {dict(options)}: {exc}") from None
    except Exception as exc:
        raise PluginError(f"{kind} {name!r} failed to start: {describe(exc)}") from exc


@attrs.define
class Resolved:
    """A request turned into live plugin objects."""

    benchmark: BaseBenchmark
    harness: BaseHarness | None
    provider: EnvironmentProvider
    contract: MetricContract
    plugin_versions: dict[str, str | None]


def resolve(host: PluginHost, req: RunRequest) -> Resolved:
    """Look up and construct the request's plugins; any mismatch is a UsageError before work starts."""
    benchmark = construct_plugin(
        "benchmark", req.benchmark, host.factory("benchmark", req.benchmark), req.benchmark_args
    )
    if not isinstance(benchmark, BaseBenchmark):
        raise UsageError(f"benchmark {req.benchmark!r} is not a BaseBenchmark (plugin bug)")
    harness_obj = construct_plugin("harness", req.harness, host.factory("harness", req.harness), req.harness_args)
    harness: BaseHarness | None = harness_obj
    if req.harness == NO_HARNESS:
        if not isinstance(benchmark, HarnessFreeBenchmark):
            raise UsageError(
                f"benchmark {req.benchmark!r} needs an agent harness; the harness 'none' is only for "
                f"benchmarks that drive their own loop. Harnesses: "
                f"{', '.join(n for n in host.names('harness') if n != NO_HARNESS)}"
            )
        harness = None
    else:
        harness_obj.check_compatible(benchmark)
        harness_obj.bind(benchmark)
    provider = construct_plugin(
        "environment", req.environment, host.factory("environment", req.environment), req.environment_args
    )
    contract = benchmark.metric_contract
    if isinstance(contract, str):
        contract = host.factory("metric_contract", contract)()
    roles = role_models(req)
    missing = [r for r in benchmark.required_model_roles if r not in roles]
    if missing:
        flags = ", ".join(f"--{r}-model" for r in missing)
        raise UsageError(f"benchmark {req.benchmark!r} needs the model role(s) {', '.join(missing)}; set {flags}")
    versions: dict[str, str | None] = {}
    for kind, name in (("benchmark", req.benchmark), ("harness", req.harness), ("environment", req.environment)):
        record = host.plugin_of(kind, name)
        if record is not None:
            versions[record.name] = record.version
    return Resolved(benchmark, harness, provider, contract, versions)


async def load_tasks(benchmark: BaseBenchmark, req: RunRequest) -> list[TaskSpec]:
    """The benchmark's tasks, filtered by ``--task-id`` and ``--limit``."""
    try:
        loaded = benchmark.load_tasks(req)
        if inspect.isawaitable(loaded):
            loaded = await loaded
        if hasattr(loaded, "__aiter__"):
            tasks = [t async for t in loaded]  # type: ignore[union-attr]
        else:
            tasks = list(loaded)  # type: ignore[arg-type]
    except AgentCompassError:
        raise
    except Exception as exc:
        raise PluginError(f"benchmark {req.benchmark!r} failed to load its tasks: {describe(exc)}") from exc
    bad = [t for t in tasks if not isinstance(t, TaskSpec)]
    if bad:
        raise PluginError(f"benchmark {req.benchmark!r} yielded {type(bad[0]).__name__}, not TaskSpec")
    seen: set[str] = set()
    for t in tasks:
        if t.task_id in seen:
            raise UsageError(f"benchmark {req.benchmark!r} yields the task id {t.task_id!r} twice (plugin bug)")
        seen.add(t.task_id)
    if req.task_ids:
        unknown = [tid for tid in req.task_ids if tid not in seen]
        if unknown:
            sample = ", ".join(sorted(seen)[:10])
            raise UsageError(
                f"unknown task id(s) {', '.join(unknown)} for benchmark {req.benchmark!r}; "
                f"see 'agentcompass tasks list {req.benchmark}' (e.g. {sample})"
            )
        wanted = set(req.task_ids)
        tasks = [t for t in tasks if t.task_id in wanted]
    if req.limit is not None:
        tasks = tasks[: req.limit]
    return tasks


def environment_specs(benchmark: BaseBenchmark, req: RunRequest, tasks: list[TaskSpec]) -> dict[str, EnvironmentSpec]:
    """Each task's environment spec, known before any task starts (images are built from them)."""
    specs: dict[str, EnvironmentSpec] = {}
    for task in tasks:
        try:
            spec = benchmark.environment_spec(task, req)
        except Exception as exc:
            raise PluginError(
                f"benchmark {req.benchmark!r} has no environment for task {task.task_id!r}: {describe(exc)}"
            ) from exc
        if not isinstance(spec, EnvironmentSpec):
            raise PluginError(f"benchmark {req.benchmark!r} returned {type(spec).__name__} as an EnvironmentSpec")
        specs[task.task_id] = spec
    return specs


def check_request(req: RunRequest) -> None:
    if req.concurrency < 1:
        raise UsageError("--concurrency must be at least 1")
    if req.max_environments is not None and req.max_environments < 1:
        raise UsageError("--max-environments must be at least 1")
    if req.retries < 0:
        raise UsageError("--retries must be 0 or more")
    if req.limit is not None and req.limit < 0:
        raise UsageError("--limit must be 0 or more")
    unknown = sorted(set(req.phase_timeouts) - PHASE_TIMEOUT_NAMES)
    if unknown:
        raise UsageError(
            f"unknown phase(s) {', '.join(unknown)} in --phase-timeout; "
            f"phases: {', '.join(sorted(PHASE_TIMEOUT_NAMES))}"
        )


@attrs.define
class RunOutcome:
    run_dir: Path
    summary: dict[str, Any]
    interrupted: bool

    @property
    def exit_code(self) -> int:
        if self.interrupted:
            return 130
        return 1 if any(k != TaskStatus.COMPLETED.value for k in self.summary["status_counts"]) else 0


ProgressCallback = Callable[[RunResult, int, int], None]


@attrs.define
class Runner:
    """Runs one request to completion (or interruption) into a run directory."""

    host: PluginHost
    request: RunRequest
    run_dir: Path | None = None
    resume: bool = False
    on_result: ProgressCallback | None = None
    on_start: Callable[[int, int], None] | None = None
    handle_signals: bool = True

    async def run(self) -> RunOutcome:
        req = self.request
        check_request(req)
        if self.resume:
            assert self.run_dir is not None
            store = RunDirectory.open_existing(self.run_dir)
            req = self._merge_resumed_request(store)
        else:
            req = replace(req, run_id=req.run_id or new_run_id())
        resolved = resolve(self.host, req)
        tasks = await load_tasks(resolved.benchmark, req)
        all_specs = environment_specs(resolved.benchmark, req, tasks)
        clients = build_clients(self.host, req)
        try:
            redactor = Redactor()
            for client in set(clients.values()):
                redactor.add(*getattr(client, "secrets", ()))
            if not self.resume:
                store = RunDirectory.create(self.run_dir or Path("runs") / req.run_id, redactor)
            store.redactor = redactor
            finished = store.final_results() if self.resume else {}
            first_attempt = store.attempt_counts() if self.resume else {}
            todo = [t for t in tasks if t.task_id not in finished]
            specs = {t.task_id: all_specs[t.task_id] for t in todo}
            try:
                return await self._execute(req, resolved, tasks, todo, specs, finished, first_attempt, clients,
                                           store)
            finally:
                store.close()
        finally:
            for client in set(clients.values()):
                with contextlib.suppress(Exception):
                    await client.aclose()

    def _merge_resumed_request(self, store: RunDirectory) -> RunRequest:
        saved = store.read_run_json()
        try:
            old = request_from_json(saved["request"])
        except Exception as exc:
            raise ResultsError(f"{store.path}/run.json does not describe a run request: {exc}") from None
        new = self.request
        for field in ("benchmark", "harness", "model"):
            given = getattr(new, field)
            if given and given != getattr(old, field):
                raise ResultsError(
                    f"{store.path} belongs to a run of {field} {getattr(old, field)!r}, not {given!r}; "
                    "resume it with the same benchmark, harness and model (or leave them out)"
                )
        # Scheduling knobs may change on resume; what defines the tasks and scores may not.
        return replace(
            old, concurrency=new.concurrency, max_environments=new.max_environments, retries=new.retries,
            max_retries=new.max_retries, max_connections=new.max_connections,
            request_timeout=new.request_timeout, model_base_url=new.model_base_url or old.model_base_url,
            model_api_key_env=new.model_api_key_env or old.model_api_key_env,
            max_cost=new.max_cost if new.max_cost is not None else old.max_cost,
        )

    async def _execute(
        self,
        req: RunRequest,
        resolved: Resolved,
        tasks: list[TaskSpec],
        todo: list[TaskSpec],
        specs: dict[str, EnvironmentSpec],
        finished: dict[str, RunResult],
        first_attempt: dict[str, int],
        clients: dict[str, ModelClient],
        store: RunDirectory,
    ) -> RunOutcome:
        from agentcompass.logging import make_run_logger
        from agentcompass.models.gateway import ModelGateway
        from agentcompass.models.roles import GatewayModelAccess

        from agentcompass.runtime.logs import bound_run_logger

        log = make_run_logger(store.stream(LOGS), store.redactor, run_id=req.run_id)
        with bound_run_logger(log):
            return await self._execute_logged(req, resolved, tasks, todo, specs, finished, first_attempt,
                                              clients, store, log)

    async def _execute_logged(self, req, resolved, tasks, todo, specs, finished, first_attempt, clients, store,
                              log):  # type: ignore[no-untyped-def]
        from agentcompass.models.gateway import ModelGateway
        from agentcompass.models.roles import GatewayModelAccess

        provider = resolved.provider
        started_at = time.time()
        gateway = ModelGateway(model_ids(req))
        interrupted = False
        final: dict[str, RunResult] = dict(finished)
        ctx: AttemptContext | None = None
        try:
            await gateway.start()
            await provider.setup(list({id(s): s for s in specs.values()}.values()), run_id=req.run_id)
            base_url, gateway_env = provider.gateway_address(
                host=gateway.host, port=gateway.port, unix_socket=gateway.unix_socket
            )
            gateway_access = GatewayModelAccess(clients, gateway, base_url, request=req)
            gateway_access.budget.add_cost(spent_usd(finished.values()))  # a resume carries what was spent
            access: ModelAccess = gateway_access
            timeouts = {**DEFAULT_TIMEOUTS, **({"run": req.timeout} if req.timeout else {}), **req.phase_timeouts}

            def on_transition(task_id: str, attempt: int, prev: Phase, new: Phase) -> None:
                event = {"event": "task.phase", "run_id": req.run_id, "task_id": task_id, "attempt": attempt,
                         "previous": prev.value, "phase": new.value}
                log.debug("task.phase", task_id=task_id, attempt=attempt, previous=prev.value, phase=new.value)
                self.host.notify("agentcompass_task_event", log, event=event)

            ctx = AttemptContext(
                run_id=req.run_id,
                request=req,
                benchmark=resolved.benchmark,
                harness=resolved.harness,
                provider=provider,
                artifacts_root=store.artifacts_dir,
                models=access,
                gateway_env=gateway_env,
                timeouts=timeouts,
                environment_slots=asyncio.Semaphore(req.max_environments) if req.max_environments else None,
                on_transition=on_transition,
            )
            store.write_run_json(self._run_json(req, resolved, store, started_at))
            log.info("run.started", benchmark=req.benchmark, harness=req.harness, model=req.model,
                     environment=req.environment, n_tasks=len(tasks), n_todo=len(todo), resumed=self.resume)
            self.host.notify("agentcompass_run_started", log, run_id=req.run_id, request=req,
                             run_dir=str(store.path))
            if self.on_start:
                self.on_start(len(tasks), len(finished))
            interrupted = await self._schedule(ctx, req, todo, specs, first_attempt, final, store, log,
                                               total=len(tasks))
        finally:
            if ctx is not None:
                for session in list(ctx.live_sessions):
                    with contextlib.suppress(BaseException):
                        await asyncio.shield(provider.close(session))
            with contextlib.suppress(BaseException):
                await asyncio.shield(provider.teardown())
            with contextlib.suppress(BaseException):
                await gateway.stop()
        summary = self._summary(req, resolved, tasks, final, interrupted, started_at, store)
        # A budget or a fatal model error (bad credentials) stops scheduling; unrun tasks stay resumable.
        summary["stopped_reason"] = ctx.models.stop_reason if ctx is not None else None
        store.write_summary(summary)
        log.info("run.finished", status_counts=summary["status_counts"], interrupted=interrupted,
                 duration_s=summary["duration_s"], stopped_reason=summary["stopped_reason"])
        self.host.notify("agentcompass_run_finished", log, run_id=req.run_id, summary=summary)
        return RunOutcome(store.path, summary, interrupted)

    async def _schedule(
        self,
        ctx: AttemptContext,
        req: RunRequest,
        todo: list[TaskSpec],
        specs: dict[str, EnvironmentSpec],
        first_attempt: dict[str, int],
        final: dict[str, RunResult],
        store: RunDirectory,
        log: Any,
        total: int,
    ) -> bool:
        """Run ``todo`` with bounded concurrency; returns True when interrupted."""
        queue = iter(todo)

        async def task_with_retries(task: TaskSpec) -> None:
            attempt = first_attempt.get(task.task_id, 0) + 1
            last = attempt + req.retries
            while True:
                try:
                    outcome: AttemptOutcome = await run_attempt(ctx, task, attempt, specs[task.task_id])
                except asyncio.CancelledError:
                    store.append_attempt(RunResult(task_id=task.task_id, category=task.category,
                                                   status=TaskStatus.CANCELLED, attempt=attempt,
                                                   error="cancelled: the run was interrupted"))
                    raise
                result = outcome.result
                if outcome.meter.calls:
                    store.append_trajectory(task.task_id, attempt, [c.to_json() for c in outcome.meter.calls])
                if outcome.retryable and attempt < last:
                    store.append_attempt(result)
                    log.warning("task.retry", task_id=task.task_id, attempt=attempt, status=result.status.value,
                                error=result.error)
                    self.host.notify("agentcompass_task_event", log, event={
                        "event": "task.retry", "run_id": req.run_id, "task_id": task.task_id,
                        "attempt": attempt, "status": result.status.value, "error": result.error})
                    attempt += 1
                    continue
                store.append_result(result)
                final[task.task_id] = result
                log.info("task.finished", task_id=task.task_id, attempt=attempt, status=result.status.value,
                         error=result.error, metrics=dict(result.metrics))
                self.host.notify("agentcompass_task_event", log, event={
                    "event": "task.finished", "run_id": req.run_id, "task_id": task.task_id, "attempt": attempt,
                    "status": result.status.value, "error": result.error, "metrics": dict(result.metrics)})
                if self.on_result:
                    self.on_result(result, len(final), total)
                return

        async def worker() -> None:
            for task in queue:
                if ctx.models.stop_reason:
                    break  # the task stays unrun (resumable); the summary says why
                await task_with_retries(task)

        workers = [asyncio.create_task(worker()) for _ in range(min(req.concurrency, len(todo)))]
        main = asyncio.current_task()
        loop = asyncio.get_running_loop()
        installed = False
        if self.handle_signals and main is not None:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(signal.SIGTERM, main.cancel)
                installed = True
        try:
            if workers:
                await asyncio.gather(*workers)
            return False
        except asyncio.CancelledError:
            log.warning("run.interrupted", finished=len(final))
            for w in workers:
                w.cancel()
            await asyncio.wait(workers)  # each closes its environments as it unwinds
            current = asyncio.current_task()
            if current is not None:
                current.uncancel()
            return True
        finally:
            if installed:
                loop.remove_signal_handler(signal.SIGTERM)

    def _run_json(
        self, req: RunRequest, resolved: Resolved, store: RunDirectory, started_at: float
    ) -> dict[str, Any]:
        previous = store.read_run_json() if self.resume else {}
        return {
            "run_id": req.run_id,
            "agentcompass_version": __version__,
            "created_at": previous.get("created_at") or datetime.fromtimestamp(started_at, UTC).isoformat(),
            "resumed_at": [*previous.get("resumed_at", []), datetime.now(UTC).isoformat()] if self.resume else [],
            "request": unstructure(req),
            "plan": {
                "benchmark_class": type(resolved.benchmark).__qualname__,
                "harness_class": type(resolved.harness).__qualname__ if resolved.harness else None,
                "environment_class": type(resolved.provider).__qualname__,
                "evaluation_environment_mode": resolved.benchmark.evaluation_environment_mode,
                "metric_contract": unstructure(resolved.contract),
                "model_roles": model_ids(req),
            },
            "plugins": resolved.plugin_versions,
        }

    def _summary(
        self,
        req: RunRequest,
        resolved: Resolved,
        tasks: list[TaskSpec],
        final: dict[str, RunResult],
        interrupted: bool,
        started_at: float,
        store: RunDirectory,
    ) -> dict[str, Any]:
        known = {t.task_id for t in tasks}
        results = [r for tid, r in final.items() if tid in known]
        agg = aggregate(resolved.contract, results)
        status_counts = dict(agg["overall"]["status_counts"])
        not_finished = len(tasks) - len(results)
        if not_finished:
            status_counts[TaskStatus.CANCELLED.value] = status_counts.get(TaskStatus.CANCELLED.value, 0) + not_finished
        usage: dict[str, dict[str, float]] = {}
        for r in results:
            for role, totals in (r.usage.get("models") or {}).items():
                acc = usage.setdefault(role, {})
                for k, v in totals.items():
                    acc[k] = acc.get(k, 0) + v
        return {
            "run_id": req.run_id,
            "benchmark": req.benchmark,
            "harness": req.harness,
            "model": req.model,
            "environment": req.environment,
            "n_tasks": len(tasks),
            "n_finished": len(results),
            "status_counts": status_counts,
            "interrupted": interrupted,
            "primary_metric": resolved.contract.primary,
            "metrics": {"overall": agg["overall"]["metrics"],
                        "by_category": {c: g for c, g in agg["by_category"].items()}},
            "usage": usage,
            "duration_s": round(time.time() - started_at, 3),
            "run_dir": str(store.path),
        }
