"""``run --scan NAME``: scanners run on each attempt as its final result is recorded, an observer of the
``agentcompass_result_recorded`` hook: the attempt's records come from the run as it wrote them (its result line
and model call lines, masked), so nothing is read back from ``results.jsonl`` or ``trajectories.jsonl``.

Finished attempts are scanned in batches (every :data:`BATCH_SECONDS`, or :data:`BATCH_SIZE` attempts), each
batch's findings appended to ``scans.jsonl`` in one write, so scanning costs the run little; the last batch is
scanned when the run ends and ``summary.json`` then counts every finding."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import attrs

from agentcompass.hookspecs import hookimpl
from agentcompass.redaction import Redactor
from agentcompass.results.lines import ARTIFACTS, RUN_JSON, read_json_file
from agentcompass.runtime.records import RecordedResult
from agentcompass.runtime.scanning import Finding, Scanner, read_findings
from agentcompass.scanning import store
from agentcompass.scanning.engine import scan_now, update_summary
from agentcompass.scanning.names import SCANS
from agentcompass.scanning.transcripts import last_messages_only, transcript_from, verdict_rule_of

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
    _run_dir: Path | None = None
    #: The run's ``run.json`` (its id, benchmark and harness go into each transcript).
    _info: dict[str, Any] = attrs.field(factory=dict)
    #: The run's verdict rule (what says an attempt passed), read from ``run.json`` once.
    _rule: tuple[str, float] | None = None
    _redactor: Redactor = attrs.field(factory=Redactor)
    #: Findings already in ``scans.jsonl`` (a resumed run's): never written twice.
    _written: set[tuple[str, str, int, int, str]] = attrs.field(factory=set)
    #: Finished attempts not scanned yet, and when the first of them finished.
    _pending: list[RecordedResult] = attrs.field(factory=list)
    _since: float = 0.0

    @hookimpl
    def agentcompass_run_started(self, run_dir: str) -> None:
        path = Path(run_dir)
        self._run_dir = path
        self._info = read_json_file(path / RUN_JSON)
        self._rule = verdict_rule_of(self._info)
        self._redactor = store.run_redactor(self._info)
        self._written = {store.identity(f) for f in read_findings(path)}

    @hookimpl
    def agentcompass_result_recorded(self, record: RecordedResult) -> None:
        if self._run_dir is None:
            return
        if not self._pending:
            self._since = time.monotonic()
        self._pending.append(record)
        if len(self._pending) >= BATCH_SIZE or time.monotonic() - self._since >= BATCH_SECONDS:
            self.flush()

    @hookimpl
    def agentcompass_run_finished(self, run_id: str, summary: Any) -> None:
        """The last batch; ``summary.json`` (written just before) then counts every finding."""
        if self._run_dir is not None and self._pending:
            self.flush()
            update_summary(self._run_dir)

    def flush(self) -> None:
        """Scan every pending attempt and append what the scanners found to ``scans.jsonl``."""
        run_dir = self._run_dir
        if run_dir is None or not self._pending:
            return
        pending, self._pending = self._pending, []
        any_artifacts = (run_dir / ARTIFACTS).is_dir()
        found: list[Finding] = []
        for record in pending:
            transcript = transcript_from(run_dir, self._info, (record.task_id, record.trial), record.result,
                                         last_messages_only(record.calls), any_artifacts=any_artifacts,
                                         rule=self._rule)
            found += [x for x in scan_now(self.scanners, transcript) if store.identity(x) not in self._written]
        self._written.update(store.identity(x) for x in found)
        store.append(run_dir / SCANS, found, self._redactor)
        self.findings.extend(found)
