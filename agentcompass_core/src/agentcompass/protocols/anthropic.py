"""Anthropic Messages (``POST /v1/messages``) to and from the canonical form.

A user turn's ``tool_result`` blocks become ``tool`` messages (before the rest of the turn); an assistant
turn's ``thinking`` / ``redacted_thinking`` blocks become ``reasoning_blocks`` (and their text
``reasoning_content``), its ``tool_use`` blocks ``tool_calls``. Rendering back puts each assistant turn's
blocks in the order thinking, text, tool use, and merges consecutive turns of one role (the API wants them
alternating).
"""

from __future__ import annotations

import json
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
    call_input,
    choice_name,
    data_url,
    error_kind,
    kind_and_body,
    new_id,
    require,
    split_data_url,
    tool_schema,
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

STOP_TO_FINISH = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_calls",
                  "refusal": "content_filter", "pause_turn": "stop", "model_context_window_exceeded": "length"}
FINISH_TO_STOP = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use",
                  "content_filter": "refusal"}
#: Settings carried as they are (canonical name = Anthropic name).
SAME = ("temperature", "top_p", "top_k", "metadata", "thinking", "service_tier")
DEFAULT_MAX_TOKENS = 4096
REASONING_TYPES = ("thinking", "redacted_thinking")


def usage_of(data: Any) -> Usage:
    """Anthropic usage: prompt tokens are input + cache writes + cache reads; cached are the cache reads."""
    if not isinstance(data, Mapping):
        return Usage()
    read = int(data.get("cache_read_input_tokens") or 0)
    prompt = int(data.get("input_tokens") or 0) + int(data.get("cache_creation_input_tokens") or 0) + read
    return Usage(prompt, int(data.get("output_tokens") or 0), read, 0)


def usage_body(usage: Usage) -> dict[str, Any]:
    return {"input_tokens": usage.prompt_tokens - usage.cached_tokens, "output_tokens": usage.completion_tokens,
            "cache_read_input_tokens": usage.cached_tokens, "cache_creation_input_tokens": 0}


def _keep_cache(source: Mapping[str, Any], target: dict[str, Any]) -> dict[str, Any]:
    if source.get("cache_control"):
        target["cache_control"] = source["cache_control"]
    return target


def _image_part(block: Mapping[str, Any]) -> dict[str, Any]:
    source = block.get("source") or {}
    if source.get("type") == "base64":
        url = data_url(str(source.get("media_type", "image/png")), str(source.get("data", "")))
    else:
        url = str(source.get("url", ""))
    return _keep_cache(block, {"type": "image_url", "image_url": {"url": url}})


def _image_block(part: Mapping[str, Any]) -> dict[str, Any]:
    url = str((part.get("image_url") or {}).get("url", ""))
    inline = split_data_url(url)
    if inline:
        block = {"type": "image", "source": {"type": "base64", "media_type": inline[0], "data": inline[1]}}
    else:
        block = {"type": "image", "source": {"type": "url", "url": url}}
    return _keep_cache(part, block)


def _parts(blocks: list[Any], dropped: list[str]) -> list[dict[str, Any]]:
    """Anthropic text / image blocks → canonical content parts."""
    parts: list[dict[str, Any]] = []
    for block in blocks:
        kind = block.get("type") if isinstance(block, Mapping) else None
        if kind == "text":
            parts.append(_keep_cache(block, {"type": "text", "text": str(block.get("text", ""))}))
        elif kind == "image":
            parts.append(_image_part(block))
        else:
            dropped.append(f"content block {kind}")
    return parts


def _blocks(content: Any) -> list[dict[str, Any]] | str:
    """Canonical content (a string or parts) → Anthropic content (the string, or blocks)."""
    if content is None:
        return []
    if isinstance(content, str):
        return content
    out: list[dict[str, Any]] = []
    for part in content:
        if not isinstance(part, Mapping):
            continue
        if part.get("type") == "text":
            out.append(_keep_cache(part, {"type": "text", "text": str(part.get("text", ""))}))
        elif part.get("type") == "image_url":
            out.append(_image_block(part))
    return out


def _block_list(content: Any) -> list[dict[str, Any]]:
    blocks = _blocks(content)
    return [{"type": "text", "text": blocks}] if isinstance(blocks, str) else blocks


def _tool_choice_in(choice: Any) -> tuple[Any, bool | None]:
    if not isinstance(choice, Mapping):
        return None, None
    kind = choice.get("type")
    parallel = False if choice.get("disable_parallel_tool_use") else None
    if kind == "any":
        return "required", parallel
    if kind == "tool":
        return {"type": "function", "function": {"name": str(choice.get("name", ""))}}, parallel
    if kind in ("auto", "none"):
        return kind, parallel
    return None, parallel


def _tool_choice_out(choice: Any, parallel: Any) -> dict[str, Any] | None:
    result: dict[str, Any] | None = None
    if choice == "required":
        result = {"type": "any"}
    elif choice in ("auto", "none"):
        result = {"type": choice}
    elif isinstance(choice, Mapping):
        name = choice_name(choice)[1]
        result = {"type": "tool", "name": name} if name else None
    if parallel is False:
        result = {**(result or {"type": "auto"}), "disable_parallel_tool_use": True}
    return result


def message_of(content: list[Any]) -> dict[str, Any]:
    """Anthropic answer (or assistant turn) content blocks → a canonical assistant message."""
    parts: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    reasoning: list[dict[str, Any]] = []
    for block in content:
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind == "text":
            parts.append(_keep_cache(block, {"type": "text", "text": str(block.get("text", ""))}))
        elif kind == "tool_use":
            calls.append(_keep_cache(block, {
                "id": str(block.get("id", "")), "type": "function",
                "function": {"name": str(block.get("name", "")),
                             "arguments": json.dumps(block.get("input") or {}, ensure_ascii=False)}}))
        elif kind in REASONING_TYPES:
            reasoning.append(dict(block))
    message: dict[str, Any] = {"role": "assistant", "content": parts or None}
    if calls:
        message["tool_calls"] = calls
    if reasoning:
        message["reasoning_blocks"] = reasoning
        text = "".join(str(b.get("thinking", "")) for b in reasoning)
        if text:
            message["reasoning_content"] = text
    return message


def assistant_blocks(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A canonical assistant message → Anthropic blocks: thinking, text, tool use."""
    blocks = [dict(b) for b in message.get("reasoning_blocks") or () if b.get("type") in REASONING_TYPES]
    content = message.get("content")
    if isinstance(content, str):
        if content:
            blocks.append({"type": "text", "text": content})
    else:
        blocks.extend(b for b in _block_list(content) if not (b.get("type") == "text" and not b.get("text")))
    for call in message.get("tool_calls") or ():
        body = kind_and_body(call)[1]
        blocks.append(_keep_cache(call, {"type": "tool_use", "id": str(call.get("id", "")),
                                         "name": str(body.get("name", "")), "input": call_input(call)}))
    return blocks


class AnthropicEncoder(Encoder):
    def __init__(self, model: str) -> None:
        self.model = model
        self.id = new_id("msg_")
        self.index = -1
        self.open: str | None = None
        self.tool_index: int | None = None
        self.custom: list[str] | None = None

    def start(self) -> bytes:
        message: dict[str, Any] = {
                   "id": self.id, "type": "message", "role": "assistant", "model": self.model, "content": [],
                   "stop_reason": None, "stop_sequence": None,
                   "usage": {"input_tokens": 0, "output_tokens": 0}}
        return (frame({"type": "message_start", "message": message}, "message_start")
                + frame({"type": "ping"}, "ping"))

    def _close(self) -> bytes:
        if self.open is None:
            return b""
        out = b""
        if self.custom is not None:
            out = self._delta({"type": "input_json_delta", "partial_json": json.dumps({"input": "".join(self.custom)})})
            self.custom = None
        self.open = None
        return out + frame({"type": "content_block_stop", "index": self.index}, "content_block_stop")

    def _open(self, kind: str, block: dict[str, Any]) -> bytes:
        out = self._close()
        self.index += 1
        self.open = kind
        return out + frame({"type": "content_block_start", "index": self.index, "content_block": block},
                           "content_block_start")

    def _delta(self, delta: dict[str, Any]) -> bytes:
        return frame({"type": "content_block_delta", "index": self.index, "delta": delta}, "content_block_delta")

    def event(self, event: StreamEvent) -> bytes:
        out = b""
        if isinstance(event, TextDelta):
            if not event.text:
                return b""
            if self.open != "text":
                out += self._open("text", {"type": "text", "text": ""})
            return out + self._delta({"type": "text_delta", "text": event.text})
        if isinstance(event, ReasoningDelta):
            if self.open != "thinking":
                out += self._open("thinking", {"type": "thinking", "thinking": "", "signature": ""})
            if event.text:
                out += self._delta({"type": "thinking_delta", "thinking": event.text})
            if event.signature:
                out += self._delta({"type": "signature_delta", "signature": event.signature})
            return out
        if isinstance(event, ToolCallDelta):
            if self.open != "tool_use" or self.tool_index != event.index:
                out += self._open("tool_use", {"type": "tool_use", "id": event.id or new_id("toolu_"),
                                               "name": event.name, "input": {}})
                self.tool_index = event.index
                self.custom = [] if event.kind == "custom" else None
            if self.custom is not None:  # a free-form tool's text: sent whole, as the one field it has here
                self.custom.append(event.arguments)
            elif event.arguments:
                out += self._delta({"type": "input_json_delta", "partial_json": event.arguments})
            return out
        assert isinstance(event, StreamEnd)
        response = event.response
        out = self._close()
        stop = FINISH_TO_STOP.get(response.finish_reason, "end_turn")
        usage = usage_body(response.usage)
        out += frame({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                      "usage": usage}, "message_delta")
        return out + frame({"type": "message_stop"}, "message_stop")

    def error(self, message: str, kind: str = "api_error") -> bytes:
        return frame({"type": "error", "error": {"type": kind, "message": message}}, "error")


class AnthropicDecoder(Decoder):
    def __init__(self, model: str) -> None:
        super().__init__(model)
        self.raw_usage: dict[str, Any] = {}
        self.stop: str | None = None
        self._tools: dict[int, int] = {}
        self._blocks: dict[int, dict[str, Any]] = {}

    def feed(self, event: str, data: str) -> list[StreamEvent]:
        payload = self.payload(data)
        if payload is None:
            return []
        kind = payload.get("type")
        out: list[StreamEvent] = []
        if kind == "error":
            error = payload.get("error") or {}
            raise UpstreamStreamError(str(error.get("message") or error), retryable=error.get("type") in (
                "overloaded_error", "api_error", "rate_limit_error"))
        if kind == "message_start":
            message = payload.get("message") or {}
            self.model = str(message.get("model") or self.model)
            self.raw_usage.update({k: v for k, v in (message.get("usage") or {}).items() if v is not None})
        elif kind == "content_block_start":
            index = int(payload.get("index") or 0)
            block = payload.get("content_block") or {}
            self._blocks[index] = dict(block)
            if block.get("type") == "tool_use":
                tool = self._tools[index] = len(self._tools)
                out.append(ToolCallDelta(tool, id=str(block.get("id") or ""), name=str(block.get("name") or "")))
            elif block.get("type") == "text" and block.get("text"):
                out.append(TextDelta(str(block["text"])))
            elif block.get("type") == "thinking" and block.get("thinking"):
                out.append(ReasoningDelta(str(block["thinking"])))
        elif kind == "content_block_delta":
            index = int(payload.get("index") or 0)
            delta = payload.get("delta") or {}
            dtype = delta.get("type")
            if dtype == "text_delta":
                out.append(TextDelta(str(delta.get("text") or "")))
            elif dtype == "input_json_delta" and index in self._tools:
                out.append(ToolCallDelta(self._tools[index], arguments=str(delta.get("partial_json") or "")))
            elif dtype == "thinking_delta":
                out.append(ReasoningDelta(str(delta.get("thinking") or "")))
            elif dtype == "signature_delta":
                out.append(ReasoningDelta(signature=str(delta.get("signature") or "")))
        elif kind == "message_delta":
            self.stop = (payload.get("delta") or {}).get("stop_reason") or self.stop
            self.raw_usage.update({k: v for k, v in (payload.get("usage") or {}).items() if v is not None})
        return self.kept(out)

    def end(self) -> StreamEnd:
        finish = STOP_TO_FINISH.get(self.stop or "end_turn", "stop")
        return StreamEnd(self.assembler.finish(self.model, usage_of(self.raw_usage), finish))


class AnthropicCodec(Codec):
    name = "anthropic"

    def parse_request(self, body: Any) -> CanonicalRequest:
        require(isinstance(body, Mapping), "the request body must be a JSON object")
        raw_messages = body.get("messages")
        require(isinstance(raw_messages, list), "request needs a 'messages' list")
        dropped: list[str] = []
        messages: list[dict[str, Any]] = []
        system = body.get("system")
        if isinstance(system, str) and system:
            messages.append({"role": "system", "content": system})
        elif isinstance(system, list) and system:
            messages.append({"role": "system", "content": _parts(system, dropped)})
        for m in raw_messages:
            require(isinstance(m, Mapping) and m.get("role") in ("user", "assistant", "system"),
                    f"each message needs a role, 'user' or 'assistant' (got {str(m)[:200]!r})")
            content = m.get("content")
            if m["role"] == "system":  # Claude Code sends system reminders as messages of their own
                messages.append({"role": "system", "content": content if isinstance(content, str)
                                 else _parts(list(content or []), dropped)})
                continue
            if m["role"] == "assistant":
                if isinstance(content, str):
                    messages.append({"role": "assistant", "content": content})
                else:
                    require(isinstance(content, list), "message content must be a string or a list of blocks")
                    message = message_of(content)
                    dropped.extend(f"content block {b.get('type')}" for b in content if isinstance(b, Mapping)
                                   and b.get("type") not in ("text", "tool_use", *REASONING_TYPES))
                    messages.append(message)
                continue
            if isinstance(content, str):
                messages.append({"role": "user", "content": content})
                continue
            require(isinstance(content, list), "message content must be a string or a list of blocks")
            rest: list[Any] = []
            for block in content:
                if isinstance(block, Mapping) and block.get("type") == "tool_result":
                    result = block.get("content")
                    tool: dict[str, Any] = {"role": "tool", "tool_call_id": str(block.get("tool_use_id", "")),
                                            "content": result if isinstance(result, str)
                                            else _parts(list(result or []), dropped)}
                    if block.get("is_error"):
                        tool["is_error"] = True
                    messages.append(_keep_cache(block, tool))
                else:
                    rest.append(block)
            if rest or not content:
                messages.append({"role": "user", "content": _parts(rest, dropped)})
        tools: list[dict[str, Any]] = []
        for t in body.get("tools") or ():
            if not isinstance(t, Mapping) or t.get("type") not in (None, "custom"):
                dropped.append(f"tool {t.get('type') if isinstance(t, Mapping) else t}")
                continue
            function: dict[str, Any] = {"name": str(t.get("name", "")),
                                        "parameters": t.get("input_schema") or {"type": "object", "properties": {}}}
            if t.get("description"):
                function["description"] = str(t["description"])
            tools.append(_keep_cache(t, {"type": "function", "function": function}))
        params: dict[str, Any] = {k: body[k] for k in SAME if body.get(k) is not None}
        if body.get("max_tokens") is not None:
            params["max_tokens"] = body["max_tokens"]
        if body.get("stop_sequences"):
            params["stop"] = list(body["stop_sequences"])
        choice, parallel = _tool_choice_in(body.get("tool_choice"))
        if choice is not None:
            params["tool_choice"] = choice
        if parallel is not None:
            params["parallel_tool_calls"] = parallel
        return CanonicalRequest(messages=messages, tools=tools, params=params, model=str(body.get("model") or ""),
                                stream=bool(body.get("stream")), dropped=tuple(dropped))

    def render_request(self, request: CanonicalRequest, model: str) -> dict[str, Any]:
        system: list[Any] = []
        out: list[dict[str, Any]] = []

        def add(role: str, blocks: list[dict[str, Any]] | str) -> None:
            if out and out[-1]["role"] == role:
                previous = out[-1]["content"]
                if isinstance(previous, str):
                    previous = [{"type": "text", "text": previous}] if previous else []
                more = [{"type": "text", "text": blocks}] if isinstance(blocks, str) else blocks
                out[-1]["content"] = previous + more
            else:
                out.append({"role": role, "content": blocks})

        for m in request.messages:
            role = m.get("role")
            if role in ("system", "developer"):
                system.append(m.get("content"))
            elif role == "user":
                content = m.get("content")
                add("user", content if isinstance(content, str) else _blocks(content))
            elif role == "assistant":
                content = m.get("content")
                if isinstance(content, str) and not m.get("tool_calls") and not m.get("reasoning_blocks"):
                    add("assistant", content)
                else:
                    add("assistant", assistant_blocks(m))
            elif role == "tool":
                content = m.get("content")
                block: dict[str, Any] = {"type": "tool_result", "tool_use_id": str(m.get("tool_call_id", "")),
                                         "content": content if isinstance(content, str) else _blocks(content)}
                if m.get("is_error"):
                    block["is_error"] = True
                add("user", [_keep_cache(m, block)])
        body: dict[str, Any] = {"model": model, "messages": out}
        if len(system) == 1 and isinstance(system[0], str):
            body["system"] = system[0]
        elif system:
            blocks: list[Any] = []
            for content in system:
                blocks.extend([{"type": "text", "text": content}] if isinstance(content, str) else
                              [b for b in _block_list(content) if b.get("type") == "text"])
            body["system"] = blocks
        params = dict(request.params)
        body["max_tokens"] = int(params.pop("max_tokens", None) or params.pop("max_completion_tokens", None)
                                 or DEFAULT_MAX_TOKENS)
        if params.get("stop"):
            stop = params["stop"]
            body["stop_sequences"] = [stop] if isinstance(stop, str) else list(stop)
        if request.tools:
            tools = []
            for t in request.tools:
                fn = kind_and_body(t, t)[1]
                tool: dict[str, Any] = {"name": str(fn.get("name", ""))}
                if fn.get("description"):
                    tool["description"] = str(fn["description"])
                tool["input_schema"] = tool_schema(t)
                tools.append(_keep_cache(t, tool))
            body["tools"] = tools
            choice = _tool_choice_out(params.get("tool_choice"), params.get("parallel_tool_calls"))
            if choice:
                body["tool_choice"] = choice
        for key in SAME:
            if params.get(key) is not None:
                body[key] = params[key]
        if request.stream:
            body["stream"] = True
        return body

    def parse_response(self, data: Any) -> ChatResponse:
        if not isinstance(data, Mapping) or not isinstance(data.get("content"), list):
            raise ProtocolError("malformed Anthropic message: no content blocks", 502, "api_error")
        message = message_of(data["content"])
        parts = message.get("content")
        if isinstance(parts, list) and all(p.get("type") == "text" and len(p) == 2 for p in parts):
            message["content"] = "".join(p["text"] for p in parts)  # the plain text, as a chat message has it
        finish = STOP_TO_FINISH.get(str(data.get("stop_reason") or "end_turn"), "stop")
        return ChatResponse(message=message, model=str(data.get("model") or ""), usage=usage_of(data.get("usage")),
                            finish_reason=finish)

    def render_response(self, response: ChatResponse, model: str) -> dict[str, Any]:
        return {"id": new_id("msg_"), "type": "message", "role": "assistant", "model": model,
                "content": assistant_blocks(response.message),
                "stop_reason": FINISH_TO_STOP.get(response.finish_reason, "end_turn"), "stop_sequence": None,
                "usage": usage_body(response.usage)}

    def encoder(self, model: str, request: CanonicalRequest) -> Encoder:
        return AnthropicEncoder(model)

    def decoder(self, model: str) -> Decoder:
        return AnthropicDecoder(model)

    def error_body(self, status: int, message: str, kind: str | None = None) -> dict[str, Any]:
        return {"type": "error", "error": {"type": kind or error_kind(status), "message": message}}
