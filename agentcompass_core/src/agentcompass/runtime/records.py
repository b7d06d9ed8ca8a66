"""Typed records of a run: what observers receive and what ``run.json`` and ``summary.json`` hold.

Every record is a frozen dataclass, turned into JSON (and read back, validated) by the one cattrs converter
in :mod:`agentcompass.serialization`. Files carry ``schema_version``; a reader refuses a newer major version
it does not know.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from agentcompass.runtime.types import RunRequest

#: Version of the on-disk records (``run.json``, ``summary.json``, each ``results.jsonl`` line).
SCHEMA_VERSION = 1

TaskEventKind = Literal["task.phase", "task.retry", "task.finished"]


@dataclass(frozen=True)
class TaskEvent:
    """What the observer hook ``agentcompass_task_event`` receives.

    :param event: ``"task.phase"`` (an attempt changed phase), ``"task.retry"`` (an attempt failed and is run
        again) or ``"task.finished"`` (the task's final result was recorded).
    :param run_id: the run.
    :param task_id: the task.
    :param attempt: the attempt number, from 1.
    :param trial: the trial number, from 1 (``--trials``).
    :param phase: the new phase (``task.phase`` only): ``PREPARING``, ``RUNNING``, ``COLLECTING``,
        ``EVALUATING``, ``FINISHED``.
    :param previous: the phase before (``task.phase`` only).
    :param status: the attempt's status name (``task.retry``, ``task.finished``).
    :param error: the attempt's error, if any (``task.retry``, ``task.finished``).
    :param metrics: the task's metrics (``task.finished``).
    """

    event: TaskEventKind
    run_id: str
    task_id: str
    attempt: int
    phase: str | None = None
    previous: str | None = None
    trial: int = 1
    status: str | None = None
    error: str | None = None
    metrics: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class RecordedResult:
    """What the observer hook ``agentcompass_result_recorded`` receives: a (task, trial)'s final attempt just as
    the run wrote it — its ``results.jsonl`` line and its ``trajectories.jsonl`` lines, as JSON objects masked of
    the run's secrets — so an observer that reads transcripts as they finish needs not read the files back.

    :param run_id: the run; :param run_dir: its directory.
    :param task_id:, :param trial:, :param attempt: the attempt.
    :param result: its ``results.jsonl`` line (``status``, ``metrics``, ``error``, ``artifacts``, ...).
    :param calls: its model calls, one ``trajectories.jsonl`` line each, in order (each with its ``messages``).
        Shared with the run: read them, never change them.
    """

    run_id: str
    run_dir: str
    task_id: str
    trial: int
    attempt: int
    result: Mapping[str, Any]
    calls: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True)
class LiveFigures:
    """What a run's live display shows beside its task counts, read on demand through the ``figures`` callable
    that ``agentcompass_run_started`` passes.

    :param in_flight: attempts handed to the executor and not reported yet.
    :param cost_usd: what the run's model calls cost so far, a resume's earlier part included; ``None`` when a
        model's prices are unknown.
    :param stalled: attempts the watchdog stopped so far (``--stall-timeout``).
    """

    in_flight: int
    cost_usd: float | None = None
    stalled: int = 0


@dataclass(frozen=True)
class ModelCallEvent:
    """What the observer hook ``agentcompass_model_call`` receives: one model call of a task attempt, ended
    (answered or failed), as its trajectory record holds it — without the messages, the reply or anything else
    a prompt may carry.

    :param run_id: the run; :param task_id:, :param trial:, :param attempt: the attempt that made the call.
    :param role: the model role (``agent``, ``user``, ``judge``); :param model: the model's name.
    :param via: ``client`` (an in-process call) or ``gateway`` (code in the environment called the gateway).
    :param started_at: when the call started (seconds since the epoch); :param latency_s: how long it took.
    :param prompt_tokens:, :param completion_tokens: the tokens the provider reported.
    :param finish_reason: why the model stopped (``stop``, ``tool_calls``, ``length``, ...), when it answered.
    :param error: the error, masked of the run's secrets, when the call failed.
    :param attempts: the provider's attempts (retries included); :param cost_usd: the call's cost, when priced.
    :param protocol:, :param cached_tokens:, :param reasoning_tokens:, :param ttft_s: what the gateway's
        protocol endpoints record, when the call's record has them (``None`` otherwise).
    """

    run_id: str
    task_id: str
    trial: int
    attempt: int
    role: str
    model: str
    via: str
    started_at: float
    latency_s: float
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str | None = None
    error: str | None = None
    attempts: int = 1
    cost_usd: float | None = None
    protocol: str | None = None
    cached_tokens: int | None = None
    reasoning_tokens: int | None = None
    ttft_s: float | None = None


@dataclass(frozen=True)
class MetricAggregate:
    """One scalar metric aggregated over a group of tasks.

    :param mean: over *all* tasks of the group, an errored task counting as 0 (``None`` for no task).
    :param mean_completed: over completed tasks only (``None`` when none completed).
    :param n: tasks in the group; ``n_completed`` + ``n_errored`` = ``n``.
    :param n_missing: completed tasks whose ``metrics`` lacked this scalar (counted as 0).
    :param stderr: the standard error of ``mean``, clustered by task (see
        :mod:`agentcompass.runtime.statistics`); ``None`` with fewer than two tasks.
    :param ci95: the 95% confidence interval of ``mean`` (``[low, high]``), within the metric's declared bounds;
        ``None`` with too few tasks (fewer than two).
    :param n_tasks: tasks behind the ``n`` results (``n / n_tasks`` trials each).
    :param ci_method: how ``ci95`` was made: ``"wilson"`` (a success rate, clustered by task through the
        effective sample size) or ``"t"`` (a t interval with ``n_tasks - 1`` degrees of freedom); see
        :mod:`agentcompass.runtime.statistics`.

    With ``--trials``, ``n`` counts (task, trial) results.
    """

    label: str
    mean: float | None
    mean_completed: float | None
    n: int
    n_completed: int
    n_errored: int
    n_missing: int = 0
    stderr: float | None = None
    ci95: tuple[float, float] | None = None
    n_tasks: int = 0
    ci_method: str | None = None
    #: Planned (task, trial) results of the group with no final record (an interrupted or stopped run): not
    #: in ``n`` nor in any figure above, which are over the finished ones only.
    n_unfinished: int = 0
    #: The run-level figures the metric contract asks for besides the mean (``MetricContract.aggregates``:
    #: ``{"sum": 3.0, "max": 1.0}``), over every result as ``mean`` is; empty for none or no result.
    aggregates: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class PassAtK:
    """pass@k and pass^k of a group for one ``k`` (see :mod:`agentcompass.runtime.statistics`).

    :param n_tasks: tasks with at least ``k`` trials, over which both are averaged.
    """

    k: int
    pass_at_k: float
    pass_hat_k: float
    n_tasks: int


@dataclass(frozen=True)
class GroupAggregate:
    """The tasks of one category (or all of them): their statuses and every scalar's aggregate.

    :param n_tasks: distinct tasks; :param n_results: their (task, trial) results (``status_counts`` counts
        these).
    """

    n_tasks: int
    status_counts: Mapping[str, int]
    metrics: Mapping[str, MetricAggregate]
    #: For a contract with a success threshold: pass@k and pass^k for k = 1..trials (errored trials fail).
    pass_k: tuple[PassAtK, ...] = ()
    #: Trials that ended in an error status (counted as failures in ``pass_k``).
    n_errored_trials: int = 0
    n_results: int = 0
    #: Planned results of the group with no final record (not counted in any figure).
    n_unfinished: int = 0


@dataclass(frozen=True)
class RunMetrics:
    """Aggregates overall and per category (tasks without a category appear only overall)."""

    overall: Mapping[str, MetricAggregate] = field(default_factory=dict)
    by_category: Mapping[str, GroupAggregate] = field(default_factory=dict)
    #: pass@k and pass^k over all tasks (for a contract with a success threshold).
    pass_k: tuple[PassAtK, ...] = ()


@dataclass(frozen=True)
class VerdictStability:
    """How often a task's trials disagree on its verdict (pass: ``metric`` at least ``threshold``; an errored
    trial fails).

    :param flip_rates: per task, the share of its trials whose verdict differs from its majority verdict
        (``min(passes, fails) / trials``; 0 for one trial or constant verdicts, 0.5 for a tie).
    :param mean_flip_rate: their mean over the tasks; :param n_flipping: tasks with any flip.
    """

    metric: str
    threshold: float
    flip_rates: Mapping[str, float] = field(default_factory=dict)
    mean_flip_rate: float = 0.0
    n_flipping: int = 0
    n_tasks: int = 0


@dataclass(frozen=True)
class RoleUsage:
    """Model usage of one role summed over a run's final results."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    errors: int = 0
    cost_usd: float | None = None
    #: Calls answered from ``--cache`` and what they saved (tokens, and USD when priced); calls answered from
    #: ``--replay``'s recording, and replay misses sent to the live model (``--replay-miss live``).
    cache_hits: int = 0
    cache_saved_tokens: int = 0
    cache_saved_usd: float | None = None
    replayed: int = 0
    replay_live: int = 0


@dataclass(frozen=True)
class Invocation:
    """One invocation of a run — its first, or a ``--resume`` — as ``summary.json`` lists them: when it started
    (ISO 8601, UTC) and how long it took."""

    started: str
    duration_s: float


@dataclass(frozen=True)
class RunSummary:
    """``summary.json``, and what the observer hook ``agentcompass_run_finished`` receives.

    ``status_counts`` counts the final results; planned (task, trial) results without one (an interrupted or
    stopped run) are ``n_unfinished`` of ``n_planned``, and every figure is over the finished ones only.
    ``usage`` counts every model call of every attempt (retried and cut-short ones included);
    ``usage_retried`` is the part spent on attempts that did not give the final result. ``duration_s`` is the
    run's time over every invocation (``invocations``: the first and each ``--resume``, in order).
    """

    run_id: str
    benchmark: str
    harness: str
    model: str
    environment: str
    n_tasks: int
    n_finished: int
    status_counts: Mapping[str, int]
    primary_metric: str
    metrics: RunMetrics
    interrupted: bool = False
    stopped_reason: str | None = None
    executor: str = "local"
    #: Trials per task (``--trials``) and the run's seed (``--seed``).
    trials: int = 1
    seed: int | None = None
    usage: Mapping[str, RoleUsage] = field(default_factory=dict)
    duration_s: float = 0.0
    run_dir: str = ""
    schema_version: int = SCHEMA_VERSION
    #: (task, trial) results the run planned, and how many of them have no final record.
    n_planned: int = 0
    n_unfinished: int = 0
    usage_retried: Mapping[str, RoleUsage] = field(default_factory=dict)
    invocations: tuple[Invocation, ...] = ()
    #: Per task, how often its trials' verdicts differ from its majority (``None`` in older summaries).
    verdicts: VerdictStability | None = None
    #: Findings of the run's scanners (``scans.jsonl``: ``run --scan``, ``agentcompass scan``), counted per
    #: scanner and severity (``{"reward-hacking": {"high": 2}}``); empty when nothing was scanned or flagged.
    #: A finding never changes a score.
    findings: Mapping[str, Mapping[str, int]] = field(default_factory=dict)

    @property
    def unfinished(self) -> bool:
        return self.n_unfinished > 0


@dataclass(frozen=True)
class RunPlan:
    """The resolved plan of a run, as ``run.json`` records it."""

    benchmark_class: str
    harness_class: str | None
    environment_class: str
    executor: str
    evaluation_environment_mode: str
    metric_contract: Mapping[str, Any]
    model_roles: Mapping[str, str]


@dataclass(frozen=True)
class PlannedWork:
    """What a run set out to do: ``n_results`` (task, trial) results, ``trials`` per task, and every task's
    category (``tasks``: task id → category)."""

    n_results: int
    trials: int = 1
    tasks: Mapping[str, str | None] = field(default_factory=dict)


@dataclass(frozen=True)
class RunInfo:
    """``run.json``: the request, the resolved plan and plugin versions. Never holds a secret."""

    run_id: str
    agentcompass_version: str
    created_at: str
    request: RunRequest
    plan: RunPlan
    plugins: Mapping[str, str | None] = field(default_factory=dict)
    resumed_at: tuple[str, ...] = ()
    #: For a run made by ``agentcompass evaluate``: the run it scored again (``run_dir``, ``run_id``).
    derived_from: Mapping[str, str] | None = None
    schema_version: int = SCHEMA_VERSION
    #: The planned total (``None`` in runs written before it was recorded).
    planned: PlannedWork | None = None
    #: Where model answers came from besides the live models: ``{"replay": {"run_dir", "run_id", "miss",
    #: "latency"}}`` for ``--replay``, ``{"cache": {"dir", "expiry_s"}}`` for ``--cache``; ``None`` otherwise.
    model_calls: Mapping[str, Any] | None = None
