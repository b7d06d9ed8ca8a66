"""Metering of model calls: every call of a task attempt becomes a record in its trajectory."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from agentcompass.runtime.models import ChatResponse, ModelClient, ModelError


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

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)


@attrs.define
class TaskMeter:
    """Collects the model calls of one task attempt."""

    task_id: str
    attempt: int
    calls: list[CallRecord] = attrs.field(factory=list)

    def totals(self) -> dict[str, dict[str, float]]:
        """Per role: calls, prompt/completion tokens, summed latency."""
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
        return out


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
        try:
            response = await self.inner.chat(messages, tools=tools, **params)
        except ModelError as exc:
            record.error = str(exc)
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
        return response
