"""``scores.json``: a compact, columnar copy of every final result's scores, written when a run ends.

Comparing large runs needs only each result's task, trial, category, status and metrics; reading them back
from ``results.jsonl`` means parsing every whole line (artifacts, timings, usage). The runner writes this index
beside it, with the size ``results.jsonl`` had then. A reader uses the index only when that size still holds
(a resume that appended results makes it stale, until the resumed run writes a new one) and the index is
well formed; otherwise it reads ``results.jsonl`` itself. The index is never the record: ``results.jsonl`` is.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from agentcompass.runtime.types import RunResult, TaskStatus

SCORES = "scores.json"
SCORES_VERSION = 1


class Score(NamedTuple):
    """What comparing runs needs of one final result."""

    category: str | None
    completed: bool
    metrics: dict[str, float]


def write_scores(run_dir: Path, final: Mapping[tuple[str, int], RunResult], results_file: Path) -> None:
    """Write the index of ``final`` (which must be what ``results_file`` holds, last line winning)."""
    names = sorted({name for r in final.values() for name in r.metrics})
    rows = list(final.values())
    data: dict[str, Any] = {
        "schema_version": SCORES_VERSION,
        "results_bytes": results_file.stat().st_size if results_file.exists() else 0,
        "task_id": [r.task_id for r in rows],
        "trial": [r.trial for r in rows],
        "category": [r.category for r in rows],
        "completed": [r.status is TaskStatus.COMPLETED for r in rows],
        "metrics": {name: [r.metrics.get(name) for r in rows] for name in names},
    }
    tmp = run_dir / (SCORES + ".tmp")
    tmp.write_text(json.dumps(data, separators=(",", ":")), encoding="utf-8")
    os.replace(tmp, run_dir / SCORES)


def read_scores(run_dir: Path, results_file: Path) -> dict[tuple[str, int], Score] | None:
    """The index, or ``None`` when there is none, it is stale, or it is not well formed."""
    try:
        data = json.loads((run_dir / SCORES).read_bytes())
        if data.get("schema_version") != SCORES_VERSION or data.get("results_bytes") != results_file.stat().st_size:
            return None
        tids, trials, cats, done = data["task_id"], data["trial"], data["category"], data["completed"]
        metrics: dict[str, list[Any]] = data["metrics"]
        n = len(tids)
        if not (len(trials) == len(cats) == len(done) == n and all(len(v) == n for v in metrics.values())):
            return None
        out: dict[tuple[str, int], Score] = {}
        columns = list(metrics.items())
        for i in range(n):
            tid, trial, category = tids[i], trials[i], cats[i]
            if type(tid) is not str or type(trial) is not int or not (category is None or type(category) is str):
                return None
            values = {name: column[i] for name, column in columns if column[i] is not None}
            out[(tid, trial)] = Score(category, done[i] is True, values)
        return out
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
