"""A terminal recording an attempt left (the ``human`` harness's ``session.cast``, asciicast v2), for the page's
player: found through the result's ``artifacts["recording"]`` in the attempt's artifacts directory."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agentcompass.runtime.names import safe_name

#: Bytes of a recording the page carries; a longer one is cut (its first part plays).
RECORDING_BYTES = 2_000_000


def attempt_dir(run_dir: Path, task_id: str, trial: int, attempt: int) -> Path:
    """Where a run keeps an attempt's artifacts (the run directory's layout)."""
    task_dir = run_dir / "artifacts" / safe_name(task_id)
    return (task_dir if trial == 1 else task_dir / f"trial-{trial}") / f"attempt-{attempt}"


def recording(run_dir: Path, result: Mapping[str, Any]) -> dict[str, Any] | None:
    """``{"header": ..., "events": [[t, kind, text], ...], "cut": bool}`` of the result's recording; ``None``
    when it names none or the file is missing or not asciicast v2."""
    name = (result.get("artifacts") or {}).get("recording")
    if not isinstance(name, str) or "/" in name or name.startswith("."):
        return None
    path = attempt_dir(run_dir, str(result["task_id"]), int(result.get("trial", 1)), int(result.get("attempt", 1))) \
        / name
    try:
        with path.open("rb") as f:
            data = f.read(RECORDING_BYTES + 1)
    except OSError:
        return None
    cut = len(data) > RECORDING_BYTES
    lines = data[:RECORDING_BYTES].decode("utf-8", "replace").splitlines()
    try:
        header = json.loads(lines[0])
    except (IndexError, ValueError):
        return None
    if not isinstance(header, dict) or header.get("version") != 2:
        return None
    events = []
    for line in lines[1:]:
        try:
            event = json.loads(line)
        except ValueError:
            cut = True  # a torn last line of a cut file
            break
        if isinstance(event, list) and len(event) == 3 and event[1] in ("o", "i"):
            events.append(event)
    return {"header": header, "events": events, "cut": cut}
