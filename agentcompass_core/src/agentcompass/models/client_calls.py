"""In-process model calls made elsewhere (a remote worker's Python harness or benchmark), answered by the head's
gateway exactly as a local in-process call is answered.

Locally, an in-process harness calls its role's metered client (``plan.models["agent"].chat(...)`` /
``.stream(...)``) with whatever arguments it likes. On a remote worker the same call goes over the worker's
WebSocket to the head as ``POST /v1/agentcompass/client`` (:data:`CLIENT_PATH`) — the messages, the tools and
every keyword argument as the harness gave them — and the head calls the very same metered client
(``Grant.direct``) with them: nothing is translated, dropped or added on the way, and the call is recorded as a
local in-process call is. A streamed call comes back one JSON line per event as the head's client yields it (so
the first piece reaches the worker while the provider is still producing the rest); a worker that stops reading
drops the call on the head, which closes the upstream call. A failure comes back as the exception the local
client raises (:class:`ModelError`, :class:`LimitReached`, :class:`RunStopped`), its message masked of the run's
secrets.

The wire format (both directions are JSON):

* request: ``{"model", "messages", "tools", "params", "stream"}``;
* whole answer: ``{"response": ChatResponse}`` or ``{"error": {...}}`` (status 200 either way);
* streamed answer: one line per event, ``{"event": {"type": "text"|"reasoning"|"tool_call"|"end", ...}}``, or a
  last ``{"error": {...}}`` line.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

from aiohttp import web

from agentcompass.errors import describe
from agentcompass.models.budget import LimitReached, RunStopped
from agentcompass.models.gateway_serving import DISCONNECTED, Grant, ModelGateway
from agentcompass.runtime.model_stream import ReasoningDelta, StreamEnd, StreamEvent, TextDelta, ToolCallDelta
from agentcompass.runtime.models import ChatResponse, ModelError, Usage

#: The head gateway's endpoint for a remote worker's in-process calls.
CLIENT_PATH = "/v1/agentcompass/client"

_EVENT_TYPES: dict[str, type[Any]] = {"text": TextDelta, "reasoning": ReasoningDelta, "tool_call": ToolCallDelta}
_TYPE_NAMES = {kind: name for name, kind in _EVENT_TYPES.items()}


def request_body(model: str, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None,
                 params: Mapping[str, Any], *, stream: bool) -> bytes:
    """One in-process call as the head reads it. Raises :class:`ModelError` when an argument is not JSON."""
    try:
        return json.dumps({"model": model, "messages": list(messages), "tools": list(tools) if tools else None,
                           "params": dict(params), "stream": stream}).encode()
    except (TypeError, ValueError) as exc:
        raise ModelError(f"a model call from a remote worker must have JSON arguments: {exc}") from None


def response_data(response: ChatResponse) -> dict[str, Any]:
    return dataclasses.asdict(response)


def response_of(data: Mapping[str, Any]) -> ChatResponse:
    return ChatResponse(message=dict(data["message"]), model=str(data["model"]), usage=Usage(**data["usage"]),
                        finish_reason=str(data["finish_reason"]), metadata=dict(data.get("metadata") or {}))


def event_data(event: StreamEvent) -> dict[str, Any]:
    if isinstance(event, StreamEnd):
        return {"type": "end", "response": response_data(event.response)}
    return {"type": _TYPE_NAMES[type(event)], **dataclasses.asdict(event)}


def event_of(data: Mapping[str, Any]) -> StreamEvent:
    fields = {k: v for k, v in data.items() if k != "type"}
    if data.get("type") == "end":
        return StreamEnd(response_of(fields["response"]))
    kind = _EVENT_TYPES.get(str(data.get("type")))
    if kind is None:
        raise ModelError(f"the run's model gateway sent an unknown stream event {str(data.get('type'))[:40]!r}")
    event: StreamEvent = kind(**fields)
    return event


def error_data(exc: BaseException, mask: Any) -> dict[str, Any]:
    """A failed call, for the worker to raise as the local client raised it (masked of the run's secrets)."""
    if not isinstance(exc, ModelError):
        return {"type": "ModelError", "message": mask(describe(exc)), "retryable": False, "status": None,
                "fatal": False}
    data = {"type": type(exc).__name__ if isinstance(exc, LimitReached | RunStopped) else "ModelError",
            "message": mask(str(exc)), "retryable": exc.retryable, "status": exc.status, "fatal": exc.fatal}
    if isinstance(exc, LimitReached):
        data["limit"] = exc.limit
    attempts = getattr(exc, "attempts", None)
    if isinstance(attempts, int):
        data["attempts"] = attempts
    return data


def error_of(data: Mapping[str, Any]) -> ModelError:
    message = str(data.get("message") or "the model call failed")
    error: ModelError
    if data.get("type") == "LimitReached":
        error = LimitReached(message, limit=str(data.get("limit") or ""))
    elif data.get("type") == "RunStopped":
        error = RunStopped(message, fatal=bool(data.get("fatal")))
    else:
        status = data.get("status")
        error = ModelError(message, retryable=bool(data.get("retryable")),
                           status=int(status) if status is not None else None, fatal=bool(data.get("fatal")))
    if "attempts" in data:
        error.attempts = int(data["attempts"])  # type: ignore[attr-defined]
    return error


def line(data: Mapping[str, Any]) -> bytes:
    return json.dumps(data, separators=(",", ":")).encode() + b"\n"


async def serve(gateway: ModelGateway, request: web.Request) -> web.StreamResponse:
    """``POST /v1/agentcompass/client``: the call, made on the attempt's in-process client (``Grant.direct``)."""
    grant: Grant | None = gateway.authorise(request)
    if grant is None:
        return web.json_response({"error": {"type": "ModelError", "status": 401, "fatal": True, "retryable": False,
                                            "message": "invalid or expired token (tokens end with their task "
                                                       "attempt)"}})
    try:
        body = json.loads(await request.read())
        model, messages = str(body.get("model") or ""), list(body["messages"])
        tools, params, stream = body.get("tools"), dict(body.get("params") or {}), bool(body.get("stream"))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        return web.json_response({"error": error_data(ModelError(f"a malformed in-process call: {describe(exc)}",
                                                                 status=400), str)})
    role = gateway.route(grant, model)
    if role is None or role not in grant.direct:
        return web.json_response({"error": error_data(ModelError(f"unknown model {model!r}", status=404), str)})
    client = grant.direct[role]
    mask = gateway.redactor
    if not stream:
        try:
            response = await client.chat(messages, tools=tools, **params)
        except Exception as exc:
            return web.json_response({"error": error_data(exc, mask.text)})
        return web.json_response({"response": mask.data(response_data(response))})
    answer = web.StreamResponse(headers={"Content-Type": "application/x-ndjson", "Cache-Control": "no-cache"})
    await answer.prepare(request)
    events = client.stream(messages, tools=tools, **params)
    async with contextlib.aclosing(events):
        try:
            async for event in events:
                await answer.write(line({"event": mask.data(event_data(event))}))
        except DISCONNECTED:
            return answer  # closing ``events`` cancels the upstream call
        except Exception as exc:
            with contextlib.suppress(*DISCONNECTED):
                await answer.write(line({"error": error_data(exc, mask.text)}))
    with contextlib.suppress(*DISCONNECTED):
        await answer.write_eof()
    return answer
