"""What an export reads of a run directory: the run's record, its final results, retried attempts, and the model
calls of each (task, trial)'s final attempt.

The files are read as the run directory's contract (DESIGN §6) names them, through the public record types
where the core has them (:class:`~agentcompass.runtime.RunResult`); ``run.json`` and ``summary.json`` are read as
:class:`Record` objects. Nothing in the directory is changed. A line that is not a valid record is skipped with a
warning naming file and line (``warnings``), as ``results show`` does; a torn last line is passed over.
``trajectories.jsonl`` is streamed: the calls of one attempt are written together, so only one attempt's calls
are held at a time, whatever the size of the run.

(When the core's public run-directory reader lands, this module becomes a thin use of it.)
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs
from agentcompass.errors import ResultsError
from agentcompass.runtime import RunResult, TaskStatus

Key = tuple[str, int]
#: The model calls of one attempt, in the order they were made (``trajectories.jsonl`` lines).
Calls = list[dict[str, Any]]

RUN_JSON, SUMMARY, RESULTS, ATTEMPTS, TRAJECTORIES = (
    "run.json", "summary.json", "results.jsonl", "attempts.jsonl", "trajectories.jsonl")
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


def read_jsonl(path: Path, warnings: list[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` of each complete line of ``path`` holding a JSON object; others are warned of
    (a torn last line, which a killed writer leaves, silently)."""
    if not path.exists():
        return
    with open(path, "rb") as f:
        for number, raw in enumerate(f, start=1):
            if not raw.endswith(b"\n"):
                return
            try:
                data = json.loads(raw)
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                warnings.append(f"{path}:{number}: not a JSON line ({exc}); skipped")
                continue
            if not isinstance(data, dict):
                warnings.append(f"{path}:{number}: not a JSON object; skipped")
                continue
            yield number, data


def _read_json(path: Path) -> Record:
    try:
        data = json.loads(path.read_bytes())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ResultsError(f"cannot read {path}: {exc}") from None
    if not isinstance(data, dict):
        raise ResultsError(f"{path} is damaged: it holds {type(data).__name__}, not a JSON object")
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
    #: What reading found damaged (a line per problem, naming file and line).
    warnings: list[str] = attrs.field(factory=list)

    @classmethod
    def open(cls, path: Path) -> RunSource:
        """Open ``path``; a missing or foreign directory is a :class:`~agentcompass.errors.ResultsError`."""
        if not path.is_dir():
            raise ResultsError(f"run directory {path} does not exist")
        if not (path / RUN_JSON).is_file():
            raise ResultsError(f"{path} is not a run directory: it has no {RUN_JSON}")
        info = _read_json(path / RUN_JSON)
        if not isinstance(info.run_id, str) or not isinstance(info.request, dict) or not isinstance(info.plan, dict):
            raise ResultsError(f"{path / RUN_JSON} is damaged: it lacks run_id, request or plan")
        summary = _read_json(path / SUMMARY) if (path / SUMMARY).exists() else None
        warnings: list[str] = []
        results: dict[Key, RunResult] = {}
        retried: dict[Key, list[RunResult]] = {}
        for name, into in ((RESULTS, None), (ATTEMPTS, retried)):
            for number, data in read_jsonl(path / name, warnings):
                result = result_of(data)
                if result is None:
                    warnings.append(f"{path / name}:{number}: not a valid result; skipped")
                elif into is None:
                    results[(result.task_id, result.trial)] = result
                else:
                    into.setdefault((result.task_id, result.trial), []).append(result)
        for attempts in retried.values():
            attempts.sort(key=lambda r: r.attempt)
        return cls(path, info, summary, results, retried, warnings)

    @property
    def roles(self) -> Mapping[str, str]:
        """Each model role and the model id it used (``agent`` first)."""
        return dict(self.info.plan.model_roles or {})

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
