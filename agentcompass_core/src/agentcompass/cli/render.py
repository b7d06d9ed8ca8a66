"""Plain-text rendering of tables and run summaries."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentcompass.runtime.records import RunSummary


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[str(h) for h in headers], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def summary_text(summary: RunSummary) -> str:
    lines = [
        f"run {summary.run_id}: {summary.benchmark} / {summary.harness} / {summary.model} on {summary.environment}",
        f"tasks: {summary.n_tasks}  " + "  ".join(f"{k}: {v}" for k, v in sorted(summary.status_counts.items())),
    ]
    rows = []
    groups = [("all", summary.metrics.overall)]
    groups += [(category, group.metrics) for category, group in summary.metrics.by_category.items()]
    for category, metrics in groups:
        for name, m in metrics.items():
            rows.append([m.label or name, category, _fmt(m.mean), _fmt(m.mean_completed), m.n, m.n_errored])
    if rows:
        lines.append(table(["metric", "category", "mean (errors=0)", "mean (completed)", "n", "errored"], rows))
    lines.append(f"run directory: {summary.run_dir}")
    return "\n".join(lines)
