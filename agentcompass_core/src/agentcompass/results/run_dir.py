"""The run directory: the on-disk record of a run (names are a contract, DESIGN §6).

* ``run.json`` — the request, the resolved plan and plugin versions; never a secret.
* ``results.jsonl`` — one line per task: its final ``RunResult``.
* ``attempts.jsonl`` — attempts that were retried or cancelled (not final).
* ``trajectories.jsonl`` — every model call, one per line, with ``task_id`` and ``attempt``.
* ``summary.json`` — aggregated metrics and status counts.
* ``logs.jsonl`` — structured logs.
* ``artifacts/<task>/attempt-<n>/`` — files that ``collect_artifacts`` saved.

Lines are appended and flushed as each task finishes, so a killed process loses at most the line it was
writing; a torn last line is cut off when the run is resumed. Files are fsync'ed at most once a second and
when the run ends.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import attrs
from agentcompass.errors import ResultsError
from agentcompass.redaction import Redactor
from agentcompass.runtime.types import RunResult
from agentcompass.serialization import result_from_json, unstructure

RUN_JSON = "run.json"
RESULTS = "results.jsonl"
ATTEMPTS = "attempts.jsonl"
TRAJECTORIES = "trajectories.jsonl"
SUMMARY = "summary.json"
LOGS = "logs.jsonl"
ARTIFACTS = "artifacts"
FSYNC_INTERVAL = 1.0


def safe_name(task_id: str) -> str:
    """A file-system-safe, still readable form of a task id."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "_", task_id).strip("._")[:80] or "task"
    if cleaned != task_id:  # keep distinct ids distinct
        cleaned += "-" + hashlib.sha256(task_id.encode()).hexdigest()[:8]
    return cleaned


def write_json_atomic(path: Path, data: Any) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, ensure_ascii=False, default=str)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """Complete JSON lines of ``path``; a torn last line (no newline, or not JSON) is skipped."""
    if not path.exists():
        return
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.endswith("\n"):
                return
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                continue


def _cut_torn_tail(path: Path) -> None:
    """Truncate a file after its last newline, so appends start on a fresh line."""
    if not path.exists() or path.stat().st_size == 0:
        return
    with open(path, "rb+") as f:
        data = f.read()
        if data.endswith(b"\n"):
            return
        f.truncate(data.rfind(b"\n") + 1)


@attrs.define
class RunDirectory:
    path: Path
    redactor: Redactor = attrs.field(factory=Redactor)
    _files: dict[str, IO[str]] = attrs.field(factory=dict)
    _last_sync: float = 0.0

    @classmethod
    def create(cls, path: Path, redactor: Redactor | None = None) -> RunDirectory:
        if (path / RUN_JSON).exists():
            raise ResultsError(
                f"{path} already holds a run; pass --resume {path} to finish it, or choose another --output"
            )
        path.mkdir(parents=True, exist_ok=True)
        return cls(path, redactor or Redactor())

    @classmethod
    def open_existing(cls, path: Path, redactor: Redactor | None = None) -> RunDirectory:
        if not path.is_dir():
            raise ResultsError(f"run directory {path} does not exist")
        if not (path / RUN_JSON).is_file():
            raise ResultsError(f"{path} is not a run directory: it has no {RUN_JSON}")
        for name in (RESULTS, ATTEMPTS, TRAJECTORIES, LOGS):
            _cut_torn_tail(path / name)
        return cls(path, redactor or Redactor())

    # -- reading -------------------------------------------------------------------------------------

    def read_run_json(self) -> dict[str, Any]:
        try:
            return json.loads((self.path / RUN_JSON).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise ResultsError(f"cannot read {self.path / RUN_JSON}: {exc}") from exc

    def final_results(self) -> dict[str, RunResult]:
        """The final record of every finished task (the last line wins if a task appears twice)."""
        out: dict[str, RunResult] = {}
        for data in read_jsonl(self.path / RESULTS):
            try:
                result = result_from_json(data)
            except Exception:
                continue
            out[result.task_id] = result
        return out

    def attempt_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for name in (RESULTS, ATTEMPTS):
            for data in read_jsonl(self.path / name):
                tid = data.get("task_id")
                if isinstance(tid, str):
                    counts[tid] = max(counts.get(tid, 0), int(data.get("attempt") or 1))
        return counts

    def read_summary(self) -> dict[str, Any] | None:
        path = self.path / SUMMARY
        return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None

    # -- writing -------------------------------------------------------------------------------------

    def write_run_json(self, data: dict[str, Any]) -> None:
        write_json_atomic(self.path / RUN_JSON, self.redactor.data(data))

    def write_summary(self, data: dict[str, Any]) -> None:
        self.sync()
        write_json_atomic(self.path / SUMMARY, self.redactor.data(data))

    def stream(self, name: str) -> IO[str]:
        f = self._files.get(name)
        if f is None:
            f = self._files[name] = open(self.path / name, "a", encoding="utf-8")
        return f

    def _append(self, name: str, *records: Any) -> None:
        """Append records as JSON lines, flushed together (a final record reaches the OS at once)."""
        lines = "".join(
            json.dumps(data, ensure_ascii=False, default=str, separators=(",", ":")) + "\n" for data in records
        )
        if self.redactor.active:
            lines = self.redactor.text(lines)
        f = self.stream(name)
        f.write(lines)
        f.flush()
        if time.monotonic() - self._last_sync >= FSYNC_INTERVAL:
            self.sync()

    def append_result(self, result: RunResult) -> None:
        self._append(RESULTS, unstructure(result))

    def append_attempt(self, result: RunResult) -> None:
        self._append(ATTEMPTS, unstructure(result))

    def append_trajectory(self, task_id: str, attempt: int, calls: list[dict[str, Any]]) -> None:
        self._append(
            TRAJECTORIES,
            *({"task_id": task_id, "attempt": attempt, "index": i, **call} for i, call in enumerate(calls)),
        )

    def artifacts_dir(self, task_id: str, attempt: int) -> Path:
        return self.path / ARTIFACTS / safe_name(task_id) / f"attempt-{attempt}"

    def sync(self) -> None:
        self._last_sync = time.monotonic()
        for f in self._files.values():
            if not f.closed:
                f.flush()
                os.fsync(f.fileno())

    def close(self) -> None:
        self.sync()
        for f in self._files.values():
            f.close()
        self._files.clear()
