"""The leaderboard of a suite directory: per benchmark, every cell's figures and its paired difference against a
baseline cell.

Each cell's figures are its own run's: ``summary.json`` (or, for a cell that has none yet, the summary of its
results so far, as ``agentcompass results show`` gives it) — the primary metric's mean with its 95% interval,
pass^k for the largest k when the run has several trials and the contract a success threshold, the results that
ended in an error status, the unfinished ones, tokens, cost and time; and ``flagged``, how many of its attempts
a transcript scanner flagged (``scans.jsonl``; ``None`` for a cell not scanned). The difference against the baseline is
:func:`agentcompass.results.comparison.compare` on the primary metric: the number ``results compare`` prints.

The baseline of a benchmark is the ``baseline`` asked for (``--baseline``, else the suite file's) when it is a
cell of that benchmark, else the benchmark's first cell in suite order. Cells are sorted by mean, best first
(cells with no figures last).

Public through :mod:`agentcompass.runtime.run_reader` (:func:`leaderboard`, :func:`is_suite_directory`): the report
plugin's leaderboard page shows exactly this.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentcompass.errors import AgentCompassError, UsageError
from agentcompass.results.comparison import LoadedRun, load_run, paired_difference, shared_tasks
from agentcompass.results.robustness import add_robustness
from agentcompass.results.run_dir import RunDirectory
from agentcompass.results.summary import summary_so_far
from agentcompass.runtime.records import RunSummary
from agentcompass.runtime.scanning import SCANS, read_findings
from agentcompass.suites.cell_state import SKIPPED, SuiteDirectory

SCHEMA_VERSION = 1


def is_suite_directory(path: Path) -> bool:
    """Whether ``path`` holds a suite (its ``suite.json``)."""
    return SuiteDirectory(path).is_suite()


def leaderboard(path: Path, baseline: str | None = None) -> dict[str, Any]:
    """The leaderboard of the suite at ``path`` as plain JSON data (the schema ``suite show --json`` prints)."""
    directory = SuiteDirectory(path)
    record = directory.read()
    names = [c.name for c in record.cells]
    if baseline is not None and baseline not in names:
        raise UsageError(f"--baseline {baseline!r} is not a cell of {path}; cells: {', '.join(names)}")
    baseline = baseline or record.baseline
    rows: list[dict[str, Any]] = []
    unstarted: list[dict[str, Any]] = []
    warnings: list[str] = []
    for cell in record.cells:
        state = directory.state(cell.name)
        row = _cell_row(directory, cell.name, state.state if state else "not started", warnings)
        if row is None:
            unstarted.append({"name": cell.name, "state": state.state if state else "not started",
                              "error": state.error if state else None, "options": dict(cell.options)})
        else:
            rows.append(row)
    benchmarks: list[dict[str, Any]] = []
    for benchmark in dict.fromkeys(r["benchmark"] for r in rows):
        cells = [r for r in rows if r["benchmark"] == benchmark]
        base = next((r for r in cells if r["name"] == baseline), cells[0])
        _add_differences(base, cells, warnings)
        add_robustness(cells, {c.name: dict(c.options) for c in record.cells}, warnings)
        cells.sort(key=lambda r: (r["mean"] is None, -(r["mean"] or 0.0), r["name"]))
        for r in cells:
            r.pop("_path", None)
        benchmarks.append({"benchmark": benchmark, "primary_metric": base["metric"], "label": base["label"],
                           "baseline": base["name"], "cells": cells})
    return {"schema_version": SCHEMA_VERSION, "suite": str(path), "benchmarks": benchmarks,
            "not_run": unstarted, "skipped": [{"name": s.name, "state": SKIPPED, "note": s.note}
                                              for s in record.skipped],
            "warnings": warnings}


def _cell_row(directory: SuiteDirectory, name: str, state: str, warnings: list[str]) -> dict[str, Any] | None:
    run_dir = directory.cell_dir(name)
    try:
        store = RunDirectory.open_existing(run_dir)
        summary = store.read_summary()
        if summary is None:
            summary = summary_so_far(store.read_run_info(), store.final_results(), store.attempt_results(),
                                     str(run_dir))
    except AgentCompassError:
        return None
    warnings += [f"{name}: {w}" for w in store.warnings]
    return {**_figures(name, state, summary), "flagged": _flagged(run_dir), "_path": run_dir}


def _flagged(run_dir: Path) -> int | None:
    """How many attempts of the cell a scanner flagged (``scans.jsonl``); ``None`` when it was not scanned."""
    if not (run_dir / SCANS).exists():
        return None
    return len({(f.task_id, f.trial, f.attempt) for f in read_findings(run_dir)})


def _figures(name: str, state: str, summary: RunSummary) -> dict[str, Any]:
    metric = summary.primary_metric
    agg = summary.metrics.overall.get(metric)
    pass_hat = None
    if summary.trials > 1 and summary.metrics.pass_k:
        top = max(summary.metrics.pass_k, key=lambda p: p.k)
        pass_hat = {"k": top.k, "value": top.pass_hat_k}
    usage = summary.usage.values()
    costs = [u.cost_usd for u in usage]
    return {
        "name": name, "state": state, "benchmark": summary.benchmark, "harness": summary.harness,
        "model": summary.model, "environment": summary.environment, "run_id": summary.run_id,
        "run_dir": name, "report": f"{name}/report.html",
        "metric": metric, "label": agg.label if agg is not None else metric,
        "mean": agg.mean if agg is not None else None,
        "ci95": list(agg.ci95) if agg is not None and agg.ci95 is not None else None,
        "ci_method": agg.ci_method if agg is not None else None,
        "n_tasks": summary.n_tasks, "n_results": summary.n_finished, "trials": summary.trials,
        "pass_hat_k": pass_hat,
        "errors": sum(v for k, v in summary.status_counts.items() if k != "COMPLETED"),
        "status_counts": dict(summary.status_counts), "unfinished": summary.n_unfinished,
        "tokens": sum(u.prompt_tokens + u.completion_tokens for u in usage),
        "cost_usd": sum(c for c in costs if c is not None) if costs and all(c is not None for c in costs) else None,
        "duration_s": summary.duration_s, "difference": None, "robustness": None,
    }


def _add_differences(base: dict[str, Any], cells: list[dict[str, Any]], warnings: list[str]) -> None:
    loaded: dict[str, LoadedRun | None] = {}

    def load(row: dict[str, Any], path: Path) -> LoadedRun | None:
        if row["name"] not in loaded:
            try:
                loaded[row["name"]] = load_run(path)
            except AgentCompassError as exc:
                warnings.append(f"{row['name']}: {exc}")
                loaded[row["name"]] = None
        return loaded[row["name"]]

    base_run = load(base, base["_path"])
    for row in cells:
        if row is base or base_run is None:
            continue
        other = load(row, row["_path"])
        if other is None:
            continue
        try:
            d = paired_difference(base_run, other, base["metric"], shared_tasks(base_run, other))
        except (AgentCompassError, KeyError) as exc:
            row["difference"] = {"vs": base["name"], "error": str(exc)}
            continue
        row["difference"] = {"vs": base["name"], "metric": base["metric"], "difference": d.difference,
                             "ci95": list(d.ci95) if d.ci95 else None, "n_tasks": d.n_tasks,
                             "better": d.b_better, "worse": d.b_worse, "equal": d.equal,
                             "mde": d.mde, "within_noise": d.within_noise}
