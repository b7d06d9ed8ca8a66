"""Limits several runs in one process share (a suite's cells): one ``--concurrency``, one ``--max-environments``
and one ``--max-cost`` for all of them.

The seam is one optional field, :attr:`agentcompass.runner.Runner.capacity`. A runner given a
:class:`SharedCapacity`

* runs each attempt only while holding one of :attr:`~SharedCapacity.attempt_slots` (its own ``concurrency``
  still bounds its workers; the slots bound the attempts of all the runs together);
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
