"""The engine's side of the executor seam: the context executors run attempts through.

:class:`InProcessContext` implements :class:`agentcompass.runtime.executor.ExecutionContext`: it runs an attempt
through the lifecycle in this process, or grants it its models for a worker elsewhere (:class:`HeadGrant`),
keeping the meter, the artifacts and the phase changes on this side.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import attrs

from agentcompass.lifecycle import AttemptContext, TaskAttempt
from agentcompass.models.metering import TaskMeter
from agentcompass.runtime.executor import AttemptOutcome, AttemptSpec
from agentcompass.runtime.logs import get_logger
from agentcompass.runtime.phases import Phase
from agentcompass.runtime.remote_attempts import RemoteAttempt, RemoteOutcome, pack_dir, scrub_request, unpack_dir
from agentcompass.runtime.types import RunRequest, RunResult, TaskStatus
from agentcompass.serialization import unstructure
from agentcompass.supervision import Supervisor


@attrs.define
class InProcessContext(AttemptContext):
    """The live side of a run, for executors: attempts run here through the lifecycle, or are granted their
    models for a worker elsewhere."""

    #: Where the run's model gateway listens (``--gateway-host``) and its port, for remote workers.
    gateway_host: str = "127.0.0.1"
    gateway_port: int = 0
    #: The run's provider secrets: masked out of whatever a remote executor sends elsewhere.
    secrets: frozenset[str] = frozenset()
    #: Slots shared with other runs of this process (:class:`agentcompass.capacity.SharedCapacity`): an attempt
    #: runs only while it holds one. ``None``: the run's own concurrency is the only bound.
    attempt_slots: asyncio.Semaphore | None = None
    #: Watches the attempts run here and may stop them (:mod:`agentcompass.supervision`: the stall watchdog,
    #: ``agentcompass ctl``); ``None``: attempts run unwatched.
    supervisor: Supervisor | None = None

    async def run_attempt(self, spec: AttemptSpec) -> AttemptOutcome:
        if self.attempt_slots is None:
            return await self._run_attempt(spec)
        async with self.attempt_slots:
            return await self._run_attempt(spec)

    async def _run_attempt(self, spec: AttemptSpec) -> AttemptOutcome:
        if self.supervisor is None:
            return await TaskAttempt(self, spec).execute()
        return await self.supervisor.run(spec, TaskAttempt(self, spec).execute)

    def grant_remote(self, spec: AttemptSpec, gateway_url: str) -> HeadGrant:
        meter = self.models.open_meter(spec, self.on_model_call)  # the worker's calls are metered here
        granted = self.models.grant(meter)
        self.live_meters[spec.key] = meter
        remote_endpoints = {role: replace(e, base_url=gateway_url) for role, e in granted.endpoints.items()}
        source = None
        if spec.rescore is not None and self.source_artifacts is not None:
            recorded = spec.rescore.result
            source = pack_dir(self.source_artifacts(spec.task.task_id, recorded.trial, recorded.attempt))
        sent = replace(spec, request=_scrubbed(spec.request, self.secrets), gateway_env={})
        return HeadGrant(self, spec, RemoteAttempt(sent, remote_endpoints, source), meter, granted.revoke)


@attrs.define
class HeadGrant:
    """One attempt granted its models for a worker elsewhere (a :class:`~agentcompass.runtime.remote_attempts.
    RemoteGrant`). Call :meth:`finish` or :meth:`fail` once."""

    context: AttemptContext
    spec: AttemptSpec
    attempt: RemoteAttempt
    meter: TaskMeter
    _revoke: Callable[[], None]
    #: Phase changes already passed to the observers as they happened (:meth:`phase`).
    _told: int = 0
    #: Warnings already written to the run's log as they happened (:meth:`log`).
    _logged: int = 0

    def phase(self, previous: str, new: str) -> None:
        """A phase change the worker reported while the attempt runs: the observers hear it now, and
        :meth:`finish` does not replay it."""
        self._told += 1
        self.context.on_transition(self.spec, Phase(previous), Phase(new))

    def log(self, level: str, event: str, fields: dict[str, Any]) -> None:
        """A warning the worker's attempt logged: written to the run's log now (the attempt named, unless the
        event names it), and :meth:`finish` does not write it again."""
        self._logged += 1
        spec = self.spec
        where = {"task_id": spec.task.task_id, "trial": spec.trial, "attempt": spec.attempt}
        log = get_logger(**{k: v for k, v in where.items() if k not in fields})
        (log.error if level == "error" else log.warning)(event, **fields)

    def finish(self, remote: RemoteOutcome) -> AttemptOutcome:
        self._end("the attempt ended before the call did")
        spec, outcome = self.spec, remote.outcome
        unpack_dir(remote.artifacts, self.context.artifacts_root(spec.task.task_id, spec.trial, spec.attempt))
        # Those not told live, in the order they came: each log after the phase changes before it.
        logs, told = list(remote.logs[self._logged:]), self._told
        for i, (previous, new) in enumerate(remote.transitions):
            while logs and logs[0][0] <= i:
                self.log(*logs.pop(0)[1])
            if i >= told:
                self.context.on_transition(spec, Phase(previous), Phase(new))
        for _, entry in logs:
            self.log(*entry)
        meter = self.meter
        result = outcome.result
        if meter.limit_reached and result.status is not TaskStatus.LIMIT_REACHED:
            result = replace(result, status=TaskStatus.LIMIT_REACHED, error=meter.limit_reached,
                             error_phase="run", metrics={})
        unfinished, worth_retrying = meter.unfinished()
        if unfinished and result.status is TaskStatus.RUN_ERROR:
            result = replace(result, error=unfinished)
        retryable = worth_retrying if unfinished else outcome.retryable and not meter.limit_reached
        return AttemptOutcome(self._metered(result), retryable, self._trajectory(), outcome.prepared, unfinished)

    def fail(self, message: str, *, retryable: bool = True) -> AttemptOutcome:
        self._end(message)
        spec = self.spec
        result = RunResult(task_id=spec.task.task_id, category=spec.task.category, status=TaskStatus.RUN_ERROR,
                           error=message, error_phase="run")
        return AttemptOutcome(self._metered(result), retryable, self._trajectory(), None)

    def revoke(self) -> None:
        """The attempt was cancelled: no outcome comes; the runner records its calls from ``live_meters``."""
        self._revoke()

    def _end(self, why: str) -> None:
        """Revoke the token and cut the calls still open (``why``): the outcome carries every call."""
        self._revoke()
        self.meter.cut_open_calls(why)
        self.context.live_meters.pop(self.spec.key, None)

    def _metered(self, result: RunResult) -> RunResult:
        usage = {k: v for k, v in result.usage.items() if k != "models"}
        if self.meter.calls:
            usage["models"] = self.meter.totals()
        spec = self.spec
        return replace(result, usage=usage, attempt=spec.attempt, trial=spec.trial, seed=spec.seed)

    def _trajectory(self) -> tuple[dict[str, Any], ...]:
        return tuple(unstructure(c) for c in self.meter.calls)


_last_scrubbed: list[tuple[RunRequest, frozenset[str], RunRequest]] = []


def _scrubbed(req: RunRequest, secrets: frozenset[str]) -> RunRequest:
    """:func:`scrub_request`, once per request (every attempt of a run carries the same one)."""
    for original, given, scrubbed in _last_scrubbed:
        if original is req and given == secrets:
            return scrubbed
    scrubbed = scrub_request(req, secrets)
    _last_scrubbed[:] = [(req, secrets, scrubbed)]
    return scrubbed
