"""Metric contracts: which scalars a benchmark reports and how they aggregate over a run.

Aggregation is honest about errors: each scalar's ``mean`` is over *all* tasks, an errored task counting as
0, and ``mean_completed`` is over completed tasks only. Both denominators are reported.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from agentcompass.runtime.records import GroupAggregate, MetricAggregate, RunMetrics
from agentcompass.runtime.types import RunResult, TaskStatus


@dataclass(frozen=True)
class MetricContract:
    """Names the scalars a benchmark's ``evaluate`` sets in ``RunResult.metrics``.

    :param primary: the headline scalar.
    :param scalar: every scalar that is averaged (``primary`` included).
    :param labels: human-readable names for reports.
    :param higher_is_better: direction of every scalar.
    """

    primary: str
    scalar: tuple[str, ...]
    labels: Mapping[str, str] = field(default_factory=dict)
    higher_is_better: bool = True

    def label(self, name: str) -> str:
        return self.labels.get(name, name)


def make_metric_contract(
    primary: str,
    scalar: Iterable[str] = (),
    labels: Mapping[str, str] | None = None,
    higher_is_better: bool = True,
) -> MetricContract:
    """Build a :class:`MetricContract`; ``primary`` is added to ``scalar`` when missing."""
    names = tuple(dict.fromkeys([primary, *scalar]))
    if not primary:
        raise ValueError("a metric contract needs a primary metric name")
    return MetricContract(
        primary=primary, scalar=names, labels=dict(labels or {}), higher_is_better=higher_is_better
    )


def aggregate_group(contract: MetricContract, results: Sequence[RunResult]) -> GroupAggregate:
    """Status counts and every scalar's aggregate over ``results``."""
    n = len(results)
    completed = [r for r in results if r.status is TaskStatus.COMPLETED]
    status_counts: dict[str, int] = {}
    for r in results:
        status_counts[r.status.value] = status_counts.get(r.status.value, 0) + 1
    metrics: dict[str, MetricAggregate] = {}
    for name in contract.scalar:
        total_completed = 0.0
        missing = 0
        for r in completed:
            value = r.metrics.get(name)
            if value is None:
                missing += 1
            else:
                total_completed += float(value)
        metrics[name] = MetricAggregate(
            label=contract.label(name),
            mean=total_completed / n if n else None,
            mean_completed=total_completed / len(completed) if completed else None,
            n=n,
            n_completed=len(completed),
            n_errored=n - len(completed),
            n_missing=missing,
        )
    return GroupAggregate(n_tasks=n, status_counts=status_counts, metrics=metrics)


def aggregate(contract: MetricContract, results: Iterable[RunResult]) -> tuple[GroupAggregate, RunMetrics]:
    """Aggregate final results: the overall group, and the metrics overall and per category.

    Errored tasks count as 0 in ``mean``; a completed task that lacks a scalar counts as 0 too and is
    reported in ``n_missing``.
    """
    results = list(results)
    by_category: dict[str, list[RunResult]] = {}
    for r in results:
        if r.category is not None:
            by_category.setdefault(r.category, []).append(r)
    overall = aggregate_group(contract, results)
    groups = {c: aggregate_group(contract, rs) for c, rs in sorted(by_category.items())}
    return overall, RunMetrics(overall=overall.metrics, by_category=groups)
