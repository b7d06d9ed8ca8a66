"""The attempts running in this process, watched and stoppable: the stall watchdog and ``agentcompass ctl``'s hands.

The seam is one optional field, :attr:`agentcompass.execution.InProcessContext.supervisor`. A context given a
:class:`Supervisor` runs each attempt as a child task the supervisor knows (:meth:`Supervisor.run`): its phase, when
it last showed a sign of life (a phase change, a model call, output of its environment:
:mod:`agentcompass.runtime.liveness`) and what that was. :meth:`Supervisor.stop` ends one attempt early — its
environments closed as on any cancellation — and turns it into an ordinary outcome the runner records:

* ``stalled`` (the watchdog): ``RUN_ERROR``, an infrastructure failure naming the phase and the last sign of life,
  retried under ``--retries``;
* ``requeue`` (``ctl pause --now``, ``ctl requeue``): ``CANCELLED``, retried (the caller allows the extra attempt);
* ``cancel`` (``ctl cancel``): ``CANCELLED``, final.

The watchdog (:meth:`Supervisor.watch`) stops an attempt that showed no sign of life for its phase's stall timeout
(``--stall-timeout``; :data:`STALL_DEFAULTS` without it), unless a model call of it is still open (a slow model is
bounded by ``--request-timeout``, not by the watchdog).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal

import attrs

from agentcompass.models.metering import TaskMeter
from agentcompass.runtime.executor import AttemptOutcome, AttemptSpec
from agentcompass.runtime.liveness import listening
from agentcompass.runtime.phases import PHASE_NAMES, Phase
from agentcompass.runtime.shortening import shorten
from agentcompass.runtime.types import RunRequest, RunResult, TaskStatus
from agentcompass.serialization import unstructure

#: Seconds an attempt may show no sign of life in each phase before the watchdog stops it (``--stall-timeout S``
#: sets every phase to S). ``prepare`` covers starting the environment (an image build can be quiet for long).
STALL_DEFAULTS: Mapping[str, float] = {"prepare": 1800.0, "run": 900.0, "collect": 600.0, "evaluate": 1800.0}

StopKind = Literal["stalled", "requeue", "cancel"]
Key = tuple[str, int, int]


def stall_timeouts(req: RunRequest) -> dict[str, float]:
    """The stall timeout of each phase for ``req``: ``--stall-timeout`` for all of them, else the defaults."""
    given = req.schedule.stall_timeout
    return {phase: given for phase in STALL_DEFAULTS} if given is not None else dict(STALL_DEFAULTS)


@attrs.define
class LiveAttempt:
    """One attempt running under a supervisor."""

    spec: AttemptSpec
    phase: str = "PENDING"
    started: float = attrs.field(factory=time.monotonic)
    last_sign: float = attrs.field(factory=time.monotonic)
    last_what: str = "started"
    task: asyncio.Task[AttemptOutcome] | None = None
    stop_kind: StopKind | None = None
    stop_reason: str = ""

    def saw(self, what: str) -> None:
        self.last_sign, self.last_what = time.monotonic(), what

    def view(self) -> dict[str, Any]:
        """What ``ctl status`` shows of it."""
        now = time.monotonic()
        return {"task_id": self.spec.task.task_id, "trial": self.spec.trial, "attempt": self.spec.attempt,
                "phase": self.phase, "running_s": round(now - self.started, 1),
                "quiet_s": round(now - self.last_sign, 1), "last": self.last_what}


@attrs.define
class Supervisor:
    """The attempts of one run that run in this process. Make it on the run's event loop."""

    #: The stall timeout by phase name (``prepare``, ``run``, ``collect``, ``evaluate``); a phase not in it is not
    #: watched.
    stall_limits: Mapping[str, float]
    #: The meters of attempts in flight (the context's ``live_meters``): a stopped attempt's calls come from it.
    meters: dict[Key, TaskMeter]
    #: Told of each attempt the watchdog stopped: ``(spec, reason)``.
    on_stalled: Callable[[AttemptSpec, str], None] = lambda spec, reason: None
    live: dict[Key, LiveAttempt] = attrs.field(factory=dict)
    #: Attempts the watchdog stopped so far.
    stalled: int = 0

    # -- the attempts ---------------------------------------------------------------------------------

    async def run(self, spec: AttemptSpec, attempt: Callable[[], Awaitable[AttemptOutcome]]) -> AttemptOutcome:
        """Run ``attempt()`` (the lifecycle of ``spec``) as a child task this supervisor may stop."""
        live = self.live[spec.key] = LiveAttempt(spec)

        async def body() -> AttemptOutcome:
            return await attempt()

        with listening(live.saw):  # the child task (and what it starts) inherits the listener
            live.task = asyncio.create_task(body())
        try:
            try:
                return await live.task
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if live.stop_kind is None or (current is not None and current.cancelling()):
                    raise  # the run was interrupted, not this attempt stopped
                return self._stopped(live)
        finally:
            self.live.pop(spec.key, None)

    def stop(self, key: Key, kind: StopKind, reason: str) -> bool:
        """End the attempt ``key`` early as ``kind`` says; ``False`` when it is not running (any more)."""
        live = self.live.get(key)
        if live is None or live.task is None or live.task.done() or live.stop_kind is not None:
            return False
        live.stop_kind, live.stop_reason = kind, reason
        live.task.cancel()
        return True

    def on_transition(self, spec: AttemptSpec, previous: object, new: object) -> None:
        live = self.live.get(spec.key)
        if live is not None and isinstance(new, Phase) and new is not Phase.FINISHED:  # a stop keeps its phase
            live.phase = new.value
            live.saw(f"entered the {PHASE_NAMES.get(new, new.value.lower())} phase")

    def on_model_call(self, spec: AttemptSpec, record: Any) -> None:
        live = self.live.get(spec.key)
        if live is not None:
            live.saw(f"a model call ended ({record.role}: {record.model})")

    def _stopped(self, live: LiveAttempt) -> AttemptOutcome:
        spec = live.spec
        meter = self.meters.pop(spec.key, None)
        usage: dict[str, Any] = {}
        trajectory: tuple[dict[str, Any], ...] = ()
        if meter is not None:
            meter.cut_open_calls(live.stop_reason)
            if meter.calls:
                usage["models"] = meter.totals()
                trajectory = tuple(unstructure(c) for c in meter.calls)
        status = TaskStatus.RUN_ERROR if live.stop_kind == "stalled" else TaskStatus.CANCELLED
        phase = PHASE_NAMES.get(Phase(live.phase)) if live.phase in Phase.__members__ else None
        result = RunResult(task_id=spec.task.task_id, category=spec.task.category, status=status,
                           error=live.stop_reason, error_phase=phase or "prepare", attempt=spec.attempt,
                           trial=spec.trial, seed=spec.seed, usage=usage)
        return AttemptOutcome(result, live.stop_kind != "cancel", trajectory, None)

    def observe(self, context: Any) -> None:
        """Watch the attempts ``context`` (an :class:`~agentcompass.execution.InProcessContext`) runs: it runs them
        through this supervisor, and its phase changes and model calls reach it before its other observers."""
        transition, model_call = context.on_transition, context.on_model_call

        def on_transition(spec: AttemptSpec, previous: Any, new: Any) -> None:
            self.on_transition(spec, previous, new)
            transition(spec, previous, new)

        def on_model_call(spec: AttemptSpec, record: Any) -> None:
            self.on_model_call(spec, record)
            if model_call is not None:
                model_call(spec, record)

        context.on_transition, context.on_model_call, context.supervisor = on_transition, on_model_call, self

    # -- the watchdog -----------------------------------------------------------------------------------

    async def watch(self) -> None:
        """Stop every attempt that stalls, until cancelled."""
        watched = [s for s in self.stall_limits.values() if s > 0]
        if not watched:
            return
        tick = max(0.05, min(0.5, min(watched) / 8))
        while True:
            await asyncio.sleep(tick)
            self.check_stalls(time.monotonic())

    def check_stalls(self, now: float) -> None:
        for key, live in list(self.live.items()):
            phase = PHASE_NAMES.get(Phase(live.phase)) if live.phase in Phase.__members__ else None
            limit = self.stall_limits.get(phase or "")
            if not limit or live.stop_kind is not None or now - live.last_sign < limit:
                continue
            meter = self.meters.get(key)
            if meter is not None and meter.open_calls:
                continue  # a model call is under way: --request-timeout bounds it
            reason = (f"stalled: no sign of life for {limit:g}s in the {phase} phase (no model call, no output, no "
                      f"phase change); the last: {shorten(live.last_what, 200)}, "
                      f"{now - live.last_sign:.0f}s ago")
            if self.stop(key, "stalled", reason):
                self.stalled += 1
                self.on_stalled(live.spec, reason)
