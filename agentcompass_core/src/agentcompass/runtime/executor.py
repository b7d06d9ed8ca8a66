"""The executor seam: the runner decides *what* runs, an executor decides *where*.

The runner turns tasks into :class:`AttemptSpec`\\ s (plain, serialisable data), hands them out through an
:class:`AttemptSource`, and records each :class:`AttemptOutcome` the executor reports back: it keeps resume,
the retry decision, recording and signals. An executor takes attempts until the source is exhausted and runs
each through the ordinary lifecycle (:func:`run_attempt`), wherever it likes.

The default, ``local``, is :class:`LocalExecutor`: ``request.concurrency`` asyncio workers in this process.
Register others with the ``register_executors`` hook and select them with ``--executor NAME``.

An executor that runs attempts on other machines sets ``remote = True``: the runner then leaves the
environment provider to the workers, and each attempt crosses over as plain data through
:mod:`agentcompass.runtime.remote` (:meth:`ExecutionContext.grant_remote` on this side, ``AttemptWorker`` on
the other), its model calls metered here through the gateway.

A wrapping executor, e.g. one that counts attempts::

    class Counting(Executor):
        def __init__(self, **options):
            super().__init__(**options)
            self.inner, self.count = LocalExecutor(), 0

        async def execute(self, attempts, context):
            outer = self

            class Counted:
                async def next(self):
                    spec = await attempts.next()
                    outer.count += spec is not None
                    return spec

                def report(self, outcome):
                    attempts.report(outcome)

            await self.inner.execute(Counted(), context)
"""

from __future__ import annotations

import abc
import asyncio
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import attrs

from agentcompass.runtime.types import EnvironmentSpec, PreparedTask, RunRequest, RunResult, TaskSpec

if TYPE_CHECKING:
    from agentcompass.models.access import ModelAccess
    from agentcompass.runtime.benchmark import BaseBenchmark
    from agentcompass.runtime.environment import EnvironmentProvider, EnvironmentSession
    from agentcompass.runtime.harness import BaseHarness
    from agentcompass.runtime.remote import RemoteGrant


@dataclass(frozen=True)
class AttemptSpec:
    """One attempt of one task, as plain data: everything but the live plugin objects.

    :param run_id: the run.
    :param task: the task, as the benchmark yielded it.
    :param attempt: 1 for the first attempt, then 2, 3, ... for retries (and for re-runs after a resume).
    :param environment: the environment the attempt runs in.
    :param timeouts: seconds per phase (``environment``, ``prepare``, ``run``, ``collect``, ``evaluate``,
        ``close``); ``None`` means no limit.
    :param request: the run's request.
    :param gateway_env: how code inside the environment reaches the run's model gateway (variables added to
        every ``exec``; the per-attempt token is issued when the attempt starts).
    :param trial: which trial of the task (1..``request.trials``).
    :param seed: the (task, trial)'s seed (:func:`agentcompass.runtime.seeds.trial_seed`).
    :param rescore: for ``agentcompass evaluate``: the recorded final result and prepared task to score again;
        the attempt then runs only the evaluate phase.
    """

    run_id: str
    task: TaskSpec
    attempt: int
    environment: EnvironmentSpec
    timeouts: Mapping[str, float | None]
    request: RunRequest
    gateway_env: Mapping[str, str] = field(default_factory=dict)
    trial: int = 1
    seed: int = 0
    rescore: Rescore | None = None

    @property
    def key(self) -> tuple[str, int, int]:
        return (self.task.task_id, self.trial, self.attempt)


@dataclass(frozen=True)
class Rescore:
    """What ``agentcompass evaluate`` scores again: a recorded result and what ``prepare_task`` returned."""

    result: RunResult
    prepared: PreparedTask


@dataclass(frozen=True)
class AttemptOutcome:
    """How an attempt ended, as plain data.

    :param result: the attempt's result (its ``attempt`` field set).
    :param retryable: the failure was the infrastructure's (an environment that did not start, a timeout):
        the runner may run the task again.
    :param trajectory: the attempt's model calls, one JSON-ready record each.
    :param prepared: what ``prepare_task`` returned (recorded, so the result can be scored again later), or
        ``None`` when the attempt did not get that far.
    """

    result: RunResult
    retryable: bool = False
    trajectory: tuple[Mapping[str, Any], ...] = ()
    prepared: PreparedTask | None = None


class AttemptSource(Protocol):
    """Where an executor takes attempts from and reports outcomes to (the runner implements it)."""

    async def next(self) -> AttemptSpec | None:
        """The next attempt to run, waiting while retries may still come; ``None`` when there is no more."""
        ...

    def report(self, outcome: AttemptOutcome) -> None:
        """Hand back the outcome of an attempt ``next`` returned. Call it once per attempt, never for an
        attempt that was cancelled."""
        ...


@attrs.define
class ExecutionContext:
    """The live side of a run, for executors that run attempts in this process.

    :param request: the run's request.
    :param benchmark: the benchmark instance.
    :param harness: the harness instance, or ``None`` when the benchmark drives its own loop.
    :param provider: the environment provider.
    :param models: grants each attempt its model clients and gateway endpoints.
    :param artifacts_root: ``(task_id, trial, attempt) -> directory`` for ``plan.artifacts_dir``.
    :param environment_slots: bounds live environments (``--max-environments``), or ``None``.
    :param on_transition: called on every phase change ``(spec, previous, new)``.
    """

    request: RunRequest
    benchmark: BaseBenchmark
    harness: BaseHarness | None
    provider: EnvironmentProvider
    models: ModelAccess
    artifacts_root: Callable[[str, int, int], Path]
    environment_slots: asyncio.Semaphore | None = None
    on_transition: Callable[[AttemptSpec, Any, Any], None] = lambda spec, prev, new: None
    #: Where a re-scored attempt's recorded artifacts are: ``(task_id, trial, attempt) -> directory``.
    source_artifacts: Callable[[str, int, int], Path] | None = None
    #: Sessions open right now, closed by the runner's teardown if an attempt could not close them.
    live_sessions: set[EnvironmentSession] = attrs.field(factory=set)
    #: Where the run's model gateway listens (``--gateway-host``) and its port, for remote workers.
    gateway_host: str = "127.0.0.1"
    gateway_port: int = 0
    #: The run's provider secrets: masked out of whatever a remote executor sends elsewhere.
    secrets: frozenset[str] = frozenset()

    def grant_remote(self, spec: AttemptSpec, gateway_url: str) -> RemoteGrant:
        """Grant ``spec`` its models for a worker elsewhere, which reaches the gateway at ``gateway_url``:
        the :class:`~agentcompass.runtime.remote.RemoteGrant` holds what to send (no secret) and turns what
        comes back into the outcome to report."""
        from agentcompass.runtime.remote import grant_remote

        return grant_remote(self, spec, gateway_url)


async def run_attempt(context: ExecutionContext, spec: AttemptSpec) -> AttemptOutcome:
    """Run one attempt through the lifecycle (prepare → run → collect → evaluate). Environments are closed on
    every path, cancellation included; a failure of any phase is part of the outcome, never raised."""
    from agentcompass.lifecycle import TaskAttempt

    return await TaskAttempt(context, spec).execute()


class Executor(abc.ABC):
    """Runs the attempts of a run. Registered with ``register_executors``; constructed with the
    ``--executor-arg`` options and used for one run."""

    name: ClassVar[str] = ""
    #: Attempts run on other machines: the runner does not set up the environment provider here, and the
    #: executor sends each attempt over with :meth:`ExecutionContext.grant_remote`.
    remote: ClassVar[bool] = False

    def __init__(self, **options: Any) -> None:
        """``options`` come from ``--executor-arg key=value``; reject unknown ones with
        :class:`~agentcompass.errors.UsageError`."""
        if options:
            from agentcompass.errors import UsageError

            raise UsageError(f"executor {self.name or type(self).__name__!r} takes no options, got "
                             f"{', '.join(sorted(options))}")

    @abc.abstractmethod
    async def execute(self, attempts: AttemptSource, context: ExecutionContext) -> None:
        """Take attempts from ``attempts`` until it returns ``None``, run each, and report each outcome.

        When cancelled (Ctrl-C), cancel the attempts in flight, wait until their environments are closed, and
        let the cancellation propagate; the runner records those attempts as cancelled.
        """

    async def check(self, request: RunRequest, environments: list[EnvironmentSpec],  # noqa: B027
                    secrets: Iterable[str] = ()) -> None:
        """Called before the run directory is written: raise :class:`~agentcompass.errors.UsageError` when the
        run cannot work here (e.g. a worker lacks a plugin the run needs). ``request``: the run's request
        without anything secret (:func:`~agentcompass.runtime.remote.scrub_request`); ``environments``: the
        specs the run's attempts will open; ``secrets``: the provider secrets, for an executor that starts
        processes to keep them out of (it must never send them). The default checks nothing."""

    async def close(self) -> None:  # noqa: B027
        """Called once after the run (or a failed :meth:`check`): release what :meth:`check` acquired."""


class LocalExecutor(Executor):
    """``request.concurrency`` asyncio workers in this process, each running one attempt at a time."""

    name = "local"

    async def execute(self, attempts: AttemptSource, context: ExecutionContext) -> None:
        async def worker() -> None:
            while (spec := await attempts.next()) is not None:
                attempts.report(await run_attempt(context, spec))

        workers = [asyncio.create_task(worker()) for _ in range(context.request.concurrency)]
        try:
            await asyncio.gather(*workers)
        finally:
            for w in workers:
                w.cancel()
            await asyncio.wait(workers)  # each closes its environments as it unwinds
            for w in workers:  # retrieve every outcome, so nothing is reported "never retrieved"
                if not w.cancelled():
                    w.exception()
