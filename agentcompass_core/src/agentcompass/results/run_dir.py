"""The run directory: the on-disk record of a run (its file names are a contract: the README's run-directory table).

* ``run.json`` — the request, the resolved plan and plugin versions; never a secret.
* ``results.jsonl`` — one line per task: its final ``RunResult``.
* ``attempts.jsonl`` — attempts that were retried or cancelled (not final).
* ``trajectories.jsonl`` — every model call, one per line, with ``task_id``, ``trial`` and ``attempt``.
* ``summary.json`` — aggregated metrics and status counts.
* ``scores.json`` — a columnar index of the final results' scores, for comparing large runs fast.
* ``logs.jsonl`` — structured logs.
* ``artifacts/<task>/attempt-<n>/`` — files that ``collect_artifacts`` saved (``artifacts/<task>/trial-<t>/
  attempt-<n>/`` for trials after the first).

Lines are appended and flushed as each task finishes, so a killed process loses at most the line it was
writing; a torn last line is cut off when the run is resumed (never by a reader such as ``results show``).
Files are fsync'ed at most once a second and when the run ends.

Every record read back is validated through the converter: a line that is not a valid record is skipped
with a warning naming the file and line (see :attr:`RunDirectory.warnings`), never counted, so its task runs
again on resume. This is the runner's reader and writer; plugins read run directories with the public, incremental
:class:`agentcompass.results.reader.RunReader` (``agentcompass.runtime.run_reader``).
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any

import attrs
from agentcompass.errors import ResultsError, SetupError, describe
from agentcompass.redaction import Redactor
from agentcompass.results.lines import (
    ARTIFACTS,
    ATTEMPTS,
    LOGS,
    RESULTS,
    RUN_JSON,
    SUMMARY,
    TRAJECTORIES,
    read_jsonl,
    result_problem,
    warn,
)
from agentcompass.results.scores import Score, read_scores, write_scores
from agentcompass.runtime.names import safe_name
from agentcompass.runtime.records import RunInfo, RunSummary
from agentcompass.runtime.types import RunResult
from agentcompass.scanning.names import SCANS
from agentcompass.serialization import RecordError, dumps_record, read_record, result_from_json, result_to_json

FSYNC_INTERVAL = 1.0

__all__ = ["ARTIFACTS", "ATTEMPTS", "LOGS", "RESULTS", "RUN_JSON", "SUMMARY", "TRAJECTORIES", "RunDirectory",
           "read_jsonl", "safe_name", "write_json_atomic"]


def write_json_atomic(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _read_objects(path: Path, warnings: list[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """Like :func:`read_jsonl`, parsing every complete line in one call when the file is undamaged (several
    times faster on large files); any damage falls back to line-by-line reading, which names the bad lines."""
    if not path.exists():
        return
    lines = path.read_bytes().split(b"\n")[:-1]  # what follows the last newline is a torn line
    try:
        parsed = json.loads(b"[" + b",".join(lines) + b"]")
    except (UnicodeDecodeError, json.JSONDecodeError):
        parsed = None
    if parsed is None or len(parsed) != len(lines) or not all(type(d) is dict for d in parsed):
        yield from read_jsonl(path, warnings)
        return
    yield from enumerate(parsed, start=1)


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


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
    #: What reading found damaged (a line per problem, naming file and line).
    warnings: list[str] = attrs.field(factory=list)
    _files: dict[str, IO[str]] = attrs.field(factory=dict)
    _last_sync: float = 0.0

    @classmethod
    def create(cls, path: Path, redactor: Redactor | None = None) -> RunDirectory:
        if (path / RUN_JSON).exists():
            raise ResultsError(
                f"{path} already holds a run; choose another --output (agentcompass run --resume {path} finishes "
                "that run)"
            )
        try:
            path.mkdir(parents=True, exist_ok=True)
            probe = path / ".agentcompass-write-check"
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as exc:
            raise SetupError(
                f"cannot create run directory {path}: {exc.strerror or describe(exc)}; choose a writable --output"
            ) from None
        return cls(path, redactor or Redactor())

    @classmethod
    def open_existing(cls, path: Path, redactor: Redactor | None = None) -> RunDirectory:
        """Open a run directory to read it; nothing in it is changed."""
        if not path.is_dir():
            raise ResultsError(f"run directory {path} does not exist")
        if not (path / RUN_JSON).is_file():
            raise ResultsError(f"{path} is not a run directory: it has no {RUN_JSON}")
        return cls(path, redactor or Redactor())

    def prepare_to_append(self) -> None:
        """Cut the torn tails a killed writer left, so appends start on a fresh line (resume only). A directory
        this process cannot write to is a :class:`SetupError` (exit 3), as for a new run."""
        try:
            probe = self.path / ".agentcompass-write-check"
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as exc:
            raise SetupError(f"cannot write to run directory {self.path}: {exc.strerror or describe(exc)}; "
                             "--resume needs to append to it") from None
        for name in (RESULTS, ATTEMPTS, TRAJECTORIES, LOGS):
            try:
                _cut_torn_tail(self.path / name)
            except OSError as exc:
                raise SetupError(f"cannot write to {self.path / name}: {exc.strerror or describe(exc)}") from None

    # -- reading -------------------------------------------------------------------------------------

    def read_run_info(self) -> RunInfo:
        """``run.json``, validated."""
        return self._read_json_record(RUN_JSON, RunInfo)

    def read_summary(self) -> RunSummary | None:
        """``summary.json``, validated; ``None`` when the run has not written one yet."""
        if not (self.path / SUMMARY).exists():
            return None
        return self._read_json_record(SUMMARY, RunSummary)

    def _read_json_record(self, name: str, cls: type[Any]) -> Any:
        path = self.path / name
        try:
            data = json.loads(path.read_bytes().decode("utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ResultsError(f"cannot read {path}: {describe(exc)}") from None
        try:
            return read_record(data, cls)
        except RecordError as exc:
            raise ResultsError(f"{path} is damaged: {exc}") from None

    def final_results(self) -> dict[tuple[str, int], RunResult]:
        """The final record of every finished (task, trial) (the last line wins if one appears twice). Lines
        that are not valid results are skipped with a warning, so their pairs count as unfinished."""
        return {key: result for key, (result, _) in self.final_records().items()}

    def final_records(self) -> dict[tuple[str, int], tuple[RunResult, dict[str, Any]]]:
        """Like :meth:`final_results`, each with its raw line (which also holds ``prepared``)."""
        out: dict[tuple[str, int], tuple[RunResult, dict[str, Any]]] = {}
        path = self.path / RESULTS
        for number, data in read_jsonl(path, self.warnings):
            try:
                result = result_from_json(data)
            except RecordError as exc:
                warn(self.warnings, path, number, f"not a valid result ({exc})")
                continue
            out[(result.task_id, result.trial)] = (result, data)
        return out

    def attempt_results(self) -> list[RunResult]:
        """Every attempt that did not give a final result (``attempts.jsonl``: retried, cut short, cancelled);
        lines that are not valid results are skipped with a warning."""
        out: list[RunResult] = []
        path = self.path / ATTEMPTS
        for number, data in read_jsonl(path, self.warnings):
            try:
                out.append(result_from_json(data))
            except RecordError as exc:
                warn(self.warnings, path, number, f"not a valid attempt ({exc})")
        return out

    def final_scores(self) -> dict[tuple[str, int], Score]:
        """The scores of every finished (task, trial), read without building whole results (for comparing large
        runs): from ``scores.json`` when it is current, else from ``results.jsonl``, each line's fields
        validated and a bad line skipped with a warning as in :meth:`final_results`."""
        indexed = read_scores(self.path, self.path / RESULTS)
        if indexed is not None:
            return indexed
        out: dict[tuple[str, int], Score] = {}
        path = self.path / RESULTS
        for number, data in _read_objects(path, self.warnings):
            problem = result_problem(data)
            if problem:
                warn(self.warnings, path, number, f"not a valid result ({problem})")
                continue
            out[(data["task_id"], data.get("trial", 1))] = Score(
                data.get("category"), data["status"] == "COMPLETED", data.get("metrics", {}))
        return out

    def attempt_counts(self) -> dict[tuple[str, int], int]:
        """The highest attempt number each (task, trial) has used in any file (results, attempts,
        trajectories), so a re-run after a resume gets a new number even when its last result was torn."""
        counts: dict[tuple[str, int], int] = {}
        for name in (RESULTS, ATTEMPTS, TRAJECTORIES):
            for _, data in read_jsonl(self.path / name):
                tid, attempt, trial = data.get("task_id"), data.get("attempt"), data.get("trial", 1)
                if isinstance(tid, str) and isinstance(attempt, int) and isinstance(trial, int) \
                        and _count(attempt) and _count(trial):
                    counts[(tid, trial)] = max(counts.get((tid, trial), 0), attempt)
        return counts

    # -- writing -------------------------------------------------------------------------------------

    def write_run_info(self, info: RunInfo) -> None:
        write_json_atomic(self.path / RUN_JSON, self.redactor.text(dumps_record(info, indent=2)))

    def write_summary(self, summary: RunSummary, final: Mapping[tuple[str, int], RunResult] | None = None) -> None:
        """``summary.json`` and, given the final results, the ``scores.json`` index of them."""
        self.sync()
        if (self.path / SCANS).exists():  # what ``run --scan`` found, counted beside the scores
            from agentcompass.scanning.store import counts

            summary = dataclasses.replace(summary, findings=counts(self.path))
        write_json_atomic(self.path / SUMMARY, self.redactor.text(dumps_record(summary, indent=2)))
        if final is not None:
            write_scores(self.path, final, self.path / RESULTS)

    def stream(self, name: str) -> IO[str]:
        f = self._files.get(name)
        if f is None:
            f = self._files[name] = open(self.path / name, "a", encoding="utf-8")
        return f

    def _append(self, name: str, *records: Any) -> tuple[Any, ...]:
        """Append records as JSON lines, flushed together (a final record reaches the OS at once); the records
        as written (masked of the run's secrets: the same objects when none was in them)."""
        lines = "".join(_line(data) for data in records)
        if self.redactor.active:
            masked = self.redactor.text(lines)
            if masked != lines:  # a secret is there: mask each value, so no mask lands inside a JSON token
                records = tuple(self.redactor.data(data) for data in records)
                masked = "".join(self.redactor.text(_line(data)) for data in records)
            lines = masked
        f = self.stream(name)
        f.write(lines)
        f.flush()
        if time.monotonic() - self._last_sync >= FSYNC_INTERVAL:
            self.sync()
        return records

    def append_result(self, result: RunResult, prepared: Mapping[str, Any] | None = None) -> Mapping[str, Any]:
        """A final result; ``prepared`` (what ``prepare_task`` returned) is kept beside it for re-scoring. The
        line as written (masked)."""
        line = result_to_json(result)
        if prepared is not None:
            line["prepared"] = prepared
        return self._append(RESULTS, line)[0]

    def append_attempt(self, result: RunResult) -> None:
        self._append(ATTEMPTS, result_to_json(result))

    def append_trajectory(self, task_id: str, trial: int, attempt: int, calls: Any) -> tuple[Mapping[str, Any], ...]:
        """The attempt's model calls, one line each; the lines as written (masked)."""
        return self._append(
            TRAJECTORIES,
            *({"task_id": task_id, "trial": trial, "attempt": attempt, "index": i, **call}
              for i, call in enumerate(calls)),
        )

    def artifacts_dir(self, task_id: str, trial: int, attempt: int) -> Path:
        task_dir = self.path / ARTIFACTS / safe_name(task_id)
        return (task_dir if trial == 1 else task_dir / f"trial-{trial}") / f"attempt-{attempt}"

    def sync(self) -> None:
        self._last_sync = time.monotonic()
        for f in self._files.values():
            if not f.closed:
                f.flush()
                os.fsync(f.fileno())

    def remove_if_nothing_recorded(self) -> bool:
        """Remove this directory when no task left a record in it (a run that failed to set up); whether it
        did."""
        for name in (RESULTS, ATTEMPTS, TRAJECTORIES):
            if (self.path / name).exists() and (self.path / name).stat().st_size:
                return False
        if (self.path / ARTIFACTS).exists():
            return False
        import shutil

        shutil.rmtree(self.path, ignore_errors=True)
        return True

    def close(self) -> None:
        self.sync()
        for f in self._files.values():
            f.close()
        self._files.clear()


#: One encoder for every record line (``json.dumps`` with options builds one per call): the same text.
_LINE_ENCODER = json.JSONEncoder(ensure_ascii=False, default=str, separators=(",", ":"))


def _line(data: Any) -> str:
    return _LINE_ENCODER.encode(data) + "\n"
