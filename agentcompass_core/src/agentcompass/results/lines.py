"""The run directory's file names, and reading its JSON-lines files: complete lines only, each a JSON object,
every damaged line named (file and line) in a warning and skipped, never counted.

A torn last line (no newline yet) is passed over silently: a killed writer leaves one, and a live writer is
in the middle of one. :class:`LineTail` reads a growing file incrementally, by byte offset.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
from agentcompass.errors import ResultsError, describe
from agentcompass.runtime.types import TaskStatus

RUN_JSON = "run.json"
RESULTS = "results.jsonl"
ATTEMPTS = "attempts.jsonl"
TRAJECTORIES = "trajectories.jsonl"
SUMMARY = "summary.json"
LOGS = "logs.jsonl"
ARTIFACTS = "artifacts"

STATUSES = frozenset(s.value for s in TaskStatus)


def warn(warnings: list[str] | None, path: Path, number: int, what: str) -> None:
    if warnings is not None:
        warnings.append(f"{path}:{number}: {what}; skipped")


def parse_line(raw: bytes, path: Path, number: int, warnings: list[str] | None) -> dict[str, Any] | None:
    """One line as a JSON object, or ``None`` (with a warning) when it is not UTF-8 JSON holding an object."""
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        warn(warnings, path, number, f"not a JSON line ({describe(exc)})")
        return None
    if not isinstance(data, dict):
        warn(warnings, path, number, f"holds {type(data).__name__}, not a JSON object")
        return None
    return data


def read_jsonl(path: Path, warnings: list[str] | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` of each complete line of ``path`` that holds a JSON object."""
    if not path.exists():
        return
    with open(path, "rb") as f:
        for number, raw in enumerate(f, start=1):
            if not raw.endswith(b"\n"):
                return
            data = parse_line(raw, path, number, warnings)
            if data is not None:
                yield number, data


def read_json_file(path: Path) -> dict[str, Any]:
    """A JSON object file, or a :class:`~agentcompass.errors.ResultsError` naming the file and what is wrong."""
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ResultsError(f"cannot read {path}: {describe(exc)}") from None
    if not isinstance(data, dict):
        raise ResultsError(f"{path} is damaged: it holds {type(data).__name__}, not a JSON object")
    return data


def result_problem(data: dict[str, Any]) -> str | None:
    """What makes ``data`` not a valid result line (``None`` when it is one), checking the fields readers use
    (the whole record is validated by :func:`agentcompass.serialization.result_from_json`)."""
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
class LineTail:
    """Where reading a growing JSON-lines file stopped: the byte offset after the last complete line."""

    path: Path
    offset: int = 0
    line: int = 0

    def new_lines(self) -> Iterator[tuple[int, int, bytes]]:
        """``(line number, byte offset, raw line)`` of every complete line appended since the last call, read as a
        stream (a file of any size costs one line of memory at a time)."""
        try:
            f = open(self.path, "rb")
        except FileNotFoundError:
            return
        except OSError as exc:
            raise ResultsError(f"cannot read {self.path}: {exc.strerror or describe(exc)}") from None
        with f:
            try:
                f.seek(self.offset)
                for raw in f:
                    if not raw.endswith(b"\n"):
                        return  # a torn or half-written last line waits for its newline
                    self.line += 1
                    offset = self.offset
                    self.offset += len(raw)
                    yield self.line, offset, raw
            except OSError as exc:
                raise ResultsError(f"cannot read {self.path}: {exc.strerror or describe(exc)}") from None
