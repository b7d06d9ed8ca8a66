"""Progress on stderr: a rich progress bar on a terminal, one plain line per finished task otherwise."""

from __future__ import annotations

import sys
from typing import Any

import click

from agentcompass.runtime.types import RunResult


class Progress:
    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.tty = enabled and sys.stderr.isatty()
        self._bar: Any = None
        self._task: Any = None

    def start(self, total: int, already_done: int) -> None:
        if not self.enabled:
            return
        if self.tty:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TextColumn("{task.fields[last]}"),
                                 console=Console(stderr=True), transient=False)
            self._bar.start()
            self._task = self._bar.add_task("tasks", total=total, completed=already_done, last="")
        elif already_done:
            click.echo(f"resuming: {already_done}/{total} tasks already finished", err=True)

    def task_done(self, result: RunResult, done: int, total: int) -> None:
        if not self.enabled:
            return
        metrics = " ".join(f"{k}={v:g}" for k, v in result.metrics.items())
        if self._bar is not None:
            self._bar.update(self._task, completed=done, last=f"{result.task_id} {result.status.value}")
        else:
            error = f" error={result.error[:120]!r}" if result.error else ""
            click.echo(f"[{done}/{total}] {result.task_id} {result.status.value} {metrics}{error}".rstrip(),
                       err=True)

    def stop(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
