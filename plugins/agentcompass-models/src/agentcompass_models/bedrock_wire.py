"""Bedrock's wire formats, read and written as Anthropic Messages (the protocol the bedrock provider speaks inward).

* :func:`sse_of_eventstream`: an AWS event-stream answer (``application/vnd.amazon.eventstream``, parsed with
  botocore's own ``EventStreamBuffer``) as Anthropic server-sent events: InvokeModelWithResponseStream's
  ``chunk`` events carry Anthropic's events base64-encoded and are unwrapped; ConverseStream's events
  (``messageStart``, ``contentBlockDelta``, ...) are rewritten into Anthropic's; an exception in the stream
  becomes Anthropic's ``error`` event.
* :func:`converse_request` / :func:`message_of_converse`: an Anthropic Messages body as a Converse request,
  and a Converse answer as an Anthropic message, for the models Bedrock serves only through Converse.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

from agentcompass.runtime.codecs import split_data_url

#: Converse's stop reasons → Anthropic's.
STOP_REASONS = {"end_turn": "end_turn", "tool_use": "tool_use", "max_tokens": "max_tokens",
                "stop_sequence": "stop_sequence", "guardrail_intervened": "refusal", "content_filtered": "refusal"}
#: An exception in an event stream → the Anthropic error type an agent knows (retryable ones as overloaded).
ERROR_TYPES = {"throttlingException": "rate_limit_error", "serviceUnavailableException": "overloaded_error",
               "modelStreamErrorException": "api_error", "internalServerException": "api_error",
               "validationException": "invalid_request_error", "modelTimeoutException": "api_error"}


def sse(event: Mapping[str, Any]) -> bytes:
    """One Anthropic server-sent event."""
    return f"event: {event.get('type', 'message')}\ndata: {json.dumps(event)}\n\n".encode()


async def sse_of_eventstream(chunks: AsyncIterator[bytes], model: str) -> AsyncIterator[bytes]:
    """The Anthropic server-sent events of an AWS event-stream answer (either Bedrock streaming API)."""
    from botocore.eventstream import EventStreamBuffer

    buffer = EventStreamBuffer()
    converse = _ConverseEvents(model)
    try:
        async for data in chunks:
            buffer.add_data(data)
            out = b"".join(_events_of(message, converse) for message in buffer)
            if out:
                yield out
    finally:
        close = getattr(chunks, "aclose", None)
        if close is not None:
            await close()


def _events_of(message: Any, converse: _ConverseEvents) -> bytes:
    headers = message.headers
    kind = headers.get(":message-type", "event")
    if kind != "event":  # an exception (or error) in the stream
        name = str(headers.get(":exception-type") or headers.get(":error-code") or "internalServerException")
        try:
            said = json.loads(message.payload).get("message", "")
        except (ValueError, AttributeError):
            said = message.payload.decode("utf-8", "replace")
        return sse({"type": "error", "error": {"type": ERROR_TYPES.get(name, "api_error"),
                                               "message": f"{name}: {said}"}})
    event_type = headers.get(":event-type", "")
    payload = json.loads(message.payload or b"{}")
    if event_type == "chunk":  # InvokeModelWithResponseStream: the model's own event, base64-encoded
        return sse(json.loads(base64.b64decode(payload.get("bytes", ""))))
    return b"".join(sse(e) for e in converse.feed(event_type, payload))


class _ConverseEvents:
    """ConverseStream's events rewritten as Anthropic's stream events."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.open: set[int] = set()
        self.stop = "end_turn"
        self.started = False

    def _start(self) -> list[dict[str, Any]]:
        if self.started:
            return []
        self.started = True
        return [{"type": "message_start", "message": {
            "id": "", "type": "message", "role": "assistant", "model": self.model, "content": [],
            "stop_reason": None, "usage": {"input_tokens": 0, "output_tokens": 0}}}]

    def feed(self, event_type: str, payload: Mapping[str, Any]) -> list[dict[str, Any]]:
        out = self._start()
        index = int(payload.get("contentBlockIndex") or 0)
        if event_type == "contentBlockStart":
            tool = (payload.get("start") or {}).get("toolUse") or {}
            self.open.add(index)
            out.append({"type": "content_block_start", "index": index, "content_block": {
                "type": "tool_use", "id": str(tool.get("toolUseId", "")), "name": str(tool.get("name", "")),
                "input": {}}})
        elif event_type == "contentBlockDelta":
            delta = payload.get("delta") or {}
            if index not in self.open:
                self.open.add(index)
                block = ({"type": "thinking", "thinking": ""} if "reasoningContent" in delta
                         else {"type": "text", "text": ""})
                out.append({"type": "content_block_start", "index": index, "content_block": block})
            if "text" in delta:
                out.append({"type": "content_block_delta", "index": index,
                            "delta": {"type": "text_delta", "text": str(delta["text"])}})
            elif "toolUse" in delta:
                out.append({"type": "content_block_delta", "index": index,
                            "delta": {"type": "input_json_delta",
                                      "partial_json": str(delta["toolUse"].get("input", ""))}})
            elif "reasoningContent" in delta and delta["reasoningContent"].get("text"):
                out.append({"type": "content_block_delta", "index": index,
                            "delta": {"type": "thinking_delta", "thinking": str(delta["reasoningContent"]["text"])}})
        elif event_type == "contentBlockStop":
            self.open.discard(index)
            out.append({"type": "content_block_stop", "index": index})
        elif event_type == "messageStop":
            self.stop = STOP_REASONS.get(str(payload.get("stopReason")), str(payload.get("stopReason")))
        elif event_type == "metadata":
            usage = payload.get("usage") or {}
            out.append({"type": "message_delta", "delta": {"stop_reason": self.stop, "stop_sequence": None},
                        "usage": {"input_tokens": int(usage.get("inputTokens") or 0),
                                  "output_tokens": int(usage.get("outputTokens") or 0)}})
            out.append({"type": "message_stop"})
        return out


# -- Converse requests and answers ---------------------------------------------------------------------------------


def _converse_block(block: Mapping[str, Any]) -> dict[str, Any] | None:
    kind = block.get("type")
    if kind == "text":
        return {"text": str(block.get("text", ""))}
    if kind == "tool_use":
        return {"toolUse": {"toolUseId": str(block.get("id", "")), "name": str(block.get("name", "")),
                            "input": block.get("input") or {}}}
    if kind == "tool_result":
        content = block.get("content")
        texts = [content] if isinstance(content, str) else [
            str(c.get("text", "")) for c in content or () if isinstance(c, Mapping) and c.get("type") == "text"]
        result: dict[str, Any] = {"toolUseId": str(block.get("tool_use_id", "")),
                                  "content": [{"text": t} for t in texts] or [{"text": ""}]}
        if block.get("is_error"):
            result["status"] = "error"
        return {"toolResult": result}
    if kind == "image":
        source = block.get("source") or {}
        data = source.get("data")
        if source.get("type") == "url":
            inline = split_data_url(str(source.get("url", "")))
            data = inline[1] if inline else None
            source = {"media_type": inline[0]} if inline else source
        if data:
            fmt = str(source.get("media_type", "image/png")).rpartition("/")[2]
            return {"image": {"format": "jpeg" if fmt == "jpg" else fmt, "source": {"bytes": data}}}
    return None


def converse_request(body: Mapping[str, Any]) -> dict[str, Any]:
    """An Anthropic Messages body as a Converse request (images travel base64, as the JSON API takes them)."""
    out: dict[str, Any] = {"messages": []}
    for m in body.get("messages") or ():
        content = m.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content or ())
        converted = [c for c in (_converse_block(b) for b in blocks if isinstance(b, Mapping)) if c]
        out["messages"].append({"role": m.get("role"), "content": converted})
    system = body.get("system")
    if system:
        texts = [system] if isinstance(system, str) else [s.get("text", "") for s in system if isinstance(s, Mapping)]
        out["system"] = [{"text": t} for t in texts if t]
    config: dict[str, Any] = {}
    for ours, theirs in (("max_tokens", "maxTokens"), ("temperature", "temperature"), ("top_p", "topP"),
                         ("stop_sequences", "stopSequences")):
        if body.get(ours) is not None:
            config[theirs] = body[ours]
    if config:
        out["inferenceConfig"] = config
    if body.get("tools"):
        tools = [{"toolSpec": {"name": t["name"], **({"description": t["description"]} if t.get("description") else {}),
                               "inputSchema": {"json": t.get("input_schema") or {"type": "object"}}}}
                 for t in body["tools"] if isinstance(t, Mapping) and t.get("name")]
        out["toolConfig"] = {"tools": tools}
        choice = body.get("tool_choice") or {}
        kind = choice.get("type") if isinstance(choice, Mapping) else None
        if kind == "any":
            out["toolConfig"]["toolChoice"] = {"any": {}}
        elif kind == "tool":
            out["toolConfig"]["toolChoice"] = {"tool": {"name": choice.get("name")}}
        elif kind == "auto":
            out["toolConfig"]["toolChoice"] = {"auto": {}}
    extra = {k: v for k, v in body.items() if k not in {"model", "messages", "system", "max_tokens", "temperature",
                                                         "top_p", "stop_sequences", "tools", "tool_choice", "stream",
                                                         "metadata", "anthropic_version"}}
    if extra:  # --model-arg settings Converse has no field for: the model's own request fields
        out["additionalModelRequestFields"] = extra
    return out


def message_of_converse(data: Mapping[str, Any], model: str) -> dict[str, Any]:
    """A Converse answer as an Anthropic message (what the anthropic codec reads)."""
    output = data.get("output")
    message = output.get("message") if isinstance(output, Mapping) else None
    if not isinstance(message, Mapping):
        raise ValueError("no output.message")
    content: list[dict[str, Any]] = []
    for block in message.get("content") or ():
        if not isinstance(block, Mapping):
            continue
        if "text" in block:
            content.append({"type": "text", "text": str(block["text"])})
        elif "toolUse" in block:
            tool = block["toolUse"]
            content.append({"type": "tool_use", "id": str(tool.get("toolUseId", "")),
                            "name": str(tool.get("name", "")), "input": tool.get("input") or {}})
        elif "reasoningContent" in block:
            text = ((block["reasoningContent"] or {}).get("reasoningText") or {}).get("text", "")
            content.append({"type": "thinking", "thinking": str(text)})
    usage = data.get("usage") if isinstance(data.get("usage"), Mapping) else {}
    assert isinstance(usage, Mapping)
    stop = str(data.get("stopReason") or "end_turn")
    return {"id": "", "type": "message", "role": "assistant", "model": model, "content": content,
            "stop_reason": STOP_REASONS.get(stop, stop), "stop_sequence": None,
            "usage": {"input_tokens": int(usage.get("inputTokens") or 0),
                      "output_tokens": int(usage.get("outputTokens") or 0)}}
