"""Keeping the ``react`` conversation within the model's context window.

Two triggers, one remedy. Before each call, a conversation longer than ``max_context_chars`` is shrunk; when the
provider still rejects a call because the prompt is too long (:func:`is_overflow`), the budget is halved and
the conversation shrunk again, a few times. Shrinking replaces the *oldest tool outputs* first with a short
note of what was removed — the instruction, the model's own messages and the latest tool output stay; the
latest tool output goes last. Every shrink is recorded (:attr:`ContextKeeper.events`).
"""

from __future__ import annotations

import json
import re
from collections.abc import MutableSequence
from dataclasses import dataclass
from typing import Any

from agentcompass.runtime import ModelError

_OVERFLOW = re.compile(
    r"context[_ -]?(length|window)|maximum context|too many tokens|prompt is too long|input is too long|"
    r"reduce the length|exceeds? (the )?(model'?s? )?(maximum|max|context|token)|token limit|"
    r"longer than the model|tokens? exceed",
    re.IGNORECASE,
)

#: What a removed tool output becomes. Kept short; the original length tells the model what it lost.
STUB = "[tool output removed to fit the model's context window: {n} characters; run the tool again if needed]"


def is_overflow(exc: ModelError) -> bool:
    """Whether a model error says the prompt does not fit the model's context window."""
    return exc.status in (None, 400, 413, 422) and bool(_OVERFLOW.search(str(exc)))


def size(messages: list[dict[str, Any]]) -> int:
    """The conversation's size in characters (contents and tool-call arguments), an estimate of its tokens."""
    total = 0
    for message in messages:
        total += len(str(message.get("content") or ""))
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            arguments = function.get("arguments")
            total += len(function.get("name") or "") + len(
                arguments if isinstance(arguments, str) else json.dumps(arguments))
    return total


@dataclass
class ShrinkEvent:
    turn: int
    reason: str  # "budget" (over max_context_chars) or "overflow" (the provider refused the prompt)
    outputs_removed: int
    chars_removed: int
    size_after: int

    def to_json(self) -> dict[str, Any]:
        return {"turn": self.turn, "reason": self.reason, "outputs_removed": self.outputs_removed,
                "chars_removed": self.chars_removed, "size_after": self.size_after}


class ContextKeeper:
    """Shrinks one conversation in place and records what it did."""

    def __init__(self, max_chars: int) -> None:
        self.max_chars = max_chars
        self.events: list[ShrinkEvent] = []
        self.overflow_errors = 0

    def fit(self, messages: MutableSequence[dict[str, Any]], turn: int, reason: str = "budget",
            target: int | None = None) -> bool:
        """Shrink ``messages`` towards ``target`` characters (default: the budget) by removing tool outputs,
        oldest first. The latest tool output is removed only when no older one is left, in a call of its own
        (so that the caller tries the call again first). Returns whether anything was removed."""
        target = self.max_chars if target is None else target
        current = size(list(messages))
        if current <= target:
            return False
        tool_indices = [i for i, m in enumerate(messages) if m.get("role") == "tool"]
        latest = tool_indices[-1:] if tool_indices else []
        # Oldest first, the latest output left alone; the latest only once nothing older is left to remove.
        older = [i for i in tool_indices[:-1] if self._removable(messages[i])]
        candidates = older or [i for i in latest if self._removable(messages[i])]
        removed = chars = 0
        for index in candidates:
            if current <= target:
                break
            message = messages[index]
            length = len(str(message.get("content") or ""))
            stub = STUB.format(n=length)
            messages[index] = {**message, "content": stub, "_stub": True}
            current -= length - len(stub)
            removed += 1
            chars += length - len(stub)
        if removed:
            self.events.append(ShrinkEvent(turn, reason, removed, chars, current))
        return removed > 0

    @staticmethod
    def _removable(message: dict[str, Any]) -> bool:
        length = len(str(message.get("content") or ""))
        return not message.get("_stub") and length > len(STUB.format(n=length))

    def record(self) -> dict[str, Any]:
        return {
            "max_context_chars": self.max_chars,
            "shrinks": len(self.events),
            "outputs_removed": sum(e.outputs_removed for e in self.events),
            "chars_removed": sum(e.chars_removed for e in self.events),
            "overflow_errors": self.overflow_errors,
            "events": [e.to_json() for e in self.events[-20:]],
        }


def for_model(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation as sent: without the keeper's private marks."""
    return [{k: v for k, v in m.items() if not k.startswith("_")} for m in messages]
