"""Runs through the real lifecycle, and plugins registered for one test.

``run_benchmark`` builds a :class:`~agentcompass.runtime.RunRequest`, runs it with the library's
:class:`~agentcompass.runner.Runner` (every phase, the model gateway, the run directory) and reads back what
the run wrote. Benchmarks, harnesses, environments and models may be given by registered name or as objects;
objects are registered for the duration of the run only. (Just over 300 lines: the run and the record reader
it returns belong together.)
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import tempfile
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from agentcompass.hookspecs import hookimpl
from agentcompass.runtime.benchmark import BaseBenchmark
from agentcompass.runtime.environment import EnvironmentProvider, EnvironmentSession
from agentcompass.runtime.harness import BaseHarness
from agentcompass.runtime.models import ModelClient
from agentcompass.runtime.types import ExecutionPlan, PreparedTask, RunRequest, RunResult, TaskSpec, TaskStatus

_serial = itertools.count(1)

#: What a function harness gets: the arguments of ``BaseHarness.run``.
Act = Callable[[TaskSpec, PreparedTask, RunRequest, ExecutionPlan, "EnvironmentSession | None"],
               Awaitable[RunResult]]


class RegistrationError(AssertionError):
    """A plugin given to the kit failed to register (the message is the plugin record's error)."""


@contextlib.contextmanager
def registered(host: Any, plugin: object, name: str) -> Iterator[Any]:
    """Register ``plugin`` (a module or an object with hookimpls) in ``host`` under ``name`` for the
    ``with`` block only. Yields the plugin record; a failed registration raises :class:`RegistrationError`
    with the record's error (an ``AssertionError``, so pytest shows it as a test failure)."""
    record = host.add_plugin(plugin, name)
    try:
        if record.error is not None:
            raise RegistrationError(f"plugin {name!r} failed to register: {record.error}")
        yield record
    finally:
        host.remove_plugin(name)


class FunctionHarness(BaseHarness):
    """A harness whose ``run`` is an async function with ``BaseHarness.run``'s arguments."""

    name = "function"

    def __init__(self, act: Act, **options: Any) -> None:
        super().__init__(**options)
        self.act = act

    async def run(self, task: TaskSpec, prepared: PreparedTask, req: RunRequest, plan: ExecutionPlan,
                  env: EnvironmentSession | None = None) -> RunResult:
        return await self.act(task, prepared, req, plan, env)


class _KitPlugin:
    """A plugin registering the objects of one kit run."""

    def __init__(self) -> None:
        self.entries: dict[str, dict[str, Callable[..., Any]]] = {}

    def add(self, kind: str, name: str, factory: Callable[..., Any]) -> None:
        self.entries.setdefault(kind, {})[name] = factory

    def _register(self, kind: str, register: Callable[[str, Callable[..., Any]], None]) -> None:
        for name, factory in self.entries.get(kind, {}).items():
            register(name, factory)

    @hookimpl
    def register_benchmarks(self, register: Any) -> None:
        self._register("benchmark", register)

    @hookimpl
    def register_harnesses(self, register: Any) -> None:
        self._register("harness", register)

    @hookimpl
    def register_environments(self, register: Any) -> None:
        self._register("environment", register)

    @hookimpl
    def register_models(self, register: Any) -> None:
        self._register("model", register)


def _free_name(host: Any, kind: str, wanted: str) -> str:
    taken = set(host.names(kind))
    if wanted and wanted not in taken:
        return wanted
    base = wanted or f"kit-{kind}"
    return next(f"{base}-kit{n}" for n in itertools.count(1) if f"{base}-kit{n}" not in taken)


def _instance_factory(obj: Any) -> Callable[..., Any]:
    def factory(*args: Any, **options: Any) -> Any:
        if options:
            raise TypeError(f"options {sorted(options)} need a class, not an instance of {type(obj).__name__}")
        return obj

    return factory


def _as_factory(kind: str, obj: Any) -> tuple[str, Callable[..., Any]]:
    """(wanted name, factory) of a plugin object the kit registers."""
    if kind == "benchmark":
        if isinstance(obj, BaseBenchmark):
            return obj.name, _instance_factory(obj)
        if isinstance(obj, type) and issubclass(obj, BaseBenchmark):
            return obj.name, obj
    elif kind == "harness":
        if isinstance(obj, BaseHarness):
            return obj.name, _instance_factory(obj)
        if isinstance(obj, type) and issubclass(obj, BaseHarness):
            return obj.name, obj
        if callable(obj) and not isinstance(obj, type):
            return getattr(obj, "__name__", "function").strip("<>"), lambda **options: FunctionHarness(obj, **options)
    elif kind == "environment":
        if isinstance(obj, EnvironmentProvider):
            return obj.name, _instance_factory(obj)
        if isinstance(obj, type) and issubclass(obj, EnvironmentProvider):
            return obj.name, obj
    elif kind == "model":
        from agentcompass.testing.scripted_models import ScriptedModel

        client = obj if isinstance(obj, ModelClient) else ScriptedModel(obj) if callable(obj) else None
        if client is not None:
            return "kit-model", lambda name="", **options: client
    raise TypeError(f"cannot use {obj!r} as a {kind}")


@attrs.define
class KitRun:
    """What a run left: ``summary`` (summary.json, as a dict), ``results`` (the final record of each task, or
    of each (task, trial) with ``trials=``, from results.jsonl, in the order they finished), ``run_dir``,
    ``exit_code`` (as the CLI's), and the raw ``records``. ``request`` is what was run; ``outcome`` is what
    ``Runner.run`` returned."""

    run_dir: Path
    summary: dict[str, Any]
    exit_code: int
    request: RunRequest
    records: list[dict[str, Any]]
    results: list[RunResult]
    outcome: Any = None

    def result(self, task_id: str, trial: int = 1) -> RunResult:
        """The final result of one task (of one trial, with ``trials=``)."""
        for r in self.results:
            if r.task_id == task_id and _trial(r) == trial:
                return r
        raise KeyError(f"no result for task {task_id!r} (trial {trial}); tasks: "
                       f"{sorted({r.task_id for r in self.results})}")

    @property
    def by_id(self) -> dict[str, RunResult]:
        """``{task_id: result}`` of the first trial."""
        return {r.task_id: r for r in self.results if _trial(r) == 1}

    def metric(self, name: str | None = None, *, trial: int = 1) -> dict[str, float | None]:
        """``{task_id: metrics[name]}`` (default: the primary metric) of every task, for one trial."""
        key = name or self.summary.get("primary_metric") or "score"
        return {r.task_id: r.metrics.get(key) for r in self.results if _trial(r) == trial}

    @property
    def statuses(self) -> dict[str, TaskStatus]:
        """``{task_id: status}`` of the first trial."""
        return {r.task_id: r.status for r in self.results if _trial(r) == 1}

    def jsonl(self, name: str) -> list[dict[str, Any]]:
        """The records of another JSONL file of the run (``attempts.jsonl``, ``trajectories.jsonl``,
        ``logs.jsonl``)."""
        return read_jsonl(self.run_dir / name)

    @property
    def attempts(self) -> list[dict[str, Any]]:
        return self.jsonl("attempts.jsonl")

    @property
    def trajectories(self) -> list[dict[str, Any]]:
        return self.jsonl("trajectories.jsonl")


def _trial(result: RunResult) -> int:
    return int(getattr(result, "trial", 1) or 1)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Complete JSON lines of ``path`` (none when it does not exist)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def result_from_record(record: Mapping[str, Any]) -> RunResult:
    """A :class:`RunResult` from a line of results.jsonl (fields the type lacks are ignored)."""
    names = {f.name for f in dataclasses.fields(RunResult)}
    data = {k: v for k, v in record.items() if k in names}
    data["status"] = TaskStatus(data.get("status", TaskStatus.COMPLETED.value))
    return RunResult(**data)


def _make_runner(host: Any, request: RunRequest, run_dir: Path) -> Any:
    from agentcompass.runner import Runner

    try:
        return Runner(host, request, run_dir=run_dir, handle_signals=False)
    except TypeError:  # a runner without the option
        return Runner(host, request, run_dir=run_dir)


async def run_benchmark(
    benchmark: Any,
    harness: Any = None,
    model: Any = "mock",
    *,
    environment: Any = "local",
    host: Any = None,
    run_dir: str | Path | None = None,
    task_ids: Sequence[str] = (),
    limit: int | None = None,
    benchmark_args: Mapping[str, str] | None = None,
    harness_args: Mapping[str, str] | None = None,
    model_args: Mapping[str, str] | None = None,
    environment_args: Mapping[str, str] | None = None,
    **request_fields: Any,
) -> KitRun:
    """Run a benchmark through the real lifecycle and return what the run wrote.

    :param benchmark: a registered name, a ``BaseBenchmark`` subclass, or an instance.
    :param harness: a registered name, a ``BaseHarness`` subclass or instance, or an async function with
        ``BaseHarness.run``'s arguments ``(task, prepared, req, plan, env)``. Default: ``"none"`` for a
        ``HarnessFreeBenchmark``, else ``"nop"``.
    :param model: a ``PROVIDER/NAME`` string (``"mock"``), a ``ModelClient``, or a responder function
        (see :mod:`agentcompass.testing.scripted_models`), served to the run like any provider.
    :param environment: a registered name, an ``EnvironmentProvider`` subclass or instance.
    :param host: the plugins (default: the installed ones, :func:`agentcompass.plugins.load_plugins`).
    :param run_dir: the run directory (default: a new temporary directory).
    :param request_fields: any other ``RunRequest`` field (``concurrency=``, ``retries=``, ``timeout=``,
        ``phase_timeouts=``, ``role_models=`` ...).
    """
    if host is None:
        from agentcompass.plugins import load_plugins

        host = load_plugins()
    plugin = _KitPlugin()

    def name_of(kind: str, obj: Any) -> str:
        if isinstance(obj, str):
            return obj
        wanted, factory = _as_factory(kind, obj)
        name = _free_name(host, kind, wanted)
        plugin.add(kind, name, factory)
        return name

    benchmark_name = name_of("benchmark", benchmark)
    if harness is None:
        from agentcompass.runtime.benchmark import HarnessFreeBenchmark

        cls = benchmark if isinstance(benchmark, type) else type(benchmark)
        if isinstance(benchmark, str):
            cls = host.factory("benchmark", benchmark)
            if not isinstance(cls, type):
                raise TypeError(f"benchmark {benchmark!r} is registered with a factory function: pass harness=")
        harness = "none" if issubclass(cls, HarnessFreeBenchmark) else "nop"
    harness_name = name_of("harness", harness)
    environment_name = name_of("environment", environment)
    model_name = model if isinstance(model, str) else name_of("model", model)
    request = RunRequest(
        benchmark=benchmark_name,
        harness=harness_name,
        model=model_name,
        environment=environment_name,
        benchmark_args=dict(benchmark_args or {}),
        harness_args=dict(harness_args or {}),
        model_args=dict(model_args or {}),
        environment_args=dict(environment_args or {}),
    ).with_options(task_ids=tuple(task_ids), limit=limit, **request_fields)
    path = Path(run_dir) if run_dir is not None else Path(tempfile.mkdtemp(prefix="agentcompass-test-")) / "run"
    with contextlib.ExitStack() as stack:
        if plugin.entries:
            stack.enter_context(registered(host, plugin, f"agentcompass-testing-{next(_serial)}"))
        outcome = await _make_runner(host, request, path).run()
    records = read_jsonl(Path(outcome.run_dir) / "results.jsonl")
    final: dict[tuple[str, int], RunResult] = {}
    for record in records:  # the last record of a (task, trial) wins, as on resume
        result = result_from_record(record)
        final.pop((result.task_id, _trial(result)), None)
        final[(result.task_id, _trial(result))] = result
    summary_path = Path(outcome.run_dir) / "summary.json"
    summary = json.loads(summary_path.read_text(encoding="utf-8")) if summary_path.exists() else {}
    return KitRun(
        run_dir=Path(outcome.run_dir),
        summary=summary,
        exit_code=int(outcome.exit_code),
        request=request,
        records=records,
        results=list(final.values()),
        outcome=outcome,
    )
