"""One attempt of one task as plain, serialisable data: what an executor is given, and what it reports back.

Public through :mod:`agentcompass.runtime.executor` (the executor seam).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agentcompass.runtime.types import EnvironmentSpec, PreparedTask, RunRequest, RunResult, TaskSpec


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
    :param trial: which trial of the task (1..``request.tasks.trials``).
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
    :param unfinished: why a failure outside the task (a model provider outage, a rejected key) cut the attempt
        short, so that its result says nothing about the task; ``None`` otherwise. Such an attempt is recorded
        as an attempt, never as the task's final result: it is retried when ``retryable`` and ``--retries``
        allow, else its task stays unfinished (resumable) and the run stops scheduling.
    """

    result: RunResult
    retryable: bool = False
    trajectory: tuple[Mapping[str, Any], ...] = ()
    prepared: PreparedTask | None = None
    unfinished: str | None = None
