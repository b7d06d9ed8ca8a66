"""``scans.jsonl``: each finding as a JSON line (masked of the run's secrets), read back and counted."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from agentcompass.redaction import Redactor
from agentcompass.runtime.known_secrets import known_secrets
from agentcompass.runtime.scanning import Finding
from agentcompass.scanning.names import SCANS


def run_redactor(info: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> Redactor:
    """What a run's findings are masked of: the secrets the report masks for it (its request's, this machine's)."""
    request = info.get("request") if isinstance(info.get("request"), Mapping) else {}
    redactor = Redactor()
    redactor.add(*known_secrets([request or {}], environ))
    return redactor


def line_of(finding: Finding, redactor: Redactor) -> str:
    data = redactor.data(dataclasses.asdict(finding))
    return json.dumps(data, ensure_ascii=False) + "\n"


def append(path: Path, findings: Iterable[Finding], redactor: Redactor) -> int:
    """Append findings to ``path`` (``scans.jsonl``), flushed together; how many."""
    lines = [line_of(f, redactor) for f in findings]
    if lines:
        with open(path, "a", encoding="utf-8") as f:
            f.write("".join(lines))
    return len(lines)


def replace_scanners(path: Path, scanners: Iterable[str], findings: Iterable[Finding], redactor: Redactor) -> int:
    """Rewrite ``path`` with ``findings`` in place of every earlier finding of ``scanners`` (others' kept)."""
    names = set(scanners)
    kept = [json.dumps(d, ensure_ascii=False) + "\n" for d in read(path) if d.get("scanner") not in names]
    new = [line_of(f, redactor) for f in findings]
    tmp = path.with_suffix(".jsonl.tmp")
    tmp.write_text("".join(kept + new), encoding="utf-8")
    os.replace(tmp, path)
    return len(new)


def read(path: Path) -> list[dict[str, Any]]:
    """The findings ``path`` holds, as JSON objects (a damaged or torn line is passed over)."""
    if not path.exists():
        return []
    out = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            try:
                data = json.loads(line)
            except ValueError:
                continue
            if isinstance(data, dict) and isinstance(data.get("scanner"), str) and isinstance(data.get("task_id"), str):
                out.append(data)
    return out


def identity(finding: Finding) -> tuple[str, str, int, int, str]:
    """What makes a finding the same one: its scanner, attempt and reason (a resumed run's is not written twice)."""
    return finding.scanner, finding.task_id, finding.trial, finding.attempt, finding.reason


def counts(run_dir: Path) -> dict[str, dict[str, int]]:
    """Findings per scanner and severity (what ``summary.json``'s ``findings`` holds); empty without scans."""
    out: dict[str, dict[str, int]] = {}
    for data in read(run_dir / SCANS):
        by = out.setdefault(data["scanner"], {})
        severity = str(data.get("severity", "low"))
        by[severity] = by.get(severity, 0) + 1
    return out


def flagged(run_dir: Path, scanners: Iterable[str] | None = None) -> set[tuple[str, int, int]]:
    """``(task, trial, attempt)`` of every attempt a finding of ``scanners`` (all when ``None``) flags."""
    names = None if scanners is None else set(scanners)
    return {(d["task_id"], int(d.get("trial") or 1), int(d.get("attempt") or 1)) for d in read(run_dir / SCANS)
            if names is None or d["scanner"] in names or d["scanner"].split(":", 1)[0] in names}
