"""The comparison the page shows for several runs: each later run against the first, as ``results compare``.

The core's comparison (``agentcompass.comparison``) is not public API, so the same estimator is computed here
from the public statistics (:mod:`agentcompass.runtime.statistics`): on the tasks both runs finished, each task's
value is its mean over the run's trials (an errored trial counts as 0); the paired difference B - A is the mean
of the per-task differences, its standard error ``sqrt(var(d) / n)`` (sample variance) and its 95% interval
``mean ± 1.96 · SE``; each side's own mean carries its interval clustered by task.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from agentcompass.runtime.statistics import Z95, clustered_stderr, confidence_interval

from agentcompass_report.rundir import RunFiles

#: Per task: its category and, per scalar, the value of each trial.
TaskValues = dict[str, tuple[str | None, dict[str, list[float]]]]


def task_values(files: RunFiles) -> tuple[tuple[str, ...], TaskValues]:
    """The run's scalars and every finished task's values (errors as 0)."""
    contract = files.info["plan"]["metric_contract"]
    scalars = tuple(str(s) for s in contract.get("scalar") or ()) or (str(contract["primary"]),)
    tasks: TaskValues = {}
    for (task_id, _), data in files.results.items():
        _, values = tasks.setdefault(task_id, (data.get("category"), {name: [] for name in scalars}))
        completed = data["status"] == "COMPLETED"
        for name in scalars:
            values[name].append(float(data.get("metrics", {}).get(name, 0.0)) if completed else 0.0)
    return scalars, tasks


def _side(tasks: TaskValues, name: str, shared: Sequence[str]) -> dict[str, Any]:
    clusters = [tasks[t][1][name] for t in shared]
    n = sum(len(c) for c in clusters)
    mean = sum(sum(c) for c in clusters) / n
    stderr = clustered_stderr(clusters)
    return {"mean": mean, "stderr": stderr, "ci95": confidence_interval(mean, stderr)}


def _metric(a: TaskValues, b: TaskValues, name: str, shared: Sequence[str], category: str | None
            ) -> dict[str, Any]:
    diffs = [sum(b[t][1][name]) / len(b[t][1][name]) - sum(a[t][1][name]) / len(a[t][1][name]) for t in shared]
    n = len(diffs)
    mean = sum(diffs) / n
    stderr = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1) / n) if n > 1 else None
    return {
        "metric": name, "category": category, "n_tasks": n, "a": _side(a, name, shared), "b": _side(b, name, shared),
        "difference": mean, "stderr": stderr,
        "ci95": (mean - Z95 * stderr, mean + Z95 * stderr) if stderr is not None else None,
        "b_better": sum(d > 0 for d in diffs), "b_worse": sum(d < 0 for d in diffs),
        "equal": sum(d == 0 for d in diffs),
    }


def compare(a: RunFiles, b: RunFiles) -> dict[str, Any]:
    """``b`` against the baseline ``a``: per scalar overall and per category; ``problem`` when they cannot be
    compared (another benchmark, no shared finished task)."""
    out: dict[str, Any] = {"a": a.run_id, "b": b.run_id, "metrics": [], "n_shared_tasks": 0, "problem": None}
    bench_a, bench_b = a.info["request"]["benchmark"], b.info["request"]["benchmark"]
    if bench_a != bench_b:
        out["problem"] = f"{b.path} is a run of benchmark {bench_b!r} and {a.path} of {bench_a!r}: not compared"
        return out
    scalars_a, va = task_values(a)
    scalars_b, vb = task_values(b)
    shared = sorted(set(va) & set(vb))
    out["n_shared_tasks"] = len(shared)
    if not shared:
        out["problem"] = f"{a.path} and {b.path} share no finished task: nothing to compare"
        return out
    names = [s for s in scalars_a if s in scalars_b]
    by_category: dict[str, list[str]] = {}
    for t in shared:
        category = va[t][0]
        if category is not None:
            by_category.setdefault(category, []).append(t)
    for name in names:
        out["metrics"].append(_metric(va, vb, name, shared, None))
        for category, tasks in sorted(by_category.items()):
            out["metrics"].append(_metric(va, vb, name, tasks, category))
    return out


def comparisons(runs: Sequence[RunFiles]) -> list[Mapping[str, Any]]:
    """Every run after the first against the first."""
    return [compare(runs[0], other) for other in runs[1:]]
