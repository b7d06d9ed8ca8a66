"""OpenAI chat completions over ``urllib``: the run's model gateway, or any OpenAI-compatible endpoint.

The gateway already retries the provider (429, 5xx, timeouts); here a request is tried again once only when
the endpoint itself could not be reached or answered 5xx without ``x-should-retry: false``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

RETRY_DELAY_SECONDS = 1.0


class ModelCallError(Exception):
    """A model call failed for good (the run ends as a runtime error)."""


class ProtocolError(Exception):
    """A model answered something tau2 cannot turn into a message (no content and no tool call, tool call
    arguments that are not a JSON object). tau2 fails such a simulation."""


class _Retryable(Exception):
    pass


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
    """One endpoint; ``complete`` returns the assistant message (content, tool calls with parsed arguments)
    with its usage and generation time."""

    def __init__(self, base_url: str, api_key: str, *, timeout: float = 600.0) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.api_key = api_key
        self.timeout = timeout
        self.calls: dict[str, int] = {}

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
        data = json.dumps(body).encode("utf-8")
        self.calls[model] = self.calls.get(model, 0) + 1
        start = time.perf_counter()
        for attempt in (1, 2):
            try:
                payload = self._post(data)
                break
            except _Retryable as exc:
                if attempt == 2:
                    raise ModelCallError(f"{exc} (after 2 attempts)") from None
                time.sleep(RETRY_DELAY_SECONDS)
        elapsed = time.perf_counter() - start
        return parse_completion(payload, model, elapsed)

    def _post(self, data: bytes) -> dict[str, Any]:
        import urllib.error  # here, so that the oracle and a judge-less evaluation never load http and ssl
        import urllib.request

        request = urllib.request.Request(
            self.url, data=data, method="POST",
            headers={"Content-Type": "application/json", "Accept": "application/json",
                     "Authorization": f"Bearer {self.api_key}"},
        )
        where = f"POST {self.url}"
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            detail = _error_detail(exc)
            message = f"model endpoint answered HTTP {exc.code} to {where}" + (f": {detail}" if detail else "")
            if exc.code >= 500 and (exc.headers.get("x-should-retry") or "").lower() != "false":
                raise _Retryable(message) from None
            raise ModelCallError(message) from None
        except (urllib.error.URLError, OSError) as exc:
            raise _Retryable(f"cannot reach the model endpoint ({where}): {getattr(exc, 'reason', exc)}") from None
        try:
            payload = json.loads(raw)
        except ValueError:
            raise ModelCallError(f"model endpoint sent an invalid chat completion to {where}: "
                                 f"{raw[:300].decode('utf-8', 'replace')!r}") from None
        if not isinstance(payload, dict):
            raise ModelCallError(f"model endpoint sent an invalid chat completion to {where}")
        return payload


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


def _error_detail(exc: Any) -> str:
    try:
        raw = exc.read()[:500].decode("utf-8", "replace")
    except Exception:
        return ""
    try:
        err = json.loads(raw).get("error")
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
        if isinstance(err, str):
            return err
    except (ValueError, AttributeError):
        pass
    return raw.strip()
