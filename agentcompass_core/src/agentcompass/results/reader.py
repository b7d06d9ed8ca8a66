"""The reader of run directories: validated, incremental, for finished runs and live ones alike (public as
:mod:`agentcompass.runtime.run_reader`).

::

    from agentcompass.runtime.run_reader import RunReader

    run = RunReader.open(Path("runs/RUN_ID"))   # run.json checked; what the files hold so far read
    run.results[("task_1", 1)]                   # the final record of (task, trial), as its JSON object
    run.attempts.get(("task_1", 1), [])          # its earlier attempts (retried or cancelled)
    run.trajectory(("task_1", 1))                # its model calls, read from their byte ranges when asked
    run.refresh()                                # a live run: read only what was appended since
    logs, offset = run.logs(offset)              # structured log records after a byte offset, and the next one

It reads the files the run-directory contract names (``run.json``, ``summary.json``, ``results.jsonl``,
``attempts.jsonl``, ``trajectories.jsonl``, ``logs.jsonl``) with the core's rules: a torn last line is passed
over silently (a live writer is in the middle of it), any other line that is not a valid record is skipped with
a warning naming file and line (:attr:`RunReader.warnings`), and the last final record of a (task, trial) wins.
Records are the JSON objects as written (a result is ``RunResult``'s JSON; ``result_from_json`` in
:mod:`agentcompass.serialization` builds one). Nothing in the directory is changed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
from agentcompass.errors import ResultsError, describe
from agentcompass.results.lines import (
    ATTEMPTS,
    LOGS,
    RESULTS,
    RUN_JSON,
    SUMMARY,
    TRAJECTORIES,
    LineTail,
    parse_line,
    read_json_file,
    result_problem,
)

#: The core writes each trajectory line with these keys first; reading them off the line spares a full parse.
_TRAJECTORY_KEY = re.compile(rb'^\{"task_id":("(?:[^"\\]|\\.)*"),"trial":(\d+),"attempt":(\d+),')

#: A (task, trial).
Key = tuple[str, int]


@attrs.define
class RunReader:
    """One run directory, read so far; :meth:`refresh` picks up what a running run appended."""

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
    _tails: dict[str, LineTail] = attrs.field(factory=dict)

    @classmethod
    def open(cls, path: Path) -> RunReader:
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
                call = parse_line(raw, self.path / TRAJECTORIES, number, self.warnings)
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
            data = parse_line(raw, self.path / name, number, self.warnings)
            if data is None:
                continue
            problem = result_problem(data)
            if problem:
                self.warnings.append(f"{self.path / name}:{number}: not a valid {what} ({problem}); skipped")
                continue
            yield data

    def _tail(self, name: str) -> LineTail:
        tail = self._tails.get(name)
        if tail is None:
            tail = self._tails[name] = LineTail(self.path / name)
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
                    data = parse_line(raw, path, 0, None)
                    if data is not None:
                        calls.append(data)
        except OSError as exc:
            raise ResultsError(f"cannot read {path}: {exc.strerror or describe(exc)}") from None
        return calls

    def logs(self, offset: int = 0) -> tuple[list[dict[str, Any]], int]:
        """The structured log records (``logs.jsonl``) written after byte ``offset``, and the offset to pass
        next time (after the last complete line): a live run's logs, followed cheaply. A line that is not a
        JSON object is skipped with a warning."""
        tail = LineTail(self.path / LOGS, offset)
        records = [data for number, _, raw in tail.new_lines()
                   if (data := parse_line(raw, tail.path, number, self.warnings)) is not None]
        return records, tail.offset


def _trajectory_key(raw: bytes) -> Key | None:
    match = _TRAJECTORY_KEY.match(raw)
    if not match:
        return None
    quoted = match.group(1)
    if b"\\" not in quoted:  # no escape: the bytes between the quotes are the name
        try:
            return quoted[1:-1].decode("utf-8"), int(match.group(2))
        except UnicodeDecodeError:
            return None
    try:
        task_id = json.loads(quoted)
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
