"""The suite directory: what a suite is, how far each cell got, and who is running it.

::

    DIR/suite.json          the resolved cells (name, origin, options), the baseline, the skipped cells
    DIR/CELL_NAME/          each cell's ordinary run directory (run.json, results.jsonl, summary.json, ...)
    DIR/.suite/CELL.json    the cell's state: finished | unfinished | interrupted | failed | running, its failures
    DIR/.suite/CELL.lock    held (flock) by the one process running the cell; holds its pid and start time

A lock is an advisory ``flock`` on the lock file, so the kernel drops it when its process dies, however it dies
(SIGKILL included): a killed invocation's locks never block a resume. The pid and start time in the file only
say who holds it, in messages.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentcompass.errors import ResultsError, SetupError
from agentcompass.procfs import read_stat
from agentcompass.suites.suite_file import Cell, SuitePlan

SUITE_JSON = "suite.json"
STATE_DIR = ".suite"
SCHEMA_VERSION = 1

#: Cell states. ``finished``: the run ended (whatever its tasks' statuses); ``unfinished``: it stopped early (a
#: budget, a fatal model error) or was killed — a resume finishes it; ``interrupted``: Ctrl-C / SIGTERM;
#: ``failed``: it could not start or crashed (a resume re-runs it up to ``--retries``); ``running``: a process
#: holds it (or held it and was killed).
FINISHED, UNFINISHED, INTERRUPTED, FAILED, RUNNING, SKIPPED = (
    "finished", "unfinished", "interrupted", "failed", "running", "skipped")


@dataclass(frozen=True)
class SkippedCell:
    name: str
    note: str


@dataclass(frozen=True)
class CellState:
    state: str
    failures: int = 0
    error: str | None = None
    exit_code: int | None = None
    updated_at: float = 0.0


@dataclass(frozen=True)
class SuiteRecord:
    """``suite.json``: the suite's cells as resolved when it started (a resume runs these, not the file)."""

    source: str
    cells: tuple[Cell, ...]
    baseline: str | None
    skipped: tuple[SkippedCell, ...]
    created_at: float


class SuiteDirectory:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.state_dir = path / STATE_DIR

    @property
    def record_path(self) -> Path:
        return self.path / SUITE_JSON

    def is_suite(self) -> bool:
        return self.record_path.is_file()

    def cell_dir(self, name: str) -> Path:
        return self.path / name

    # -- suite.json ----------------------------------------------------------------------------------

    def create(self, plan: SuitePlan, skipped: list[SkippedCell]) -> SuiteRecord:
        """Write ``suite.json`` for a new suite; an error when ``path`` already holds one (two invocations
        starting the same directory: exactly one wins)."""
        record = SuiteRecord(plan.source, plan.cells, plan.baseline, tuple(skipped), time.time())
        try:
            self.state_dir.mkdir(parents=True, exist_ok=True)
            tmp = self.state_dir / f"suite.json.{os.getpid()}.tmp"
            tmp.write_text(json.dumps(_record_json(record), indent=2) + "\n", encoding="utf-8")
            try:
                os.link(tmp, self.record_path)  # atomic, and fails when another invocation was first
            except FileExistsError:
                raise ResultsError(f"{self.path} already holds a suite; finish it with: agentcompass suite run "
                                   f"--resume {self.path} (or choose another --output)") from None
            finally:
                tmp.unlink(missing_ok=True)
        except OSError as exc:
            raise SetupError(f"cannot write the suite directory {self.path}: {exc.strerror or exc}; choose a "
                             "writable --output") from None
        return record

    def rewrite(self, record: SuiteRecord) -> None:
        """Replace ``suite.json`` with ``record`` (a resume that took edited cells), atomically."""
        tmp = self.state_dir / f"suite.json.{os.getpid()}.tmp"
        try:
            tmp.write_text(json.dumps(_record_json(record), indent=2) + "\n", encoding="utf-8")
            os.replace(tmp, self.record_path)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise SetupError(f"cannot write {self.record_path}: {exc.strerror or exc}") from None

    def read(self) -> SuiteRecord:
        if not self.path.is_dir():
            raise ResultsError(f"suite directory {self.path} does not exist")
        try:
            data = json.loads(self.record_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ResultsError(f"{self.path} is not a suite directory: it has no {SUITE_JSON}") from None
        except (OSError, ValueError) as exc:
            raise ResultsError(f"{self.record_path} cannot be read: {exc}") from None
        try:
            return SuiteRecord(
                source=data["source"],
                cells=tuple(Cell(c["name"], c["options"], c["origin"]) for c in data["cells"]),
                baseline=data.get("baseline"),
                skipped=tuple(SkippedCell(s["name"], s["note"]) for s in data.get("skipped", ())),
                created_at=data.get("created_at", 0.0),
            )
        except (KeyError, TypeError) as exc:
            raise ResultsError(f"{self.record_path} is damaged (missing {exc}); it was not written by this "
                               "version of agentcompass") from None

    # -- cell state ----------------------------------------------------------------------------------

    def state(self, name: str) -> CellState | None:
        try:
            data = json.loads((self.state_dir / f"{name}.json").read_text(encoding="utf-8"))
            return CellState(**data)
        except (OSError, ValueError, TypeError):
            return None

    def write_state(self, name: str, state: CellState) -> None:
        target = self.state_dir / f"{name}.json"
        tmp = target.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(state.__dict__) + "\n", encoding="utf-8")
        os.replace(tmp, target)

    def lock(self, name: str) -> CellLock:
        return CellLock(self.state_dir / f"{name}.lock")


class CellLock:
    """An exclusive, non-blocking lock on one cell for this process (see the module's docstring)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self) -> bool:
        """Take the lock; ``False`` when a live process holds it."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        info = read_stat(os.getpid())
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps({"pid": os.getpid(), "start": info.start if info else None}).encode())
        self._fd = fd
        return True

    def holder(self) -> Mapping[str, Any]:
        """Who holds (or last held) the lock: ``{"pid": ..., "start": ...}``, empty when unknown."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8") or "{}")
            return data if isinstance(data, dict) else {}
        except (OSError, ValueError):
            return {}

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def _record_json(record: SuiteRecord) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION, "source": record.source, "created_at": record.created_at,
        "baseline": record.baseline,
        "cells": [{"name": c.name, "origin": c.origin, "options": dict(c.options)} for c in record.cells],
        "skipped": [{"name": s.name, "note": s.note} for s in record.skipped],
    }
