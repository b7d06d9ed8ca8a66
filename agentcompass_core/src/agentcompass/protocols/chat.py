"""OpenAI chat completions (``POST /v1/chat/completions``): the canonical form's own protocol."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from agentcompass.protocols.base import (
    CanonicalRequest,
    Codec,
    Decoder,
    Encoder,
    ProtocolError,
    UpstreamStreamError,
)
from agentcompass.protocols.shared import (
    error_kind,
    kind_and_body,
    new_id,
    require,
)
from agentcompass.protocols.sse import frame
from agentcompass.runtime.model_stream import (
    ReasoningDelta,
    StreamEnd,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
)
from agentcompass.runtime.models import ChatResponse, Usage

#: Generation settings a chat request carries into the canonical form.
PARAMS = (
    "temperature", "top_p", "max_tokens", "max_completion_tokens", "seed", "stop", "tool_choice",
    "presence_penalty", "frequency_penalty", "response_format", "parallel_tool_calls", "reasoning_effort",
    "metadata",
)


def usage_of(data: Any) -> Usage:
    """Chat-completions usage (with ``prompt_tokens_details.cached_tokens`` and
    ``completion_tokens_details.reasoning_tokens``) as a :class:`Usage`."""
    if not isinstance(data, Mapping):
        return Usage()
    prompt_details = data.get("prompt_tokens_details") or {}
    completion_details = data.get("completion_tokens_details") or {}
    return Usage(int(data.get("prompt_tokens") or 0), int(data.get("completion_tokens") or 0),
                 int(prompt_details.get("cached_tokens") or 0), int(completion_details.get("reasoning_tokens") or 0))


def usage_body(usage: Usage) -> dict[str, Any]:
    return {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
            "total_tokens": usage.total_tokens,
            "prompt_tokens_details": {"cached_tokens": usage.cached_tokens},
            "completion_tokens_details": {"reasoning_tokens": usage.reasoning_tokens}}


#: Canonical-only keys (see :mod:`agentcompass.protocols.base`) that a chat-completions server does not take.
CANONICAL_ONLY = frozenset({"reasoning_blocks", "is_error", "cache_control", "thought_signature"})


def _without_canonical(item: Any) -> Any:
    if not isinstance(item, Mapping):
        return item
    out = {k: v for k, v in item.items() if k not in CANONICAL_ONLY}
    for key in ("content", "tool_calls"):
        if isinstance(out.get(key), list):
            out[key] = [_without_canonical(part) for part in out[key]]
    return out


def wire_messages(messages: Any) -> list[dict[str, Any]]:
    """Canonical messages as a chat-completions server takes them: the canonical-only keys (vendor reasoning
    blocks, ``is_error``, ``cache_control``, Gemini's ``thought_signature``) left out of messages, content parts
    and tool calls. Everything else, ``reasoning_content`` included, is kept."""
    return [_without_canonical(m) for m in messages]


def wire_tools(tools: Any) -> list[dict[str, Any]]:
    """Canonical tools without their ``cache_control``."""
    return [_without_canonical(t) for t in tools]


class ChatEncoder(Encoder):
    def __init__(self, model: str, include_usage: bool) -> None:
        self.id = new_id("chatcmpl-")
        self.created = int(time.time())
        self.model = model
        self.include_usage = include_usage
        self._started: set[int] = set()
        self._role_sent = False

    def _chunk(self, delta: Mapping[str, Any], finish: str | None = None, **extra: Any) -> bytes:
        if not self._role_sent:  # the first chunk says whose message it is
            self._role_sent = True
            delta = {"role": "assistant", **delta}
        return frame({"id": self.id, "object": "chat.completion.chunk", "created": self.created,
                      "model": self.model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                      **extra})

    def event(self, event: StreamEvent) -> bytes:
        if isinstance(event, TextDelta):
            return self._chunk({"content": event.text}) if event.text else b""
        if isinstance(event, ReasoningDelta):
            return self._chunk({"reasoning_content": event.text}) if event.text else b""
        if isinstance(event, ToolCallDelta):
            call: dict[str, Any] = {"index": event.index}
            first = event.index not in self._started
            self._started.add(event.index)
            if event.kind == "custom":
                call.update(type="custom", custom={"input": event.arguments})
                if first:
                    call.update(id=event.id)
                    call["custom"]["name"] = event.name
            else:
                call["function"] = {"arguments": event.arguments}
                if first:
                    call.update(id=event.id, type="function")
                    call["function"]["name"] = event.name
            return self._chunk({"tool_calls": [call]})
        assert isinstance(event, StreamEnd)
        usage = usage_body(event.response.usage)
        out = self._chunk({}, event.response.finish_reason)
        if self.include_usage:
            out += frame({"id": self.id, "object": "chat.completion.chunk", "created": self.created,
                          "model": self.model, "choices": [], "usage": usage})
        return out + b"data: [DONE]\n\n"

    def error(self, message: str, kind: str = "api_error") -> bytes:
        return frame({"error": {"message": message, "type": kind, "code": kind}}) + b"data: [DONE]\n\n"


class ChatDecoder(Decoder):
    def __init__(self, model: str) -> None:
        super().__init__(model)
        self.finish: str | None = None
        self._kinds: dict[int, str] = {}

    def feed(self, event: str, data: str) -> list[StreamEvent]:
        chunk = self.payload(data)
        if chunk is None:
            return []
        if chunk.get("error"):
            error = chunk["error"]
            raise UpstreamStreamError(str(error.get("message") if isinstance(error, Mapping) else error))
        self.model = str(chunk.get("model") or self.model)
        if chunk.get("usage"):
            self.usage = usage_of(chunk["usage"])
        out: list[StreamEvent] = []
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            if delta.get("reasoning_content"):
                out.append(ReasoningDelta(str(delta["reasoning_content"])))
            if delta.get("content"):
                out.append(TextDelta(str(delta["content"])))
            for call in delta.get("tool_calls") or ():
                index = int(call.get("index") or 0)
                kind = self._kinds.setdefault(index, str(call.get("type") or "function"))
                body = kind_and_body({**call, "type": kind})[1]
                piece = body.get("input") if kind == "custom" else body.get("arguments")
                out.append(ToolCallDelta(index, id=str(call.get("id") or ""), name=str(body.get("name") or ""),
                                         arguments=str(piece or ""), kind=kind))
            if choice.get("finish_reason"):
                self.finish = str(choice["finish_reason"])
        return self.kept(out)

    def end(self) -> StreamEnd:
        return StreamEnd(self.assembler.finish(self.model, self.usage, self.finish))


class ChatCodec(Codec):
    name = "chat"

    def parse_request(self, body: Any) -> CanonicalRequest:
        require(isinstance(body, Mapping), "the request body must be a JSON object")
        messages = body.get("messages")
        require(isinstance(messages, list) and all(isinstance(m, Mapping) for m in messages),
                "request needs a 'messages' list")
        tools = body.get("tools") or []
        require(isinstance(tools, list), "'tools' must be a list")
        params = {k: body[k] for k in PARAMS if body.get(k) is not None}
        if isinstance(params.get("stop"), str):
            params["stop"] = [params["stop"]]
        options = body.get("stream_options") or {}
        return CanonicalRequest(
            messages=[dict(m) for m in messages], tools=[dict(t) for t in tools], params=params,
            model=str(body.get("model") or ""), stream=bool(body.get("stream")),
            include_usage=bool(isinstance(options, Mapping) and options.get("include_usage")))

    def render_request(self, request: CanonicalRequest, model: str) -> dict[str, Any]:
        body: dict[str, Any] = {"model": model, "messages": [dict(m) for m in request.messages]}
        if request.tools:
            body["tools"] = [dict(t) for t in request.tools]
        body.update({k: v for k, v in request.params.items() if k in PARAMS})
        if request.stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        return body

    def parse_response(self, data: Any) -> ChatResponse:
        choices = data.get("choices") if isinstance(data, Mapping) else None
        if not isinstance(choices, list) or not choices or not isinstance(choices[0].get("message"), Mapping):
            raise ProtocolError("malformed chat completion: no choices[0].message", 502, "api_error")
        raw = choices[0]["message"]
        message: dict[str, Any] = {"role": "assistant", "content": raw.get("content")}
        for key in ("tool_calls", "reasoning_content", "refusal"):
            if raw.get(key):
                message[key] = raw[key]
        return ChatResponse(message=message, model=str(data.get("model") or ""), usage=usage_of(data.get("usage")),
                            finish_reason=str(choices[0].get("finish_reason") or "stop"))

    def render_response(self, response: ChatResponse, model: str) -> dict[str, Any]:
        message = {k: v for k, v in response.message.items() if k != "reasoning_blocks"}
        message.setdefault("content", None)
        message["role"] = "assistant"
        return {"id": new_id("chatcmpl-"), "object": "chat.completion", "created": int(time.time()), "model": model,
                "choices": [{"index": 0, "message": message, "finish_reason": response.finish_reason}],
                "usage": usage_body(response.usage)}

    def encoder(self, model: str, request: CanonicalRequest) -> Encoder:
        return ChatEncoder(model, request.include_usage)

    def decoder(self, model: str) -> Decoder:
        return ChatDecoder(model)

    def error_body(self, status: int, message: str, kind: str | None = None) -> dict[str, Any]:
        return {"error": {"message": message, "type": kind or error_kind(status), "code": status}}
