"""What ``agentcompass ctl`` does to a live run: its actions, and the attempt source that obeys them.

:class:`SteeredAttempts` stands between the run's :class:`~agentcompass.attempts.AttemptQueue` and the executor
(the same seam :class:`agentcompass.capacity.HeldAttempts` uses): it hands out attempts only while the run is not
paused, not draining and below the concurrency ``ctl set concurrency=N`` chose. :class:`Steering` carries out each
request (:meth:`Steering.handle`), through the queue, the :class:`~agentcompass.supervision.Supervisor` (which stops
running attempts) and the run's budget.

Actions (``{"action": ...}`` and their fields):

* ``status`` — what runs (phase, seconds since its last sign of life), what waits, the figures.
* ``pause`` (``now``: bool) — no attempt starts; with ``now`` the running ones are cancelled and queued again.
* ``resume`` — attempts start again.
* ``cancel`` (``task``, ``trial``) — the task's waiting and running attempts end, final ``CANCELLED``.
* ``requeue`` (``task``, ``trial``) — the task runs again: a running attempt is cut and retried, a finished one
  keeps its record as an earlier attempt and a new attempt is queued.
* ``set`` (``name``, ``value``) — ``concurrency`` (attempts at once), ``max-cost`` (USD), ``timeout`` (seconds of
  the run phase of attempts that start from now on).
* ``drain`` — nothing more starts; the run ends, interrupted, once the running attempts finish (``agentcompass run
  --resume`` runs the rest).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from agentcompass.attempts import AttemptQueue
from agentcompass.errors import UsageError
from agentcompass.models.budget import RunBudget
from agentcompass.runtime.executor import AttemptOutcome, AttemptSource, AttemptSpec
from agentcompass.runtime.types import RunResult, TaskSpec
from agentcompass.runtime.wording import counted
from agentcompass.supervision import Supervisor

#: The most workers a steered run keeps ready for ``set concurrency=N`` (N may not exceed it).
MOST_WORKERS = 256
#: Waiting attempts ``status`` lists (it counts them all).
STATUS_WAITING = 50
SETTINGS = ("concurrency", "max-cost", "timeout")


@attrs.define
class SteeredAttempts:
    """An :class:`~agentcompass.runtime.executor.AttemptSource` that obeys pause, drain and a live concurrency."""

    source: AttemptSource
    queue: AttemptQueue
    limit: int
    #: Workers an executor should keep for this source (``LocalExecutor`` reads it): the most ``limit`` may become.
    most_workers: int
    paused: bool = False
    draining: bool = False
    handed_out: int = 0
    _exhausted: bool = False
    _changed: asyncio.Event = attrs.field(factory=asyncio.Event)

    def changed(self) -> None:
        self._changed.set()

    def _nothing_left(self) -> bool:
        return not self.queue.waiting() and not self.queue.running()

    async def next(self) -> AttemptSpec | None:
        while True:
            if self.draining or self._exhausted:
                return None
            if self.paused or self.handed_out >= self.limit:
                if self.paused and self._nothing_left():
                    return None  # paused with nothing left to run: the run is done
                self._changed.clear()
                await self._changed.wait()
                continue
            self.handed_out += 1
            try:
                spec = await self.source.next()
            except BaseException:
                self.handed_out -= 1
                raise
            if spec is None:
                self.handed_out -= 1
                self._exhausted = True
                self.changed()
                return None
            if self.paused or self.draining:  # changed while we waited for it
                self.queue.give_back(spec)
                self.handed_out -= 1
                continue
            return spec

    def report(self, outcome: AttemptOutcome) -> None:
        self.handed_out -= 1
        try:
            self.source.report(outcome)
        finally:
            self.changed()


@attrs.define
class Steering:
    """Carries out ``agentcompass ctl`` requests on one live run (on its event loop)."""

    run_id: str
    queue: AttemptQueue
    supervisor: Supervisor
    budget: RunBudget
    attempts: SteeredAttempts
    #: Every task of the run by id, and the trials of the run.
    tasks: Mapping[str, TaskSpec]
    trials: int
    #: The run's (task, trial) count, for ``status``.
    n_work: int
    #: Logs and announces an action: ``(action, uid, fields)``.
    on_action: Callable[[str, int, dict[str, Any]], None] = lambda action, uid, fields: None

    @classmethod
    def around(cls, source: AttemptSource, queue: AttemptQueue, concurrency: int, **fields: Any) -> Steering:
        most = max(concurrency, min(MOST_WORKERS, fields["n_work"]))
        attempts = SteeredAttempts(source, queue, limit=concurrency, most_workers=most)
        return cls(queue=queue, attempts=attempts, **fields)

    @property
    def drained(self) -> bool:
        return self.attempts.draining

    def handle(self, request: dict[str, Any], uid: int) -> dict[str, Any]:
        action = request["action"]
        act = getattr(self, f"_act_{action}", None)
        if act is None:
            raise UsageError(f"unknown action {action!r}; actions: status, pause, resume, cancel, requeue, set, drain")
        message = act(request)
        if action != "status":
            self.on_action(action, uid, {k: v for k, v in request.items() if k != "action"} | {"result": message})
        return {"ok": True, "message": message, "status": self.status()}

    # -- the actions ------------------------------------------------------------------------------------

    def _act_status(self, request: dict[str, Any]) -> str:
        return "status"

    def _act_pause(self, request: dict[str, Any]) -> str:
        self.attempts.paused = True
        self.attempts.changed()
        if not request.get("now"):
            return f"paused: no attempt starts; {len(self.supervisor.live)} running go on"
        cut = [spec for spec in self.queue.running() if self._cut(spec, "requeue", "requeued: the run was paused "
                                                                             "with ctl pause --now")]
        return f"paused: no attempt starts; {len(cut)} running cancelled and queued again"

    def _act_resume(self, request: dict[str, Any]) -> str:
        was = self.attempts.paused
        self.attempts.paused = False
        self.attempts.changed()
        return "resumed" if was else "not paused: nothing to resume"

    def _act_drain(self, request: dict[str, Any]) -> str:
        self.attempts.draining = True
        self.attempts.changed()
        running, waiting = len(self.queue.running()), len(self.queue.waiting())
        return (f"draining: nothing more starts; the run ends, interrupted, once {counted(running, 'running attempt')} "
                f"finish; agentcompass run --resume runs the {counted(waiting, 'waiting attempt')}"
                if waiting else f"draining: nothing more starts; the run ends, interrupted, once "
                f"{counted(running, 'running attempt')} finish")

    def _act_cancel(self, request: dict[str, Any]) -> str:
        task, trial = self._task(request)
        error = "cancelled with ctl cancel"
        withdrawn = self.queue.withdraw(task.task_id, error, trial)
        stopped = [s for s in self.queue.running()
                   if s.task.task_id == task.task_id and trial in (None, s.trial) and self._cut(s, "cancel", error)]
        if not withdrawn and not stopped:
            raise UsageError(f"task {task.task_id!r}{_of(trial)} neither waits nor runs: nothing to cancel")
        self.attempts.changed()
        return f"cancelled {task.task_id}{_of(trial)}: {len(withdrawn)} waiting, {len(stopped)} running"

    def _act_requeue(self, request: dict[str, Any]) -> str:
        task, trial = self._task(request)
        trials = [trial] if trial is not None else list(range(1, self.trials + 1))
        done: list[str] = []
        for t in trials:
            key = (task.task_id, t)
            running = [s for s in self.queue.running() if (s.task.task_id, s.trial) == key]
            if running:
                cut = [spec for spec in running if self._cut(spec, "requeue", "requeued with ctl requeue")]
                done.append(f"trial {t}: running attempt cut, queued again" if cut else
                            f"trial {t}: running where ctl cannot cut it (another worker, or just ending)")
            elif key in self.queue.final:
                spec = self.queue.again(task, t)
                done.append(f"trial {t}: queued as attempt {spec.attempt}")
            elif any((s.task.task_id, s.trial) == key for s in self.queue.waiting()):
                done.append(f"trial {t}: already waiting")
            else:
                done.append(f"trial {t}: not part of this run's work")
        self.attempts.changed()
        return f"requeued {task.task_id}: " + "; ".join(done)

    def _act_set(self, request: dict[str, Any]) -> str:
        name, value = str(request.get("name", "")), request.get("value")
        if name not in SETTINGS:
            raise UsageError(f"cannot set {name!r}; settings: {', '.join(SETTINGS)}")
        try:
            number = float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise UsageError(f"set {name}= takes a number, got {value!r}") from None
        if not (math.isfinite(number) and number > 0):
            raise UsageError(f"set {name}= takes a positive number, got {value!r}")
        if name == "concurrency":
            if number != int(number) or number > self.attempts.most_workers:
                raise UsageError(f"set concurrency= takes a whole number from 1 to {self.attempts.most_workers}, "
                                 f"got {value!r}")
            before, self.attempts.limit = self.attempts.limit, int(number)
            self.attempts.changed()
            return f"concurrency {before} -> {int(number)}"
        if name == "max-cost":
            before_cost = self.budget.max_cost
            self.budget.max_cost = number
            if self.budget.stopped_by_limit and self.budget.spent_usd < number and self.budget.pool is None:
                self.budget.stop_reason, self.budget.stopped_by_limit = None, False  # a raised budget goes on
            self.budget.add_cost(0.0)  # a lowered one below what was spent stops the run now
            self.attempts.changed()
            return f"max-cost {before_cost if before_cost is not None else 'none'} -> {number:g} USD"
        self.queue.timeouts = {**self.queue.timeouts, "run": number}
        self.queue.task_timeouts = {t: {**p, "run": number} for t, p in self.queue.task_timeouts.items()}
        return f"timeout of the run phase -> {number:g}s for attempts that start from now on"

    # -- helpers -----------------------------------------------------------------------------------------

    def _task(self, request: dict[str, Any]) -> tuple[TaskSpec, int | None]:
        task_id, trial = request.get("task"), request.get("trial")
        task = self.tasks.get(str(task_id))
        if task is None:
            known = sorted(self.tasks)
            shown = ", ".join(known[:10]) + (", ..." if len(known) > 10 else "")
            raise UsageError(f"no task {task_id!r} in this run; its tasks: {shown}")
        if trial is not None and not (isinstance(trial, int) and 1 <= trial <= self.trials):
            raise UsageError(f"--trial takes 1 to {self.trials} in this run, got {trial!r}")
        return task, trial

    def _cut(self, spec: AttemptSpec, kind: Any, reason: str) -> bool:
        """Stop a running attempt; a requeued one gets an attempt more than ``--retries`` allows."""
        stopped = self.supervisor.stop(spec.key, kind, reason)
        if stopped and kind == "requeue":
            self.queue.allow_one_more(spec.task.task_id, spec.trial)
        return stopped

    def status(self) -> dict[str, Any]:
        waiting = self.queue.waiting()
        final: dict[tuple[str, int], RunResult] = self.queue.final
        attempts = self.attempts
        return {
            "run_id": self.run_id,
            "state": "draining" if attempts.draining else "paused" if attempts.paused else "running",
            "concurrency": attempts.limit,
            "finished": len(final), "total": self.n_work,
            "running": [live.view() for live in self.supervisor.live.values()],
            "n_waiting": len(waiting),
            "waiting": [{"task_id": s.task.task_id, "trial": s.trial, "attempt": s.attempt}
                        for s in waiting[:STATUS_WAITING]],
            "stalled": self.supervisor.stalled,
            "cost_usd": round(self.budget.spent_usd, 6), "max_cost": self.budget.max_cost,
            "timeout": self.queue.timeouts.get("run"),
        }


def _of(trial: int | None) -> str:
    return f" trial {trial}" if trial is not None else ""
