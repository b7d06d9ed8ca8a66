"""The comparison the page shows for several runs: each later run against the first, exactly as
``results compare`` computes it (:mod:`agentcompass.runtime.run_reader`), as JSON for the page."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from agentcompass.errors import AgentCompassError
from agentcompass.runtime.run_reader import RunReader, load_run
from agentcompass.runtime.run_reader import compare as compare_runs


def compare(a: RunReader, b: RunReader) -> dict[str, Any]:
    """``b`` against the baseline ``a``: per scalar overall and per category; ``problem`` (and no metrics) when
    they cannot be compared (another benchmark, no shared finished task)."""
    out: dict[str, Any] = {"a": a.run_id, "b": b.run_id, "metrics": [], "n_shared_tasks": 0, "problem": None}
    try:
        comparison = compare_runs(load_run(a.path), load_run(b.path), by_category=True)
    except AgentCompassError as exc:
        out["problem"] = f"not compared: {exc}"
        return out
    out["n_shared_tasks"] = comparison.n_shared_tasks
    out["metrics"] = [dataclasses.asdict(m) for m in comparison.metrics]
    return out


def comparisons(runs: Sequence[RunReader]) -> list[Mapping[str, Any]]:
    """Every run after the first against the first."""
    return [compare(runs[0], other) for other in runs[1:]]
