"""A task's trajectory as a conversation: what each model call added, with its tokens, latency and cost.

Every line of ``trajectories.jsonl`` holds a call's whole prompt, so consecutive calls of one role repeat the
conversation so far. Each call here keeps only the messages its predecessor (of the same role and attempt) did
not already show, and says from which message on it starts (``skipped``).

What a page inlines is capped (:class:`Caps`): a text longer than ``text`` characters is shortened, and once a
trajectory has used ``total`` characters, the later calls keep only their numbers. :class:`Cut` counts what was
cut, and the page says so.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import attrs


@dataclass(frozen=True)
class Caps:
    """How much of a trajectory a page carries: characters per text, characters in all, calls in all."""

    text: int = 4000
    total: int = 60_000
    calls: int = 200


#: ``agentcompass report`` inlines every task's trajectory: keep each small.
REPORT_CAPS = Caps()
#: ``agentcompass view`` loads one task's trajectory when it is opened: far more fits.
VIEW_CAPS = Caps(text=100_000, total=2_000_000, calls=5_000)


@attrs.define
class Cut:
    """What the caps left out of one trajectory."""

    calls_dropped: int = 0
    texts_shortened: int = 0
    chars_cut: int = 0

    def as_dict(self) -> dict[str, int] | None:
        if not (self.calls_dropped or self.texts_shortened):
            return None
        return {"calls_dropped": self.calls_dropped, "texts_shortened": self.texts_shortened,
                "chars_cut": self.chars_cut}


@attrs.define
class _Budget:
    caps: Caps
    cut: Cut = attrs.field(factory=Cut)
    used: int = 0
    #: Characters the last :meth:`text` call cut (0: none).
    last_cut: int = 0

    def text(self, value: Any) -> str:
        text = value if isinstance(value, str) else _as_text(value)
        limit = min(self.caps.text, max(0, self.caps.total - self.used))
        self.last_cut = max(0, len(text) - limit)
        if len(text) > limit:
            self.cut.texts_shortened += 1
            self.cut.chars_cut += len(text) - limit
            text = text[:limit]
        self.used += len(text)
        return text

    @property
    def spent(self) -> bool:
        return self.used >= self.caps.total


def _as_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, list):  # content parts: text parts joined, anything else named
        parts = []
        for part in value:
            if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif isinstance(part, Mapping):
                parts.append(f"[{part.get('type', 'part')}]")
            else:
                parts.append(str(part))
        return "\n".join(parts)
    try:
        return json.dumps(value, ensure_ascii=False, indent=1, default=str)
    except (TypeError, ValueError):
        return str(value)


def _message(message: Any, budget: _Budget) -> dict[str, Any]:
    if not isinstance(message, Mapping):
        return {"role": "?", "content": budget.text(message)}
    out: dict[str, Any] = {"role": str(message.get("role", "?")), "content": budget.text(message.get("content"))}
    if budget.last_cut:
        out["content_cut"] = budget.last_cut
    calls = message.get("tool_calls")
    if isinstance(calls, list) and calls:
        out["tool_calls"] = [_tool_call(c, budget) for c in calls]
    for name in ("tool_call_id", "name"):
        if isinstance(message.get(name), str):
            out[name] = message[name]
    return out


def _tool_call(call: Any, budget: _Budget) -> dict[str, Any]:
    if not isinstance(call, Mapping):
        return {"name": "?", "arguments": budget.text(call)}
    fn: Mapping[str, Any] = call["function"] if isinstance(call.get("function"), Mapping) else call
    out: dict[str, Any] = {"id": str(call.get("id", "")), "name": str(fn.get("name", "?")),
                           "arguments": budget.text(fn.get("arguments"))}
    if budget.last_cut:
        out["arguments_cut"] = budget.last_cut
    return out


def _number(value: Any) -> float | None:
    return float(value) if type(value) in (int, float) else None


def conversation(calls: Iterable[Mapping[str, Any]], caps: Caps = REPORT_CAPS) -> dict[str, Any]:
    """``{"calls": [...], "cut": {...} | None}`` for a (task, trial)'s recorded calls (every attempt)."""
    budget = _Budget(caps)
    shown: dict[tuple[Any, Any], list[Any]] = {}  # (attempt, role) -> the conversation its last call saw
    out: list[dict[str, Any]] = []
    for n, call in enumerate(calls):
        messages: list[Any] = call["messages"] if isinstance(call.get("messages"), list) else []
        response = call.get("response")
        stream = (call.get("attempt"), call.get("role"))
        before = shown.get(stream, [])
        skipped = 0
        while skipped < min(len(before), len(messages)) and before[skipped] == messages[skipped]:
            skipped += 1
        shown[stream] = [*messages, response] if response is not None else list(messages)
        entry: dict[str, Any] = {
            "index": call.get("index", n), "attempt": call.get("attempt"), "role": call.get("role"),
            "model": call.get("model"), "started_at": _number(call.get("started_at")),
            "latency_s": _number(call.get("latency_s")), "prompt_tokens": _number(call.get("prompt_tokens")),
            "completion_tokens": _number(call.get("completion_tokens")), "cost_usd": _number(call.get("cost_usd")),
            "finish_reason": call.get("finish_reason"), "retries": call.get("attempts"),
            "error": budget.text(call["error"]) if call.get("error") else None,
            "truncated": call.get("truncated"), "skipped": skipped, "n_messages": len(messages),
        }
        if len(out) >= caps.calls or budget.spent:
            budget.cut.calls_dropped += 1
            entry["dropped"] = True
        else:
            entry["messages"] = [_message(m, budget) for m in messages[skipped:]]
            entry["response"] = _message(response, budget) if response is not None else None
            if isinstance(call.get("tools"), list):
                entry["tools"] = [str(t) for t in call["tools"]][:100]
        out.append(entry)
    return {"calls": out, "cut": budget.cut.as_dict()}


def capped(value: Any, limit: int) -> tuple[Any, int]:
    """``value`` (JSON data) with its text cut to ``limit`` characters as JSON, and how many were cut."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    if len(text) <= limit:
        return value, 0
    return {"_cut": text[:limit]}, len(text) - limit
