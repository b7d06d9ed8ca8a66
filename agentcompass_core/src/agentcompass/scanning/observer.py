"""``run --scan NAME``: scanners run on each attempt as its final result is recorded, an observer of the
``agentcompass_task_event`` hook reading the records the run has just written (``results.jsonl``,
``trajectories.jsonl``).

Finished attempts are scanned in batches (every :data:`BATCH_SECONDS`, or :data:`BATCH_SIZE` attempts), each
batch reading the files once, so scanning costs the run little; the last batch is scanned when the run ends and
``summary.json`` then counts every finding."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

import attrs

from agentcompass.hookspecs import hookimpl
from agentcompass.redaction import Redactor
from agentcompass.results.lines import ARTIFACTS, TRAJECTORIES
from agentcompass.results.reader import Key, RunReader
from agentcompass.runtime.records import TaskEvent
from agentcompass.runtime.scanning import Finding, Scanner, read_findings
from agentcompass.scanning import store
from agentcompass.scanning.engine import scan_now, update_summary
from agentcompass.scanning.names import SCANS
from agentcompass.scanning.transcripts import transcript_of

#: The name the observer is registered under while a run goes.
SCAN_PLUGIN = "agentcompass-scan"
#: A batch of finished attempts is scanned when it is this old (seconds) or this large.
BATCH_SECONDS = 0.5
BATCH_SIZE = 256


@attrs.define
class ScanObserver:
    """Scans each (task, trial)'s final attempt once it is recorded; ``findings`` collects what was written."""

    scanners: list[Scanner]
    findings: list[Finding] = attrs.field(factory=list)
    _reader: RunReader | None = None
    _redactor: Redactor = attrs.field(factory=Redactor)
    #: Findings already in ``scans.jsonl`` (a resumed run's): never written twice.
    _written: set[tuple[str, str, int, int, str]] = attrs.field(factory=set)
    #: Finished attempts not scanned yet, and when the first of them finished.
    _pending: dict[tuple[str, int, int], None] = attrs.field(factory=dict)
    _since: float = 0.0

    @hookimpl
    def agentcompass_run_started(self, run_dir: str) -> None:
        path = Path(run_dir)
        self._reader = RunReader.open(path)
        self._redactor = store.run_redactor(self._reader.info)
        self._written = {store.identity(f) for f in read_findings(path)}

    @hookimpl
    def agentcompass_task_event(self, event: TaskEvent) -> None:
        if event.event != "task.finished" or self._reader is None:
            return
        if not self._pending:
            self._since = time.monotonic()
        self._pending[(event.task_id, event.trial, event.attempt)] = None
        if len(self._pending) >= BATCH_SIZE or time.monotonic() - self._since >= BATCH_SECONDS:
            self.flush()

    @hookimpl
    def agentcompass_run_finished(self, run_id: str, summary: Any) -> None:
        """The last batch; ``summary.json`` (written just before) then counts every finding."""
        if self._reader is not None and self._pending:
            self.flush()
            update_summary(self._reader.path)

    def flush(self) -> None:
        """Scan every pending attempt whose final record is written (the files read once for all of them)."""
        reader = self._reader
        if reader is None or not self._pending:
            return
        pending, self._pending = list(self._pending), {}
        reader.refresh()
        any_artifacts = (reader.path / ARTIFACTS).is_dir()
        found: list[Finding] = []
        path = reader.path / TRAJECTORIES
        with open(path, "rb") if path.exists() else contextlib.nullcontext() as f:
            for task_id, trial, attempt in pending:
                key: Key = (task_id, trial)
                record = reader.results.get(key)
                if record is None or record.get("attempt") != attempt:
                    continue
                transcript = transcript_of(reader, key, record, any_artifacts=any_artifacts, trajectories=f)
                found += [x for x in scan_now(self.scanners, transcript) if store.identity(x) not in self._written]
        self._written.update(store.identity(x) for x in found)
        store.append(reader.path / SCANS, found, self._redactor)
        self.findings.extend(found)

