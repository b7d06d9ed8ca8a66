"""Limits several runs in one process share (a suite's cells): one ``--concurrency``, one ``--max-environments``
and one ``--max-cost`` for all of them.

The seam is one optional field, :attr:`agentcompass.runner.Runner.capacity`. A runner given a
:class:`SharedCapacity`

* runs each attempt only while holding one of :attr:`~SharedCapacity.attempt_slots` (its own ``concurrency``
  still bounds its workers; the slots bound the attempts of all the runs together) — in this process, or, with
  an executor that runs attempts elsewhere (``--executor ray``), from the moment the executor takes an attempt
  until it reports it (:meth:`SharedCapacity.hold`), when it also holds one environment slot;
* opens environments under :attr:`~SharedCapacity.environment_slots` instead of a semaphore of its own;
* adds its model cost to :attr:`~SharedCapacity.cost` as well as to its own budget, and stops scheduling (unrun
  work stays resumable) once the shared pool is spent.

Everything else about each run — its directory, gateway, environment provider, retries and resume — is its own.
"""

from __future__ import annotations

import asyncio

import attrs

from agentcompass.errors import UsageError
from agentcompass.models.budget import CostPool
from agentcompass.runtime.executor import AttemptOutcome, AttemptSource, AttemptSpec


@attrs.define
class SharedCapacity:
    """One concurrency, one environment bound and one cost budget for every run that is handed this object.
    Make it on the event loop the runs use."""

    concurrency: int
    max_environments: int | None = None
    max_cost: float | None = None
    attempt_slots: asyncio.Semaphore = attrs.field(init=False)
    environment_slots: asyncio.Semaphore | None = attrs.field(init=False)
    cost: CostPool = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        if self.concurrency < 1:
            raise UsageError("--concurrency must be at least 1")
        if self.max_environments is not None and self.max_environments < 1:
            raise UsageError("--max-environments must be at least 1")
        if self.max_cost is not None and self.max_cost <= 0:
            raise UsageError("--max-cost must be more than 0")
        self.attempt_slots = asyncio.Semaphore(self.concurrency)
        self.environment_slots = asyncio.Semaphore(self.max_environments) if self.max_environments else None
        self.cost = CostPool(self.max_cost)

    def hold(self, source: AttemptSource) -> HeldAttempts:
        """``source`` for an executor that runs attempts elsewhere: each attempt it hands out holds an attempt
        slot (and an environment slot) of this capacity until it is reported."""
        slots = [self.attempt_slots, *([self.environment_slots] if self.environment_slots else [])]
        return HeldAttempts(source, slots)


@attrs.define
class HeldAttempts:
    """An :class:`~agentcompass.runtime.executor.AttemptSource` whose attempts each hold one of every
    semaphore in ``slots`` from :meth:`next` to :meth:`report` (taken after the attempt is handed out, so a
    run waiting for retries holds nothing). :meth:`release` gives back what unreported attempts hold."""

    source: AttemptSource
    slots: list[asyncio.Semaphore]
    held: int = 0

    async def next(self) -> AttemptSpec | None:
        spec = await self.source.next()
        if spec is None:
            return None
        taken: list[asyncio.Semaphore] = []
        try:
            for slot in self.slots:
                await slot.acquire()
                taken.append(slot)
        except BaseException:
            for slot in taken:
                slot.release()
            raise
        self.held += 1
        return spec

    def report(self, outcome: AttemptOutcome) -> None:
        self._give_back(1)
        self.source.report(outcome)

    def release(self) -> None:
        self._give_back(self.held)

    def _give_back(self, n: int) -> None:
        n = min(n, self.held)
        self.held -= n
        for _ in range(n):
            for slot in self.slots:
                slot.release()
