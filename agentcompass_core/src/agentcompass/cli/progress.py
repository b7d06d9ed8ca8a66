"""Progress on stderr. The run directory first; then, on a terminal, one live status line (done / running / errored /
rate / ETA / model calls and tokens so far / cost so far); one plain line per finished task when stderr is not a
terminal or when asked (``--task-lines``); the warnings a run has for the user, and what a Ctrl-C does.

The console is an observer of the same hooks every plugin sees (pytest's terminal output is a plugin too):
:class:`ConsoleReporter` implements them and draws with :class:`Progress`; the CLI registers it on the run's
plugin host for the run (:func:`agentcompass.cli.common.observing`)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

import click

from agentcompass.cli.render import CONSOLE_ERROR
from agentcompass.hookspecs import hookimpl
from agentcompass.runtime.rate_limits import LimitState, throttled
from agentcompass.runtime.records import LiveFigures, ModelCallEvent, TaskEvent
from agentcompass.runtime.shortening import shorten
from agentcompass.runtime.types import RunRequest, RunResult, TaskStatus


def task_label(result: RunResult, trials: int = 1) -> str:
    """The task id, with its trial when the run has several (``roman trial 2/3``)."""
    return f"{result.task_id} trial {result.trial}/{trials}" if trials > 1 or result.trial > 1 else result.task_id


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}" if seconds >= 3600 \
        else f"{seconds // 60}:{seconds % 60:02d}"


def throttle_text(state: LimitState) -> str:
    """A rate-limited provider on the status line: ``openai 4/64 calls (12 waiting)``."""
    waiting = f" ({state.waiting} waiting)" if state.waiting else ""
    paused = f" paused {state.paused_s:.0f}s" if state.paused_s >= 1 else ""
    return f"{state.provider.split(' at ')[0]} {state.limit}/{state.ceiling} calls{waiting}{paused}"


class Progress:
    def __init__(self, enabled: bool = True, task_lines: bool | None = None) -> None:
        self.enabled = enabled
        self.tty = enabled and sys.stderr.isatty()
        #: One line per finished task: asked for, or when stderr is not a terminal.
        self.task_lines = enabled and (task_lines if task_lines else not self.tty)
        self._live: Any = None
        self.trials = 1
        self.total = 0
        self.done = 0
        self.errored = 0
        self._done_here = 0
        self._started = time.monotonic()
        self._figures: Callable[[], LiveFigures] | None = None
        #: Model calls ended so far in this process's run, and their tokens (prompt and completion).
        self.calls = 0
        self.tokens = 0

    def start(self, total: int, already_done: int, trials: int = 1, run_dir: str | None = None,
              figures: Callable[[], LiveFigures] | None = None) -> None:
        self.trials, self.total, self.done, self._figures = trials, total, already_done, figures
        self._started = time.monotonic()
        if not self.enabled:
            return
        if run_dir is not None:
            click.echo(f"run directory: {run_dir}  (watch it: agentcompass view {run_dir})", err=True)
        if already_done:
            click.echo(f"resuming: {already_done}/{total} tasks already finished", err=True)
        if self.tty and not self.task_lines:
            from rich.console import Console
            from rich.live import Live

            self._live = Live(self._status_text(), console=Console(stderr=True), refresh_per_second=4,
                              transient=False, get_renderable=self._status_text)
            self._live.start()

    def status_line(self) -> str:
        """``done 3/22  running 2  errored 1  rate 4.1/min  ETA 1:05  calls 41  tokens 52,310  cost 0.0123 USD``."""
        figures = self._figures() if self._figures is not None else LiveFigures(0)
        running, cost = figures.in_flight, figures.cost_usd
        elapsed = max(time.monotonic() - self._started, 1e-9)
        rate = self._done_here / elapsed * 60
        left = self.total - self.done
        eta = _duration(left / (rate / 60)) if self._done_here and left > 0 else "-"
        parts = [f"done {self.done}/{self.total}", f"running {running}", f"errored {self.errored}",
                 *([f"stalled {figures.stalled}"] if figures.stalled else []),
                 f"rate {rate:.1f}/min", f"ETA {eta}", f"calls {self.calls:,}", f"tokens {self.tokens:,}"]
        if cost is not None:
            parts.append(f"cost {cost:.4f} USD")
        parts += [throttle_text(state) for state in throttled()]
        return "  ".join(parts)

    def _status_text(self) -> Any:
        from rich.text import Text

        return Text(self.status_line())

    def model_call(self, tokens: int) -> None:
        self.calls += 1
        self.tokens += tokens

    def task_done(self, result: RunResult, done: int, total: int) -> None:
        self.done, self.total = done, total
        self._done_here += 1
        if result.status is not TaskStatus.COMPLETED:
            self.errored += 1
        if not self.enabled or not self.task_lines:
            return
        metrics = " ".join(f"{k}={v:g}" for k, v in result.metrics.items())
        error = f" error={shorten(result.error, CONSOLE_ERROR)!r}" if result.error else ""
        line = f"[{done}/{total}] {task_label(result, self.trials)} {result.status.value} {metrics}{error}"
        click.echo(line.rstrip(), err=True)

    def note(self, line: str) -> None:
        """A line for the user, above the live status line."""
        if not self.enabled:
            return
        if self._live is not None:
            self._live.console.print(line, markup=False, highlight=False)
        else:
            click.echo(line, err=True)

    def stop(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None


class ConsoleReporter:
    """The console's observer plugin: what a run announces through the hooks, drawn by :class:`Progress`.
    Register it on the run's plugin host for the run (:func:`agentcompass.cli.common.observing`)."""

    def __init__(self, enabled: bool = True, task_lines: bool | None = None) -> None:
        self.progress = Progress(enabled=enabled, task_lines=task_lines)
        #: The names of the signals the run received, in order.
        self.signals: list[str] = []
        #: The (task, trial)s finished in this process's run.
        self.finished: set[tuple[str, int]] = set()

    @hookimpl
    def agentcompass_run_started(self, request: RunRequest, run_dir: str, n_work: int, n_finished: int,
                                 figures: Callable[[], LiveFigures]) -> None:
        self.progress.start(n_work, n_finished, request.tasks.trials, run_dir, figures)

    @hookimpl
    def agentcompass_task_event(self, event: TaskEvent) -> None:
        if event.event != "task.finished":
            return
        progress = self.progress
        key = (event.task_id, event.trial)
        if key in self.finished:  # run again (agentcompass ctl requeue): its new result replaces the earlier one
            progress.done -= 1
        self.finished.add(key)
        result = RunResult(task_id=event.task_id, status=TaskStatus(event.status), attempt=event.attempt,
                           trial=event.trial, metrics=dict(event.metrics), error=event.error)
        progress.task_done(result, progress.done + 1, progress.total)

    @hookimpl
    def agentcompass_model_call(self, event: ModelCallEvent) -> None:
        self.progress.model_call(event.prompt_tokens + event.completion_tokens)

    @hookimpl
    def agentcompass_run_warning(self, message: str) -> None:
        click.echo(f"warning: {message}", err=True)

    @hookimpl
    def agentcompass_run_control(self, action: str, uid: int, message: str) -> None:
        self.progress.note(f"ctl {action} (uid {uid}): {message}")

    @hookimpl
    def agentcompass_run_signal(self, signal: str, count: int) -> None:
        self.signals.append(signal)
        self.progress.stop()
        if count == 1:
            click.echo(f"{signal}: stopping; closing environments and keeping finished results…", err=True)
        else:
            click.echo(f"{signal}: still stopping; the clean-up finishes on its own (it cannot be skipped)",
                       err=True)

    def stop(self) -> None:
        """End the live status line (before the summary is printed)."""
        self.progress.stop()
