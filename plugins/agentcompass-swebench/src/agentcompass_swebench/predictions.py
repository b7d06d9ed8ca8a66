"""Predictions in the official shape (``instance_id``, ``model_name_or_path``, ``model_patch``): read from a file
for ``-b predictions=``, and written for every ``swebench`` run so that the official tools can grade it too::

    python -m swebench.harness.run_evaluation -d DATASET -p RUN_DIR/predictions.jsonl -id RUN_ID

``predictions.jsonl`` in the run directory holds one line per instance (trial 1; ``predictions.trial-N.jsonl``
for later trials), the patch each final attempt collected. It is rewritten from ``results.jsonl`` whenever the
run ends, so a resumed run's file is complete too.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agentcompass.errors import UsageError
from agentcompass.runtime.names import safe_name

PREDICTIONS = "predictions.jsonl"
KEYS = ("instance_id", "model_name_or_path", "model_patch")


def read_predictions(path: Path, known: set[str]) -> dict[str, dict[str, Any]]:
    """``path``'s predictions by instance id (the last one wins, as upstream reads them). JSONL or JSON (a list, or
    a mapping of instance id to prediction, as SWE-agent writes). Every id must be an instance of the dataset."""
    if not path.is_file():
        raise UsageError(f"swebench: -b predictions={path}: no such file")
    rows: list[tuple[str, Any]] = []
    if path.suffix == ".jsonl":
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.strip():
                try:
                    rows.append((f"{path} line {number}", json.loads(line)))
                except json.JSONDecodeError as exc:
                    raise UsageError(f"swebench: {path} line {number} is not JSON ({exc.msg})") from None
    elif path.suffix == ".json":
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise UsageError(f"swebench: {path} is not JSON ({exc.msg}, line {exc.lineno})") from None
        items = list(data.values()) if isinstance(data, dict) else data
        if not isinstance(items, list):
            raise UsageError(f"swebench: {path} holds neither a list of predictions nor a mapping of them")
        rows = [(f"{path}[{i}]", row) for i, row in enumerate(items)]
    else:
        raise UsageError(f"swebench: -b predictions={path}: expected a .jsonl or .json file")
    predictions: dict[str, dict[str, Any]] = {}
    for where, row in rows:
        if not isinstance(row, dict) or not isinstance(row.get("instance_id"), str):
            raise UsageError(f"swebench: {where}: a prediction is an object with an instance_id")
        patch = row.get("model_patch")
        if patch is not None and not isinstance(patch, str):
            raise UsageError(f"swebench: {where}: model_patch is {type(patch).__name__}, not a string")
        predictions[row["instance_id"]] = row
    unknown = sorted(set(predictions) - known)
    if unknown:
        raise UsageError(f"swebench: {path}: prediction(s) for instance(s) not in the dataset: {', '.join(unknown)}")
    if not predictions:
        raise UsageError(f"swebench: {path} holds no prediction")
    return predictions


def _final_results(results: Path) -> dict[tuple[str, int], Mapping[str, Any]]:
    final: dict[tuple[str, int], Mapping[str, Any]] = {}
    if not results.is_file():
        return final
    for line in results.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue  # a torn last line
        if isinstance(record, dict) and isinstance(record.get("task_id"), str):
            final[(record["task_id"], int(record.get("trial") or 1))] = record
    return final


def write_run_predictions(run_dir: Path, model_name: str) -> list[Path]:
    """Write the run's predictions files from its final results; returns the files written."""
    by_trial: dict[int, list[dict[str, Any]]] = {}
    for (task_id, trial), record in sorted(_final_results(run_dir / "results.jsonl").items()):
        task_dir = run_dir / "artifacts" / safe_name(task_id)
        attempt_dir = (task_dir if trial == 1 else task_dir / f"trial-{trial}") / f"attempt-{record.get('attempt', 1)}"
        patch_file = attempt_dir / "model.patch"
        patch = patch_file.read_bytes().decode("utf-8", errors="replace") if patch_file.is_file() else None
        by_trial.setdefault(trial, []).append(
            {"instance_id": task_id, "model_name_or_path": model_name, "model_patch": patch})
    written = []
    for trial, rows in sorted(by_trial.items()):
        path = run_dir / (PREDICTIONS if trial == 1 else f"predictions.trial-{trial}.jsonl")
        tmp = path.with_suffix(".tmp")
        tmp.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
        tmp.replace(path)
        written.append(path)
    return written
