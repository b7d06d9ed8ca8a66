"""Robustness as a result: how much a run under ``--faults`` lost against the same run without them.

Given a clean run and a faulted one (same benchmark; the faulted one's ``run.json`` names its profile), on the
tasks they share:

* the **score drop**, clean minus faulted on the primary metric, paired by task as ``results compare`` pairs
  them (:func:`agentcompass.results.comparison.paired_difference`), with its 95% interval;
* **per fault kind**: how many calls got it, on how many tasks, and the drop on those tasks (with its
  interval) — where a kind hurts;
* **errors caused by faults vs by the agent**: the faulted run's results that ended in an error status, split
  into those a fault explains (the task met a fault that failed one of its calls, and did not error in the
  clean run) and the rest.

:func:`robustness` reads both runs; ``results compare`` prints it when one run is faulted and the other not,
``suite show`` (and the report's leaderboard) for each faulted cell against its clean twin.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentcompass.errors import UsageError
from agentcompass.results.comparison import LoadedRun, paired_difference, shared_tasks
from agentcompass.results.reader import RunReader

#: Fault kinds that fail the call they hit (the others change or delay its answer).
FAILING_KINDS = frozenset({"rate_limit", "server_error", "connection_reset", "timeout", "stream_cut"})


@dataclass(frozen=True)
class KindImpact:
    """One fault kind in the faulted run: the calls it hit, the tasks they belong to, the drop on those tasks."""

    kind: str
    calls: int
    tasks: int
    drop: float | None
    ci95: tuple[float, float] | None


@dataclass(frozen=True)
class Robustness:
    """A faulted run against its clean twin (see the module)."""

    clean: str
    faulted: str
    profile: str
    metric: str
    n_tasks: int
    clean_mean: float
    faulted_mean: float
    drop: float
    ci95: tuple[float, float] | None
    within_noise: bool
    faulted_calls: int
    calls: int
    kinds: tuple[KindImpact, ...] = field(default_factory=tuple)
    errors_by_faults: int = 0
    errors_by_agent: int = 0


def fault_profile(run: LoadedRun) -> str | None:
    """The fault profile ``run`` was made under (``run.json``), or ``None`` for a clean run."""
    info = RunReader.open(run.path).info
    faults = ((info.get("model_calls") or {}).get("faults") or {}) if isinstance(info, Mapping) else {}
    profile = faults.get("profile") if isinstance(faults, Mapping) else None
    return str(profile) if profile and profile != "none" else None


def _final_calls(reader: RunReader) -> dict[str, list[dict[str, Any]]]:
    """Each task's calls in the final attempt of each of its trials."""
    out: dict[str, list[dict[str, Any]]] = {}
    for key, final in reader.results.items():
        attempt = final.get("attempt", 1)
        calls = [c for c in reader.trajectory(key) if c.get("attempt", 1) == attempt]
        out.setdefault(key[0], []).extend(calls)
    return out


def _errored(reader: RunReader) -> dict[tuple[str, int], bool]:
    return {key: r.get("status") != "COMPLETED" for key, r in reader.results.items()}


def robustness(clean: LoadedRun, faulted: LoadedRun, metric: str | None = None) -> Robustness:
    """``faulted`` against ``clean`` on their shared tasks; a :class:`UsageError` when they cannot be compared."""
    tasks = shared_tasks(clean, faulted)
    metric = metric or str(clean.info.plan.metric_contract.get("primary") or (clean.scalars or ("score",))[0])
    if metric not in clean.scalars or metric not in faulted.scalars:
        raise UsageError(f"{clean.path} and {faulted.path} do not both have the metric {metric!r}")
    overall = paired_difference(faulted, clean, metric, tasks)  # clean - faulted: the drop
    reader, clean_reader = RunReader.open(faulted.path), RunReader.open(clean.path)
    calls = _final_calls(reader)
    kinds: Counter[str] = Counter()
    tasks_of: dict[str, set[str]] = {}
    failed_by_fault: set[str] = set()
    for task, task_calls in calls.items():
        for call in task_calls:
            fault = call.get("fault")
            if not isinstance(fault, Mapping):
                continue
            kind = str(fault.get("kind"))
            kinds[kind] += 1
            tasks_of.setdefault(kind, set()).add(task)
            if kind in FAILING_KINDS:
                failed_by_fault.add(task)
    impacts = []
    for kind in sorted(kinds):
        hit = [t for t in tasks if t in tasks_of[kind]]
        d = paired_difference(faulted, clean, metric, hit) if hit else None
        impacts.append(KindImpact(kind, kinds[kind], len(tasks_of[kind]), d.difference if d else None,
                                  d.ci95 if d else None))
    clean_errors = _errored(clean_reader)
    by_faults = by_agent = 0
    for key, errored in _errored(reader).items():
        if not errored:
            continue
        if key[0] in failed_by_fault and not clean_errors.get(key, False):
            by_faults += 1
        else:
            by_agent += 1
    sides = [sum(sum(v) / len(v) for v in (run.tasks[t][1][metric] for t in tasks)) / len(tasks)
             for run in (clean, faulted)]
    return Robustness(
        clean=clean.info.run_id, faulted=faulted.info.run_id, profile=fault_profile(faulted) or "none",
        metric=metric, n_tasks=len(tasks), clean_mean=sides[0], faulted_mean=sides[1], drop=overall.difference,
        ci95=overall.ci95, within_noise=overall.within_noise,
        faulted_calls=sum(1 for cs in calls.values() for c in cs if isinstance(c.get("fault"), Mapping)),
        calls=sum(len(cs) for cs in calls.values()), kinds=tuple(impacts), errors_by_faults=by_faults,
        errors_by_agent=by_agent)


def robustness_text(r: Robustness) -> str:
    """The robustness section, as ``results compare`` and ``suite show`` print it."""
    ci = f" [{r.ci95[0]:+.3f}, {r.ci95[1]:+.3f}]" if r.ci95 else ""
    lines = [f"robustness under faults {r.profile!r} ({r.metric}, {r.n_tasks} tasks): {r.clean_mean:.4f} clean -> "
             f"{r.faulted_mean:.4f} faulted, drop {r.drop:+.4f}{ci}" + (" (within noise)" if r.within_noise else ""),
             f"  faulted calls: {r.faulted_calls} of {r.calls}; errors caused by faults: {r.errors_by_faults}, "
             f"by the agent: {r.errors_by_agent}"]
    for k in r.kinds:
        kci = f" [{k.ci95[0]:+.3f}, {k.ci95[1]:+.3f}]" if k.ci95 else ""
        drop = f"drop {k.drop:+.4f}{kci}" if k.drop is not None else "drop -"
        lines.append(f"  {k.kind:<16} {k.calls:>4} calls on {k.tasks:>3} tasks, {drop} on those tasks")
    return "\n".join(lines)


def pairs_of(runs: Sequence[LoadedRun]) -> list[tuple[LoadedRun, LoadedRun]]:
    """(clean, faulted) pairs among ``runs`` as ``results compare`` takes them: the baseline against each
    other run, whichever of the two is the faulted one."""
    base, others = runs[0], runs[1:]
    base_faulted = fault_profile(base) is not None
    pairs = []
    for other in others:
        other_faulted = fault_profile(other) is not None
        if base_faulted != other_faulted:
            pairs.append((other, base) if base_faulted else (base, other))
    return pairs


def _clean(options: Mapping[str, Any]) -> bool:
    return options.get("faults") in (None, "", "none")


def add_robustness(cells: list[dict[str, Any]], options: Mapping[str, Mapping[str, Any]], warnings: list[str]
                   ) -> None:
    """Give each faulted cell of one benchmark's leaderboard rows (``cells``, with their ``_path``) its
    robustness against its clean twin: the cell whose options (``options`` by cell name) are its own but for
    ``faults``. A faulted cell without a clean twin gets none."""
    from agentcompass.errors import AgentCompassError
    from agentcompass.results.comparison import load_run
    from agentcompass.serialization import unstructure

    def rest(name: str) -> dict[str, Any]:
        return {k: v for k, v in (options.get(name) or {}).items() if k not in ("faults", "name")}

    for row in cells:
        mine = options.get(row["name"]) or {}
        if _clean(mine):
            continue
        twin = next((c for c in cells if _clean(options.get(c["name"]) or {}) and rest(c["name"]) == rest(
            row["name"])), None)
        if twin is None:
            continue
        try:
            r = robustness(load_run(twin["_path"]), load_run(row["_path"]), twin.get("metric"))
        except (AgentCompassError, KeyError) as exc:
            warnings.append(f"{row['name']}: robustness against {twin['name']}: {exc}")
            continue
        row["robustness"] = {"vs": twin["name"], "faults": mine.get("faults"), **unstructure(r)}
