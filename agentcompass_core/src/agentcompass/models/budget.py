"""Run-wide model budgets and the run's stop signal.

* ``--max-tokens-per-task N``: a task attempt whose agent and user roles have used N tokens gets no further
  call; it ends as ``LIMIT_REACHED`` (the judge is exempt, so a task that ran can still be scored).
* ``--max-cost USD``: once the run's summed cost reaches it, no further call is made, tasks in flight end as
  ``LIMIT_REACHED``, and the runner schedules no new task (the rest stay unrun; ``--resume`` with a higher
  budget finishes them).
* A fatal model error (bad credentials, unknown model) also stops scheduling: every later task would fail
  the same way.
"""

from __future__ import annotations

import attrs

from agentcompass.runtime.models import ModelError

#: Roles whose tokens count toward ``--max-tokens-per-task``.
BUDGETED_ROLES = frozenset({"agent", "user"})


class LimitReached(ModelError):
    """A budget refused a model call. Not retryable; the attempt ends as ``LIMIT_REACHED``."""

    def __init__(self, message: str, *, limit: str) -> None:
        super().__init__(message, retryable=False, status=400)
        self.limit = limit


class RunStopped(ModelError):
    """The run stopped (a fatal model error elsewhere, or the cost budget): no further call is made."""

    def __init__(self, message: str, *, fatal: bool) -> None:
        super().__init__(message, retryable=False, status=400, fatal=fatal)


@attrs.define
class CostPool:
    """A ``--max-cost`` shared by several runs of one process (a suite's cells): each run's budget adds its
    cost here too, and once the pool is spent every run sharing it stops as if its own budget were."""

    max_cost: float | None = None
    spent_usd: float = 0.0

    @property
    def stop_reason(self) -> str | None:
        if self.max_cost is not None and self.spent_usd >= self.max_cost:
            return f"limit reached: shared max_cost={self.max_cost:g} USD (spent {self.spent_usd:.4f} USD)"
        return None


@attrs.define
class RunBudget:
    """Shared by every attempt of a run: the cost so far, the limits, and why the run stopped (if it did)."""

    max_cost: float | None = None
    max_tokens_per_task: int | None = None
    spent_usd: float = 0.0
    stop_reason: str | None = None
    #: The stop came from a budget (True) or from a fatal model error (False).
    stopped_by_limit: bool = False
    #: ``--retries``: with none, a provider outage stops the run at once (no attempt could be retried).
    retries: int = 0
    #: A cost budget shared with other runs (a suite's ``--max-cost``), or ``None``.
    pool: CostPool | None = None

    def stop(self, reason: str, *, limit: bool = False) -> None:
        if self.stop_reason is None:
            self.stop_reason = reason
            self.stopped_by_limit = limit

    def add_cost(self, cost: float) -> None:
        self.spent_usd += cost
        if self.pool is not None:
            self.pool.spent_usd += cost
        if self.max_cost is not None and self.spent_usd >= self.max_cost:
            self.stop(f"limit reached: max_cost={self.max_cost:g} USD (spent {self.spent_usd:.4f} USD)", limit=True)
        self.poll()

    def poll(self) -> str | None:
        """Why the run stops, taking in a shared pool another run may have spent (``None``: it goes on)."""
        if self.stop_reason is None and self.pool is not None and (reason := self.pool.stop_reason):
            self.stop(reason, limit=True)
        return self.stop_reason

    def check(self) -> None:
        """Raise if the run no longer makes calls."""
        if (reason := self.poll()) is None:
            return
        if self.stopped_by_limit:
            raise LimitReached(reason, limit="max_cost")
        raise RunStopped(f"run stopped: {reason}", fatal=True)
