"""Metric contracts: which scalars a benchmark reports and how they aggregate over a run.

Aggregation is honest about errors: each scalar's ``mean`` is over *all* (task, trial) results, an errored one
counting as 0, and ``mean_completed`` is over completed ones only. Both denominators are reported, with the
standard error of ``mean`` clustered by task and its 95% confidence interval (Wilson for a success rate, else a t
interval clipped to the metric's bounds: the declared ones, else [0, 1] when every value the metric took lies
in [0, 1]); a contract that declares a success threshold also gets pass@k
and pass^k (formulas in :mod:`agentcompass.runtime.statistics`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from agentcompass.runtime.records import GroupAggregate, MetricAggregate, PassAtK, RunMetrics, VerdictStability
from agentcompass.runtime.statistics import clustered_stderr, flip_rate, inferred_bounds, mean_interval, pass_curves
from agentcompass.runtime.types import RunResult, TaskStatus


@dataclass(frozen=True)
class MetricContract:
    """Names the scalars a benchmark's ``evaluate`` sets in ``RunResult.metrics``.

    :param primary: the headline scalar.
    :param scalar: every scalar that is averaged (``primary`` included).
    :param labels: human-readable names for reports.
    :param higher_is_better: direction of every scalar.
    :param success_threshold: a trial whose ``success_metric`` is at least this succeeded; set, the summary has
        pass@k and pass^k for k = 1..trials. ``None``: the metric is not pass/fail.
    :param success_metric: the scalar the threshold applies to (default: ``primary``).
    :param bounds: the range of each scalar that declares one (``(low, high)``); intervals never leave it.
    :param aggregates: run-level figures of every scalar besides its mean, each of :data:`AGGREGATIONS`
        (``"sum"``, ``"min"``, ``"max"``), over every result as the mean is (an errored result, or one that
        lacks the scalar, counting 0); in each :class:`MetricAggregate`'s ``aggregates``.
    """

    primary: str
    scalar: tuple[str, ...]
    labels: Mapping[str, str] = field(default_factory=dict)
    higher_is_better: bool = True
    success_threshold: float | None = None
    success_metric: str | None = None
    bounds: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    aggregates: tuple[str, ...] = ()

    def label(self, name: str) -> str:
        return self.labels.get(name, name)


#: The run-level figures a contract may ask for besides the mean (``MetricContract.aggregates``), over the
#: values every result counts for a scalar.
AGGREGATIONS: Mapping[str, Callable[[Sequence[float]], float]] = {"sum": sum, "min": min, "max": max}

#: The success threshold of a binary reward (1.0 for success, 0.0 for failure), tolerant of rounding.
BINARY_SUCCESS = 1.0 - 1e-6


def make_metric_contract(
    primary: str,
    scalar: Iterable[str] = (),
    labels: Mapping[str, str] | None = None,
    higher_is_better: bool = True,
    *,
    binary: bool = False,
    success_threshold: float | None = None,
    success_metric: str | None = None,
    bounds: tuple[float, float] | Mapping[str, tuple[float, float]] | None = None,
    aggregates: Iterable[str] = (),
) -> MetricContract:
    """Build a :class:`MetricContract`; ``primary`` is added to ``scalar`` when missing.

    :param binary: the success metric is a 0/1 reward: success means at least :data:`BINARY_SUCCESS`
        (shorthand for that ``success_threshold``).
    :param success_threshold: declare pass/fail at this value of ``success_metric``; enables pass@k and pass^k.
    :param success_metric: which scalar decides success (default ``primary``).
    :param bounds: the range the scalars take, ``(low, high)`` for every scalar or ``{name: (low, high)}``;
        confidence intervals are clipped to it. ``binary`` implies ``(0, 1)`` for the success metric. A scalar
        without declared bounds whose every value in a run lies in [0, 1] is clipped to [0, 1] all the same.
    :param aggregates: run-level figures besides the mean (:data:`AGGREGATIONS`: ``sum``, ``min``, ``max``).
    """
    names = tuple(dict.fromkeys([primary, *scalar]))
    kinds = tuple(dict.fromkeys(str(a) for a in aggregates if a != "mean"))
    unknown_kinds = [a for a in kinds if a not in AGGREGATIONS]
    if unknown_kinds:
        raise ValueError(f"aggregates {unknown_kinds} are not among {sorted(AGGREGATIONS)} (the mean is always "
                         "reported)")
    if not primary:
        raise ValueError("a metric contract needs a primary metric name")
    if binary and success_threshold is None:
        success_threshold = BINARY_SUCCESS
    if success_metric is not None and success_metric not in names:
        raise ValueError(f"success_metric {success_metric!r} is not one of the scalars {names}")
    if bounds is None:
        declared: dict[str, tuple[float, float]] = {}
    elif isinstance(bounds, Mapping):
        declared = {str(k): _pair(v, k) for k, v in bounds.items()}
        unknown = sorted(set(declared) - set(names))
        if unknown:
            raise ValueError(f"bounds name {unknown}, which are not among the scalars {names}")
    else:
        pair = _pair(bounds, "bounds")
        declared = dict.fromkeys(names, pair)
    if binary:
        declared.setdefault(success_metric or primary, (0.0, 1.0))
    return MetricContract(
        primary=primary, scalar=names, labels=dict(labels or {}), higher_is_better=higher_is_better,
        success_threshold=success_threshold, success_metric=success_metric, bounds=declared, aggregates=kinds,
    )


def _pair(value: object, name: object) -> tuple[float, float]:
    try:
        low, high = (float(v) for v in value)  # type: ignore[attr-defined]
    except (TypeError, ValueError):
        raise ValueError(f"bounds of {name!r} must be a pair (low, high), not {value!r}") from None
    if not low < high:
        raise ValueError(f"bounds of {name!r} must have low < high, not {value!r}")
    return low, high


def contract_from_json(data: Mapping[str, object]) -> MetricContract:
    """The contract ``run.json``'s plan records (``metric_contract``), read back; lenient about missing fields
    (older runs have no ``bounds``)."""
    primary = str(data["primary"])
    scalar = tuple(str(s) for s in data.get("scalar") or ()) or (primary,)  # type: ignore[attr-defined]
    threshold = data.get("success_threshold")
    bounds: dict[str, tuple[float, float]] = {}
    for name, pair in (data.get("bounds") or {}).items():  # type: ignore[attr-defined]
        try:
            bounds[str(name)] = _pair(pair, name)
        except ValueError:
            continue
    labels = data.get("labels") or {}
    success_metric = data.get("success_metric")
    kinds = tuple(str(a) for a in data.get("aggregates") or () if a in AGGREGATIONS)  # type: ignore[attr-defined]
    return MetricContract(
        primary=primary, scalar=tuple(dict.fromkeys((primary, *scalar))),
        labels={str(k): str(v) for k, v in labels.items()},  # type: ignore[attr-defined]
        higher_is_better=bool(data.get("higher_is_better", True)),
        success_threshold=float(threshold) if type(threshold) in (int, float) else None,  # type: ignore[arg-type]
        success_metric=success_metric if isinstance(success_metric, str) else None,
        bounds=bounds, aggregates=kinds,
    )


#: The threshold of a verdict when the contract declares no success threshold: full marks.
FULL_MARKS = 1.0 - 1e-6


def verdict_rule(contract: MetricContract) -> tuple[str, float]:
    """What decides a trial's verdict (pass or fail): the contract's ``success_metric`` (default ``primary``) at
    least its ``success_threshold``; a contract without a threshold passes a trial with full marks (1)."""
    threshold = contract.success_threshold if contract.success_threshold is not None else FULL_MARKS
    return contract.success_metric or contract.primary, threshold


def verdict(contract: MetricContract, result: RunResult) -> bool:
    """Whether ``result`` passed (:func:`verdict_rule`); an errored result fails."""
    name, threshold = verdict_rule(contract)
    value = result.metrics.get(name) if result.status is TaskStatus.COMPLETED else None
    return value is not None and float(value) >= threshold


def verdict_stability(contract: MetricContract, results: Iterable[RunResult]) -> VerdictStability:
    """Every task's flip rate (the share of its trials whose verdict differs from its majority,
    :func:`~agentcompass.runtime.statistics.flip_rate`), their mean and the tasks with any flip."""
    by_task: dict[str, list[bool]] = {}
    for r in results:
        by_task.setdefault(r.task_id, []).append(verdict(contract, r))
    rates = {task: flip_rate(verdicts) for task, verdicts in sorted(by_task.items())}
    name, threshold = verdict_rule(contract)
    return VerdictStability(
        metric=name, threshold=round(threshold, 6), flip_rates=rates,
        mean_flip_rate=sum(rates.values()) / len(rates) if rates else 0.0,
        n_flipping=sum(1 for rate in rates.values() if rate > 0), n_tasks=len(rates),
    )


def _value(result: RunResult, name: str) -> float:
    """The value ``result`` counts for ``name`` in an aggregate: 0 for an errored result or a missing scalar."""
    value = result.metrics.get(name) if result.status is TaskStatus.COMPLETED else 0.0
    return 0.0 if value is None else float(value)


def metric_bounds(contract: MetricContract, results: Iterable[RunResult]) -> dict[str, tuple[float, float]]:
    """The bounds every scalar's interval is clipped to: the declared ones, else [0, 1] for a scalar whose every
    value in ``results`` lies in [0, 1] (:func:`~agentcompass.runtime.statistics.inferred_bounds`)."""
    results = list(results)
    bounds = {}
    for name in contract.scalar:
        pair = inferred_bounds(contract.bounds.get(name), (_value(r, name) for r in results))
        if pair is not None:
            bounds[name] = pair
    return bounds


def aggregate_group(contract: MetricContract, results: Sequence[RunResult], n_unfinished: int = 0,
                    bounds: Mapping[str, tuple[float, float]] | None = None) -> GroupAggregate:
    """Status counts, every scalar's aggregate (with its clustered standard error) and, for a contract with a
    success threshold, pass@k and pass^k over ``results`` — one per (task, trial). ``n_unfinished`` planned
    results without a final record are reported as such, never counted. ``bounds``: each scalar's range (default
    :func:`metric_bounds` of ``results``)."""
    if bounds is None:
        bounds = metric_bounds(contract, results)
    n = len(results)
    status_counts: dict[str, int] = {}
    by_task: dict[str, list[RunResult]] = {}
    for r in results:
        status_counts[r.status.value] = status_counts.get(r.status.value, 0) + 1
        by_task.setdefault(r.task_id, []).append(r)
    n_completed = sum(1 for r in results if r.status is TaskStatus.COMPLETED)
    metrics: dict[str, MetricAggregate] = {}
    for name in contract.scalar:
        clusters: list[list[float]] = []
        total = 0.0
        missing = 0
        for task_results in by_task.values():
            values = []
            for r in task_results:
                value = r.metrics.get(name) if r.status is TaskStatus.COMPLETED else 0.0
                if value is None:
                    missing += 1
                    value = 0.0
                values.append(float(value))
            total += sum(values)
            clusters.append(values)
        mean = total / n if n else None
        figures: dict[str, float] = {}
        if contract.aggregates and n:
            counted = [v for values in clusters for v in values]
            figures = {kind: float(AGGREGATIONS[kind](counted)) for kind in contract.aggregates}
        stderr = clustered_stderr(clusters)
        interval = mean_interval(clusters, bounds.get(name))
        metrics[name] = MetricAggregate(
            label=contract.label(name),
            mean=mean,
            mean_completed=total / n_completed if n_completed else None,
            n=n,
            n_completed=n_completed,
            n_errored=n - n_completed,
            n_missing=missing,
            stderr=stderr,
            ci95=(interval.low, interval.high) if interval else None,
            ci_method=interval.method if interval else None,
            n_unfinished=n_unfinished,
            n_tasks=len(by_task),
            aggregates=figures,
        )
    return GroupAggregate(
        n_tasks=len(by_task), n_results=n, status_counts=status_counts, metrics=metrics,
        pass_k=_pass_k(contract, by_task), n_errored_trials=n - n_completed, n_unfinished=n_unfinished,
    )


def _pass_k(contract: MetricContract, by_task: Mapping[str, list[RunResult]]) -> tuple[PassAtK, ...]:
    if contract.success_threshold is None or not by_task:
        return ()
    name, threshold = contract.success_metric or contract.primary, contract.success_threshold
    outcomes = {
        task: (len(rs), sum(1 for r in rs if r.status is TaskStatus.COMPLETED
                            and float(r.metrics.get(name, 0.0)) >= threshold))
        for task, rs in by_task.items()
    }
    max_k = max(n for n, _ in outcomes.values())
    return tuple(PassAtK(k, at, hat, counted) for k, at, hat, counted in pass_curves(outcomes, max_k))


def aggregate(contract: MetricContract, results: Iterable[RunResult],
              unfinished: Iterable[str | None] = ()) -> tuple[GroupAggregate, RunMetrics]:
    """Aggregate final results (one per (task, trial)): the overall group, and the metrics overall and per
    category. ``unfinished`` holds the category of every planned result without a final record (counted as
    unfinished in its group, never in a figure).

    Errored results count as 0 in ``mean``; a completed result that lacks a scalar counts as 0 too and is
    reported in ``n_missing``.
    """
    results = list(results)
    by_category: dict[str, list[RunResult]] = {}
    for r in results:
        if r.category is not None:
            by_category.setdefault(r.category, []).append(r)
    missing: dict[str | None, int] = {}
    for category in unfinished:
        missing[category] = missing.get(category, 0) + 1
    for category in missing:
        if category is not None:
            by_category.setdefault(category, [])
    bounds = metric_bounds(contract, results)
    overall = aggregate_group(contract, results, sum(missing.values()), bounds)
    groups = {c: aggregate_group(contract, rs, missing.get(c, 0), bounds) for c, rs in sorted(by_category.items())}
    return overall, RunMetrics(overall=overall.metrics, by_category=groups, pass_k=overall.pass_k)
