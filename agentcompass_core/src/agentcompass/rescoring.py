"""``agentcompass evaluate``: what a finished run recorded, made ready to be scored again.

The source run is only read. Its request is reused (with the options the user gives now, e.g. a new
``--judge-model``), its tasks are loaded from the benchmark as installed now, and each final result is paired
with what ``prepare_task`` returned for it, so the runner can run the evaluate phase alone
(:class:`~agentcompass.runtime.executor.Rescore`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from agentcompass.errors import UsageError
from agentcompass.results.run_dir import RunDirectory
from agentcompass.runtime.benchmark import BaseBenchmark
from agentcompass.runtime.executor import Rescore
from agentcompass.runtime.records import RunInfo
from agentcompass.runtime.types import PreparedTask, RunRequest, RunResult, TaskSpec

#: Request fields ``agentcompass evaluate`` may change: the judge, the environment, and how it is scheduled.
OVERRIDABLE = ("environment", "environment_args", "concurrency", "max_environments", "retries", "executor",
               "executor_args", "max_retries", "max_connections", "request_timeout", "phase_timeouts")


@attrs.define
class RescoreSource:
    path: Path
    store: RunDirectory
    info: RunInfo
    records: dict[tuple[str, int], tuple[RunResult, dict[str, Any]]]
    #: ``--exclude-flagged``: the scanners whose flagged attempts were left out, and how many were.
    excluded_by: tuple[str, ...] = ()
    n_excluded: int = 0

    @classmethod
    def open(cls, path: Path, exclude_flagged: Sequence[str] = ()) -> RescoreSource:
        store = RunDirectory.open_existing(path)
        info = store.read_run_info()
        records = store.final_records()
        if not records:
            raise UsageError(f"{path} has no final results to score again")
        n_excluded = 0
        if exclude_flagged:
            records, n_excluded = _without_flagged(path, records, exclude_flagged)
        return cls(path, store, info, records, tuple(exclude_flagged), n_excluded)

    def request(self, given: RunRequest, run_id: str, overrides: frozenset[str] = frozenset()) -> RunRequest:
        """The source's request, with a new run id, the judge model given now, and the overridden fields."""
        old = self.info.request
        roles = dict(old.models.roles)
        if given.models.roles.get("judge"):
            roles["judge"] = given.models.roles["judge"]
        changed = {f: given.option(f) for f in OVERRIDABLE if f in overrides}
        return old.with_options(run_id=run_id, role_models=roles, task_ids=(), limit=None, **changed)

    def check(self, benchmark: BaseBenchmark, tasks: Sequence[TaskSpec]) -> list[TaskSpec]:
        """The benchmark's tasks that the source run finished; refuse what cannot be scored again."""
        name = self.info.request.benchmark
        if benchmark.evaluate_needs_live_environment:
            raise UsageError(
                f"benchmark {name!r} scores from the live state of the task's environment, which a finished run "
                "no longer has; it cannot be scored again without re-running (agentcompass run)"
            )
        known = {t.task_id: t for t in tasks}
        missing = sorted({tid for tid, _ in self.records} - set(known))
        if missing:
            raise UsageError(
                f"{len(missing)} task(s) of {self.path} are no longer in benchmark {name!r} as installed "
                f"(e.g. {', '.join(missing[:5])})"
            )
        wanted = {tid for tid, _ in self.records}
        return [t for t in tasks if t.task_id in wanted]

    def rescores(self) -> dict[tuple[str, int], Rescore]:
        out = {}
        for key, (result, line) in self.records.items():
            prepared = line.get("prepared") or {}
            metadata = prepared.get("metadata") if isinstance(prepared, dict) else None
            out[key] = Rescore(result, PreparedTask(task_id=result.task_id, metadata=dict(metadata or {})))
        return out

    def derived_from(self) -> dict[str, str]:
        out = {"run_dir": str(self.path.resolve()), "run_id": self.info.run_id}
        if self.excluded_by:
            out["excluded_flagged"] = f"{self.n_excluded} flagged by {', '.join(self.excluded_by)}"
        return out


def _without_flagged(path: Path, records: dict[tuple[str, int], tuple[RunResult, dict[str, Any]]],
                     scanners: Sequence[str]) -> tuple[dict[tuple[str, int], tuple[RunResult, dict[str, Any]]], int]:
    """``records`` less the final attempts a finding of ``scanners`` flags (``scans.jsonl``), and how many."""
    from agentcompass.scanning import store as scans
    from agentcompass.scanning.names import SCANS

    if not (path / SCANS).exists():
        raise UsageError(f"--exclude-flagged: {path} was not scanned (it has no {SCANS}); scan it first: "
                         f"agentcompass scan {path} --scanner {scanners[0]}")
    flagged = scans.flagged(path, scanners)
    kept = {key: (result, line) for key, (result, line) in records.items()
            if (result.task_id, result.trial, result.attempt) not in flagged}
    if not kept:
        raise UsageError(f"--exclude-flagged {', '.join(scanners)} leaves none of the {len(records)} results of "
                         f"{path} to score")
    return kept, len(records) - len(kept)
