"""One progress view of a whole suite on stderr.

An observer plugin of the cells' runs (``agentcompass_run_started``, ``agentcompass_task_event``) and of the
suite (:class:`~agentcompass.suites.scheduler.SuiteObserver`): a line per cell as it starts, ends or is skipped;
one line per finished task (``[CELL 3/12] task STATUS metrics``) when stderr is not a terminal or when asked,
otherwise one live status line: ``cells 2/8 finished, 3 running, 1 failed  tasks 45/120  errored 3``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from agentcompass import hookimpl
from agentcompass.cli.render import CONSOLE_ERROR
from agentcompass.runtime.records import TaskEvent
from agentcompass.runtime.shortening import shorten
from agentcompass.suites.cell_state import FAILED, FINISHED
from agentcompass.suites.scheduler import CellOutcome


class SuiteConsole:
    def __init__(self, n_cells: int, task_lines: bool = False) -> None:
        self.n_cells = n_cells
        self.tty = sys.stderr.isatty()
        self.task_lines = task_lines or not self.tty
        self._cells_by_dir: dict[str, str] = {}
        self._cell_of_run: dict[str, str] = {}
        self._planned: dict[str, int] = {}
        self._done: dict[str, int] = {}
        self.running: set[str] = set()
        self.ended: dict[str, str] = {}
        self.errored = 0
        self._live: Any = None

    # -- the suite's side ----------------------------------------------------------------------------

    def cell_note(self, name: str, message: str) -> None:
        self._echo(f"cell {name}: {message}")

    def cell_started(self, name: str, run_dir: Path, resumed: bool) -> None:
        self._cells_by_dir[str(run_dir)] = name
        self.running.add(name)
        self._echo(f"cell {name}: {'resuming' if resumed else 'starting'} in {run_dir}")

    def cell_ended(self, outcome: CellOutcome) -> None:
        self.running.discard(outcome.name)
        self.ended[outcome.name] = outcome.state
        if outcome.summary is not None:
            counts = "  ".join(f"{k}: {v}" for k, v in outcome.summary.status_counts.items())
            extra = f" ({outcome.error})" if outcome.error else ""
            self._echo(f"cell {outcome.name}: {outcome.state}{extra} — {counts or 'no tasks'}")
        else:
            self._echo(f"cell {outcome.name}: {outcome.state} — {outcome.error}")

    # -- the runs' observer hooks --------------------------------------------------------------------

    @hookimpl
    def agentcompass_run_started(self, run_id: str, run_dir: str) -> None:
        name = self._cells_by_dir.get(run_dir)
        if name is None:
            return
        self._cell_of_run[run_id] = name
        planned, done = 0, 0
        try:
            info = json.loads((Path(run_dir) / "run.json").read_text(encoding="utf-8"))
            planned = int((info.get("planned") or {}).get("n_results") or 0)
        except (OSError, ValueError, TypeError, AttributeError):
            pass
        try:
            with open(Path(run_dir) / "results.jsonl", "rb") as f:
                done = sum(1 for line in f if line.endswith(b"\n"))
        except OSError:
            pass
        self._planned[name], self._done[name] = planned, min(done, planned) if planned else done
        self._start_live()

    @hookimpl
    def agentcompass_task_event(self, event: TaskEvent) -> None:
        if event.event != "task.finished":
            return
        name = self._cell_of_run.get(event.run_id)
        if name is None:
            return
        self._done[name] = self._done.get(name, 0) + 1
        if event.status != "COMPLETED":
            self.errored += 1
        if self.task_lines:
            metrics = " ".join(f"{k}={v:g}" for k, v in (event.metrics or {}).items())
            trial = f" trial {event.trial}" if event.trial > 1 else ""
            error = f" error={shorten(event.error, CONSOLE_ERROR)!r}" if event.error else ""
            click.echo(f"[{name} {self._done[name]}/{self._planned.get(name) or '?'}] {event.task_id}{trial} "
                       f"{event.status} {metrics}{error}".rstrip(), err=True)

    # -- the live line -------------------------------------------------------------------------------

    def status_line(self) -> str:
        finished = sum(1 for s in self.ended.values() if s == FINISHED)
        failed = sum(1 for s in self.ended.values() if s == FAILED)
        done, planned = sum(self._done.values()), sum(self._planned.values())
        return (f"cells {finished}/{self.n_cells} finished, {len(self.running)} running, {failed} failed  "
                f"tasks {done}/{planned}  errored {self.errored}")

    def _start_live(self) -> None:
        if self.task_lines or self._live is not None:
            return
        from rich.console import Console
        from rich.live import Live
        from rich.text import Text

        self._live = Live(Text(self.status_line()), console=Console(stderr=True), refresh_per_second=4,
                          get_renderable=lambda: Text(self.status_line()))
        self._live.start()

    def _echo(self, line: str) -> None:
        if self._live is not None:
            self._live.console.print(line, markup=False, highlight=False)
        else:
            click.echo(line, err=True)

    def stop(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
