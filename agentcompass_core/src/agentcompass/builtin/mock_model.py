"""The ``mock`` model provider: deterministic, offline, with optional simulated latency.

It behaves like a very literal tool-using agent, so offline demos produce a realistic mix of outcomes:

* after a ``tool`` message it replies with text only (``"Done: ..."``);
* otherwise it picks the tool all of whose name words (``create_task`` → create, task) occur in the last
  user message, preferring tools with more name words, and fills the arguments from that message: a
  parameter ending in ``_id`` takes the first ``<prefix>_<digits>`` token, an ``enum`` parameter the enum
  value that occurs, another string parameter the next unused quoted string;
* when no tool fits, or a required argument cannot be filled, it acknowledges the message in text;
* once the conversation holds ``max_turns`` of its own replies (default 10), it gives a final answer in text
  (``"Final answer: ..."``) and never calls a tool again: a conversation it cannot drive (an agent whose loop
  it does not understand) is handed an end rather than kept going. An agent that goes on asking after a final
  answer is stopped by its harness's per-attempt limits (``LIMIT_REACHED``).

Options (``--model-arg``): ``latency`` seconds per call (e.g. ``0.1``); ``max_turns`` (see above);
``error_rate`` P in [0, 1]: with probability P a call that would call a tool answers in text instead ("I cannot
do that."), drawn from the call's ``seed`` (the runtime passes each (task, trial)'s seed), so trials differ and
a run with the same ``--seed`` answers the same way. The usual generation settings (``temperature``, ``top_p``,
``max_tokens``, ...) are accepted and have no effect; anything else is a usage error.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import re
from collections.abc import Mapping, Sequence
from typing import Any

from agentcompass.errors import UsageError
from agentcompass.runtime.models import ChatResponse, ModelClient, Usage

OPTIONS = ("latency", "error_rate", "max_turns")
#: Replies of its own in a conversation after which the mock answers with a final text answer only.
DEFAULT_MAX_TURNS = 10
#: Generation settings other providers take; the mock accepts them, so a command line works with either.
IGNORED_SETTINGS = frozenset({
    "temperature", "top_p", "max_tokens", "max_completion_tokens", "seed", "stop", "presence_penalty",
    "frequency_penalty", "tool_choice", "parallel_tool_calls", "response_format",
})

_QUOTED = re.compile(r"'([^']+)'|\"([^\"]+)\"")


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def _text(content: Any) -> str:
    """A message's content as text (a list of content parts joined)."""
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) if isinstance(p, Mapping) else str(p) for p in content)
    return str(content or "")


def count_tokens(messages: Sequence[Mapping[str, Any]]) -> int:
    return sum(len(str(m.get("content") or "").split()) + 1 for m in messages)


def _fill_arguments(tool: Mapping[str, Any], text: str) -> dict[str, Any] | None:
    params = tool.get("parameters") or {}
    properties: Mapping[str, Any] = params.get("properties") or {}
    required = set(params.get("required") or ())
    quoted = [a or b for a, b in _QUOTED.findall(text)]
    lowered = text.lower()
    args: dict[str, Any] = {}
    for name, schema in properties.items():
        value: Any = None
        if name.endswith("_id"):
            match = re.search(rf"\b{re.escape(name[:-3])}_\d+\b", text)
            value = match.group(0) if match else None
        elif schema.get("enum"):
            value = next((v for v in schema["enum"] if str(v).lower() in lowered), None)
        elif schema.get("type", "string") == "string" and quoted:
            value = quoted.pop(0)
        if value is not None:
            args[name] = value
        elif name in required:
            return None
    return args


def _pick_tool(tools: Sequence[Mapping[str, Any]], text: str) -> tuple[str, dict[str, Any]] | None:
    words = _words(text)
    candidates = []
    for entry in tools:
        fn = entry.get("function", entry)
        name_words = [w for w in str(fn.get("name", "")).lower().split("_") if w]
        if name_words and all(w in words or w.rstrip("s") in words for w in name_words):
            candidates.append((len(name_words), fn))
    for _, fn in sorted(candidates, key=lambda c: -c[0]):
        args = _fill_arguments(fn, text)
        if args is not None:
            return str(fn["name"]), args
    return None


class MockModel(ModelClient):
    #: It takes a ``seed`` generation setting (the runtime then passes each trial's seed).
    accepts_seed = True

    def __init__(self, model: str = "", latency: float | str = 0.0, error_rate: float | str = 0.0,
                 max_turns: int | str = DEFAULT_MAX_TURNS, *, settings: Any = None, **options: Any) -> None:
        unknown = sorted(set(options) - IGNORED_SETTINGS)
        if unknown:
            raise UsageError(
                f"model 'mock' has no option {', '.join(repr(u) for u in unknown)}; its options: "
                f"{', '.join(OPTIONS)} (generation settings such as temperature are accepted and ignored)"
            )
        self.model = model or "mock"
        try:
            self.latency = float(latency)
        except ValueError:
            raise UsageError(f"model 'mock': latency must be a number of seconds, got {latency!r}") from None
        if not self.latency >= 0:
            raise UsageError(f"model 'mock': latency must be 0 or more seconds, got {latency!r}")
        try:
            self.error_rate = float(error_rate)
        except ValueError:
            self.error_rate = -1.0
        if not 0.0 <= self.error_rate <= 1.0:
            raise UsageError(f"model 'mock': error_rate must be a probability from 0 to 1, got {error_rate!r}")
        try:
            self.max_turns = int(str(max_turns))
        except ValueError:
            self.max_turns = 0
        if self.max_turns < 1:
            raise UsageError(f"model 'mock': max_turns must be a whole number of at least 1, got {max_turns!r}")
        self.calls = 0

    async def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        **params: Any,
    ) -> ChatResponse:
        if self.latency:
            await asyncio.sleep(self.latency)
        self.calls += 1
        message = self._reply(messages, tools or ())
        if message.get("tool_calls") and self.error_rate and self._errs(messages, params.get("seed")):
            message = {"role": "assistant", "content": "I cannot do that."}
        completion = len(str(message.get("content") or "").split()) + 8 * len(message.get("tool_calls", []))
        return ChatResponse(
            message=message,
            model=self.model,
            usage=Usage(prompt_tokens=count_tokens(messages), completion_tokens=completion),
            finish_reason="tool_calls" if message.get("tool_calls") else "stop",
        )

    def _errs(self, messages: Sequence[Mapping[str, Any]], seed: Any) -> bool:
        """Whether this call answers wrongly: a draw from the seed and the conversation, so reproducible."""
        digest = hashlib.sha256(json.dumps(list(messages), default=str, sort_keys=True).encode()).hexdigest()
        return random.Random(f"{seed}:{digest}").random() < self.error_rate

    def _reply(self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]) -> dict:
        last = messages[-1] if messages else {"role": "user", "content": ""}
        content = str(last.get("content") or "")
        if sum(1 for m in messages if m.get("role") == "assistant") >= self.max_turns:
            return {"role": "assistant", "content": f"Final answer: {_text(content)[:200]}"}
        if last.get("role") == "tool":
            return {"role": "assistant", "content": f"Done: {content[:200]}"}
        picked = _pick_tool(tools, content) if tools else None
        if picked is None:
            digest = hashlib.sha256(json.dumps(list(messages), default=str).encode()).hexdigest()[:8]
            return {"role": "assistant", "content": f"I understand ({digest}): {content[:200]}"}
        name, args = picked
        call_id = "call_" + hashlib.sha256(f"{len(messages)}:{name}:{args}".encode()).hexdigest()[:12]
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
            ],
        }


def make_mock_model(name: str = "", **options: Any) -> MockModel:
    return MockModel(name, **options)

