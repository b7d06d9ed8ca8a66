"""Reading a run directory for the page, from its documented JSON files only.

The core's validated readers (``agentcompass.results``) are not part of the public API a plugin may import, so
this module reads the files the run directory contract names (``run.json``, ``summary.json``,
``results.jsonl``, ``attempts.jsonl``, ``trajectories.jsonl``) itself, with the same rules: a torn last line is
passed over silently, any other line that is not a valid record is skipped with a warning naming file and line,
and the last final record of a (task, trial) wins.

:class:`RunFiles` reads incrementally: :meth:`RunFiles.refresh` parses only what was appended since the last
call, so ``agentcompass view`` follows a running run cheaply.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
from agentcompass.errors import ResultsError, describe
from agentcompass.runtime.types import TaskStatus

RUN_JSON = "run.json"
SUMMARY = "summary.json"
RESULTS = "results.jsonl"
ATTEMPTS = "attempts.jsonl"
TRAJECTORIES = "trajectories.jsonl"

STATUSES = frozenset(s.value for s in TaskStatus)
#: The core writes each trajectory line with these keys first; reading them off the line spares a full parse.
_TRAJECTORY_KEY = re.compile(rb'^\{"task_id":("(?:[^"\\]|\\.)*"),"trial":(\d+),"attempt":(\d+),')

Key = tuple[str, int]


def read_json_file(path: Path) -> dict[str, Any]:
    """A JSON object file, or a :class:`ResultsError` naming the file and what is wrong."""
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ResultsError(f"cannot read {path}: {describe(exc)}") from None
    if not isinstance(data, dict):
        raise ResultsError(f"{path} is damaged: it holds {type(data).__name__}, not a JSON object")
    return data


def result_problem(data: dict[str, Any]) -> str | None:
    """What makes ``data`` not a valid result line (``None`` when it is one), checking the fields the page uses."""
    if not isinstance(data.get("task_id"), str):
        return "task_id is not a string"
    trial = data.get("trial", 1)
    if type(trial) is not int or trial < 1:
        return "trial is not a positive integer"
    if data.get("status") not in STATUSES:
        return f"status {data.get('status')!r:.40} is not a task status"
    category = data.get("category")
    if category is not None and not isinstance(category, str):
        return "category is not a string"
    metrics = data.get("metrics", {})
    if not isinstance(metrics, dict) or any(type(v) not in (int, float) for v in metrics.values()):
        return "metrics is not a mapping of numbers"
    for name in ("timings", "usage", "artifacts"):
        if not isinstance(data.get(name, {}), dict):
            return f"{name} is not a mapping"
    error = data.get("error")
    if error is not None and not isinstance(error, str):
        return "error is not a string"
    return None


@attrs.define
class _Tail:
    """Where reading a growing JSONL file stopped: the byte offset after the last complete line."""

    path: Path
    offset: int = 0
    line: int = 0

    def new_lines(self) -> Iterator[tuple[int, int, bytes]]:
        """``(line number, byte offset, raw line)`` of every complete line appended since the last call."""
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return
        except OSError as exc:
            raise ResultsError(f"cannot read {self.path}: {exc.strerror or describe(exc)}") from None
        end = data.rfind(b"\n")
        if end < 0:
            return  # nothing complete yet (a torn or half-written last line waits for its newline)
        start = 0
        for raw in data[:end + 1].splitlines(keepends=True):
            self.line += 1
            yield self.line, self.offset + start, raw
            start += len(raw)
        self.offset += end + 1


def _parse(raw: bytes, path: Path, number: int, warnings: list[str]) -> dict[str, Any] | None:
    try:
        data = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        warnings.append(f"{path}:{number}: not a JSON line ({describe(exc)}); skipped")
        return None
    if not isinstance(data, dict):
        warnings.append(f"{path}:{number}: holds {type(data).__name__}, not a JSON object; skipped")
        return None
    return data


@attrs.define
class RunFiles:
    """One run directory as the page reads it; :meth:`refresh` picks up what a running run appended."""

    path: Path
    info: dict[str, Any]
    #: The final record of every finished (task, trial), in the order they first finished (a later line replaces
    #: an earlier one in its place).
    results: dict[Key, dict[str, Any]] = attrs.field(factory=dict)
    #: Earlier attempts (retried or cancelled) per (task, trial).
    attempts: dict[Key, list[dict[str, Any]]] = attrs.field(factory=dict)
    #: Byte ranges of the trajectory lines of each (task, trial), read only when a task is shown.
    trajectory_lines: dict[Key, list[tuple[int, int]]] = attrs.field(factory=dict)
    warnings: list[str] = attrs.field(factory=list)
    #: How many final records replaced an earlier one (a row that changed in place, not appended).
    replaced: int = 0
    _tails: dict[str, _Tail] = attrs.field(factory=dict)

    @classmethod
    def open(cls, path: Path) -> RunFiles:
        """Open ``path`` and read what it holds so far; a :class:`ResultsError` when it is not a run directory."""
        if not path.is_dir():
            raise ResultsError(f"run directory {path} does not exist")
        if not (path / RUN_JSON).is_file():
            raise ResultsError(f"{path} is not a run directory: it has no {RUN_JSON}")
        info = read_json_file(path / RUN_JSON)
        problem = _run_info_problem(info)
        if problem:
            raise ResultsError(f"{path / RUN_JSON} is damaged: {problem}")
        files = cls(path, info)
        files.refresh()
        return files

    @property
    def run_id(self) -> str:
        return str(self.info["run_id"])

    def summary(self) -> dict[str, Any] | None:
        """``summary.json`` when it is there and describes every final result read; else ``None``."""
        path = self.path / SUMMARY
        if not path.exists():
            return None
        data = read_json_file(path)
        if not isinstance(data.get("status_counts"), dict) or not isinstance(data.get("metrics"), dict):
            raise ResultsError(f"{path} is damaged: it lacks status_counts or metrics")
        if data.get("n_finished") != len(self.results):
            return None  # a resumed run is adding results: the written summary is stale
        return data

    def version(self) -> tuple[int, ...]:
        """Changes whenever what the page shows of the run may have: bytes read so far, summary.json's time."""
        try:
            summary = (self.path / SUMMARY).stat().st_mtime_ns
        except OSError:
            summary = 0
        return (*(t.offset for t in self._tails.values()), self.replaced, summary)

    def refresh(self) -> bool:
        """Read what was appended since the last call; whether anything was."""
        changed = False
        for data in self._new_results(RESULTS, "result"):
            data.pop("prepared", None)
            key = (data["task_id"], data.get("trial", 1))
            if key in self.results:
                self.replaced += 1  # a re-recorded (task, trial) keeps its place; its row changes
            self.results[key] = data
            changed = True
        for data in self._new_results(ATTEMPTS, "attempt"):
            self.attempts.setdefault((data["task_id"], data.get("trial", 1)), []).append(data)
            changed = True
        for number, offset, raw in self._tail(TRAJECTORIES).new_lines():
            parsed_key = _trajectory_key(raw)
            if parsed_key is not None:
                key = parsed_key
            else:
                call = _parse(raw, self.path / TRAJECTORIES, number, self.warnings)
                if call is None:
                    continue
                tid, trial = call.get("task_id"), call.get("trial", 1)
                if not isinstance(tid, str) or type(trial) is not int:
                    self.warnings.append(f"{self.path / TRAJECTORIES}:{number}: names no task; skipped")
                    continue
                key = (tid, trial)
            self.trajectory_lines.setdefault(key, []).append((offset, len(raw)))
            changed = True
        return changed

    def _new_results(self, name: str, what: str) -> Iterator[dict[str, Any]]:
        """The valid result records appended to ``name`` since the last look; the others are skipped with a
        warning naming file and line."""
        for number, _, raw in self._tail(name).new_lines():
            data = _parse(raw, self.path / name, number, self.warnings)
            if data is None:
                continue
            problem = result_problem(data)
            if problem:
                self.warnings.append(f"{self.path / name}:{number}: not a valid {what} ({problem}); skipped")
                continue
            yield data

    def _tail(self, name: str) -> _Tail:
        tail = self._tails.get(name)
        if tail is None:
            tail = self._tails[name] = _Tail(self.path / name)
        return tail

    def trajectory(self, key: Key) -> list[dict[str, Any]]:
        """Every recorded model call of ``key`` (all its attempts), in the order they were written."""
        spans = self.trajectory_lines.get(key, [])
        if not spans:
            return []
        calls: list[dict[str, Any]] = []
        path = self.path / TRAJECTORIES
        try:
            with open(path, "rb") as f:
                for offset, length in spans:
                    f.seek(offset)
                    raw = f.read(length)
                    data = _parse(raw, path, 0, [])
                    if data is not None:
                        calls.append(data)
        except OSError as exc:
            raise ResultsError(f"cannot read {path}: {exc.strerror or describe(exc)}") from None
        return calls


def _trajectory_key(raw: bytes) -> Key | None:
    match = _TRAJECTORY_KEY.match(raw)
    if not match:
        return None
    try:
        task_id = json.loads(match.group(1))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    return task_id, int(match.group(2))


def _run_info_problem(info: dict[str, Any]) -> str | None:
    if not isinstance(info.get("run_id"), str):
        return "run_id is not a string"
    request = info.get("request")
    if not isinstance(request, dict) or not all(isinstance(request.get(k), str)
                                                 for k in ("benchmark", "harness", "model")):
        return "request lacks benchmark, harness or model"
    plan = info.get("plan")
    if not isinstance(plan, dict) or not isinstance(plan.get("metric_contract"), dict) \
            or not isinstance(plan["metric_contract"].get("primary"), str):
        return "plan lacks its metric contract"
    return None
