"""The executor seam: the runner decides *what* runs, an executor decides *where*.

The runner turns tasks into :class:`AttemptSpec`\\ s (plain, serialisable data), hands them out through an
:class:`AttemptSource`, and records each :class:`AttemptOutcome` the executor reports back: it keeps resume,
the retry decision, recording and signals. An executor takes attempts until the source is exhausted and runs
each through the ordinary lifecycle (:meth:`ExecutionContext.run_attempt`), wherever it likes.

The default, ``local``, is :class:`LocalExecutor`: ``request.schedule.concurrency`` asyncio workers in this process.
Register others with the ``register_executors`` hook and select them with ``--executor NAME``.

An executor that runs attempts on other machines sets ``remote = True``: the runner then leaves the
environment provider to the workers, and each attempt crosses over as plain data through
:mod:`agentcompass.runtime.remote` (:meth:`ExecutionContext.grant_remote` on this side, ``AttemptWorker`` on
the other), its model calls metered here through the gateway.

This module imports nothing from the engine: the context an executor receives is a protocol, implemented by the
engine (:class:`agentcompass.execution.InProcessContext`).

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
from collections.abc import Iterable
from typing import Any, ClassVar, Protocol

from agentcompass.errors import UsageError
from agentcompass.runtime.attempt_spec import AttemptOutcome, AttemptSpec, Rescore
from agentcompass.runtime.remote_attempts import RemoteGrant
from agentcompass.runtime.types import EnvironmentSpec, RunRequest

__all__ = ["AttemptOutcome", "AttemptSource", "AttemptSpec", "ExecutionContext", "Executor", "LocalExecutor",
           "Rescore", "run_attempt"]


class AttemptSource(Protocol):
    """Where an executor takes attempts from and reports outcomes to (the runner implements it)."""

    async def next(self) -> AttemptSpec | None:
        """The next attempt to run, waiting while retries may still come; ``None`` when there is no more."""
        ...

    def report(self, outcome: AttemptOutcome) -> None:
        """Hand back the outcome of an attempt ``next`` returned. Call it once per attempt, never for an
        attempt that was cancelled."""
        ...


class ExecutionContext(Protocol):
    """What an executor runs attempts through (the runner makes it; executors only use it).

    In this process, :meth:`run_attempt` runs an attempt through the lifecycle; for a worker elsewhere,
    :meth:`grant_remote` grants it its models and gives what to send (see :mod:`agentcompass.runtime.remote`).
    """

    @property
    def request(self) -> RunRequest:
        """The run's request."""
        ...

    @property
    def gateway_host(self) -> str:
        """Where the run's model gateway listens (``--gateway-host``), for remote workers."""
        ...

    @property
    def gateway_port(self) -> int:
        """The port of the run's model gateway."""
        ...

    async def run_attempt(self, spec: AttemptSpec) -> AttemptOutcome:
        """Run one attempt through the lifecycle (prepare → run → collect → evaluate) in this process.
        Environments are closed on every path, cancellation included; a failure of any phase is part of the
        outcome, never raised."""
        ...

    def grant_remote(self, spec: AttemptSpec, gateway_url: str) -> RemoteGrant:
        """Grant ``spec`` its models for a worker elsewhere, which reaches the gateway at ``gateway_url``:
        the :class:`~agentcompass.runtime.remote_attempts.RemoteGrant` holds what to send (no secret) and
        turns what comes back into the outcome to report."""
        ...


async def run_attempt(context: ExecutionContext, spec: AttemptSpec) -> AttemptOutcome:
    """Run one attempt through the lifecycle in this process: ``context.run_attempt(spec)``."""
    return await context.run_attempt(spec)


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
        without anything secret (:func:`~agentcompass.runtime.remote_attempts.scrub_request`); ``environments``: the
        specs the run's attempts will open; ``secrets``: the provider secrets, for an executor that starts
        processes to keep them out of (it must never send them). The default checks nothing."""

    async def close(self) -> None:  # noqa: B027
        """Called once after the run (or a failed :meth:`check`): release what :meth:`check` acquired."""


class LocalExecutor(Executor):
    """``request.schedule.concurrency`` asyncio workers in this process, each running one attempt at a time (more
    when the source says its concurrency may grow while the run runs: its ``most_workers``, as ``agentcompass ctl
    set concurrency=N`` needs; the source then bounds how many work at once)."""

    name = "local"

    async def execute(self, attempts: AttemptSource, context: ExecutionContext) -> None:
        async def worker() -> None:
            while (spec := await attempts.next()) is not None:
                attempts.report(await context.run_attempt(spec))

        n = max(context.request.schedule.concurrency, getattr(attempts, "most_workers", 0))
        workers = [asyncio.create_task(worker()) for _ in range(n)]
        try:
            await asyncio.gather(*workers)
        finally:
            for w in workers:
                w.cancel()
            await asyncio.wait(workers)  # each closes its environments as it unwinds
            for w in workers:  # retrieve every outcome, so nothing is reported "never retrieved"
                if not w.cancelled():
                    w.exception()
