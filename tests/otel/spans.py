"""Checks of a run's trace against its run directory, for spans from the SDK's in-memory exporter and from the
OTLP receiver alike."""

from __future__ import annotations

import itertools
import json
from collections import Counter
from pathlib import Path
from typing import Any

from tests.export.runs import jsonl
from tests.otel.receiver import ReceivedSpan

PHASE_ORDER = ["prepare", "run", "collect", "evaluate"]
#: proto's SpanKind numbers (the SDK's enum numbers them differently).
CLIENT, INTERNAL = 3, 1


def from_sdk(spans: Any) -> list[ReceivedSpan]:
    from opentelemetry.trace import SpanKind

    kinds = {SpanKind.INTERNAL: INTERNAL, SpanKind.CLIENT: CLIENT}
    return [ReceivedSpan(
        name=s.name, span_id=f"{s.context.span_id:016x}", parent_id=f"{s.parent.span_id:016x}" if s.parent else None,
        trace_id=f"{s.context.trace_id:032x}", kind=kinds.get(s.kind, 0), start_ns=s.start_time, end_ns=s.end_time,
        attributes=dict(s.attributes or {}), status_code=s.status.status_code.value,
        status_message=s.status.description or "", resource=dict(s.resource.attributes)) for s in spans]


def check_run_tree(spans: list[ReceivedSpan], run_dir: Path) -> dict[str, Any]:
    """Assert the tree run → task attempt → phase → model call and its attributes against ``run_dir``'s files;
    return the spans by kind for further checks."""
    info = json.loads((run_dir / "run.json").read_text())
    summary = json.loads((run_dir / "summary.json").read_text())
    run_id = info["run_id"]
    roots = [s for s in spans if s.parent_id is None]
    (root,) = [s for s in roots if s.attributes.get("agentcompass.run_id") == run_id]
    mine = [s for s in spans if s.trace_id == root.trace_id]
    by_id = {s.span_id: s for s in mine}
    assert root.name == f"run {info['request']['benchmark']}"
    assert root.attributes["agentcompass.benchmark"] == info["request"]["benchmark"]
    for status, n in summary["status_counts"].items():
        assert root.attributes[f"agentcompass.status_count.{status}"] == n
    primary = summary["primary_metric"]
    assert root.attributes.get("agentcompass.score") == summary["metrics"]["overall"][primary]["mean"]

    attempts = [s for s in mine if s.parent_id == root.span_id and s.name.startswith("task ")]
    finals = {(r["task_id"], r["trial"], r["attempt"]): r for r in jsonl(run_dir / "results.jsonl")}
    retried = {(r["task_id"], r["trial"], r["attempt"]): r for r in jsonl(run_dir / "attempts.jsonl")}
    seen = {(s.attributes["agentcompass.task.id"], s.attributes["agentcompass.trial"],
             s.attributes["agentcompass.attempt"]): s for s in attempts}
    assert len(seen) == len(attempts) and set(seen) == set(finals) | set(retried)
    for key, span in seen.items():
        result = finals.get(key) or retried[key]
        assert span.name == f"task {key[0]}"
        assert span.attributes["agentcompass.status"] == result["status"]
        assert span.attributes.get("agentcompass.retried", False) == (key in retried)
        if result["status"] == "COMPLETED":
            assert span.status_code != 2
            assert span.attributes.get("agentcompass.score") == result["metrics"].get(primary)
        else:
            assert span.status_code == 2 and result["status"] in span.status_message

    phases = [s for s in mine if s.parent_id in {a.span_id for a in attempts} and not s.name.startswith("chat ")]
    for attempt in attempts:
        names = [p.name for p in sorted((p for p in phases if p.parent_id == attempt.span_id),
                                        key=lambda p: p.start_ns)]
        assert names == PHASE_ORDER[:len(names)] and names, names
        # phases follow one another inside their attempt, which lies inside the run
        ordered = sorted((p for p in phases if p.parent_id == attempt.span_id), key=lambda p: p.start_ns)
        assert root.start_ns <= attempt.start_ns <= attempt.end_ns <= root.end_ns
        assert attempt.start_ns <= ordered[0].start_ns and ordered[-1].end_ns <= attempt.end_ns
        assert all(a.start_ns <= a.end_ns <= b.start_ns for a, b in itertools.pairwise(ordered))
        if attempt.attributes["agentcompass.status"] == "COMPLETED":
            assert names == PHASE_ORDER

    calls = [s for s in mine if s.name.startswith("chat ")]
    assert len(mine) == 1 + len(attempts) + len(phases) + len(calls)
    recorded = list(jsonl(run_dir / "trajectories.jsonl"))
    roles = info["plan"]["model_roles"]
    expected = Counter((c["task_id"], c["trial"], c["attempt"], c["prompt_tokens"], c["completion_tokens"],
                        c["finish_reason"], roles[c["role"]]) for c in recorded)
    got: Counter[tuple[Any, ...]] = Counter()
    late: Counter[tuple[Any, ...]] = Counter()
    for span in calls:
        a = span.attributes
        parent = by_id[span.parent_id]
        assert parent.name == "run" and by_id[parent.parent_id] in attempts  # under the attempt's run phase
        assert span.kind == CLIENT and a["gen_ai.operation.name"] == "chat"
        assert a["gen_ai.system"] == a["gen_ai.request.model"].split("/")[0]
        assert span.start_ns >= parent.start_ns
        key = (a["agentcompass.task.id"], a["agentcompass.trial"], a["agentcompass.attempt"],
               a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"],
               (a.get("gen_ai.response.finish_reasons") or (None,))[0], a["gen_ai.request.model"])
        if a.get("agentcompass.after_attempt_end"):
            # a call still in flight when its attempt ended (a timeout): its trajectory may have ended without it
            assert by_id[parent.parent_id].attributes["agentcompass.status"] != "COMPLETED"
            late[key] += 1
            continue
        assert span.end_ns <= parent.end_ns
        got[key] += 1
    assert not got - expected and not (expected - got) - late, (expected, got, late)
    return {"root": root, "attempts": attempts, "phases": phases, "calls": calls}


def all_values(spans: list[ReceivedSpan]) -> str:
    """Every name, attribute, status message and resource attribute of ``spans``, as one text."""
    parts = []
    for s in spans:
        parts += [s.name, s.status_message, json.dumps(s.attributes, default=str), json.dumps(s.resource, default=str)]
    return "\n".join(parts)
