"""What an export reads of a run directory: the run's record, its final results, retried attempts, and the model
calls of each (task, trial)'s final attempt — a thin adapter over the core's public reader
(:class:`agentcompass.runtime.run_reader.RunReader`), which validates the records, skips damaged lines with a warning
naming file and line, and passes a torn last line over. Results become the public
:class:`~agentcompass.runtime.RunResult`; ``run.json`` and ``summary.json`` are read as :class:`Record` objects.
The scanners' findings (``scans.jsonl``) are read by attempt. Nothing in the directory is changed. Trajectories
are read per (task, trial) from their byte ranges, so only one (task, trial)'s calls are held at a time, whatever
the size of the run.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs
from agentcompass.errors import ResultsError
from agentcompass.runtime import RunResult, TaskStatus
from agentcompass.runtime.run_reader import SUMMARY, RunReader, read_json_file
from agentcompass.runtime.scanning import Finding, read_findings

Key = tuple[str, int]
#: The model calls of one attempt, in the order they were made (``trajectories.jsonl`` lines).
Calls = list[dict[str, Any]]

#: The newest ``schema_version`` of the records this reader knows.
SCHEMA_VERSION = 1
_STATUSES = {s.value: s for s in TaskStatus}


class Record(dict[str, Any]):
    """A JSON object of the run directory (``run.json``, ``summary.json``), its fields readable as attributes
    (nested objects and lists of objects likewise); a missing field reads as ``None``."""

    def __getattr__(self, name: str) -> Any:
        return _record(self.get(name))


def _record(value: Any) -> Any:
    if isinstance(value, dict) and not isinstance(value, Record):
        return Record(value)
    if isinstance(value, list):
        return [_record(v) for v in value]
    return value


def _count(value: Any) -> bool:
    return type(value) is int and value >= 1


def result_of(data: Mapping[str, Any]) -> RunResult | None:
    """A ``results.jsonl`` / ``attempts.jsonl`` line as a :class:`RunResult` (artifacts left out), or ``None``
    when it is not a valid result."""
    tid, status = data.get("task_id"), _STATUSES.get(data.get("status"))  # type: ignore[arg-type]
    trial, attempt = data.get("trial", 1), data.get("attempt", 1)
    metrics, timings = data.get("metrics") or {}, data.get("timings") or {}
    if not isinstance(tid, str) or status is None or not _count(trial) or not _count(attempt):
        return None
    if not isinstance(metrics, dict) or not all(type(v) in (int, float) for v in metrics.values()):
        return None
    error, phase, usage = data.get("error"), data.get("error_phase"), data.get("usage")
    if not (error is None or isinstance(error, str)) or not (phase is None or isinstance(phase, str)):
        return None
    return RunResult(
        task_id=tid, category=data.get("category") if isinstance(data.get("category"), str) else None,
        status=status, final_answer=data.get("final_answer"), error=error, metrics=metrics, attempt=attempt,
        trial=trial, seed=data.get("seed") if type(data.get("seed")) is int else None, error_phase=phase,
        timings=timings if isinstance(timings, dict) else {},
        usage=usage if isinstance(usage, dict) else {},
    )


def _checked(path: Path, data: dict[str, Any]) -> Record:
    version = data.get("schema_version", 1)
    if type(version) is int and version > SCHEMA_VERSION:
        raise ResultsError(f"{path} has schema_version {version}, newer than this agentcompass-export knows "
                           f"({SCHEMA_VERSION}); upgrade agentcompass-export")
    return Record(data)


@attrs.define
class RunSource:
    """One run directory, opened for export."""

    path: Path
    info: Record
    summary: Record | None
    #: The final result of every finished (task, trial) (the last line wins if one appears twice).
    results: dict[Key, RunResult]
    #: The attempts that were retried (or cancelled) before each final result, oldest first.
    retried: dict[Key, list[RunResult]]
    #: The core's reader, for the trajectories (read by byte range when asked).
    reader: RunReader
    #: What reading found damaged (a line per problem, naming file and line).
    warnings: list[str] = attrs.field(factory=list)
    _findings: dict[tuple[str, int, int], list[Finding]] | None = None

    @classmethod
    def open(cls, path: Path) -> RunSource:
        """Open ``path``; a missing or foreign directory is a :class:`~agentcompass.errors.ResultsError`."""
        reader = RunReader.open(path)
        info = _checked(path / "run.json", reader.info)
        summary = _checked(path / SUMMARY, read_json_file(path / SUMMARY)) if (path / SUMMARY).exists() else None
        warnings = reader.warnings
        results: dict[Key, RunResult] = {}
        retried: dict[Key, list[RunResult]] = {}
        for key, data in reader.results.items():
            result = result_of(data)
            if result is None:
                warnings.append(f"{path}: the result of {key[0]} (trial {key[1]}) is not a valid result; skipped")
            else:
                results[key] = result
        for key, datas in reader.attempts.items():
            attempts = [r for r in map(result_of, datas) if r is not None]
            if attempts:
                retried[key] = sorted(attempts, key=lambda r: r.attempt)
        return cls(path, info, summary, results, retried, reader, warnings)

    def findings(self, result: RunResult) -> list[Finding]:
        """The scanners' findings of ``result``'s attempt (``scans.jsonl``; none when the run was not scanned)."""
        if self._findings is None:
            self._findings = {}
            for f in read_findings(self.path):
                self._findings.setdefault((f.task_id, f.trial, f.attempt), []).append(f)
        return self._findings.get((result.task_id, result.trial, result.attempt), [])

    @property
    def roles(self) -> Mapping[str, str]:
        """Each model role and the model id it used (``agent`` first)."""
        return dict(self.info.plan.model_roles or {})

    def final_calls(self) -> Iterator[tuple[Key, Calls]]:
        """``((task, trial), calls)`` of every final result that made model calls, in the order the trajectory
        file first names them. Calls of attempts that were retried are passed over."""
        for key in self.reader.trajectory_lines:
            result = self.results.get(key)
            if result is None:
                continue
            calls = [call for call in self.reader.trajectory(key) if call.get("attempt") == result.attempt]
            if calls:
                yield key, calls
