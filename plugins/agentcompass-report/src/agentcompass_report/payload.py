"""What the page shows of one run, as JSON-ready data: its header, summary, task rows and task details.

The page receives rows as arrays (:data:`ROW_COLUMNS` names their fields) so that 10,000 tasks stay a few
megabytes, and a task's detail (its result, earlier attempts and conversation) separately: inlined in its own
block by ``report``, fetched when opened by ``view``.

A run that has not written ``summary.json`` yet (still going, or killed) gets a summary computed here from the
final results so far, through the same public aggregation the runner uses
(:func:`agentcompass.runtime.metrics.aggregate`); it is marked ``live``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from agentcompass.runtime.metrics import MetricContract, aggregate, contract_from_json, verdict_stability
from agentcompass.runtime.run_reader import Key, RunReader
from agentcompass.runtime.scanning import Finding, read_findings
from agentcompass.runtime.shortening import shorten
from agentcompass.runtime.types import RunResult, TaskStatus

from agentcompass_report.conversation import REPORT_CAPS, Caps, capped, conversation
from agentcompass_report.recording import recording

#: The fields of a task row, in order.
ROW_COLUMNS = ("task_id", "trial", "category", "status", "score", "error", "phase", "attempt", "seconds", "calls",
               "tokens", "cost", "answer", "flags")
#: The status of a row for planned work without a final record (not a task status: nothing was recorded).
UNFINISHED = "UNFINISHED"
#: Characters of an error or answer a row carries (the detail has the whole text, within its caps).
ROW_TEXT = 160
#: Characters of a result's artifacts a detail carries.
ARTIFACTS_CHARS = 20_000


def contract_of(info: Mapping[str, Any]) -> MetricContract:
    """The run's metric contract, from ``run.json``'s plan."""
    return contract_from_json(info["plan"]["metric_contract"])


def header(files: RunReader) -> dict[str, Any]:
    """Who ran what, where, when: the request and plan of ``run.json``."""
    info = files.info
    req, plan = info["request"], info["plan"]
    return {
        "run_id": info["run_id"], "path": str(files.path), "benchmark": req["benchmark"], "harness": req["harness"],
        "model": req["model"], "environment": req.get("environment", "local"),
        "executor": req.get("executor", "local"), "seed": req.get("seed"), "trials": req.get("trials", 1),
        "created_at": info.get("created_at"), "resumed_at": info.get("resumed_at") or [],
        "agentcompass_version": info.get("agentcompass_version"), "plugins": info.get("plugins") or {},
        "model_roles": plan.get("model_roles") or {}, "role_models": req.get("role_models") or {},
        "benchmark_args": req.get("benchmark_args") or {}, "harness_args": req.get("harness_args") or {},
        "model_args": req.get("model_args") or {}, "environment_args": req.get("environment_args") or {},
        "limit": req.get("limit"), "concurrency": req.get("concurrency"), "retries": req.get("retries"),
        "derived_from": info.get("derived_from"), "contract": plan["metric_contract"],
    }


def _as_result(data: Mapping[str, Any]) -> RunResult:
    return RunResult(task_id=data["task_id"], category=data.get("category"), status=TaskStatus(data["status"]),
                     metrics=dict(data.get("metrics") or {}), trial=data.get("trial", 1))


def unfinished_work(files: RunReader) -> list[tuple[str, int, str | None]]:
    """Planned (task, trial) results without a final record (from ``run.json``'s ``planned``; none for runs
    written before it was recorded), with their categories."""
    planned = files.info.get("planned") or {}
    tasks, trials = planned.get("tasks") or {}, int(planned.get("trials") or 1)
    return [(tid, trial, cat) for trial in range(1, trials + 1) for tid, cat in tasks.items()
            if (tid, trial) not in files.results]


def live_summary(files: RunReader, contract: MetricContract) -> dict[str, Any]:
    """A ``summary.json``-shaped summary of the final results read so far, against the planned total."""
    results = [_as_result(d) for d in files.results.values()]
    unfinished = unfinished_work(files)
    overall, metrics = aggregate(contract, results, [cat for _, _, cat in unfinished])
    usage: dict[str, dict[str, float]] = {}
    retried: dict[str, dict[str, float]] = {}
    records = [(d, usage) for d in files.results.values()]
    records += [(a, target) for attempts in files.attempts.values() for a in attempts for target in (usage, retried)]
    for data, target in records:
        for role, used in ((data.get("usage") or {}).get("models") or {}).items():
            acc = target.setdefault(role, {})
            for k, v in (used or {}).items():
                if type(v) in (int, float):
                    acc[k] = acc.get(k, 0) + v
    req = files.info["request"]
    tasks = {k[0] for k in files.results} | {tid for tid, _, _ in unfinished}
    return {
        "run_id": files.run_id, "n_tasks": len(tasks), "n_finished": len(results),
        "n_planned": len(results) + len(unfinished), "n_unfinished": len(unfinished),
        "status_counts": dict(overall.status_counts), "primary_metric": contract.primary,
        "metrics": dataclasses.asdict(metrics), "trials": req.get("trials", 1), "seed": req.get("seed"),
        "usage": usage, "usage_retried": retried, "duration_s": None, "interrupted": False, "stopped_reason": None,
        "verdicts": dataclasses.asdict(verdict_stability(contract, results)),
    }


def summary_of(files: RunReader) -> tuple[dict[str, Any], bool]:
    """The run's summary and whether it is live (computed here, the run not finished)."""
    written = files.summary()
    if written is not None:
        return written, False
    return live_summary(files, contract_of(files.info)), True


def total_cost(usage: Mapping[str, Any]) -> float | None:
    """The summed ``cost_usd`` of every role, or ``None`` when a role that made calls has no known price."""
    total = 0.0
    for used in usage.values():
        if not isinstance(used, Mapping):
            continue
        cost = used.get("cost_usd")
        if isinstance(cost, int | float) and not isinstance(cost, bool):
            total += cost
        elif used.get("calls"):
            return None
    return total


def _short(value: Any) -> str:
    if value is None:
        return ""
    return shorten(value, ROW_TEXT)


def findings_by_attempt(files: RunReader) -> dict[tuple[str, int, int], list[Finding]]:
    """The scanners' findings of the run (``scans.jsonl``), by (task, trial, attempt)."""
    out: dict[tuple[str, int, int], list[Finding]] = {}
    for f in read_findings(files.path):
        out.setdefault((f.task_id, f.trial, f.attempt), []).append(f)
    return out


def flags_of(findings: list[Finding]) -> str | None:
    """A row's ``flags``: the scanners that flagged its attempt, by name (``None`` when none did)."""
    return ", ".join(sorted({f.scanner for f in findings})) or None


def row(data: Mapping[str, Any], primary: str, findings: list[Finding] | None = None) -> list[Any]:
    """One task row (the fields of :data:`ROW_COLUMNS`)."""
    models = (data.get("usage") or {}).get("models") or {}
    calls = sum(int(u.get("calls", 0)) for u in models.values() if isinstance(u, Mapping))
    tokens = sum(int(u.get("prompt_tokens", 0)) + int(u.get("completion_tokens", 0))
                 for u in models.values() if isinstance(u, Mapping))
    score = (data.get("metrics") or {}).get(primary)
    seconds = (data.get("timings") or {}).get("total")
    return [data["task_id"], data.get("trial", 1), data.get("category"), data["status"],
            score if type(score) in (int, float) else None, _short(data.get("error")), data.get("error_phase"),
            data.get("attempt", 1), seconds if type(seconds) in (int, float) else None, calls, tokens,
            total_cost(models) if models else None, _short(data.get("final_answer")), flags_of(findings or [])]


def rows(files: RunReader) -> list[list[Any]]:
    """A row per final result (in the order read, so a live view can fetch them incrementally)."""
    primary = contract_of(files.info).primary
    found = findings_by_attempt(files)
    return [row(d, primary, found.get((d["task_id"], d.get("trial", 1), d.get("attempt", 1))))
            for d in files.results.values()]


def unfinished_rows(files: RunReader) -> list[list[Any]]:
    """A row per planned (task, trial) without a final result (status ``UNFINISHED``), shown after the others."""
    primary = contract_of(files.info).primary
    return [row({"task_id": tid, "trial": trial, "category": category, "status": UNFINISHED}, primary)
            for tid, trial, category in unfinished_work(files)]


def _attempt_view(data: Mapping[str, Any], caps: Caps) -> dict[str, Any]:
    out = {k: v for k, v in data.items() if k not in ("prepared", "artifacts", "schema_version")}
    for name in ("error", "final_answer"):
        value, cut = capped(out.get(name), caps.text)
        out[name] = value
        if cut:
            out[f"{name}_cut"] = cut
    artifacts, cut = capped(data.get("artifacts") or {}, ARTIFACTS_CHARS if caps is REPORT_CAPS else caps.total)
    out["artifacts"] = artifacts
    if cut:
        out["artifacts_cut"] = cut
    return out


def detail(files: RunReader, key: Key, caps: Caps = REPORT_CAPS) -> dict[str, Any] | None:
    """What a task's own view shows: its final result, earlier attempts and conversation (every attempt), the
    scanners' findings of its final attempt (shown beside the conversation), and its terminal recording (the
    ``human`` harness's), if it left one."""
    data = files.results.get(key)
    if data is None:
        return None
    attempt = (key[0], key[1], data.get("attempt", 1))
    return {
        "result": _attempt_view(data, caps),
        "attempts": [_attempt_view(a, caps) for a in files.attempts.get(key, [])],
        "conversation": conversation(files.trajectory(key), caps),
        "findings": [dataclasses.asdict(f) for f in findings_by_attempt(files).get(attempt, [])],
        "recording": recording(files.path, data),
    }


def run_payload(files: RunReader) -> dict[str, Any]:
    """The header, summary and rows of one run (no details)."""
    summary, live = summary_of(files)
    return {"header": header(files), "summary": summary, "live": live, "columns": list(ROW_COLUMNS),
            "rows": rows(files), "unfinished": unfinished_rows(files), "warnings": list(files.warnings)}
