"""``run --scan NAME``: scanners run on each attempt as its final result is recorded, an observer of the
``agentcompass_task_event`` hook reading the records the run has just written (``results.jsonl``,
``trajectories.jsonl``), so ``scans.jsonl`` is complete when ``summary.json`` is written."""

from __future__ import annotations

from pathlib import Path

import attrs

from agentcompass.hookspecs import hookimpl
from agentcompass.redaction import Redactor
from agentcompass.results.reader import RunReader
from agentcompass.runtime.records import TaskEvent
from agentcompass.runtime.scanning import Finding, Scanner
from agentcompass.scanning import store
from agentcompass.scanning.engine import scan_now
from agentcompass.scanning.names import SCANS
from agentcompass.scanning.transcripts import transcript_of

#: The name the observer is registered under while a run goes.
SCAN_PLUGIN = "agentcompass-scan"


@attrs.define
class ScanObserver:
    """Scans each (task, trial)'s final attempt as it is recorded; ``findings`` collects what was written."""

    scanners: list[Scanner]
    findings: list[Finding] = attrs.field(factory=list)
    _reader: RunReader | None = None
    _redactor: Redactor = attrs.field(factory=Redactor)
    #: Findings already in ``scans.jsonl`` (a resumed run's): never written twice.
    _written: set[tuple[str, str, int, int, str]] = attrs.field(factory=set)

    @hookimpl
    def agentcompass_run_started(self, run_dir: str) -> None:
        path = Path(run_dir)
        self._reader = RunReader.open(path)
        self._redactor = store.run_redactor(self._reader.info)
        self._written = {store.identity(store.finding_of(d)) for d in store.read(path / SCANS)}

    @hookimpl
    def agentcompass_task_event(self, event: TaskEvent) -> None:
        if event.event != "task.finished" or self._reader is None:
            return
        reader = self._reader
        reader.refresh()
        key = (event.task_id, event.trial)
        record = reader.results.get(key)
        if record is None or record.get("attempt") != event.attempt:
            return
        found = [f for f in scan_now(self.scanners, transcript_of(reader, key, record))
                 if store.identity(f) not in self._written]
        self._written.update(store.identity(f) for f in found)
        store.append(reader.path / SCANS, found, self._redactor)
        self.findings.extend(found)
