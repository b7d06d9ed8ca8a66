"""OpenAI chat completions in tau2's terms, over ``taubench_runner.chat_client`` (a link to the core's public
standard-library client, :mod:`agentcompass.runtime.chat_client`): the run's model gateway, or any
OpenAI-compatible endpoint."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

from taubench_runner import chat_client
from taubench_runner.chat_client import ModelCallError

__all__ = ["ChatClient", "ModelCallError", "ProtocolError", "parse_completion", "to_api_messages"]

class ProtocolError(Exception):
    """A model answered something tau2 cannot turn into a message (no content and no tool call, tool call
    arguments that are not a JSON object). tau2 fails such a simulation."""


def to_api_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Trajectory messages as chat-completion messages (tau2's ``to_litellm_messages``)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        role = m.get("role")
        if role in ("system", "user"):
            out.append({"role": role, "content": m.get("content")})
        elif role == "assistant":
            message: dict[str, Any] = {"role": "assistant", "content": m.get("content")}
            if m.get("tool_calls") is not None:
                message["tool_calls"] = [
                    {"id": c["id"], "type": "function",
                     "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])}}
                    for c in m["tool_calls"]
                ]
            out.append(message)
        elif role == "tool":
            out.append({"role": "tool", "content": m.get("content"), "tool_call_id": m.get("id")})
    return out


class ChatClient:
    """One endpoint (:mod:`agentcompass.runtime.chat_client` does the HTTP); ``complete`` returns the assistant
    message (content, tool calls with parsed arguments) with its usage and generation time."""

    def __init__(self, base_url: str, api_key: str, *, timeout: float = 600.0) -> None:
        self.endpoint = chat_client.ChatClient(base_url, api_key, timeout=timeout)

    @property
    def calls(self) -> dict[str, int]:
        return self.endpoint.calls

    def complete(
        self,
        model: str,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        **params: Any,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"model": model, "messages": to_api_messages(messages)}
        if tools:
            body["tools"] = list(tools)
            body["tool_choice"] = "auto"
        body.update({k: v for k, v in params.items() if v is not None})
        start = time.perf_counter()
        payload = self.endpoint.complete(body)
        return parse_completion(payload, model, time.perf_counter() - start)


def parse_completion(payload: Mapping[str, Any], model: str, elapsed: float) -> dict[str, Any]:
    """The assistant message of a chat completion in trajectory form (requestor to be set by the caller)."""
    try:
        raw = payload["choices"][0]["message"]
        if not isinstance(raw, Mapping):
            raise TypeError
    except (KeyError, IndexError, TypeError):
        raise ModelCallError(f"the {model!r} model sent a chat completion without a message") from None
    calls = []
    for i, call in enumerate(raw.get("tool_calls") or ()):
        function = call.get("function") or {}
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except ValueError:
                raise ProtocolError(
                    f"the {model!r} model called {function.get('name')!r} with arguments that are not JSON: "
                    f"{arguments[:200]!r}"
                ) from None
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise ProtocolError(f"the {model!r} model called {function.get('name')!r} with arguments that are not "
                                f"a JSON object: {arguments!r}"[:300])
        calls.append({"id": call.get("id") or f"call_{i}", "name": function.get("name") or "",
                      "arguments": arguments})
    content = raw.get("content")
    if content is not None and not isinstance(content, str):
        content = json.dumps(content)
    usage = payload.get("usage") or {}
    return {
        "role": "assistant",
        "content": content,
        "tool_calls": calls or None,
        "usage": {"completion_tokens": usage.get("completion_tokens"), "prompt_tokens": usage.get("prompt_tokens")},
        "generation_time_seconds": round(elapsed, 6),
    }
