"""What an export reads of a run directory: the run's record, its final results, retried attempts, and the model
calls of each (task, trial)'s final attempt.

Everything is read through the core's validated run-directory reader (:class:`~agentcompass.results.run_dir.
RunDirectory`); nothing in the directory is changed. A damaged line is skipped with a warning (``warnings``),
as ``results show`` does. ``trajectories.jsonl`` is streamed: the calls of one attempt are written together, so
only one attempt's calls are held at a time, whatever the size of the run.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs
from agentcompass.results.run_dir import ATTEMPTS, TRAJECTORIES, RunDirectory, read_jsonl
from agentcompass.runtime.records import RunInfo, RunSummary
from agentcompass.runtime.types import RunResult
from agentcompass.serialization import RecordError, result_from_json

Key = tuple[str, int]
#: The model calls of one attempt, in the order they were made (``trajectories.jsonl`` lines).
Calls = list[dict[str, Any]]


@attrs.define
class RunSource:
    """One run directory, opened for export."""

    store: RunDirectory
    info: RunInfo
    summary: RunSummary | None
    #: The final result of every finished (task, trial), in the order they finished.
    results: dict[Key, RunResult]
    #: The attempts that were retried (or cancelled) before each final result, oldest first.
    retried: dict[Key, list[RunResult]]

    @classmethod
    def open(cls, path: Path) -> RunSource:
        """Open ``path``; a missing or foreign directory is a :class:`~agentcompass.errors.ResultsError`."""
        store = RunDirectory.open_existing(path)
        info = store.read_run_info()
        summary = store.read_summary()
        results = store.final_results()
        retried: dict[Key, list[RunResult]] = {}
        attempts_path = store.path / ATTEMPTS
        for number, data in read_jsonl(attempts_path, store.warnings):
            try:
                result = result_from_json(data)
            except RecordError as exc:
                store.warnings.append(f"{attempts_path}:{number}: not a valid result ({exc}); skipped")
                continue
            retried.setdefault((result.task_id, result.trial), []).append(result)
        for attempts in retried.values():
            attempts.sort(key=lambda r: r.attempt)
        return cls(store, info, summary, results, retried)

    @property
    def path(self) -> Path:
        return self.store.path

    @property
    def warnings(self) -> list[str]:
        return self.store.warnings

    @property
    def roles(self) -> Mapping[str, str]:
        """Each model role and the model id it used (``agent`` first)."""
        return dict(self.info.plan.model_roles)

    def final_calls(self) -> Iterator[tuple[Key, Calls]]:
        """``((task, trial), calls)`` of every final result that made model calls, in file order. Calls of
        attempts that were retried, and of (task, trial)s without a final result, are passed over."""
        final_attempt = {key: r.attempt for key, r in self.results.items()}
        group: Calls = []
        current: tuple[str, int, int] | None = None
        for _, call in read_jsonl(self.path / TRAJECTORIES, self.warnings):
            tid, trial, attempt = call.get("task_id"), call.get("trial", 1), call.get("attempt")
            if not isinstance(tid, str) or type(trial) is not int or type(attempt) is not int:
                continue
            key3 = (tid, trial, attempt)
            if key3 != current:
                if current is not None and group and final_attempt.get(current[:2]) == current[2]:
                    yield current[:2], group
                current, group = key3, []
            group.append(call)
        if current is not None and group and final_attempt.get(current[:2]) == current[2]:
            yield current[:2], group
