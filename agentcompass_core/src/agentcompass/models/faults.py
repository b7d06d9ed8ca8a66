"""``--faults PROFILE``: faults injected at the gateway's upstream step, as the provider would cause them.

The seam: :class:`FaultSource` is a :class:`~agentcompass.models.access.CallSource` (installed last by
:mod:`agentcompass.models.call_sources`, so it sits outside ``--replay`` and ``--cache``): every call of every
role — in process, translated behind the gateway, or passed through — first draws its fault
(:func:`~agentcompass.models.fault_profiles.fault_for`), then

* ``rate_limit`` / ``server_error``: fails with :class:`InjectedFault` (HTTP 429 with ``Retry-After``, or 500 /
  503), which the gateway answers in the protocol's own error shape (a retryable error: the SDKs retry it);
* ``connection_reset``: the agent's connection is dropped before any answer; ``timeout``: after
  ``timeout_after`` seconds without one (a client with a shorter timeout gives up first, as it would);
* ``stream_cut``: a streamed answer's connection is dropped after ``cut_after`` events (a whole answer is
  not affected);
* ``bad_tool_json``: the answer's tool-call arguments are made invalid JSON (a ``}`` too many);
* ``empty_answer``: an empty answer (no text, no tool call, no tokens);
* latency: the call waits ``latency_s`` first.

The failures and the empty answer never reach the provider (nothing is billed for them); the call's record in
``trajectories.jsonl`` holds the fault (``"fault": {"kind", "index", ...}``), and a failure is the agent's to
ride out — never taken for a provider outage. Dropping a connection needs the HTTP request being served:
:func:`serving_middleware` (on the gateway's app) makes it reachable from the call.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any

import attrs
from aiohttp import web

from agentcompass.models.fault_profiles import DROPPING_KINDS, Fault, FaultProfile, fault_for, load_profile
from agentcompass.models.metering import TaskMeter
from agentcompass.protocols import CODECS
from agentcompass.protocols.sse import last_boundary
from agentcompass.runtime.model_stream import NativeReply, NativeRequest, StreamEnd, StreamEvent, ToolCallDelta
from agentcompass.runtime.models import ChatResponse, ModelClient, ModelError, Usage

#: The HTTP request the gateway is serving in this task (what a dropping fault closes), set by the middleware.
_SERVING: contextvars.ContextVar[web.Request | None] = contextvars.ContextVar("agentcompass_serving", default=None)


@web.middleware
async def serving_middleware(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                             ) -> web.StreamResponse:
    """Make the request being served reachable from the model call it makes (see :func:`drop_connection`)."""
    token = _SERVING.set(request)
    try:
        return await handler(request)
    finally:
        _SERVING.reset(token)


def drop_connection() -> None:
    """Drop the connection of the HTTP request being served, if any: the agent sees it reset."""
    request = _SERVING.get()
    transport = request.transport if request is not None else None
    if transport is not None:
        transport.abort()


class InjectedFault(ModelError):
    """A fault ``--faults`` injected into a call (``fault``): retryable, with the HTTP status the provider
    would have answered (and its ``Retry-After``), never an outage of the provider."""

    def __init__(self, fault: Fault, model: str) -> None:
        what = {"rate_limit": "rate limited", "server_error": "server error", "connection_reset":
                "connection reset", "timeout": f"no answer within {fault.hang_s:g}s" if fault.hang_s else "timeout",
                "stream_cut": f"stream cut after {fault.cut_after} events"}.get(fault.kind, fault.kind)
        status = f" (HTTP {fault.status})" if fault.status else ""
        super().__init__(f"injected fault: {what}{status} for {model!r} (--faults)", retryable=True,
                         status=fault.status or 502)
        self.fault = fault
        self.retry_after = fault.retry_after


def corrupt_arguments(message: Mapping[str, Any]) -> dict[str, Any]:
    """``message`` with each function tool call's arguments made invalid JSON (a ``}`` too many); arguments
    that are invalid already (a replayed corrupted answer) are left as they are, so corrupting is idempotent."""
    out = dict(message)
    calls = []
    for call in message.get("tool_calls") or ():
        call = dict(call)
        body = call.get("function")
        if isinstance(body, Mapping) and (call.get("type") or "function") == "function":
            arguments = str(body.get("arguments") or "")
            if _valid_json(arguments):
                call["function"] = {**body, "arguments": arguments + "}"}
        calls.append(call)
    if calls:
        out["tool_calls"] = calls
    return out


def _valid_json(text: str) -> bool:
    try:
        json.loads(text or "{}")
    except ValueError:
        return False
    return True


def _with_fault(response: ChatResponse, fault: Fault, message: Mapping[str, Any] | None = None) -> ChatResponse:
    return ChatResponse(message=dict(message if message is not None else response.message), model=response.model,
                        usage=response.usage, finish_reason=response.finish_reason,
                        metadata={**response.metadata, "fault": fault.record()})


class FaultyModel(ModelClient):
    """One role's client for one attempt, injecting the profile's faults into its calls."""

    def __init__(self, inner: ModelClient, role: str, source: FaultSource, meter: TaskMeter) -> None:
        self.inner = inner
        self.role = role
        self.rates = source.profile.rates(role)
        self.seed, self.task_id, self.trial = meter.seed, meter.task_id, meter.trial
        self.model = inner.model
        self.secrets = tuple(getattr(inner, "secrets", ()))
        self.accepts_seed = inner.accepts_seed
        self.native_protocols = inner.native_protocols
        self.calls = 0

    def next_fault(self) -> Fault:
        self.calls += 1
        return fault_for(self.rates, self.seed, self.task_id, self.trial, self.role, self.calls)

    async def _before(self, fault: Fault) -> None:
        """Wait the fault's latency; fail as the fault says (a dropped connection first, for those that drop)."""
        if fault.latency_s:
            await asyncio.sleep(fault.latency_s)
        if fault.kind == "timeout" and fault.hang_s:
            await asyncio.sleep(fault.hang_s)
        if fault.kind in ("rate_limit", "server_error", "connection_reset", "timeout"):
            if fault.kind in DROPPING_KINDS:
                drop_connection()
            raise InjectedFault(fault, self.model)

    def _empty(self, fault: Fault) -> ChatResponse:
        return ChatResponse(message={"role": "assistant", "content": ""}, model=self.model, usage=Usage(),
                            finish_reason="stop", metadata={"fault": fault.record()})

    async def chat(self, messages: Sequence[Mapping[str, Any]], *, tools: Sequence[Mapping[str, Any]] | None = None,
                   **params: Any) -> ChatResponse:
        fault = self.next_fault()
        await self._before(fault)
        if fault.kind == "empty_answer":
            return self._empty(fault)
        response = await self.inner.chat(messages, tools=tools, **params)
        if fault.kind == "bad_tool_json" and response.tool_calls:
            return _with_fault(response, fault, corrupt_arguments(response.message))
        if fault.latency_s:
            return _with_fault(response, Fault(latency_s=fault.latency_s, index=fault.index))
        return response

    async def stream(self, messages: Sequence[Mapping[str, Any]], *, tools: Sequence[Mapping[str, Any]] | None = None,
                     **params: Any) -> AsyncGenerator[StreamEvent, None]:
        fault = self.next_fault()
        await self._before(fault)
        if fault.kind == "empty_answer":
            yield StreamEnd(self._empty(fault))
            return
        sent = 0
        arguments: dict[int, list[str]] = {}  # each function tool call's arguments streamed so far
        async with contextlib.aclosing(self.inner.stream(messages, tools=tools, **params)) as events:
            async for event in events:
                if fault.kind == "stream_cut" and (sent >= (fault.cut_after or 0) or isinstance(event, StreamEnd)):
                    drop_connection()
                    raise InjectedFault(fault, self.model)
                if isinstance(event, StreamEnd):
                    if fault.kind == "bad_tool_json":  # the closing piece of each call: one ``}`` too many
                        for index, parts in sorted(arguments.items()):
                            if _valid_json("".join(parts)):
                                yield ToolCallDelta(index, arguments="}")
                    yield self._ended(event, fault)
                    return
                if isinstance(event, ToolCallDelta) and event.kind == "function":
                    arguments.setdefault(event.index, []).append(event.arguments)
                sent += 1
                yield event

    def _ended(self, end: StreamEnd, fault: Fault) -> StreamEvent:
        if fault.kind == "bad_tool_json" and end.response.tool_calls:
            return StreamEnd(_with_fault(end.response, fault, corrupt_arguments(end.response.message)))
        if fault.latency_s:
            return StreamEnd(_with_fault(end.response, Fault(latency_s=fault.latency_s, index=fault.index)))
        return end

    async def native(self, request: NativeRequest) -> NativeReply:
        if request.path.endswith("count_tokens") or request.path.endswith(":countTokens"):
            return await self.inner.native(request)
        fault = self.next_fault()
        await self._before(fault)
        if fault.kind == "empty_answer":
            codec = CODECS[request.protocol]
            body = codec.render_response(self._empty(fault), self.model)
            return NativeReply(200, {"content-type": "application/json"}, json.dumps(body).encode(),
                               metadata={"fault": fault.record()})
        reply = await self.inner.native(request)
        # A passed-through answer is relayed as the provider wrote it: only a stream is cut (tool-call arguments
        # are corrupted in translated calls only).
        recorded: Fault | None = Fault(latency_s=fault.latency_s, index=fault.index)
        if fault.kind == "stream_cut" and reply.chunks is not None and reply.status == 200:
            reply.chunks = _cut_chunks(reply.chunks, fault, self.model)
            recorded = fault
        if recorded:
            reply.metadata = {**reply.metadata, "fault": recorded.record()}
        return reply


async def _cut_chunks(chunks: AsyncIterator[bytes], fault: Fault, model: str) -> AsyncIterator[bytes]:
    """A passed-through stream's first ``cut_after`` events, then the connection dropped."""
    pending, sent = b"", 0
    try:
        async for chunk in chunks:
            pending += chunk
            while (cut := last_boundary(pending)) > 0:
                first = _first_event_end(pending[:cut])
                yield pending[:first]
                pending = pending[first:]
                sent += 1
                if sent >= (fault.cut_after or 0):
                    drop_connection()
                    raise InjectedFault(fault, model)
        drop_connection()
        raise InjectedFault(fault, model)
    finally:
        close = getattr(chunks, "aclose", None)
        if close is not None:
            await close()


def _first_event_end(events: bytes) -> int:
    """Where the first event of ``events`` (whole events) ends."""
    ends = [i + len(sep) for sep in (b"\r\n\r\n", b"\n\n", b"\r\r") if (i := events.find(sep)) >= 0]
    return min(ends) if ends else len(events)


@attrs.define
class FaultSource:
    """The :class:`~agentcompass.models.access.CallSource` of ``--faults``."""

    profile: FaultProfile
    spec: str = ""

    @classmethod
    def load(cls, spec: str) -> FaultSource:
        return cls(load_profile(spec), spec)

    def decorate(self, clients: Mapping[str, ModelClient], meter: TaskMeter) -> dict[str, ModelClient]:
        return {role: FaultyModel(client, role, self, meter) for role, client in clients.items()}

    def provenance(self) -> dict[str, object]:
        return {"faults": {"profile": self.profile.name, "spec": self.spec}}

    def warnings(self) -> list[str]:
        return []
