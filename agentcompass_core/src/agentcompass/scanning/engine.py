"""Scanners chosen by name (``NAME`` or ``NAME:ARG``) and run over a run directory's attempts."""

from __future__ import annotations

import inspect
import json
import os
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import attrs

from agentcompass.errors import UsageError
from agentcompass.results.lines import SUMMARY
from agentcompass.results.reader import RunReader
from agentcompass.runtime.logs import get_logger
from agentcompass.runtime.models import ModelClient
from agentcompass.runtime.scanning import Finding, Scanner, Transcript, read_findings
from agentcompass.scanning import store
from agentcompass.scanning.names import BUILTIN_SCANNERS, JUDGE, SCANS
from agentcompass.scanning.transcripts import transcripts


def split(spec: str) -> tuple[str, str | None]:
    """``NAME:ARG`` as ``(NAME, ARG)``; ``NAME`` as ``(NAME, None)``."""
    name, _, arg = spec.partition(":")
    return name, (arg or None)


def build_scanners(host: Any, specs: Sequence[str], judge: ModelClient | None = None) -> list[Scanner]:
    """The scanners ``specs`` name (every built-in but the judge when empty); an unknown name or a bad argument
    is a :class:`UsageError` naming it."""
    scanners: list[Scanner] = []
    for spec in specs or BUILTIN_SCANNERS:
        name, arg = split(spec)
        if name == JUDGE:
            from agentcompass.scanning.judge import JudgeScanner

            if not arg:
                raise UsageError("--scanner judge needs a rubric: --scanner judge:RUBRIC.md")
            if judge is None:
                raise UsageError(f"--scanner {spec} needs the judge's model: give --judge-model MODEL")
            scanners.append(JudgeScanner.from_file(Path(arg), judge))
            continue
        factory = host.factory("scanner", name)
        scanner = factory(arg) if arg is not None else factory()
        if not isinstance(scanner, Scanner):
            raise UsageError(f"scanner {name!r} is not a scanner (it needs a name and scan(transcript))")
        scanners.append(scanner)
    return scanners


async def findings_of(scanners: Iterable[Scanner], transcript: Transcript) -> list[Finding]:
    """What ``scanners`` find in one attempt (an awaitable answer awaited); a scanner that raises is logged
    (``scan.scanner_failed``) and the others still run."""
    out: list[Finding] = []
    for scanner in scanners:
        try:
            found = scanner.scan(transcript)
            if inspect.isawaitable(found):
                found = await found
            out.extend(found)
        except UsageError:
            raise
        except Exception as exc:  # a broken scanner never hides the others' findings
            get_logger().warning("scan.scanner_failed", scanner=scanner.name, task_id=transcript.task_id,
                                 trial=transcript.trial, error=f"{type(exc).__name__}: {exc}")
    return out


def scan_now(scanners: Iterable[Scanner], transcript: Transcript) -> list[Finding]:
    """:func:`findings_of` for scanners that answer at once (no awaitable); an awaitable answer is refused."""
    out: list[Finding] = []
    for scanner in scanners:
        try:
            found = scanner.scan(transcript)
            if inspect.isawaitable(found):
                if hasattr(found, "close"):
                    found.close()
                raise UsageError(f"scanner {scanner.name!r} asks a model; run it after the run with "
                                 "agentcompass scan RUN_DIR --scanner ...")
            out.extend(found)
        except UsageError:
            raise
        except Exception as exc:
            get_logger().warning("scan.scanner_failed", scanner=scanner.name, task_id=transcript.task_id,
                                 trial=transcript.trial, error=f"{type(exc).__name__}: {exc}")
    return out


@attrs.frozen
class ScanOutcome:
    """What a scan did: attempts read, the findings (as written), and how long it took."""

    n_attempts: int
    findings: tuple[Finding, ...]
    seconds: float


async def scan_run(run_dir: Path, scanners: Sequence[Scanner]) -> ScanOutcome:
    """Scan every final attempt of ``run_dir``; ``scans.jsonl`` gets the findings in place of the earlier ones of
    the same scanners, and ``summary.json`` (when written) their counts. Nothing else is changed."""
    started = time.perf_counter()
    reader = RunReader.open(run_dir)
    redactor = store.run_redactor(reader.info)
    from agentcompass.scanning.judge import SCAN_CALLS, CallLog, JudgeScanner

    for scanner in scanners:
        if isinstance(scanner, JudgeScanner) and scanner.on_meter is None:
            scanner.on_meter = CallLog(run_dir / SCAN_CALLS, redactor)
    found: list[Finding] = []
    n = 0
    for transcript in transcripts(reader):
        n += 1
        found.extend(await findings_of(scanners, transcript))
    store.replace_scanners(run_dir / SCANS, [s.name for s in scanners], found, redactor)
    update_summary(run_dir)
    names = {s.name for s in scanners}
    masked = tuple(f for f in read_findings(run_dir) if f.scanner in names)
    return ScanOutcome(n, masked, time.perf_counter() - started)


def update_summary(run_dir: Path) -> None:
    """Put the findings' counts into ``summary.json`` when the run has one."""
    path = run_dir / SUMMARY
    if not path.exists():
        return
    data = json.loads(path.read_text(encoding="utf-8"))
    data["findings"] = store.counts(run_dir)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2), encoding="utf-8")
    os.replace(tmp, path)
