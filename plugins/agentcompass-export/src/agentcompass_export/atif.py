"""``agentcompass export atif``: each (task, trial) as a trajectory in Harbor's Agent Trajectory Interchange
Format (ATIF, RFC 0001; written as ``ATIF-v1.7``), by this module from the published schema (``harbor`` itself
needs Python 3.12; the tests validate what this writes with Harbor's own models and validator).

Layout, as Harbor keeps one directory per trial: ``OUT/<task>__trial-<n>/agent/trajectory.json``.

What a trajectory holds (the final attempt of the (task, trial), the conversation of its ``agent`` role):

* a ``system`` or ``user`` step for each message the prompts added that is not the model's;
* one ``agent`` step per model call (``llm_call_count`` 1): the reply's text and reasoning, its tool calls
  (arguments as objects), tokens and cost (``metrics``), and as its ``observation`` the tool results the next
  prompt brought back for those calls; a failed call is a step with an empty message and its error in ``extra``;
* ``final_metrics``: the steps' token and cost totals; ``extra.agentcompass``: the result (status, error and
  phase, metrics, final answer) and the calls of other roles (a user simulator, a judge), counted.

A (task, trial) whose final attempt made no model call (it failed before, or needs no model) gets one
``system`` step saying so, with its status and error: every finished (task, trial) has a trajectory.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agentcompass.runtime.names import safe_name
from agentcompass.runtime.types import RunResult

from agentcompass_export.chat import agent_calls, common_prefix, reasoning_of, text_of, tool_calls_of
from agentcompass_export.source import Calls, RunSource

SCHEMA_VERSION = "ATIF-v1.7"


def _timestamp(seconds: Any) -> str | None:
    if not isinstance(seconds, int | float) or isinstance(seconds, bool):
        return None
    return dt.datetime.fromtimestamp(seconds, tz=dt.UTC).isoformat()


def _metrics(call: Mapping[str, Any]) -> dict[str, Any]:
    metrics: dict[str, Any] = {"prompt_tokens": int(call.get("prompt_tokens") or 0),
                               "completion_tokens": int(call.get("completion_tokens") or 0)}
    if isinstance(call.get("cached_tokens"), int):
        metrics["cached_tokens"] = call["cached_tokens"]
    if call.get("cost_usd") is not None:
        metrics["cost_usd"] = float(call["cost_usd"])
    if isinstance(call.get("reasoning_tokens"), int):
        metrics["extra"] = {"reasoning_tokens": call["reasoning_tokens"]}
    return metrics


def _call_extra(call: Mapping[str, Any]) -> dict[str, Any]:
    keys = ("role", "via", "latency_s", "finish_reason", "attempts", "error", "truncated", "protocol", "endpoint",
            "ttft_s")
    return {k: call[k] for k in keys if call.get(k) is not None}


class _Steps:
    """Builds the steps of one trajectory, numbering them from 1."""

    def __init__(self) -> None:
        self.steps: list[dict[str, Any]] = []
        self._last_agent: dict[str, Any] | None = None

    def add(self, step: dict[str, Any]) -> dict[str, Any]:
        step = {"step_id": len(self.steps) + 1, **step}
        self.steps.append(step)
        if step["source"] == "agent":
            self._last_agent = step
        return step

    def message(self, m: Mapping[str, Any], timestamp: str | None) -> None:
        """A message a prompt added that the model did not write in this trajectory."""
        role = m.get("role")
        content = text_of(m.get("content"))
        if role == "tool":
            self._tool_result(m, content)
        elif role == "assistant":  # history the harness gave the model (no call of this trajectory wrote it)
            calls = [{"tool_call_id": i, "function_name": n, "arguments": a} for i, n, a, _ in tool_calls_of(m)]
            self.add({"timestamp": timestamp, "source": "agent", "message": content, "is_copied_context": True,
                      "llm_call_count": 0, **({"tool_calls": calls} if calls else {})})
        else:
            self.add({"timestamp": timestamp, "source": "system" if role in ("system", "developer") else "user",
                      "message": content})

    def _tool_result(self, m: Mapping[str, Any], content: str) -> None:
        call_id = str(m.get("tool_call_id") or "")
        step = self._last_agent
        if step is None:
            self.add({"source": "user", "message": content, "extra": {"tool_call_id": call_id or None}})
            return
        known = {c["tool_call_id"] for c in step.get("tool_calls") or ()}
        result: dict[str, Any] = {"content": content}
        if call_id in known:
            result["source_call_id"] = call_id
        elif call_id:
            result["extra"] = {"tool_call_id": call_id}
        step.setdefault("observation", {"results": []})["results"].append(result)

    def call(self, call: Mapping[str, Any], model: str) -> None:
        reply = call.get("response") if isinstance(call.get("response"), Mapping) else None
        step: dict[str, Any] = {
            "timestamp": _timestamp(call.get("started_at")), "source": "agent", "model_name": model,
            "message": text_of((reply or {}).get("content")), "llm_call_count": 1, "metrics": _metrics(call),
        }
        reasoning = reasoning_of(reply)
        if reasoning:
            step["reasoning_content"] = reasoning
        calls = [{"tool_call_id": i, "function_name": n, "arguments": a, **({"extra": {"parse_error": e}} if e else {})}
                 for i, n, a, e in tool_calls_of(reply)]
        if calls:
            step["tool_calls"] = calls
        extra = _call_extra(call)
        if extra:
            step["extra"] = extra
        self.add(step)


def _no_calls(result: RunResult) -> dict[str, Any]:
    what = f"{result.status.value}" + (f" in {result.error_phase}: {result.error}" if result.error else "")
    return {"source": "system", "message": f"no model calls were recorded for this attempt ({what})"}


def build_trajectory(source: RunSource, result: RunResult, calls: Calls) -> dict[str, Any]:
    """The ATIF trajectory (a JSON-ready dict) of one final result and its attempt's calls."""
    info, req = source.info, source.info.request
    roles = source.roles
    role, own = agent_calls(calls, list(roles))
    model = roles.get(role, "") or (str(own[-1].get("model")) if own else req.model)
    steps = _Steps()
    previous: list[Any] = []
    for call in own:
        messages = [m for m in call.get("messages") or () if isinstance(m, Mapping)]
        timestamp = _timestamp(call.get("started_at"))
        for m in messages[common_prefix(previous, messages):]:
            steps.message(m, timestamp)
        steps.call(call, model)
        reply = call.get("response")
        previous = [*messages, reply] if isinstance(reply, Mapping) else messages
    if not steps.steps:
        steps.add(_no_calls(result))
    tools = sorted({str(t) for c in own for t in c.get("tools") or ()})
    costs = [float(c["cost_usd"]) for c in own if c.get("cost_usd") is not None]
    cached = [int(c["cached_tokens"]) for c in own if isinstance(c.get("cached_tokens"), int)]
    final_metrics: dict[str, Any] = {
        "total_prompt_tokens": sum(int(c.get("prompt_tokens") or 0) for c in own),
        "total_completion_tokens": sum(int(c.get("completion_tokens") or 0) for c in own),
        "total_steps": len(steps.steps),
    }
    if costs:
        final_metrics["total_cost_usd"] = sum(costs)
    if cached:
        final_metrics["total_cached_tokens"] = sum(cached)
    others: dict[str, int] = {}
    for c in calls:
        if c.get("role") != role:
            others[str(c.get("role"))] = others.get(str(c.get("role")), 0) + 1
    agent_name = req.harness if req.harness and req.harness != "none" else req.benchmark
    return {
        "schema_version": SCHEMA_VERSION,
        "session_id": info.run_id,
        "trajectory_id": f"{info.run_id}/{result.task_id}/trial-{result.trial}",
        "agent": {
            "name": agent_name, "version": info.plugins.get(agent_name) or info.agentcompass_version,
            "model_name": model,
            **({"tool_definitions": [{"type": "function", "function": {"name": t}} for t in tools]} if tools else {}),
            "extra": {"role": role, "harness": req.harness, "benchmark": req.benchmark},
        },
        "steps": steps.steps,
        "final_metrics": final_metrics,
        "extra": {"agentcompass": {
            "run_id": info.run_id, "benchmark": req.benchmark, "task_id": result.task_id, "trial": result.trial,
            "attempt": result.attempt, "category": result.category, "status": result.status.value,
            "error": result.error, "error_phase": result.error_phase, "metrics": dict(result.metrics),
            "final_answer": result.final_answer, "other_role_calls": others,
            "retried_attempts": len(source.retried.get((result.task_id, result.trial), ())),
            **({"findings": [dataclasses.asdict(f) for f in found]} if (found := source.findings(result)) else {}),
        }},
    }


def trial_dir(output: Path, task_id: str, trial: int) -> Path:
    """``OUT/<task>__trial-<n>``: one directory per (task, trial), as Harbor keeps one per trial."""
    return output / f"{safe_name(task_id)}__trial-{trial}"


def _write(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, ensure_ascii=False, indent=1), encoding="utf-8")
    os.replace(tmp, path)


def export_atif(source: RunSource, output: Path) -> int:
    """Write every finished (task, trial) of ``source`` under ``output``; how many trajectories were written."""
    written = 0
    pending = dict(source.results)
    for key, calls in source.final_calls():
        result = pending.pop(key, None)
        if result is None:
            continue
        _write(trial_dir(output, *key) / "agent" / "trajectory.json", build_trajectory(source, result, calls))
        written += 1
    for (task_id, trial), result in pending.items():  # final attempts without a model call
        _write(trial_dir(output, task_id, trial) / "agent" / "trajectory.json", build_trajectory(source, result, []))
        written += 1
    return written

