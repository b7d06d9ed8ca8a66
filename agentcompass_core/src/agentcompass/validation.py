"""``agentcompass validate``: is a benchmark's every task sound, before any agent is measured on it?

Two runs over the tasks, ``trials`` each, into one validate directory — ``oracle/`` (the reference solutions)
and ``nop/`` (an agent that does nothing), each a normal run directory (so ``--resume``, ``results show`` and
``report`` work on them). Per task, from their final results:

* **oracle fails** — the reference solution did not pass in some trial: the task or its verifier is broken;
* **nop passes** — the untouched environment passed in some trial: the verifier accepts doing nothing;
* **flaky** — the oracle's verdicts differ between trials.

A trial's **verdict** is :func:`agentcompass.runtime.metrics.verdict`: the contract's success metric (default
its ``primary``) at least its success threshold — 1 for a binary reward — and, for a contract without a
threshold, full marks (1); an errored trial fails.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agentcompass.errors import UsageError
from agentcompass.plugins import PluginHost
from agentcompass.results.run_dir import RunDirectory
from agentcompass.runtime.metrics import contract_from_json, verdict, verdict_rule
from agentcompass.runtime.statistics import flip_rate
from agentcompass.runtime.types import RunRequest, RunResult, TaskStatus

#: The two runs of a validation, in the order they run: the validate directory's subdirectories.
PHASES = ("oracle", "nop")
#: Trials per task by default.
DEFAULT_TRIALS = 3


@dataclass(frozen=True)
class TaskValidity:
    """One task under the oracle and nop.

    :param oracle: the oracle's verdict in each trial (by trial number); :param nop: nop's.
    :param oracle_errors: the oracle's error statuses (``"EVAL_ERROR: ..."``), when any trial errored.
    :param flip_rate: the share of the oracle's trials whose verdict differs from its majority.
    :param seconds: per run (``oracle``, ``nop``), the mean seconds of each lifecycle phase of a trial
        (``environment``, ``prepare``, ``run``, ``collect``, ``evaluate``, ``total`` ...).
    """

    task_id: str
    oracle: tuple[bool, ...]
    nop: tuple[bool, ...]
    oracle_errors: tuple[str, ...] = ()
    flip_rate: float = 0.0
    seconds: Mapping[str, Mapping[str, float]] = field(default_factory=dict)

    @property
    def oracle_fails(self) -> bool:
        return not all(self.oracle)

    @property
    def nop_passes(self) -> bool:
        return any(self.nop)

    @property
    def flaky(self) -> bool:
        return len(set(self.oracle)) > 1

    @property
    def problems(self) -> tuple[str, ...]:
        """What is wrong with the task, in words (empty: sound)."""
        found = []
        if self.flaky:
            found.append("flaky")
        if self.oracle_fails:
            found.append("oracle fails")
        if self.nop_passes:
            found.append("nop passes")
        return tuple(found)


@dataclass(frozen=True)
class ValidityReport:
    """A validation's findings: every task, and each run's time.

    :param metric:, :param threshold: the verdict rule (a trial passes when ``metric >= threshold``).
    :param seconds: per run (``oracle``, ``nop``), its wall-clock seconds over every invocation.
    :param unfinished: per run, its planned results with no final record.
    """

    benchmark: str
    directory: str
    trials: int
    metric: str
    threshold: float
    tasks: tuple[TaskValidity, ...]
    seconds: Mapping[str, float] = field(default_factory=dict)
    unfinished: Mapping[str, int] = field(default_factory=dict)

    @property
    def problem_tasks(self) -> tuple[TaskValidity, ...]:
        return tuple(t for t in self.tasks if t.problems)

    @property
    def sound(self) -> bool:
        return not self.problem_tasks and not any(self.unfinished.values())


def check_has_oracle(host: PluginHost, benchmark: str, benchmark_args: Mapping[str, str]) -> None:
    """A UsageError (one line) when ``benchmark`` has no reference solutions, so it cannot be validated."""
    from agentcompass.resolve import construct_plugin

    bench = construct_plugin("benchmark", benchmark, host.factory("benchmark", benchmark), dict(benchmark_args))
    if not bench.has_reference_solutions():
        raise UsageError(f"benchmark {benchmark!r} has no reference solutions (no 'oracle'), so it cannot be "
                         "validated; a benchmark supports it by implementing apply_reference_solution")


def phase_request(request: RunRequest, phase: str) -> RunRequest:
    """``request`` (benchmark, its options, environment, tasks, trials) run with the ``phase`` harness."""
    from dataclasses import replace

    return replace(request, harness=phase, model=request.model or "mock", run_id="")


def _state(path: Path) -> str:
    """``new`` (no run there), ``resume`` (a run without a finished summary) or ``done``."""
    if not (path / "run.json").exists():
        return "new"
    summary = RunDirectory.open_existing(path).read_summary()
    return "done" if summary is not None and not summary.unfinished and not summary.interrupted else "resume"


async def validate_benchmark(host: PluginHost, request: RunRequest, directory: Path,
                             *, handle_signals: bool = True) -> ValidityReport:
    """Run ``oracle`` then ``nop`` over ``request``'s tasks into ``directory/oracle`` and ``directory/nop``
    (each resumed when it is there unfinished, kept when it finished) and read the findings."""
    from agentcompass.runner import Runner

    check_has_oracle(host, request.benchmark, request.benchmark_args)
    for phase in PHASES:
        path = directory / phase
        state = _state(path)
        if state == "done":
            continue
        runner = Runner(host, phase_request(request, phase), run_dir=path, resume=state == "resume",
                        handle_signals=handle_signals)
        outcome = await runner.run()
        if outcome.interrupted:
            break
    return read_validity(directory)


def _by_task(results: Sequence[RunResult]) -> dict[str, list[RunResult]]:
    by_task: dict[str, list[RunResult]] = {}
    for r in sorted(results, key=lambda r: (r.task_id, r.trial)):
        by_task.setdefault(r.task_id, []).append(r)
    return by_task


def _mean_seconds(results: Sequence[RunResult]) -> dict[str, float]:
    totals: dict[str, float] = {}
    for r in results:
        for phase, seconds in r.timings.items():
            totals[phase] = totals.get(phase, 0.0) + seconds
    return {phase: round(total / len(results), 3) for phase, total in totals.items()} if results else {}


def is_validate_directory(path: Path) -> bool:
    """Whether ``path`` is a validate directory (what ``agentcompass validate -o`` writes): an ``oracle`` run
    directory inside, and no run directory of its own."""
    return (path / "oracle" / "run.json").is_file() and not (path / "run.json").exists()


def read_validity(directory: Path) -> ValidityReport:
    """The findings of the validate directory ``directory`` (what ``validate`` ran into it); a UsageError naming
    it when it holds no oracle run."""
    if not (directory / "oracle" / "run.json").exists():
        raise UsageError(f"{directory} is not a validate directory (no oracle/run.json); make one with: "
                         "agentcompass validate BENCHMARK -o DIR")
    runs: dict[str, dict[str, list[RunResult]]] = {}
    seconds: dict[str, float] = {}
    unfinished: dict[str, int] = {}
    info = None
    for phase in PHASES:
        path = directory / phase
        if not (path / "run.json").exists():
            runs[phase] = {}
            continue
        store = RunDirectory.open_existing(path)
        info = info or store.read_run_info()
        results = list(store.final_results().values())
        runs[phase] = _by_task(results)
        summary = store.read_summary()
        seconds[phase] = summary.duration_s if summary is not None else 0.0
        planned = store.read_run_info().planned
        unfinished[phase] = (planned.n_results if planned is not None else len(results)) - len(results)
    assert info is not None
    contract = contract_from_json(info.plan.metric_contract)
    metric, threshold = verdict_rule(contract)
    tasks = []
    for task_id in sorted(set(runs["oracle"]) | set(runs["nop"])):
        oracle, nop = runs["oracle"].get(task_id, []), runs["nop"].get(task_id, [])
        oracle_verdicts = tuple(verdict(contract, r) for r in oracle)
        tasks.append(TaskValidity(
            task_id=task_id, oracle=oracle_verdicts, nop=tuple(verdict(contract, r) for r in nop),
            oracle_errors=tuple(f"{r.status.value}: {(r.error or '').splitlines()[0] if r.error else ''}".rstrip(": ")
                                for r in oracle if r.status is not TaskStatus.COMPLETED),
            flip_rate=flip_rate(oracle_verdicts),
            seconds={"oracle": _mean_seconds(oracle), "nop": _mean_seconds(nop)},
        ))
    return ValidityReport(
        benchmark=info.request.benchmark, directory=str(directory), trials=info.request.tasks.trials,
        metric=metric, threshold=round(threshold, 6), tasks=tuple(tasks), seconds=seconds, unfinished=unfinished,
    )
