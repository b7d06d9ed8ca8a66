"""OpenAI Responses (``POST /v1/responses``) to and from the canonical form.

``instructions`` become the leading system message; input items become messages: ``function_call`` /
``custom_tool_call`` items join the assistant message before them as ``tool_calls``, ``reasoning`` items its
``reasoning_blocks``, ``function_call_output`` / ``custom_tool_call_output`` items ``tool`` messages. Rendering
back gives each call and reasoning item its own input item again, in the order reasoning, message, calls.
The codec refuses ``previous_response_id`` (it holds no responses); the gateway serves it for translated calls
from the answers of the running task attempt (:mod:`agentcompass.models.gateway_serving`), and passes it
through to a provider that speaks Responses. ``item_reference`` items are refused.
"""

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
    choice_name,
    error_kind,
    kind_and_body,
    new_id,
    require,
    text_of,
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

SAME = ("temperature", "top_p", "metadata", "parallel_tool_calls")
TOOL_CALL_ITEMS = ("function_call", "custom_tool_call")
TOOL_OUTPUT_ITEMS = ("function_call_output", "custom_tool_call_output")
REFUSED_PREVIOUS = ("previous_response_id is not supported: this gateway stores no responses. Send the whole "
                    "conversation as input (with store: false), as Codex does")


def usage_of(data: Any) -> Usage:
    if not isinstance(data, Mapping):
        return Usage()
    return Usage(int(data.get("input_tokens") or 0), int(data.get("output_tokens") or 0),
                 int((data.get("input_tokens_details") or {}).get("cached_tokens") or 0),
                 int((data.get("output_tokens_details") or {}).get("reasoning_tokens") or 0))


def usage_body(usage: Usage) -> dict[str, Any]:
    return {"input_tokens": usage.prompt_tokens, "input_tokens_details": {"cached_tokens": usage.cached_tokens},
            "output_tokens": usage.completion_tokens,
            "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
            "total_tokens": usage.total_tokens}


def _parts(content: Any, dropped: list[str]) -> Any:
    """Responses message content → canonical content (a string stays a string)."""
    if isinstance(content, str):
        return content
    parts: list[dict[str, Any]] = []
    for part in content or ():
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind in ("input_text", "output_text", "text"):
            parts.append({"type": "text", "text": str(part.get("text", ""))})
        elif kind == "input_image" and part.get("image_url"):
            image: dict[str, Any] = {"url": str(part["image_url"])}
            if part.get("detail"):
                image["detail"] = part["detail"]
            parts.append({"type": "image_url", "image_url": image})
        else:
            dropped.append(f"content part {kind}")
    return parts


def _content(content: Any, role: str) -> Any:
    """Canonical content → Responses message content."""
    if isinstance(content, str) or content is None:
        return content or ""
    text_type = "output_text" if role == "assistant" else "input_text"
    out: list[dict[str, Any]] = []
    for part in content:
        if part.get("type") == "text":
            out.append({"type": text_type, "text": str(part.get("text", ""))})
        elif part.get("type") == "image_url":
            image = part.get("image_url") or {}
            out.append({"type": "input_image", "image_url": str(image.get("url", "")),
                        "detail": image.get("detail", "auto")})
    return out


def _reasoning_text(item: Mapping[str, Any]) -> str:
    pieces = [str(s.get("text", "")) for s in item.get("summary") or () if isinstance(s, Mapping)]
    pieces += [str(c.get("text", "")) for c in item.get("content") or () if isinstance(c, Mapping)]
    return "\n".join(p for p in pieces if p)


def _call_of(item: Mapping[str, Any]) -> dict[str, Any]:
    call_id = str(item.get("call_id") or item.get("id") or "")
    if item.get("type") == "custom_tool_call":
        return {"id": call_id, "type": "custom",
                "custom": {"name": str(item.get("name", "")), "input": str(item.get("input") or "")}}
    return {"id": call_id, "type": "function",
            "function": {"name": str(item.get("name", "")), "arguments": str(item.get("arguments") or "")}}


def message_of(items: list[Any]) -> dict[str, Any]:
    """Output items → one canonical assistant message."""
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    reasoning: list[dict[str, Any]] = []
    for item in items:
        if not isinstance(item, Mapping):
            continue
        kind = item.get("type")
        if kind == "message":
            texts.append(text_of([p for p in item.get("content") or () if isinstance(p, Mapping)]))
        elif kind in TOOL_CALL_ITEMS:
            calls.append(_call_of(item))
        elif kind == "reasoning":
            reasoning.append(dict(item))
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts else None}
    if calls:
        message["tool_calls"] = calls
    if reasoning:
        message["reasoning_blocks"] = reasoning
        text = "\n".join(t for t in map(_reasoning_text, reasoning) if t)
        if text:
            message["reasoning_content"] = text
    return message


def output_items(message: Mapping[str, Any], *, ids: bool = True) -> list[dict[str, Any]]:
    """A canonical assistant message → output items (reasoning, the message, calls)."""
    items: list[dict[str, Any]] = [dict(b) for b in message.get("reasoning_blocks") or ()
                                   if b.get("type") == "reasoning"]
    if not items and message.get("reasoning_content") and ids:
        items.append({"type": "reasoning", "id": new_id("rs_"),
                      "summary": [{"type": "summary_text", "text": str(message["reasoning_content"])}]})
    content = message.get("content")
    if content:
        item: dict[str, Any] = {"type": "message", "role": "assistant",
                                "content": [{"type": "output_text", "text": text_of(content), "annotations": []}]}
        if ids:
            item.update(id=new_id("msg_"), status="completed")
        items.append(item)
    for call in message.get("tool_calls") or ():
        kind, body = kind_and_body(call)
        if kind == "custom":
            item = {"type": "custom_tool_call", "call_id": str(call.get("id", "")), "name": str(body.get("name", "")),
                    "input": str(body.get("input") or "")}
            if ids:
                item["id"] = new_id("ctc_")
        else:
            item = {"type": "function_call", "call_id": str(call.get("id", "")), "name": str(body.get("name", "")),
                    "arguments": str(body.get("arguments") or "")}
            if ids:
                item.update(id=new_id("fc_"), status="completed")
        items.append(item)
    return items


def _tool_choice_in(choice: Any) -> Any:
    if isinstance(choice, str):
        return choice
    if isinstance(choice, Mapping) and choice.get("type") in ("function", "custom") and choice.get("name"):
        kind = str(choice["type"])
        return {"type": kind, kind: {"name": str(choice["name"])}}
    return None


def _tool_choice_out(choice: Any) -> Any:
    if isinstance(choice, str):
        return choice
    if isinstance(choice, Mapping):
        kind, name = choice_name(choice)
        return {"type": kind, "name": name} if name else None
    return None


class ResponsesEncoder(Encoder):
    def __init__(self, model: str, request: CanonicalRequest) -> None:
        self.model = model
        self.request = request
        self.id = new_id("resp_")
        self.created = int(time.time())
        self.sequence = 0
        self.items: list[dict[str, Any]] = []
        self.open: dict[str, Any] | None = None
        self.tool_index: int | None = None

    def _send(self, kind: str, **data: Any) -> bytes:
        payload = {"type": kind, "sequence_number": self.sequence, **data}
        self.sequence += 1
        return frame(payload, kind)

    def response(self, status: str, usage: Usage | None = None, **extra: Any) -> dict[str, Any]:
        params = self.request.params
        return {"id": self.id, "object": "response", "created_at": self.created, "status": status,
                "model": self.model, "output": [dict(i) for i in self.items], "error": None,
                "incomplete_details": None, "instructions": None, "metadata": params.get("metadata") or {},
                "parallel_tool_calls": params.get("parallel_tool_calls", True),
                "temperature": params.get("temperature"), "top_p": params.get("top_p"),
                "tool_choice": _tool_choice_out(params.get("tool_choice")) or "auto", "tools": [], "store": False,
                "usage": usage_body(usage) if usage is not None else None, **extra}

    def start(self) -> bytes:
        return (self._send("response.created", response=self.response("in_progress"))
                + self._send("response.in_progress", response=self.response("in_progress")))

    def _index(self) -> int:
        return len(self.items) - 1

    def _close(self) -> bytes:
        item = self.open
        if item is None:
            return b""
        self.open = None
        i, out = self._index(), b""
        kind = item["type"]
        if kind == "message":
            part = item["content"][0]
            out += self._send("response.output_text.done", item_id=item["id"], output_index=i, content_index=0,
                              text=part["text"], logprobs=[])
            out += self._send("response.content_part.done", item_id=item["id"], output_index=i, content_index=0,
                              part=part)
        elif kind == "reasoning":
            part = item["summary"][0]
            out += self._send("response.reasoning_summary_text.done", item_id=item["id"], output_index=i,
                              summary_index=0, text=part["text"])
            out += self._send("response.reasoning_summary_part.done", item_id=item["id"], output_index=i,
                              summary_index=0, part=part)
        elif kind == "function_call":
            out += self._send("response.function_call_arguments.done", item_id=item["id"], output_index=i,
                              name=item["name"], arguments=item["arguments"])
        elif kind == "custom_tool_call":
            out += self._send("response.custom_tool_call_input.done", item_id=item["id"], output_index=i,
                              input=item["input"])
        item["status"] = "completed"
        return out + self._send("response.output_item.done", output_index=i, item=dict(item))

    def _open(self, item: dict[str, Any]) -> bytes:
        out = self._close()
        self.items.append(item)
        self.open = item
        out += self._send("response.output_item.added", output_index=self._index(), item=dict(item))
        if item["type"] == "message":
            out += self._send("response.content_part.added", item_id=item["id"], output_index=self._index(),
                              content_index=0, part={"type": "output_text", "text": "", "annotations": []})
        elif item["type"] == "reasoning":
            out += self._send("response.reasoning_summary_part.added", item_id=item["id"],
                              output_index=self._index(), summary_index=0, part={"type": "summary_text", "text": ""})
        return out

    def event(self, event: StreamEvent) -> bytes:
        out = b""
        if isinstance(event, TextDelta):
            if not event.text:
                return b""
            if self.open is None or self.open["type"] != "message":
                out += self._open({"type": "message", "id": new_id("msg_"), "status": "in_progress",
                                   "role": "assistant", "content": []})
                assert self.open is not None
                self.open["content"] = [{"type": "output_text", "text": "", "annotations": []}]
            assert self.open is not None
            self.open["content"][0]["text"] += event.text
            return out + self._send("response.output_text.delta", item_id=self.open["id"],
                                    output_index=self._index(), content_index=0, delta=event.text, logprobs=[])
        if isinstance(event, ReasoningDelta):
            if self.open is None or self.open["type"] != "reasoning":
                out += self._open({"type": "reasoning", "id": new_id("rs_"), "summary": []})
                assert self.open is not None
                self.open["summary"] = [{"type": "summary_text", "text": ""}]
            assert self.open is not None
            if not event.text:
                return out
            self.open["summary"][0]["text"] += event.text
            return out + self._send("response.reasoning_summary_text.delta", item_id=self.open["id"],
                                    output_index=self._index(), summary_index=0, delta=event.text)
        if isinstance(event, ToolCallDelta):
            custom = event.kind == "custom"
            if self.open is None or self.open["type"] not in TOOL_CALL_ITEMS or self.tool_index != event.index:
                self.tool_index = event.index
                call_id = event.id or new_id("call_")
                if custom:
                    out += self._open({"type": "custom_tool_call", "id": new_id("ctc_"), "status": "in_progress",
                                       "call_id": call_id, "name": event.name, "input": ""})
                else:
                    out += self._open({"type": "function_call", "id": new_id("fc_"), "status": "in_progress",
                                       "call_id": call_id, "name": event.name, "arguments": ""})
            assert self.open is not None
            if not event.arguments:
                return out
            if custom:
                self.open["input"] += event.arguments
                return out + self._send("response.custom_tool_call_input.delta", item_id=self.open["id"],
                                        output_index=self._index(), delta=event.arguments)
            self.open["arguments"] += event.arguments
            return out + self._send("response.function_call_arguments.delta", item_id=self.open["id"],
                                    output_index=self._index(), delta=event.arguments)
        assert isinstance(event, StreamEnd)
        out = self._close()
        response = event.response
        if response.finish_reason == "length":
            return out + self._send("response.incomplete", response=self.response(
                "incomplete", response.usage, incomplete_details={"reason": "max_output_tokens"}))
        return out + self._send("response.completed", response=self.response("completed", response.usage))

    def error(self, message: str, kind: str = "api_error") -> bytes:
        failed = self.response("failed", error={"code": kind, "message": message})
        return (self._send("error", code=kind, message=message, param=None)
                + self._send("response.failed", response=failed))


class ResponsesDecoder(Decoder):
    def __init__(self, model: str) -> None:
        super().__init__(model)
        self.status = "completed"
        self.reason: str | None = None
        self._tools: dict[int, int] = {}

    def feed(self, event: str, data: str) -> list[StreamEvent]:
        payload = self.payload(data)
        if payload is None:
            return []
        kind = payload.get("type") or event
        out: list[StreamEvent] = []
        if kind == "error":
            raise UpstreamStreamError(str(payload.get("message") or payload.get("error") or "stream error"))
        if kind == "response.failed":
            error = (payload.get("response") or {}).get("error") or {}
            raise UpstreamStreamError(str(error.get("message") or "the response failed"))
        if kind in ("response.created", "response.in_progress"):
            self.model = str((payload.get("response") or {}).get("model") or self.model)
        elif kind == "response.output_item.added":
            item = payload.get("item") or {}
            if item.get("type") in TOOL_CALL_ITEMS:
                index = self._tools[int(payload.get("output_index") or 0)] = len(self._tools)
                out.append(ToolCallDelta(index, id=str(item.get("call_id") or ""), name=str(item.get("name") or ""),
                                         kind="custom" if item["type"] == "custom_tool_call" else "function"))
        elif kind == "response.output_text.delta":
            out.append(TextDelta(str(payload.get("delta") or "")))
        elif kind in ("response.function_call_arguments.delta", "response.custom_tool_call_input.delta"):
            tool = self._tools.get(int(payload.get("output_index") or 0))
            if tool is not None:
                custom = kind.startswith("response.custom")
                out.append(ToolCallDelta(tool, arguments=str(payload.get("delta") or ""),
                                         kind="custom" if custom else "function"))
        elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            out.append(ReasoningDelta(str(payload.get("delta") or "")))
        elif kind in ("response.completed", "response.incomplete"):
            response = payload.get("response") or {}
            self.usage = usage_of(response.get("usage"))
            self.status = str(response.get("status") or "completed")
            self.reason = (response.get("incomplete_details") or {}).get("reason")
        return self.kept(out)

    def end(self) -> StreamEnd:
        finish = "length" if self.status == "incomplete" else None
        return StreamEnd(self.assembler.finish(self.model, self.usage, finish))


class ResponsesCodec(Codec):
    name = "responses"

    def parse_request(self, body: Any) -> CanonicalRequest:
        require(isinstance(body, Mapping), "the request body must be a JSON object")
        if body.get("previous_response_id"):
            raise ProtocolError(REFUSED_PREVIOUS)
        dropped: list[str] = []
        messages: list[dict[str, Any]] = []
        if body.get("instructions"):
            messages.append({"role": "system", "content": str(body["instructions"])})
        raw = body.get("input")
        items = [{"role": "user", "content": raw}] if isinstance(raw, str) else raw
        require(isinstance(items, list), "request needs 'input': a string or a list of items")

        def assistant() -> dict[str, Any]:
            if messages and messages[-1]["role"] == "assistant" and not messages[-1].get("_closed"):
                return messages[-1]
            messages.append({"role": "assistant", "content": None})
            return messages[-1]

        for item in items:
            require(isinstance(item, Mapping), "each input item must be an object")
            kind = item.get("type") or ("message" if item.get("role") else None)
            if kind == "message":
                role = str(item.get("role") or "user")
                require(role in ("user", "assistant", "system", "developer"), f"unknown message role {role!r}")
                content = _parts(item.get("content"), dropped)
                if role == "assistant":
                    target = assistant()
                    if target.get("content") or target.get("tool_calls"):
                        messages.append({"role": "assistant", "content": None})
                        target = messages[-1]
                    target["content"] = content if isinstance(content, str) else text_of(content)
                else:
                    messages.append({"role": role, "content": content})
            elif kind in TOOL_CALL_ITEMS:
                assistant().setdefault("tool_calls", []).append(_call_of(item))
            elif kind == "reasoning":
                target = assistant()
                if target.get("content") is not None or target.get("tool_calls"):
                    messages.append({"role": "assistant", "content": None})
                    target = messages[-1]
                target.setdefault("reasoning_blocks", []).append(dict(item))
                text = _reasoning_text(item)
                if text:
                    target["reasoning_content"] = "\n".join(filter(None, (target.get("reasoning_content"), text)))
            elif kind in TOOL_OUTPUT_ITEMS:
                output = item.get("output")
                messages.append({"role": "tool", "tool_call_id": str(item.get("call_id") or ""),
                                 "content": output if isinstance(output, str) else _parts(output, dropped)})
            elif kind == "item_reference":
                raise ProtocolError("item_reference input items need stored responses, which this gateway does "
                                    "not keep: send the items themselves")
            else:
                dropped.append(f"input item {kind}")
        tools: list[dict[str, Any]] = []
        for t in body.get("tools") or ():
            kind = t.get("type") if isinstance(t, Mapping) else None
            if kind == "function":
                function = {k: t[k] for k in ("name", "description", "parameters", "strict") if t.get(k) is not None}
                tools.append({"type": "function", "function": function})
            elif kind == "custom":
                tools.append({"type": "custom", "custom": {k: t[k] for k in ("name", "description", "format")
                                                           if t.get(k) is not None}})
            else:
                dropped.append(f"tool {kind}")
        params: dict[str, Any] = {k: body[k] for k in SAME if body.get(k) is not None}
        if body.get("max_output_tokens") is not None:
            params["max_tokens"] = body["max_output_tokens"]
        choice = _tool_choice_in(body.get("tool_choice"))
        if choice is not None:
            params["tool_choice"] = choice
        effort = (body.get("reasoning") or {}).get("effort") if isinstance(body.get("reasoning"), Mapping) else None
        if effort:
            params["reasoning_effort"] = effort
        return CanonicalRequest(messages=messages, tools=tools, params=params, model=str(body.get("model") or ""),
                                stream=bool(body.get("stream")), dropped=tuple(dropped))

    def render_request(self, request: CanonicalRequest, model: str) -> dict[str, Any]:
        body: dict[str, Any] = {"model": model}
        messages = list(request.messages)
        if messages and messages[0].get("role") == "system" and isinstance(messages[0].get("content"), str):
            body["instructions"] = messages.pop(0)["content"]
        kinds = {str(c.get("id")): c.get("type") for m in messages for c in m.get("tool_calls") or ()}
        items: list[dict[str, Any]] = []
        for m in messages:
            role = m.get("role")
            if role == "assistant":
                items.extend(output_items(m, ids=False))
            elif role == "tool":
                kind = "custom_tool_call_output" if kinds.get(str(m.get("tool_call_id"))) == "custom" \
                    else "function_call_output"
                content = m.get("content")
                items.append({"type": kind, "call_id": str(m.get("tool_call_id", "")),
                              "output": content if isinstance(content, str) else _content(content, "user")})
            else:
                items.append({"type": "message", "role": role, "content": _content(m.get("content"), str(role))})
        body["input"] = items
        if request.tools:
            tools = []
            for t in request.tools:
                kind, fn = kind_and_body(t)
                tools.append({"type": kind, **dict(fn)})
            body["tools"] = tools
        params = request.params
        for key in SAME:
            if params.get(key) is not None:
                body[key] = params[key]
        if params.get("max_tokens") is not None:
            body["max_output_tokens"] = params["max_tokens"]
        if params.get("tool_choice") is not None:
            body["tool_choice"] = _tool_choice_out(params["tool_choice"])
        if params.get("reasoning_effort"):
            body["reasoning"] = {"effort": params["reasoning_effort"]}
        body["store"] = False
        if request.stream:
            body["stream"] = True
        return body

    def parse_response(self, data: Any) -> ChatResponse:
        if not isinstance(data, Mapping) or not isinstance(data.get("output"), list):
            raise ProtocolError("malformed response: no output items", 502, "api_error")
        message = message_of(data["output"])
        finish = "length" if data.get("status") == "incomplete" else (
            "tool_calls" if message.get("tool_calls") else "stop")
        return ChatResponse(message=message, model=str(data.get("model") or ""), usage=usage_of(data.get("usage")),
                            finish_reason=finish)

    def render_response(self, response: ChatResponse, model: str) -> dict[str, Any]:
        encoder = ResponsesEncoder(model, CanonicalRequest(messages=[]))
        encoder.items = output_items(response.message)
        if response.finish_reason == "length":
            return encoder.response("incomplete", response.usage, incomplete_details={"reason": "max_output_tokens"})
        return encoder.response("completed", response.usage)

    def encoder(self, model: str, request: CanonicalRequest) -> Encoder:
        return ResponsesEncoder(model, request)

    def decoder(self, model: str) -> Decoder:
        return ResponsesDecoder(model)

    def error_body(self, status: int, message: str, kind: str | None = None) -> dict[str, Any]:
        return {"error": {"message": message, "type": kind or error_kind(status), "param": None, "code": None}}
