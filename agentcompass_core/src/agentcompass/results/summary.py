"""Building the run's records: ``summary.json`` from the final results, ``run.json`` from the plan."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime

from agentcompass import __version__
from agentcompass.runtime.metrics import MetricContract, aggregate
from agentcompass.runtime.records import RoleUsage, RunInfo, RunPlan, RunSummary
from agentcompass.runtime.types import RunRequest, RunResult, TaskSpec, TaskStatus
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
) -> RunSummary:
    """The run's summary. Every (task, trial) of the run is counted: one without a final record as
    ``CANCELLED``; the metrics are over the finished ones (errors as 0)."""
    results = [final[key] for t, trial in work if (key := (t.task_id, trial)) in final]
    overall, metrics = aggregate(contract, results)
    status_counts = dict(overall.status_counts)
    not_finished = len(work) - len(results)
    if not_finished:
        status_counts[TaskStatus.CANCELLED.value] = status_counts.get(TaskStatus.CANCELLED.value, 0) + not_finished
    return RunSummary(
        run_id=req.run_id, benchmark=req.benchmark, harness=req.harness, model=req.model,
        environment=req.environment, executor=req.executor, n_tasks=len({t.task_id for t, _ in work}),
        trials=req.trials, seed=req.seed, n_finished=len(results),
        status_counts=status_counts, interrupted=interrupted, stopped_reason=stopped_reason,
        primary_metric=contract.primary, metrics=metrics, usage=role_usage(results),
        duration_s=round(duration_s, 3), run_dir=run_dir,
    )


def build_run_info(
    req: RunRequest, plan: RunPlan, plugins: Mapping[str, str | None], previous: RunInfo | None, started_at: float,
    derived_from: Mapping[str, str] | None = None,
) -> RunInfo:
    """``run.json``; a resumed run keeps its creation time and adds this resume's time."""
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
    )


def contract_json(contract: MetricContract) -> dict[str, object]:
    return dict(unstructure(contract))
