"""``agentcompass results compare``: is run B really better than run A, or is the difference noise?

On the tasks the runs share, per metric: each run's mean over those tasks with its clustered 95% interval, and
the **paired difference** B - A. Pairing is by task: each task's value is its mean over the run's trials
(errored trials count as 0), ``d_i = b_i - a_i``, and the difference's standard error is the standard error of
the mean of the ``d_i`` (``sqrt(var(d) / n)``, sample variance), so the trials of a task stay one cluster. The
95% interval is ``mean(d) ± t(0.975, n - 1) · SE``, clipped to the widest difference the metric's bounds allow
(declared, or [0, 1] for a metric whose every value lies in it); each run's own interval is the one
``summary.json`` gives (:func:`agentcompass.runtime.statistics.mean_interval`). Tasks where B is better, worse
or equal are counted from the ``d_i``.

Beside each difference: the **minimum detectable difference** (MDE), the smallest true difference these tasks and
trials find with 80% power in a two-sided 5% test, ``(z(0.975) + z(0.8)) · SE`` (≈ 2.8 standard errors, the
normal approximation), and whether the difference is **within noise** (its 95% interval contains zero).
:func:`plan_comparison` turns a pilot's variance components (between tasks, within a task's trials;
:func:`agentcompass.runtime.statistics.variance_components`) into the tasks by trials a difference needs.

Public API: plugins that show comparisons (the report) call :func:`load_run` and :func:`compare`, so every view
of a comparison gives the numbers ``results compare`` prints.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agentcompass.errors import UsageError
from agentcompass.results.run_dir import RunDirectory
from agentcompass.runtime.metrics import MetricContract, contract_from_json
from agentcompass.runtime.records import RunInfo
from agentcompass.runtime.statistics import (
    VarianceComponents,
    clustered_stderr,
    inferred_bounds,
    mean_interval,
    minimum_detectable_difference,
    paired_components,
    paired_stderr,
    t_quantile,
    tasks_needed,
    unpaired_components,
    variance_components,
)


@dataclass(frozen=True)
class RunSide:
    """One run's mean over the shared tasks, with its clustered interval."""

    run_id: str
    mean: float
    stderr: float | None
    ci95: tuple[float, float] | None


@dataclass(frozen=True)
class MetricComparison:
    metric: str
    category: str | None
    n_tasks: int
    a: RunSide
    b: RunSide
    difference: float
    stderr: float | None
    ci95: tuple[float, float] | None
    b_better: int
    b_worse: int
    equal: int
    #: The metric's label in the contract (what the summary and the report show), else its name.
    label: str = ""
    #: The smallest difference these tasks and trials detect (80% power, 5% two-sided); ``None`` for one task.
    mde: float | None = None
    #: The 95% interval contains zero (or there is none): the difference cannot be told from noise.
    within_noise: bool = True


@dataclass(frozen=True)
class Comparison:
    """Run ``b`` against the baseline ``a``."""

    a: str
    b: str
    benchmark: str
    n_shared_tasks: int
    metrics: tuple[MetricComparison, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class LoadedRun:
    """A finished (or partly finished) run directory's final scores, read for comparing."""

    path: Path
    info: RunInfo
    scalars: tuple[str, ...]
    #: Per task: its category and the value of every scalar in each of its trials (errors as 0).
    tasks: Mapping[str, tuple[str | None, Mapping[str, list[float]]]]
    contract: MetricContract | None = None


def load_run(path: Path) -> LoadedRun:
    """Read ``path``'s run record and final scores; a :class:`~agentcompass.errors.UsageError` (or a results
    error) naming the file when it is not a readable run directory."""
    store = RunDirectory.open_existing(path)
    info = store.read_run_info()
    scalars = tuple(info.plan.metric_contract.get("scalar") or ())
    tasks: dict[str, tuple[str | None, dict[str, list[float]]]] = {}
    for (task_id, _), score in store.final_scores().items():
        _, values = tasks.setdefault(task_id, (score.category, {name: [] for name in scalars}))
        for name in scalars:
            values[name].append(float(score.metrics.get(name, 0.0)) if score.completed else 0.0)
    return LoadedRun(path, info, scalars, tasks, contract_from_json(info.plan.metric_contract))


def _side(run: LoadedRun, name: str, tasks: Sequence[str]) -> RunSide:
    clusters = [run.tasks[t][1][name] for t in tasks]
    n = sum(len(c) for c in clusters)
    mean = sum(sum(c) for c in clusters) / n
    stderr = clustered_stderr(clusters)
    interval = mean_interval(clusters, _bounds(run, name))
    return RunSide(run.info.run_id, mean, stderr, (interval.low, interval.high) if interval else None)


def _bounds(run: LoadedRun, name: str) -> tuple[float, float] | None:
    """``name``'s declared bounds, else [0, 1] when every value it took in the run lies in [0, 1]."""
    declared = run.contract.bounds.get(name) if run.contract is not None else None
    return inferred_bounds(declared, (v for _, values in run.tasks.values() for v in values.get(name, ())))


@dataclass(frozen=True)
class PairedDifference:
    """``b - a`` on one metric over shared tasks: the mean of the per-task differences, its standard error and
    95% interval, and the tasks where ``b`` is better, worse or equal."""

    n_tasks: int
    difference: float
    stderr: float | None
    ci95: tuple[float, float] | None
    b_better: int
    b_worse: int
    equal: int
    mde: float | None = None
    within_noise: bool = True


def paired_difference(a: LoadedRun, b: LoadedRun, name: str, tasks: Sequence[str]) -> PairedDifference:
    """The paired difference of :func:`compare` alone (without each run's own interval), for views that show
    many runs against one baseline (a suite's leaderboard)."""
    diffs = []
    for t in tasks:
        va, vb = a.tasks[t][1][name], b.tasks[t][1][name]
        diffs.append(sum(vb) / len(vb) - sum(va) / len(va))
    n = len(diffs)
    mean = sum(diffs) / n
    stderr = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1) / n) if n > 1 else None
    ci = None
    if stderr is not None:
        half = t_quantile(0.975, n - 1) * stderr
        ci = (mean - half, mean + half)
        bounds = _bounds(a, name) or _bounds(b, name)
        if bounds is not None:
            span = bounds[1] - bounds[0]
            ci = (max(ci[0], -span), min(ci[1], span))
    return PairedDifference(n, mean, stderr, ci, sum(d > 0 for d in diffs), sum(d < 0 for d in diffs),
                            sum(d == 0 for d in diffs), minimum_detectable_difference(stderr),
                            ci is None or ci[0] <= 0.0 <= ci[1])


def shared_tasks(a: LoadedRun, b: LoadedRun) -> list[str]:
    """The tasks both runs finished, sorted; a UsageError when they cannot be compared."""
    if a.info.request.benchmark != b.info.request.benchmark:
        raise UsageError(f"{a.path} is a run of benchmark {a.info.request.benchmark!r} and {b.path} of "
                         f"{b.info.request.benchmark!r}; compare runs of one benchmark")
    shared = sorted(set(a.tasks) & set(b.tasks))
    if not shared:
        raise UsageError(f"{a.path} and {b.path} share no finished task; nothing to compare")
    return shared


def _compare_metric(a: LoadedRun, b: LoadedRun, name: str, tasks: Sequence[str], category: str | None
                    ) -> MetricComparison:
    d = paired_difference(a, b, name, tasks)
    contract = a.contract or b.contract
    return MetricComparison(
        metric=name, category=category, n_tasks=d.n_tasks, a=_side(a, name, tasks), b=_side(b, name, tasks),
        difference=d.difference, stderr=d.stderr, ci95=d.ci95, b_better=d.b_better, b_worse=d.b_worse,
        equal=d.equal, label=contract.label(name) if contract is not None else name, mde=d.mde,
        within_noise=d.within_noise,
    )


def compare(a: LoadedRun, b: LoadedRun, *, by_category: bool = False) -> Comparison:
    """``b`` against ``a`` on their shared tasks; a UsageError when they cannot be compared."""
    shared = shared_tasks(a, b)
    names = [n for n in a.scalars if n in b.scalars]
    groups: list[tuple[str | None, list[str]]] = [(None, shared)]
    if by_category:
        categories = sorted({c for t in shared if (c := a.tasks[t][0]) is not None})
        groups += [(c, [t for t in shared if a.tasks[t][0] == c]) for c in categories]
    metrics = tuple(_compare_metric(a, b, name, tasks, category) for category, tasks in groups for name in names)
    return Comparison(a=a.info.run_id, b=b.info.run_id, benchmark=a.info.request.benchmark,
                      n_shared_tasks=len(shared), metrics=metrics)


#: The trials per task a plan lists.
PLAN_TRIALS = (1, 2, 3, 5, 10)


@dataclass(frozen=True)
class PlanRow:
    """``tasks`` tasks with ``trials`` trials each find the difference with 80% power."""

    trials: int
    tasks: int
    total_trials: int


@dataclass(frozen=True)
class ComparisonPlan:
    """How many tasks by trials a paired comparison needs to detect ``difference`` on ``metric``.

    :param paired: the components come from two runs over the same tasks (their per-task differences);
        ``False``: from one pilot run, the other run taken to vary alike and independently (conservative).
    :param components: the variance components of a per-task difference.
    :param pilot_mde: the smallest difference the pilot's own tasks and trials detect.
    """

    metric: str
    difference: float
    paired: bool
    components: VarianceComponents
    pilot_tasks: int
    pilot_trials: float
    pilot_mde: float
    rows: tuple[PlanRow, ...]


def _clusters(run: LoadedRun, name: str, tasks: Sequence[str]) -> list[list[float]]:
    return [run.tasks[t][1][name] for t in tasks]


def plan_comparison(runs: Sequence[LoadedRun], difference: float, metric: str | None = None,
                    trials: Sequence[int] = PLAN_TRIALS) -> ComparisonPlan:
    """The tasks by trials needed to detect ``difference`` (on ``metric``, default the primary one) from a pilot:
    one run (its variance components, doubled for an unpaired other run) or two runs over the same tasks (the
    components of their paired differences). A UsageError when the pilot cannot estimate them."""
    if not difference or not math.isfinite(difference):
        raise UsageError(f"--difference must be a non-zero number; got {difference}")
    first = runs[0]
    name = metric or (first.contract.primary if first.contract is not None else (first.scalars or ("",))[0])
    for run in runs:
        if name not in run.scalars:
            raise UsageError(f"{run.path} has no metric {name!r}; its metrics: {', '.join(run.scalars) or 'none'}")
    if len(runs) == 1:
        tasks = sorted(first.tasks)
        pilot = variance_components(_clusters(first, name, tasks))
        components = unpaired_components(pilot) if pilot is not None else None
    else:
        tasks = shared_tasks(runs[0], runs[1])
        components = paired_components(_clusters(runs[0], name, tasks), _clusters(runs[1], name, tasks))
    if components is None:
        raise UsageError(f"a plan needs a pilot of at least 2 tasks; {len(tasks)} finished in {first.path}")
    pilot_trials = max(1, round(components.trials))
    rows = tuple(PlanRow(k, n, n * k) for k in trials for n in [tasks_needed(components, difference, k)])
    return ComparisonPlan(
        metric=name, difference=abs(difference), paired=len(runs) > 1, components=components,
        pilot_tasks=components.n_tasks, pilot_trials=components.trials,
        pilot_mde=minimum_detectable_difference(paired_stderr(components, components.n_tasks, pilot_trials)) or 0.0,
        rows=rows,
    )
