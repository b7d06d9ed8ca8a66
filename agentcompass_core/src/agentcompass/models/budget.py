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

    def stop(self, reason: str, *, limit: bool = False) -> None:
        if self.stop_reason is None:
            self.stop_reason = reason
            self.stopped_by_limit = limit

    def add_cost(self, cost: float) -> None:
        self.spent_usd += cost
        if self.max_cost is not None and self.spent_usd >= self.max_cost:
            self.stop(f"limit reached: max_cost={self.max_cost:g} USD (spent {self.spent_usd:.4f} USD)", limit=True)

    def check(self) -> None:
        """Raise if the run no longer makes calls."""
        if self.stop_reason is None:
            return
        if self.stopped_by_limit:
            raise LimitReached(self.stop_reason, limit="max_cost")
        raise RunStopped(f"run stopped: {self.stop_reason}", fatal=True)
