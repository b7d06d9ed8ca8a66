"""``agentcompass export inspect``: a run as an Inspect log, written through ``inspect_ai``'s own log API.

What maps to what:

* the run → the log's ``eval`` (task = the benchmark, model = the agent's model, ``model_roles`` = the other
  roles, solver = the harness, ``epochs`` = ``--trials``), ``plan`` (the harness and its options), ``results``
  (every scalar metric of ``summary.json``: ``mean`` over all results with errors counting as 0,
  ``mean_completed``, ``stderr``, the 95% interval, pass@k and pass^k) and ``stats`` (usage per model and role);
* each (task, trial) → a sample (``id`` = task, ``epoch`` = trial) holding the conversation of its final attempt
  (messages with tool calls and results), one model event per call (input, output, tokens, time, error), its
  scores, its usage, and for a result that is not ``COMPLETED`` an ``error`` (the status, phase and message),
  so it shows as errored; retried attempts are its ``error_retries``; the scanners' findings of the attempt
  (``agentcompass scan``) are its ``metadata["findings"]`` (never a score).

``inspect_ai`` is an optional dependency of this plugin (``pip install agentcompass-export[inspect]``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentcompass.errors import UsageError
from agentcompass.runtime.types import RunResult, TaskStatus

from agentcompass_export.chat import agent_calls, common_prefix, conversation, text_of, tool_calls_of
from agentcompass_export.source import Calls, Record, RunSource

if TYPE_CHECKING:
    from inspect_ai.log import EvalLog, EvalSample
    from inspect_ai.model import ChatMessage, ModelOutput, ModelUsage

#: ``finish_reason`` of a call → Inspect's ``stop_reason``.
STOP_REASONS: dict[str, Any] = {
    "stop": "stop", "tool_calls": "tool_calls", "function_call": "tool_calls", "length": "max_tokens",
    "max_tokens": "max_tokens", "content_filter": "content_filter", "end_turn": "stop", "tool_use": "tool_calls",
    "stop_sequence": "stop"}


def require_inspect() -> None:
    try:
        import inspect_ai  # noqa: F401
    except ImportError:
        raise UsageError("export inspect needs inspect_ai: pip install 'agentcompass-export[inspect]' "
                         "(or pip install inspect-ai)") from None


def _iso(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, tz=dt.UTC).isoformat()


def _messages(conv: Sequence[Mapping[str, Any]], model: str, names: dict[str, str] | None = None
              ) -> list[ChatMessage]:
    from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageTool, ChatMessageUser
    from inspect_ai.tool import ToolCall

    names = {} if names is None else names  # tool call id -> function, across the calls of a sample
    out: list[ChatMessage] = []
    for m in conv:
        role, content = m.get("role"), text_of(m.get("content"))
        if role == "assistant":
            calls = [ToolCall(id=cid, function=name, arguments=args, parse_error=err)
                     for cid, name, args, err in tool_calls_of(m)]
            names.update((c.id, c.function) for c in calls)
            out.append(ChatMessageAssistant(content=content, tool_calls=calls or None, model=model,
                                            source="generate"))
        elif role == "tool":
            call_id = str(m.get("tool_call_id") or "")
            out.append(ChatMessageTool(content=content, tool_call_id=call_id or None,
                                       function=m.get("name") or names.get(call_id)))
        elif role in ("system", "developer"):
            out.append(ChatMessageSystem(content=content))
        else:
            out.append(ChatMessageUser(content=content))
    return out


def _usage(prompt: int, completion: int, cost: float | None = None, cached: int | None = None,
           reasoning: int | None = None) -> ModelUsage:
    from inspect_ai.model import ModelUsage

    return ModelUsage(input_tokens=int(prompt), output_tokens=int(completion), total_tokens=int(prompt + completion),
                      total_cost=cost, input_tokens_cache_read=cached, reasoning_tokens=reasoning)


def _output(call: Mapping[str, Any] | None, model: str) -> ModelOutput:
    from inspect_ai.model import ChatCompletionChoice, ModelOutput

    if call is None:
        return ModelOutput(model=model)
    reply = call.get("response")
    if not isinstance(reply, Mapping):
        return ModelOutput(model=model, error=call.get("error"), time=call.get("latency_s"),
                           usage=_usage(call.get("prompt_tokens", 0), call.get("completion_tokens", 0)))
    (message,) = _messages([{"role": "assistant", **reply}], model)
    return ModelOutput(
        model=model, time=call.get("latency_s"),
        choices=[ChatCompletionChoice(message=message,  # type: ignore[arg-type]
                                      stop_reason=STOP_REASONS.get(call.get("finish_reason") or "", "unknown"))],
        usage=_usage(call.get("prompt_tokens", 0), call.get("completion_tokens", 0), call.get("cost_usd"),
                     call.get("cached_tokens"), call.get("reasoning_tokens")),
    )


class _Inputs:
    """The input messages of a sample's model events, converted once: a call's prompt repeats the previous
    prompt of its role, so the messages they share are the same objects (which also lets Inspect's writer pool
    them without hashing each copy)."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        self.previous: dict[str, tuple[list[Any], list[ChatMessage]]] = {}
        self.tools: dict[tuple[str, ...], list[Any]] = {}

    def messages(self, call: Mapping[str, Any], model: str) -> list[ChatMessage]:
        raw = [m for m in call.get("messages") or () if isinstance(m, Mapping)]
        role = str(call.get("role"))
        before, converted = self.previous.get(role, ([], []))
        shared = common_prefix(before, raw)
        out = converted[:shared] + _messages(raw[shared:], model, self.names)
        self.previous[role] = (raw, out)
        return out

    def tool_infos(self, call: Mapping[str, Any]) -> list[Any]:
        from inspect_ai.tool import ToolInfo

        key = tuple(str(name) for name in call.get("tools") or ())
        found = self.tools.get(key)
        if found is None:
            found = self.tools[key] = [ToolInfo(name=name, description="") for name in key]
        return found


def _event(call: Mapping[str, Any], model: str, inputs: _Inputs) -> Any:
    from inspect_ai.event import ModelEvent
    from inspect_ai.model import GenerateConfig

    started = float(call.get("started_at") or 0.0)
    latency = float(call.get("latency_s") or 0.0)
    return ModelEvent(
        timestamp=dt.datetime.fromtimestamp(started, tz=dt.UTC),
        completed=dt.datetime.fromtimestamp(started + latency, tz=dt.UTC),
        working_time=latency, working_start=0.0, model=model, role=call.get("role"),
        input=inputs.messages(call, model), tools=inputs.tool_infos(call),
        tool_choice="auto", config=GenerateConfig(), output=_output(call, model),
        retries=max(0, int(call.get("attempts") or 1) - 1), error=call.get("error"),
        metadata={"via": call.get("via"), "index": call.get("index"),
                  **({"truncated": call["truncated"]} if call.get("truncated") else {})},
    )


def _findings(source: RunSource, result: RunResult) -> list[dict[str, Any]]:
    """The scanners' findings of the sample's attempt, as JSON (what ``scans.jsonl`` holds)."""
    return [dataclasses.asdict(f) for f in source.findings(result)]


def _error_text(result: RunResult) -> str:
    return f"{result.status.value} in {result.error_phase or 'run'}: {result.error or '(no message)'}"


def _sample(source: RunSource, result: RunResult, calls: Calls) -> EvalSample:
    from inspect_ai.log import EvalError, EvalRetryError, EvalSample
    from inspect_ai.scorer import Score

    roles = source.roles
    role, own = agent_calls(calls, list(roles))
    model = roles.get(role, "") or (str(own[-1].get("model")) if own else "")
    messages = _messages(conversation(own), model)
    first_user = next((m for m in messages if m.role == "user"), None)
    by_model: dict[str, list[int | float | None]] = {}
    by_role: dict[str, list[int | float | None]] = {}
    for call in calls:
        for key, table in ((roles.get(call.get("role", ""), str(call.get("model"))), by_model),
                           (str(call.get("role")), by_role)):
            totals = table.setdefault(key, [0, 0, None])
            totals[0] = int(totals[0] or 0) + int(call.get("prompt_tokens") or 0)
            totals[1] = int(totals[1] or 0) + int(call.get("completion_tokens") or 0)
            if call.get("cost_usd") is not None:
                totals[2] = float(totals[2] or 0.0) + float(call["cost_usd"])
    inputs = _Inputs()
    completed = result.status is TaskStatus.COMPLETED
    error = None if completed else EvalError(message=_error_text(result), traceback=_error_text(result),
                                             traceback_ansi=_error_text(result))
    retries = [EvalRetryError(message=_error_text(r), traceback=_error_text(r), traceback_ansi=_error_text(r))
               for r in source.retried.get((result.task_id, result.trial), ())]
    started = min((float(c.get("started_at") or 0.0) for c in calls), default=None)
    return EvalSample(
        id=result.task_id, epoch=result.trial,
        input=[first_user] if first_user is not None else result.task_id,
        target="",
        messages=messages,
        output=_output(own[-1] if own else None, model) if own else _final_output(result, model),
        scores={name: Score(value=value, answer=result.final_answer) for name, value in result.metrics.items()}
        if completed else None,
        metadata={"category": result.category, "status": result.status.value, "attempt": result.attempt,
                  "seed": result.seed, "error_phase": result.error_phase, "timings": dict(result.timings),
                  "final_answer": result.final_answer,
                  **({"findings": findings} if (findings := _findings(source, result)) else {})},
        events=[_event(c, roles.get(str(c.get("role")), str(c.get("model"))), inputs) for c in calls],
        model_usage={k: _usage(int(p or 0), int(c or 0), x) for k, (p, c, x) in by_model.items()},
        role_usage={k: _usage(int(p or 0), int(c or 0), x) for k, (p, c, x) in by_role.items()},
        started_at=_iso(started) if started is not None else None,
        total_time=result.timings.get("total"), working_time=result.timings.get("total"),
        error=error, error_retries=retries or None,
    )


def _final_output(result: RunResult, model: str) -> ModelOutput:
    from inspect_ai.model import ModelOutput

    return ModelOutput.from_content(model=model, content=result.final_answer or "") if result.final_answer \
        else ModelOutput(model=model)


def build_log(source: RunSource) -> EvalLog:
    """The Inspect log of ``source``: every finished (task, trial) a sample, the run's figures its results."""
    from inspect_ai.log import (
        EvalConfig,
        EvalDataset,
        EvalLog,
        EvalMetric,
        EvalPlan,
        EvalPlanStep,
        EvalResults,
        EvalScore,
        EvalSpec,
        EvalStats,
    )
    from inspect_ai.model import ModelConfig

    info, summary, req = source.info, source.summary, source.info.request  # run.json: options by name
    roles = source.roles
    calls = dict(source.final_calls())
    samples = [_sample(source, r, calls.get(key, [])) for key, r in sorted(
        source.results.items(), key=lambda kv: (kv[0][1], kv[0][0]))]
    task_ids = sorted({tid for tid, _ in source.results})
    spec = EvalSpec(
        eval_id=info.run_id, run_id=info.run_id, created=info.created_at, task=req.benchmark,
        task_id=info.run_id, task_args=dict(req.benchmark_args), solver=req.harness,
        solver_args=dict(req.harness_args),
        dataset=EvalDataset(name=req.benchmark, samples=summary.n_tasks if summary else len(task_ids),
                            sample_ids=task_ids),
        model=roles.get("agent", req.model), model_args=dict(req.model_args), model_base_url=req.model_base_url,
        model_roles={role: ModelConfig(model=model) for role, model in roles.items() if role != "agent"} or None,
        config=EvalConfig(epochs=req.trials, limit=req.limit, max_samples=req.concurrency,
                          retry_on_error=req.retries or None, token_limit=req.max_tokens_per_task,
                          cost_limit=req.max_cost),
        packages={"agentcompass": info.agentcompass_version,
                  **{name: version for name, version in info.plugins.items() if version}},
        metadata={"agentcompass": {"run_id": info.run_id, "run_dir": str(source.path), "harness": req.harness,
                                   "environment": req.environment, "executor": req.executor, "seed": req.seed,
                                   "trials": req.trials,
                                   "metric_contract": dict(info.plan.metric_contract)}},
    )
    plan = EvalPlan(steps=[EvalPlanStep(solver=req.harness, params=dict(req.harness_args))])
    results = None
    stats = EvalStats(started_at=info.created_at)
    status = "started"
    if summary is not None:
        status = "cancelled" if summary.interrupted or summary.stopped_reason else "success"
        scores = []
        for name, overall in summary.metrics.overall.items():
            agg = Record(overall)
            figures = {"mean": agg.mean, "mean_completed": agg.mean_completed, "stderr": agg.stderr}
            if agg.ci95 is not None:
                figures.update(ci95_low=agg.ci95[0], ci95_high=agg.ci95[1])
            metrics = {k: EvalMetric(name=k, value=v) for k, v in figures.items() if v is not None}
            if name == summary.primary_metric:
                for pk in summary.metrics.pass_k or ():
                    metrics[f"pass@{pk.k}"] = EvalMetric(name=f"pass@{pk.k}", value=pk.pass_at_k)
                    metrics[f"pass^{pk.k}"] = EvalMetric(name=f"pass^{pk.k}", value=pk.pass_hat_k)
            scores.append(EvalScore(name=name, scorer=req.benchmark, scored_samples=agg.n_completed,
                                    unscored_samples=agg.n_errored, metrics=metrics,
                                    metadata={"label": agg.label, "n": agg.n, "n_missing": agg.n_missing}))
        results = EvalResults(total_samples=sum(summary.status_counts.values()),
                              completed_samples=summary.status_counts.get("COMPLETED", 0), scores=scores,
                              metadata={"status_counts": dict(summary.status_counts),
                                        "stopped_reason": summary.stopped_reason})
        started = dt.datetime.fromisoformat(info.created_at)
        stats = EvalStats(
            started_at=info.created_at,
            completed_at=(started + dt.timedelta(seconds=summary.duration_s)).isoformat(),
            model_usage={roles.get(role, role): _usage(u["prompt_tokens"], u["completion_tokens"], u.get("cost_usd"))
                         for role, u in (summary.usage or {}).items()},
            role_usage={role: _usage(u["prompt_tokens"], u["completion_tokens"], u.get("cost_usd"))
                        for role, u in (summary.usage or {}).items()},
        )
    return EvalLog(status=status, eval=spec, plan=plan, results=results, stats=stats,  # type: ignore[arg-type]
                   samples=samples)


def default_output(source: RunSource) -> Path:
    return source.path / f"{source.info.run_id}.eval"


def export_inspect(source: RunSource, output: Path) -> Path:
    """Write ``source`` as an Inspect log at ``output`` (``.eval``, or ``.json`` for the JSON format)."""
    from inspect_ai.log import write_eval_log

    log = build_log(source)
    output.parent.mkdir(parents=True, exist_ok=True)
    write_eval_log(log, str(output), format="json" if output.suffix == ".json" else "eval")
    return output
