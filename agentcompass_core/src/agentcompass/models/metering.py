"""Metering of model calls: every call of a task attempt becomes a record in its trajectory.

Each record holds the messages, the tools offered, the reply (tool calls included), token usage, latency, the
provider's attempts and the cost when the model has a price. The meter also enforces the budgets
(:mod:`agentcompass.models.budget`) and notices fatal model errors, which stop the run's scheduling.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import attrs

from agentcompass.models.budget import BUDGETED_ROLES, LimitReached, RunBudget
from agentcompass.models.prices import Price
from agentcompass.runtime.models import ChatResponse, ModelClient, ModelError
from agentcompass.runtime.types import RunResult, TaskStatus


@attrs.define
class CallRecord:
    role: str
    model: str
    started_at: float
    latency_s: float
    messages: list[Any]
    tools: list[str]
    response: Mapping[str, Any] | None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str | None = None
    via: str = "client"
    finish_reason: str | None = None
    attempts: int = 1
    cost_usd: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "model": self.model,
            "via": self.via,
            "started_at": self.started_at,
            "latency_s": self.latency_s,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "error": self.error,
            "tools": self.tools,
            "messages": self.messages,
            "response": self.response,
            "finish_reason": self.finish_reason,
            "attempts": self.attempts,
            "cost_usd": self.cost_usd,
        }


@attrs.define
class TaskMeter:
    """Collects the model calls of one task attempt."""

    task_id: str
    attempt: int
    calls: list[CallRecord] = attrs.field(factory=list)
    #: Run-wide budget and stop signal (set when the attempt is granted its models).
    budget: RunBudget | None = None
    #: ``--max-tokens-per-task``: tokens of the agent and user roles this attempt may use.
    max_tokens: int | None = None
    #: Price of each role's model, when known.
    prices: dict[str, Price | None] = attrs.field(factory=dict)
    tokens_used: int = 0
    #: Why a budget refused a call of this attempt.
    limit_reached: str | None = None
    #: The first fatal model error of this attempt (bad credentials, unknown model).
    fatal_error: str | None = None

    def totals(self) -> dict[str, dict[str, float]]:
        """Per role: calls, prompt/completion tokens, summed latency, errors, and cost when priced."""
        out: dict[str, dict[str, float]] = {}
        for c in self.calls:
            t = out.setdefault(
                c.role, {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "latency_s": 0.0, "errors": 0}
            )
            t["calls"] += 1
            t["prompt_tokens"] += c.prompt_tokens
            t["completion_tokens"] += c.completion_tokens
            t["latency_s"] += c.latency_s
            t["errors"] += c.error is not None
            if c.cost_usd is not None:
                t["cost_usd"] = t.get("cost_usd", 0.0) + c.cost_usd
        return out

    def check(self, role: str) -> None:
        """Raise :class:`LimitReached` (or ``RunStopped``) when a budget or a stopped run refuses a call."""
        if self.budget is not None:
            self.budget.check()
        if self.max_tokens is not None and role in BUDGETED_ROLES and self.tokens_used >= self.max_tokens:
            raise LimitReached(
                f"limit reached: max_tokens_per_task={self.max_tokens} (used {self.tokens_used})",
                limit="max_tokens_per_task",
            )

    def settle(self, result: RunResult) -> RunResult:
        """The run phase's result, corrected by what the meter saw: a refused call makes it ``LIMIT_REACHED``
        (whatever the code that made the call did with the refusal); a fatal model error names the cause."""
        if self.limit_reached:
            return replace(
                result, status=TaskStatus.LIMIT_REACHED, error=self.limit_reached, error_phase="run", metrics={}
            )
        if self.fatal_error and result.status is TaskStatus.RUN_ERROR:
            return replace(result, error=f"model call failed: {self.fatal_error}")
        return result


class MeteredModel(ModelClient):
    """A model client that records every call into a :class:`TaskMeter`."""

    def __init__(self, inner: ModelClient, role: str, meter: TaskMeter, via: str = "client") -> None:
        self.inner = inner
        self.role = role
        self.meter = meter
        self.model = inner.model
        self.via = via

    async def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        **params: Any,
    ) -> ChatResponse:
        started = time.time()
        t0 = time.perf_counter()
        record = CallRecord(
            role=self.role,
            model=self.model,
            started_at=started,
            latency_s=0.0,
            messages=list(messages),
            tools=[str((t.get("function") or t).get("name", "")) for t in tools or ()],
            response=None,
            via=self.via,
        )
        meter = self.meter
        try:
            meter.check(self.role)
            response = await self.inner.chat(messages, tools=tools, **params)
        except LimitReached as exc:
            record.error = str(exc)
            meter.limit_reached = meter.limit_reached or str(exc)
            raise
        except ModelError as exc:
            record.error = str(exc)
            if exc.fatal:
                meter.fatal_error = meter.fatal_error or str(exc)
                if meter.budget is not None:
                    meter.budget.stop(str(exc))
            raise
        except Exception as exc:
            record.error = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            record.latency_s = time.perf_counter() - t0
            self.meter.calls.append(record)
        record.response = dict(response.message)
        record.prompt_tokens = response.usage.prompt_tokens
        record.completion_tokens = response.usage.completion_tokens
        record.finish_reason = response.finish_reason
        record.attempts = int((response.metadata or {}).get("attempts", 1))
        if self.role in BUDGETED_ROLES:
            meter.tokens_used += response.usage.total_tokens
        price = meter.prices.get(self.role)
        if price is not None:
            record.cost_usd = price.cost(response.usage.prompt_tokens, response.usage.completion_tokens)
            if meter.budget is not None:
                meter.budget.add_cost(record.cost_usd)
        return response
