"""Building the run's records: ``summary.json`` from the final results, ``run.json`` from the plan."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime

from agentcompass import __version__
from agentcompass.runtime.metrics import MetricContract, aggregate, verdict_stability
from agentcompass.runtime.records import Invocation, PlannedWork, RoleUsage, RunInfo, RunPlan, RunSummary
from agentcompass.runtime.types import RunRequest, RunResult, TaskSpec
from agentcompass.serialization import unstructure


def role_usage(results: Iterable[RunResult]) -> dict[str, RoleUsage]:
    """Model usage per role, summed over ``results`` (each result's ``usage["models"]``)."""
    totals: dict[str, dict[str, float]] = {}
    for r in results:
        for role, used in (r.usage.get("models") or {}).items():
            acc = totals.setdefault(role, {})
            for k, v in used.items():
                acc[k] = acc.get(k, 0) + v
    return {
        role: RoleUsage(
            calls=int(t.get("calls", 0)), prompt_tokens=int(t.get("prompt_tokens", 0)),
            completion_tokens=int(t.get("completion_tokens", 0)), latency_s=float(t.get("latency_s", 0.0)),
            errors=int(t.get("errors", 0)), cost_usd=float(t["cost_usd"]) if "cost_usd" in t else None,
            cache_hits=int(t.get("cache_hits", 0)), cache_saved_tokens=int(t.get("cache_saved_tokens", 0)),
            cache_saved_usd=float(t["cache_saved_usd"]) if "cache_saved_usd" in t else None,
            replayed=int(t.get("replayed", 0)), replay_live=int(t.get("replay_live", 0)),
        )
        for role, t in totals.items()
    }


def build_summary(
    req: RunRequest,
    contract: MetricContract,
    work: Sequence[tuple[TaskSpec, int]],
    final: Mapping[tuple[str, int], RunResult],
    *,
    interrupted: bool,
    stopped_reason: str | None,
    duration_s: float,
    run_dir: str,
    attempts: Iterable[RunResult] = (),
    started_at: float | None = None,
    earlier: Sequence[Invocation] = (),
) -> RunSummary:
    """The run's summary. Every planned (task, trial) of ``work`` without a final record is *unfinished*:
    counted in ``n_unfinished`` (overall and per category), never in a status or a figure. ``usage`` counts
    the model calls of every attempt (``attempts``: the retried and cut-short ones) besides the final ones.
    ``duration_s`` is this invocation's, begun at ``started_at`` (a timestamp; ``None``: no invocation to list);
    the summary's is the total with the ``earlier`` invocations of the run (a resumed one's)."""
    results = [final[key] for t, trial in work if (key := (t.task_id, trial)) in final]
    unfinished = [t.category for t, trial in work if (t.task_id, trial) not in final]
    overall, metrics = aggregate(contract, results, unfinished)
    others = list(attempts)
    invocations = tuple(earlier)
    if started_at is not None:
        invocations += (Invocation(datetime.fromtimestamp(started_at, UTC).isoformat(), round(duration_s, 3)),)
        duration_s = 0.0
    return RunSummary(
        run_id=req.run_id, benchmark=req.benchmark, harness=req.harness, model=req.model,
        environment=req.environment, executor=req.execution.executor, n_tasks=len({t.task_id for t, _ in work}),
        trials=req.tasks.trials, seed=req.tasks.seed, n_finished=len(results),
        status_counts=dict(overall.status_counts), interrupted=interrupted, stopped_reason=stopped_reason,
        primary_metric=contract.primary, metrics=metrics, usage=role_usage([*results, *others]),
        usage_retried=role_usage(others), duration_s=round(duration_s + sum(i.duration_s for i in invocations), 3),
        run_dir=run_dir, n_planned=len(work), n_unfinished=len(unfinished), invocations=invocations,
        verdicts=verdict_stability(contract, results),
    )


def earlier_invocations(previous: RunSummary | None, info: RunInfo | None) -> tuple[Invocation, ...]:
    """The invocations a resumed run's ``summary.json`` lists (``previous``), for its total time; a summary
    written before they were listed counts as one invocation, begun at ``run.json``'s last (re)start."""
    if previous is None:
        return ()
    if previous.invocations:
        return tuple(previous.invocations)
    if not previous.duration_s:
        return ()
    started = (info.resumed_at[-1] if info.resumed_at else info.created_at) if info is not None else ""
    return (Invocation(started, previous.duration_s),)


def planned_work(req: RunRequest, work: Sequence[tuple[TaskSpec, int]]) -> PlannedWork:
    """``run.json``'s ``planned``: the run's (task, trial) total and every task's category."""
    return PlannedWork(n_results=len(work), trials=req.tasks.trials, tasks={t.task_id: t.category for t, _ in work})


def summary_so_far(info: RunInfo, final: Mapping[tuple[str, int], RunResult], attempts: Iterable[RunResult],
                   run_dir: str) -> RunSummary:
    """A summary of a run that has not written ``summary.json`` (still going, or killed), from ``run.json``
    (its planned work and metric contract) and the final results so far."""
    from agentcompass.runtime.metrics import contract_from_json

    req = info.request
    if info.planned is not None:
        tasks = {tid: TaskSpec(task_id=tid, category=cat) for tid, cat in info.planned.tasks.items()}
        trials = info.planned.trials
    else:
        tasks = {tid: TaskSpec(task_id=tid, category=r.category) for (tid, _), r in final.items()}
        trials = req.tasks.trials
    for (tid, _), r in final.items():
        tasks.setdefault(tid, TaskSpec(task_id=tid, category=r.category))
    work = [(t, trial) for trial in range(1, trials + 1) for t in tasks.values()]
    work += [(tasks[tid], trial) for tid, trial in final if trial > trials]
    return build_summary(req, contract_from_json(info.plan.metric_contract), work, final, interrupted=False,
                         stopped_reason=None, duration_s=0.0, run_dir=run_dir, attempts=attempts)


def build_run_info(
    req: RunRequest, plan: RunPlan, plugins: Mapping[str, str | None], previous: RunInfo | None, started_at: float,
    derived_from: Mapping[str, str] | None = None,
    planned: PlannedWork | None = None,
    model_calls: Mapping[str, object] | None = None,
) -> RunInfo:
    """``run.json``; a resumed run keeps its creation time and adds this resume's time. ``model_calls`` is
    where the run's answers come from besides the live models (``--replay``, ``--cache``), as the runner
    knows it."""
    now = datetime.now(UTC).isoformat()
    return RunInfo(
        run_id=req.run_id,
        agentcompass_version=__version__,
        created_at=previous.created_at if previous else datetime.fromtimestamp(started_at, UTC).isoformat(),
        resumed_at=(*previous.resumed_at, now) if previous else (),
        request=req,
        plan=plan,
        plugins=dict(plugins),
        derived_from=previous.derived_from if previous else derived_from,
        planned=planned,
        model_calls=dict(model_calls) if model_calls is not None else None,
    )


def contract_json(contract: MetricContract) -> dict[str, object]:
    return dict(unstructure(contract))
