"""Request resolution: a :class:`RunRequest` turned into live plugin objects and the task list, all checked
before the first task starts, so bad input never leaves half a run behind."""

from __future__ import annotations

import inspect
import math
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import attrs

from agentcompass.errors import AgentCompassError, PluginError, UsageError, describe
from agentcompass.models.roles import RunModels, resolve_models
from agentcompass.plugins import PluginHost
from agentcompass.runtime.benchmark import BaseBenchmark, HarnessFreeBenchmark
from agentcompass.runtime.environment import EnvironmentProvider
from agentcompass.runtime.executor import Executor
from agentcompass.runtime.harness import BaseHarness
from agentcompass.runtime.metrics import MetricContract
from agentcompass.runtime.phases import DEFAULT_TIMEOUTS
from agentcompass.runtime.types import EnvironmentSpec, RunRequest, TaskSpec

NO_HARNESS = "none"
PHASE_TIMEOUT_NAMES = frozenset(DEFAULT_TIMEOUTS)


def phase_timeouts(req: RunRequest, declared: Mapping[str, float] | None = None) -> dict[str, float | None]:
    """Seconds per phase: the defaults, then what the task declares (``BaseBenchmark.task_timeouts``), then
    ``--timeout`` for the run phase, then ``--phase-timeout``: what the user gave explicitly always wins."""
    run = {"run": req.schedule.timeout} if req.schedule.timeout is not None else {}
    return {**DEFAULT_TIMEOUTS, **(declared or {}), **run, **req.schedule.phase_timeouts}


def task_timeouts(benchmark: BaseBenchmark, req: RunRequest, tasks: list[TaskSpec]
                  ) -> dict[str, dict[str, float | None]]:
    """The phase timeouts of each task that declares its own (:meth:`BaseBenchmark.task_timeouts`), merged as
    :func:`phase_timeouts` says; a task that declares none is not in the result (the run's apply)."""
    merged: dict[str, dict[str, float | None]] = {}
    for task in tasks:
        try:
            declared = dict(benchmark.task_timeouts(task, req) or {})
        except Exception as exc:
            raise PluginError(
                f"benchmark {req.benchmark!r} cannot give the timeouts of task {task.task_id!r}: {describe(exc)}"
            ) from exc
        for phase, seconds in declared.items():
            if phase not in PHASE_TIMEOUT_NAMES or isinstance(seconds, bool) or not isinstance(seconds, (int, float)) \
                    or not (math.isfinite(seconds) and seconds > 0):
                raise PluginError(
                    f"benchmark {req.benchmark!r} declared {phase}={seconds!r} for task {task.task_id!r}: expected "
                    f"a positive number of seconds for one of the phases {', '.join(sorted(PHASE_TIMEOUT_NAMES))}"
                )
        if declared:
            merged[task.task_id] = phase_timeouts(req, {k: float(v) for k, v in declared.items()})
    return merged


def new_run_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6]


def construct_plugin(kind: str, name: str, factory: Callable[..., Any], options: Mapping[str, Any]) -> Any:
    """``factory(**options)``; the object gets the name it was registered under (its ``name``), so messages
    name it as the user typed it. A rejected option is a UsageError, any other failure a PluginError."""
    try:
        obj = factory(**options)
    except AgentCompassError:
        raise
    except (TypeError, ValueError) as exc:
        raise UsageError(f"{kind} {name!r} rejected its arguments {dict(options)}: {exc}") from None
    except Exception as exc:
        raise PluginError(f"{kind} {name!r} failed to start: {describe(exc)}") from exc
    if kind in ("benchmark", "harness", "environment", "executor"):
        try:
            obj.name = name
        except AttributeError:
            pass  # a slotted or frozen object keeps its own name
    return obj


@attrs.define
class Resolved:
    """A request turned into live plugin objects."""

    benchmark: BaseBenchmark
    harness: BaseHarness | None
    provider: EnvironmentProvider
    executor: Executor
    contract: MetricContract
    plugin_versions: dict[str, str | None]


def resolve(host: PluginHost, req: RunRequest, models: RunModels | None = None) -> Resolved:
    """Look up and construct the request's plugins (the request checked: :mod:`agentcompass.request_checks`);
    any mismatch between them is a UsageError before work starts. ``models``: the request's, resolved."""
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
    executor_name = req.execution.executor
    executor = construct_plugin("executor", executor_name, host.factory("executor", executor_name),
                                req.execution.executor_args)
    if not isinstance(executor, Executor):
        raise PluginError(f"executor {req.execution.executor!r} is not an Executor (plugin bug)")
    contract = metric_contract(host, benchmark, req.benchmark)
    roles = (models if models is not None else resolve_models(req)).roles
    missing = [r for r in benchmark.required_model_roles if r not in roles]
    if missing:
        flags = ", ".join(f"--{r}-model" for r in missing)
        raise UsageError(f"benchmark {req.benchmark!r} needs the model role(s) {', '.join(missing)}; set {flags}")
    versions: dict[str, str | None] = {}
    providers = [("model", spec.partition("/")[0]) for spec in roles.values()]  # run.json: --rerun compares them
    for kind, name in (("benchmark", req.benchmark), ("harness", req.harness), ("environment", req.environment),
                       ("executor", req.execution.executor), *providers):
        record = host.plugin_of(kind, name)
        if record is not None:
            versions[record.name] = record.version
    return Resolved(benchmark, harness, provider, executor, contract, versions)


def metric_contract(host: PluginHost, benchmark: BaseBenchmark, name: str) -> MetricContract:
    """The benchmark's contract: its ``metric_contract`` itself, or the registered contract it names."""
    contract = benchmark.metric_contract
    if isinstance(contract, str):
        contract = host.factory("metric_contract", contract)()
    if not isinstance(contract, MetricContract):
        raise PluginError(
            f"benchmark {name!r}: metric_contract is {type(contract).__name__}, not a MetricContract or the "
            "name of a registered one (plugin bug)"
        )
    return contract


async def load_tasks(benchmark: BaseBenchmark, req: RunRequest) -> list[TaskSpec]:
    """The benchmark's tasks, filtered by ``--task-id`` and ``--limit``."""
    try:
        loaded = benchmark.load_tasks(req)
        if inspect.isawaitable(loaded):
            loaded = await loaded
        if hasattr(loaded, "__aiter__"):
            tasks = [t async for t in loaded]
        else:
            tasks = list(loaded)
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
    if req.tasks.task_ids:
        unknown = [tid for tid in req.tasks.task_ids if tid not in seen]
        if unknown:
            sample = ", ".join(sorted(seen)[:10])
            categories = {t.category for t in tasks}
            prefixes = sorted({tid.split("/")[0] for tid in unknown if "/" in tid} - categories)
            hint = (f"; the benchmark's options choose which tasks it loads — for {prefixes[0]!r} try "
                    f"-b domain={prefixes[0]} (or see its README)" if prefixes else "")
            raise UsageError(
                f"unknown task id(s) {', '.join(unknown)} for benchmark {req.benchmark!r}; "
                f"see 'agentcompass tasks list {req.benchmark}' (e.g. {sample}){hint}"
            )
        wanted = set(req.tasks.task_ids)
        tasks = [t for t in tasks if t.task_id in wanted]
    if req.tasks.limit is not None:
        tasks = tasks[: req.tasks.limit]
    return tasks


def environment_specs(
    benchmark: BaseBenchmark, req: RunRequest, tasks: list[TaskSpec], harness: BaseHarness | None = None
) -> dict[str, EnvironmentSpec]:
    """Each task's environment spec, known before any task starts (images are built from them): the
    benchmark's, as the harness derives it (:meth:`BaseHarness.environment_spec`)."""
    specs: dict[str, EnvironmentSpec] = {}
    for task in tasks:
        try:
            spec = benchmark.environment_spec(task, req)
        except UsageError:
            raise  # the request asks for what the benchmark cannot give (a task's image on `local`)
        except Exception as exc:
            raise PluginError(
                f"benchmark {req.benchmark!r} has no environment for task {task.task_id!r}: {describe(exc)}"
            ) from exc
        if not isinstance(spec, EnvironmentSpec):
            raise PluginError(f"benchmark {req.benchmark!r} returned {type(spec).__name__} as an EnvironmentSpec")
        if harness is not None:
            try:
                derived = harness.environment_spec(spec, task, req)
            except AgentCompassError:
                raise
            except Exception as exc:
                raise PluginError(
                    f"harness {req.harness!r} cannot set up the environment of task {task.task_id!r}: "
                    f"{describe(exc)}"
                ) from exc
            if not isinstance(derived, EnvironmentSpec):
                raise PluginError(f"harness {req.harness!r} returned {type(derived).__name__} as an EnvironmentSpec")
            spec = derived
        specs[task.task_id] = spec
    return specs
