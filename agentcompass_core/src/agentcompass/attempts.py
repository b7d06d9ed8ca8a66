"""The runner's side of the executor seam: hands out attempts, decides on retries, records every outcome.

An executor calls :meth:`AttemptQueue.next` for work and :meth:`AttemptQueue.report` with each outcome. The
queue writes the outcome at once (``results.jsonl`` for a final result, ``attempts.jsonl`` for a retried
one, ``trajectories.jsonl`` for its model calls), emits the task events, and queues a retry in front of new
tasks when the failure was the infrastructure's and ``--retries`` allows.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs

from agentcompass.models.metering import TaskMeter
from agentcompass.plugins import PluginHost
from agentcompass.results.run_dir import RunDirectory
from agentcompass.runtime.executor import AttemptOutcome, AttemptSpec, Rescore
from agentcompass.runtime.records import RecordedResult, TaskEvent
from agentcompass.runtime.seeds import trial_seed
from agentcompass.runtime.types import EnvironmentSpec, RunRequest, RunResult, TaskSpec, TaskStatus
from agentcompass.serialization import unstructure


@attrs.define
class AttemptQueue:
    """The attempts of one run. Safe for any number of concurrent consumers on the run's event loop."""

    request: RunRequest
    store: RunDirectory
    host: PluginHost
    log: Any
    timeouts: Mapping[str, float | None]
    specs: Mapping[str, EnvironmentSpec]
    gateway_env: Mapping[str, str]
    #: Final results so far (a resumed run's included), by (task id, trial).
    final: dict[tuple[str, int], RunResult]
    stop_reason: Callable[[], str | None] = lambda: None
    #: Stops the run's scheduling (and its model calls) with a reason: an outage past ``--retries``.
    stop: Callable[[str], None] = lambda reason: None
    #: The phase timeouts of the tasks that declare their own (``BaseBenchmark.task_timeouts``), by task id;
    #: every other task gets ``timeouts``.
    task_timeouts: Mapping[str, Mapping[str, float | None]] = attrs.field(factory=dict)
    _pending: deque[AttemptSpec] = attrs.field(factory=deque)
    _in_flight: dict[tuple[str, int, int], AttemptSpec] = attrs.field(factory=dict)
    _last_allowed: dict[tuple[str, int], int] = attrs.field(factory=dict)
    _changed: asyncio.Event = attrs.field(factory=asyncio.Event)
    #: The highest attempt number each (task, trial) was given so far.
    _highest: dict[tuple[str, int], int] = attrs.field(factory=dict)

    def add(self, work: Iterable[tuple[TaskSpec, int]], attempts_used: Mapping[tuple[str, int], int],
            rescores: Mapping[tuple[str, int], Rescore] | None = None) -> None:
        """Queue the next attempt of each (task, trial), after the attempts a previous run already used."""
        for task, trial in work:
            key = (task.task_id, trial)
            attempt = attempts_used.get(key, 0) + 1
            self._last_allowed[key] = attempt + self.request.schedule.retries
            self._pending.append(self._spec(task, trial, attempt, (rescores or {}).get(key)))

    def _spec(self, task: TaskSpec, trial: int, attempt: int, rescore: Rescore | None = None) -> AttemptSpec:
        key = (task.task_id, trial)
        self._highest[key] = max(self._highest.get(key, 0), attempt)
        return AttemptSpec(
            run_id=self.request.run_id, task=task, attempt=attempt, environment=self.specs[task.task_id],
            timeouts=self.task_timeouts.get(task.task_id, self.timeouts), request=self.request,
            gateway_env=self.gateway_env, trial=trial,
            seed=trial_seed(self.request.tasks.seed or 0, task.task_id, trial), rescore=rescore,
        )

    def in_flight(self) -> int:
        """Attempts handed out and not reported yet."""
        return len(self._in_flight)

    # -- steering (agentcompass ctl: :mod:`agentcompass.control.steering`) -----------------------------

    def waiting(self) -> list[AttemptSpec]:
        """Attempts queued and not handed out yet, in the order they go."""
        return list(self._pending)

    def running(self) -> list[AttemptSpec]:
        """Attempts handed out and not reported yet."""
        return list(self._in_flight.values())

    def give_back(self, spec: AttemptSpec) -> None:
        """An attempt :meth:`next` handed out that did not start: first in line again."""
        if self._in_flight.pop(spec.key, None) is not None:
            self._pending.appendleft(spec)
        self._changed.set()

    def allow_one_more(self, task_id: str, trial: int) -> None:
        """One attempt more for (task, trial) than ``--retries`` allows: one cut short on purpose is retried."""
        key = (task_id, trial)
        self._last_allowed[key] = self._last_allowed.get(key, 0) + 1

    def withdraw(self, task_id: str, error: str, trial: int | None = None) -> list[AttemptSpec]:
        """Take the waiting attempts of a task (one trial of it) out of the queue; each is recorded as final
        ``CANCELLED`` with ``error``."""
        taken = [s for s in self._pending if s.task.task_id == task_id and trial in (None, s.trial)]
        for spec in taken:
            self._pending.remove(spec)
            result = RunResult(task_id=task_id, category=spec.task.category, status=TaskStatus.CANCELLED,
                               attempt=spec.attempt, trial=spec.trial, seed=spec.seed, error=error)
            self.store.append_result(result)
            self.final[(task_id, spec.trial)] = result
            self.log.info("task.finished", task_id=task_id, trial=spec.trial, attempt=spec.attempt,
                          status=result.status.value, error=error, metrics={})
            self._event("task.finished", result)
        self._changed.set()
        return taken

    def again(self, task: TaskSpec, trial: int) -> AttemptSpec:
        """Run a finished (task, trial) again: its final result becomes an earlier attempt (kept in
        ``attempts.jsonl``; its line in ``results.jsonl`` stays, and the new result's line follows it), and a new
        attempt numbered after every earlier one is queued, with ``--retries`` of its own."""
        key = (task.task_id, trial)
        earlier = self.final.pop(key, None)
        if earlier is not None:
            self.store.append_attempt(earlier)
        highest = max(self._highest.get(key, 0), earlier.attempt if earlier is not None else 0)
        self.add([(task, trial)], {key: highest})
        self._changed.set()
        return self._pending[-1]

    # -- the AttemptSource protocol ------------------------------------------------------------------

    async def next(self) -> AttemptSpec | None:
        while True:
            if self._pending and not self.stop_reason():
                spec = self._pending.popleft()
                self._in_flight[spec.key] = spec
                return spec
            if not self._in_flight or self.stop_reason():
                return None  # nothing left, or a budget / fatal model error stopped the run (unrun: resumable)
            self._changed.clear()
            await self._changed.wait()  # an attempt in flight may still be retried

    def report(self, outcome: AttemptOutcome) -> None:
        result = outcome.result
        spec = self._in_flight.pop((result.task_id, result.trial, result.attempt), None)
        if spec is None:
            raise RuntimeError(f"outcome of an attempt that is not in flight: {result.task_id!r} trial "
                               f"{result.trial} attempt {result.attempt}")
        try:
            self._record(spec, outcome)
        finally:
            self._changed.set()

    # -- recording -----------------------------------------------------------------------------------

    def _record(self, spec: AttemptSpec, outcome: AttemptOutcome) -> None:
        result, task_id, trial, attempt = outcome.result, spec.task.task_id, spec.trial, spec.attempt
        calls: tuple[Mapping[str, Any], ...] = ()
        if outcome.trajectory:
            calls = self.store.append_trajectory(task_id, trial, attempt, outcome.trajectory)
        if outcome.unfinished is not None:
            self._record_unfinished(spec, outcome)
            return
        if outcome.retryable and attempt < self._last_allowed[(task_id, trial)]:
            self.store.append_attempt(result)
            self.log.warning("task.retry", task_id=task_id, trial=trial, attempt=attempt,
                             status=result.status.value, error=result.error)
            self._event("task.retry", result)
            self._pending.appendleft(self._spec(spec.task, trial, attempt + 1, spec.rescore))
            return
        prepared = outcome.prepared
        line = self.store.append_result(result, {"metadata": dict(prepared.metadata)} if prepared is not None else None)
        self.final[(task_id, trial)] = result
        if self.host.pm.hook.agentcompass_result_recorded.get_hookimpls():  # built only for an observer of it
            self.host.notify("agentcompass_result_recorded", record=RecordedResult(
                run_id=self.request.run_id, run_dir=str(self.store.path), task_id=task_id, trial=trial,
                attempt=attempt, result=line, calls=calls))
        self.log.info("task.finished", task_id=task_id, trial=trial, attempt=attempt, status=result.status.value,
                      error=result.error, metrics=dict(result.metrics))
        self._event("task.finished", result)

    def _record_unfinished(self, spec: AttemptSpec, outcome: AttemptOutcome) -> None:
        """An attempt cut short by a failure outside the task: recorded as an attempt, retried when that may
        help and ``--retries`` allows, else its (task, trial) stays unfinished and the run stops scheduling."""
        result, task_id, trial, attempt = outcome.result, spec.task.task_id, spec.trial, spec.attempt
        self.store.append_attempt(result)
        self._event("task.retry", result)
        if outcome.retryable and attempt < self._last_allowed[(task_id, trial)] and not self.stop_reason():
            self.log.warning("task.retry", task_id=task_id, trial=trial, attempt=attempt,
                             status=result.status.value, error=result.error)
            self._pending.appendleft(self._spec(spec.task, trial, attempt + 1, spec.rescore))
            return
        self.log.warning("task.unfinished", task_id=task_id, trial=trial, attempt=attempt, reason=outcome.unfinished)
        if not self.stop_reason():
            self.stop(outcome.unfinished or "")

    def _event(self, kind: Any, result: RunResult) -> None:
        error = result.error
        if error and self.store.redactor.active:  # observers see what is written: masked
            error = self.store.redactor.text(error)
        self.host.notify("agentcompass_task_event", event=TaskEvent(
            event=kind, run_id=self.request.run_id, task_id=result.task_id, attempt=result.attempt,
            trial=result.trial, status=result.status.value, error=error, metrics=dict(result.metrics),
        ))

    def record_cancelled(self, meters: Mapping[tuple[str, int, int], TaskMeter] | None = None) -> None:
        """Record every attempt still in flight as cancelled (the run was interrupted), with the model calls
        its meter (in ``meters``, by attempt key) holds: in ``trajectories.jsonl`` and in its usage, calls still
        open cut with the tokens counted so far."""
        for key, spec in self._in_flight.items():
            meter = (meters or {}).get(key)
            usage: dict[str, Any] = {}
            if meter is not None:
                meter.cut_open_calls("cancelled: the run was interrupted")
                if meter.calls:
                    self.store.append_trajectory(spec.task.task_id, spec.trial, spec.attempt,
                                                 tuple(unstructure(c) for c in meter.calls))
                    usage["models"] = meter.totals()
            self.store.append_attempt(RunResult(
                task_id=spec.task.task_id, category=spec.task.category, status=TaskStatus.CANCELLED,
                attempt=spec.attempt, trial=spec.trial, seed=spec.seed, error="cancelled: the run was interrupted",
                usage=usage,
            ))
        self._in_flight.clear()
