"""``scan --replay RECORDING``: the judge's calls answered from those a judge scan recorded
(``RECORDING/scan_calls.jsonl``), offline, as ``run --replay`` answers a run's calls from its trajectories.

Each attempt's judge call is matched on its canonical key (the rubric and the transcript excerpt it was shown,
its settings) to a recorded call of the same (task, trial) — the calls of the latest attempt the recording
scanned of it — so the replayed findings are the recorded ones; a call that matches none (the rubric or the
transcript changed) is a miss, and the scan stops with a one-line error naming the task."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs

from agentcompass.errors import UsageError
from agentcompass.models.replay import OfflineModel, Replay
from agentcompass.results.lines import RUN_JSON, read_json_file
from agentcompass.scanning.judge import SCAN_CALLS


@attrs.define
class ScanCallsRecording:
    """The judge calls ``scan_calls.jsonl`` holds, by (task, trial): those of the latest attempt scanned."""

    path: Path
    run_id: str
    by_key: dict[tuple[str, int], list[dict[str, Any]]]
    model: str

    @classmethod
    def open(cls, path: Path) -> ScanCallsRecording:
        """``path`` (a run directory, or its ``scan_calls.jsonl``); a :class:`UsageError` naming what is wrong."""
        file = path if path.name == SCAN_CALLS else path / SCAN_CALLS
        if not file.is_file():
            raise UsageError(f"--replay {path}: no judge calls are recorded there (no {SCAN_CALLS}); scan a run "
                             "with --scanner judge:RUBRIC.md --judge-model MODEL first, then replay that run")
        latest: dict[tuple[str, int], tuple[int, list[dict[str, Any]]]] = {}
        model = ""
        with open(file, encoding="utf-8", errors="replace") as f:
            for line in f:
                try:
                    call = json.loads(line)
                except ValueError:
                    continue  # a torn line: its call is a miss if asked
                if not isinstance(call, dict) or not isinstance(call.get("task_id"), str):
                    continue
                key, attempt = (call["task_id"], int(call.get("trial") or 1)), int(call.get("attempt") or 1)
                seen = latest.get(key)
                if seen is None or attempt > seen[0]:
                    latest[key] = seen = (attempt, [])
                if attempt == seen[0]:
                    seen[1].append(call)
                model = str(call.get("model") or model)
        if not latest:
            raise UsageError(f"--replay {path}: {file} holds no judge call; scan with a judge first")
        run_json = file.parent / RUN_JSON
        run_id = str(read_json_file(run_json).get("run_id", "")) if run_json.is_file() else ""
        return cls(file.parent.resolve(), run_id, {k: calls for k, (_, calls) in latest.items()}, model)

    def calls(self, task_id: str, trial: int) -> dict[str, list[dict[str, Any]]]:
        return {"judge": list(self.by_key.get((task_id, trial), []))}


def judge_replay(path: Path) -> tuple[Replay, OfflineModel]:
    """The replay of ``path``'s judge calls (misses are errors) and the judge that stands for the recorded one,
    never asked."""
    recording = ScanCallsRecording.open(path)
    judge = OfflineModel(recording.model or "judge", frozenset(), False,
                         f"the judge's calls are replayed from {recording.path / SCAN_CALLS}")
    return Replay(recording, miss="error"), judge
