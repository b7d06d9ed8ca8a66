"""Runs a suite's cells together in one process, each an ordinary run under one shared capacity.

Library entry point::

    outcome = await SuiteRunner(host, SuiteDirectory(Path("suites/x")), concurrency=8).run(plan)
    outcome = await SuiteRunner(host, SuiteDirectory(Path("suites/x")), concurrency=8).run(None)  # resume

What it does, in order:

1. every cell's options become its request through the run config's parser, and its plugins are looked up and
   constructed (:func:`agentcompass.resolve.resolve`) — all before anything runs. A matrix cell pairing an
   ordinary benchmark with ``none`` (or a harness-free benchmark with a harness) is skipped with a note; any
   other problem makes the cell *failed* (it could not start), and the others go on;
2. a new suite writes ``suite.json`` (a resume reads it: it runs the recorded cells, save those that never
   started, which take the suite file's edited definition: :mod:`agentcompass.suites.edits`);
3. each cell runs as a :class:`~agentcompass.runner.Runner` into ``DIR/CELL`` — resumed when it already has a
   ``run.json`` — all at once, sharing one :class:`~agentcompass.capacity.SharedCapacity`. A cell is run only
   by the process holding its lock; a finished cell is never run again; a failed one is run again by a resume
   while it has failed at most ``retries`` times. A cell whose tasks ended in error statuses is finished.
4. the first SIGINT/SIGTERM cancels every cell (each closes its environments; finished results are kept).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

import attrs

from agentcompass.capacity import SharedCapacity
from agentcompass.errors import AgentCompassError, ResultsError, UsageError, describe
from agentcompass.exit_codes import ExitCode
from agentcompass.interrupts import SignalEchoes
from agentcompass.models.roles import build_clients
from agentcompass.plugins import PluginHost
from agentcompass.request_checks import check_request, raise_problems
from agentcompass.resolve import NO_HARNESS, resolve
from agentcompass.results.lines import RUN_JSON
from agentcompass.runtime.benchmark import HarnessFreeBenchmark
from agentcompass.runtime.known_secrets import missing_secret_env
from agentcompass.runtime.records import RunSummary
from agentcompass.runtime.types import RunRequest
from agentcompass.suites.cell_request import cell_request
from agentcompass.suites.cell_state import (
    FAILED,
    FINISHED,
    INTERRUPTED,
    RUNNING,
    UNFINISHED,
    CellState,
    SkippedCell,
    SuiteDirectory,
)
from agentcompass.suites.edits import SuiteEdits, suite_edits
from agentcompass.suites.suite_file import FROM_MATRIX, Cell, SuitePlan

#: Cell states a resume leaves alone.
DONE_STATES = (FINISHED,)


@attrs.define
class CellOutcome:
    """How one cell ended in this invocation. ``state``: a :mod:`~agentcompass.suites.cell_state` state, or
    ``"held"`` (another process runs it) or ``"skipped"``."""

    name: str
    state: str
    summary: RunSummary | None = None
    error: str | None = None
    ran: bool = False


@attrs.define
class SuiteOutcome:
    path: Path
    cells: list[CellOutcome]
    skipped: tuple[SkippedCell, ...]
    interrupted: bool = False

    @property
    def exit_code(self) -> ExitCode:
        if self.interrupted:
            return ExitCode.INTERRUPTED
        for cell in self.cells:
            if cell.state != FINISHED:
                return ExitCode.TASK_ERRORS
            if cell.summary is not None and (any(k != "COMPLETED" for k in cell.summary.status_counts)
                                             or cell.summary.unfinished):
                return ExitCode.TASK_ERRORS
        return ExitCode.OK


class SuiteObserver(Protocol):
    """What the suite tells its console (the run's own observer hooks carry the tasks)."""

    def cell_note(self, name: str, message: str) -> None: ...

    def cell_started(self, name: str, run_dir: Path, resumed: bool) -> None: ...

    def cell_ended(self, outcome: CellOutcome) -> None: ...


class _Silent:
    def cell_note(self, name: str, message: str) -> None:
        pass

    def cell_started(self, name: str, run_dir: Path, resumed: bool) -> None:
        pass

    def cell_ended(self, outcome: CellOutcome) -> None:
        pass


@attrs.define
class _Ready:
    cell: Cell
    request: RunRequest
    given: frozenset[str]


@attrs.define
class SuiteRunner:
    host: PluginHost
    directory: SuiteDirectory
    #: ``suite run --concurrency``: attempts at once, over all the cells together (default: the largest
    #: ``concurrency`` among the cells).
    concurrency: int | None = None
    max_environments: int | None = None
    max_cost: float | None = None
    #: How many times a resume re-runs a cell that could not start or crashed.
    retries: int = 2
    observer: SuiteObserver = attrs.field(factory=_Silent)
    #: Install SIGINT/SIGTERM handlers (the CLI does).
    handle_signals: bool = True
    #: Called with the signal's name and count (the first one stops the suite).
    on_signal: Callable[[str, int], None] | None = None
    _signals: int = 0

    async def run(self, plan: SuitePlan | None) -> SuiteOutcome:
        """Run a new suite (``plan``), or resume the suite in :attr:`directory` (``plan=None``)."""
        directory = self.directory
        edits = SuiteEdits({}, {})
        if plan is None:
            record = directory.read()
            edits = suite_edits(directory, record)  # cells that never started take the edited suite file's
            cells = edits.apply(list(record.cells))
            for name, note in edits.notes.items():
                self.observer.cell_note(name, note)
        else:
            if directory.is_suite():
                raise ResultsError(f"{directory.path} already holds a suite; finish it with: agentcompass "
                                        f"suite run --resume {directory.path} (or choose another --output)")
            cells = list(plan.cells)
        source = plan.source if plan is not None else str(directory.record_path)
        base_dir = Path(plan.source).parent if plan is not None else None
        outcomes: dict[str, CellOutcome] = {}
        ready: list[_Ready] = []
        kept: dict[str, Cell] = {}  # the cells as suite.json keeps them: their options as checked
        skipped: list[SkippedCell] = []
        failed_checks: dict[str, str] = {}
        for cell in cells:
            state = directory.state(cell.name) if plan is None else None
            if state is not None and state.state in DONE_STATES:
                outcomes[cell.name] = CellOutcome(cell.name, FINISHED, _summary_of(directory, cell.name))
                continue
            if state is not None and state.state == FAILED and state.failures > self.retries \
                    and cell.name not in edits.cells:
                outcomes[cell.name] = CellOutcome(cell.name, FAILED, error=f"{state.error} (failed {state.failures} "
                                                  f"times; --retries {self.retries} allows no more)")
                self.observer.cell_note(cell.name, f"not run again: {outcomes[cell.name].error}")
                continue
            try:
                request, given, checked = await self._check(
                    cell, *((edits.source, Path(edits.source).parent) if cell.name in edits.cells else
                            (source, base_dir)))
            except _Incompatible as exc:
                skipped.append(SkippedCell(cell.name, str(exc)))
                self.observer.cell_note(cell.name, f"skipped: {exc}")
                continue
            except AgentCompassError as exc:
                failed_checks[cell.name] = str(exc)
                continue
            kept[cell.name] = replace(cell, options=checked)
            ready.append(_Ready(cell, request, given))
        if plan is not None:
            names = {s.name for s in skipped}
            record = directory.create(replace(plan, cells=tuple(kept.get(c.name, c) for c in plan.cells
                                                                if c.name not in names)), skipped)
        elif edits.cells:  # suite.json keeps what the edited cells now are
            record = replace(record, cells=tuple(kept.get(c.name, c) if c.name in edits.cells else c
                                                 for c in cells))
            directory.rewrite(record)
        skipped_all = tuple(record.skipped) if plan is None else tuple(skipped)
        for name, error in failed_checks.items():
            outcomes[name] = self._cannot_start(name, error)
        capacity = SharedCapacity(self.concurrency or max([r.request.schedule.concurrency for r in ready] or [1]),
                                  self.max_environments, self.max_cost)
        capacity.cost.spent_usd = _spent(outcomes)
        tasks = {r.cell.name: asyncio.create_task(self._run_cell(r, capacity)) for r in ready}
        with self._signals_to(list(tasks.values())):
            if tasks:
                await asyncio.wait(tasks.values())
        for name, task in tasks.items():
            outcomes[name] = task.result()
        order = [c.name for c in cells]
        outcomes = {n: o for n, o in outcomes.items() if n not in {s.name for s in skipped_all}}
        return SuiteOutcome(directory.path, sorted(outcomes.values(), key=lambda o: order.index(o.name)),
                            skipped_all, interrupted=self._signals > 0)

    # -- checks before anything runs -----------------------------------------------------------------

    async def _check(self, cell: Cell, source: str, base_dir: Path | None
                     ) -> tuple[RunRequest, frozenset[str], dict[str, Any]]:
        """The cell's request, after every check that needs no work done: its options, its plugins and their
        options, the benchmark/harness pairing, its model clients (options, keys, prices), ``secret_env``."""
        request, given, checked = cell_request(cell.options, f"{source} cell {cell.name!r}", base_dir)
        missing = [k for k in ("benchmark", "harness", "model") if not getattr(request, k)]
        if missing:
            raise UsageError(f"cell {cell.name!r} has no {', '.join(missing)}; set it in the cell, the "
                                    "matrix or [defaults]")
        if self.concurrency is not None and "concurrency" not in given:
            request = request.with_options(concurrency=self.concurrency)
        raise_problems(check_request(request if self.max_cost is None else request.with_options(
            max_cost=self.max_cost)))  # the shared budget needs every cell's prices, as a run's own does
        try:
            resolve(self.host, request)
        except AgentCompassError:
            if cell.origin == FROM_MATRIX and (why := self._incompatible(request)):
                raise _Incompatible(why) from None
            raise
        clients = build_clients(self.host, request)
        for client in set(clients.values()):
            with contextlib.suppress(Exception):
                await client.aclose()
        missing = missing_secret_env(request.models.secret_env)
        if missing:
            raise UsageError(f"secret_env names {', '.join('$' + m for m in missing)}, which is not set; set it or "
                             "leave it out")
        return request, given, checked

    def _incompatible(self, request: RunRequest) -> str | None:
        try:
            benchmark = self.host.factory("benchmark", request.benchmark)(**request.benchmark_args)
        except Exception:
            return None
        free = isinstance(benchmark, HarnessFreeBenchmark)
        if request.harness == NO_HARNESS and not free:
            return f"benchmark {request.benchmark!r} needs an agent harness, not 'none'"
        if request.harness != NO_HARNESS and free:
            return f"benchmark {request.benchmark!r} drives its own loop (harness 'none'), not {request.harness!r}"
        return None

    def _cannot_start(self, name: str, error: str) -> CellOutcome:
        lock = self.directory.lock(name)
        if not lock.acquire():
            return self._held(name, lock.holder())
        try:
            previous = self.directory.state(name)
            failures = (previous.failures if previous else 0) + 1
            self.directory.write_state(name, CellState(FAILED, failures, error, int(ExitCode.USAGE), time.time()))
        finally:
            lock.release()
        outcome = CellOutcome(name, FAILED, error=f"could not start: {error}")
        self.observer.cell_ended(outcome)
        return outcome

    def _held(self, name: str, holder: dict[str, object] | object) -> CellOutcome:
        pid = holder.get("pid") if isinstance(holder, dict) else None
        outcome = CellOutcome(name, "held", error=f"another invocation (pid {pid}) is running it")
        self.observer.cell_note(name, f"not run here: {outcome.error}")
        return outcome

    # -- running -------------------------------------------------------------------------------------

    async def _run_cell(self, ready: _Ready, capacity: SharedCapacity) -> CellOutcome:
        from agentcompass.runner import Runner

        name, directory = ready.cell.name, self.directory
        lock = directory.lock(name)
        if not lock.acquire():
            return self._held(name, lock.holder())
        try:
            previous = directory.state(name)
            if previous is not None and previous.state in DONE_STATES:  # another invocation finished it meanwhile
                return CellOutcome(name, FINISHED, _summary_of(directory, name))
            failures = previous.failures if previous else 0
            run_dir = directory.cell_dir(name)
            resumed = (run_dir / RUN_JSON).is_file()
            directory.write_state(name, CellState(RUNNING, failures, None, None, time.time()))
            self.observer.cell_started(name, run_dir, resumed)
            runner = Runner(self.host, ready.request, run_dir=run_dir, resume=resumed, handle_signals=False,
                            given=ready.given if not resumed else frozenset(), capacity=capacity)
            try:
                result = await runner.run()
            except asyncio.CancelledError:
                outcome = CellOutcome(name, INTERRUPTED, error="interrupted", ran=True)
                directory.write_state(name, CellState(INTERRUPTED, failures, None, None, time.time()))
            except AgentCompassError as exc:
                outcome = CellOutcome(name, FAILED, error=f"could not start: {exc}", ran=True)
                directory.write_state(name, CellState(FAILED, failures + 1, str(exc), None, time.time()))
            except Exception as exc:  # a crash: recorded, the other cells go on
                outcome = CellOutcome(name, FAILED, error=f"crashed: {describe(exc)}", ran=True)
                directory.write_state(name, CellState(FAILED, failures + 1, f"crashed: {describe(exc)}", None,
                                                      time.time()))
            else:
                summary = result.summary
                state = INTERRUPTED if result.interrupted else UNFINISHED if summary.unfinished else FINISHED
                outcome = CellOutcome(name, state, summary, summary.stopped_reason, ran=True)
                directory.write_state(name, CellState(state, failures, summary.stopped_reason,
                                                      int(result.exit_code), time.time()))
            self.observer.cell_ended(outcome)
            return outcome
        finally:
            lock.release()

    @contextlib.contextmanager
    def _signals_to(self, tasks: list[asyncio.Task[CellOutcome]]):
        if not self.handle_signals:
            yield
            return
        loop = asyncio.get_running_loop()
        echoes = SignalEchoes()

        def received(sig: signal.Signals) -> None:
            if echoes.is_echo(sig):  # one Ctrl-C forwarded twice (uv run)
                return
            self._signals += 1
            if self._signals == 1:
                for task in tasks:
                    task.cancel()
            if self.on_signal is not None:
                self.on_signal(sig.name, self._signals)

        installed = []
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, received, sig)
                installed.append(sig)
        try:
            yield
        finally:
            if not self._signals:
                for sig in installed:
                    with contextlib.suppress(Exception):
                        loop.remove_signal_handler(sig)


class _Incompatible(AgentCompassError):
    """A matrix cell pairs a benchmark with a harness it cannot run with: skipped with a note."""


def _summary_of(directory: SuiteDirectory, name: str) -> RunSummary | None:
    from agentcompass.results.run_dir import RunDirectory

    try:
        return RunDirectory.open_existing(directory.cell_dir(name)).read_summary()
    except AgentCompassError:
        return None


def _spent(outcomes: dict[str, CellOutcome]) -> float:
    """What the cells this invocation does not run spent (a resume's shared budget starts there; the cells it
    resumes add their own spending as they start)."""
    total = 0.0
    for outcome in outcomes.values():
        if outcome.summary is not None:
            for usage in outcome.summary.usage.values():
                total += getattr(usage, "cost_usd", None) or 0.0
    return total


