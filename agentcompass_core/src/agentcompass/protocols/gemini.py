"""The Gemini API (``POST /v1beta/models/{model}:generateContent``, ``:streamGenerateContent?alt=sse``,
``:countTokens``) to and from the canonical form.

The model is named in the URL, not the body: the gateway puts it into the body as ``model`` (and ``stream``)
before :meth:`GeminiCodec.parse_request`. ``systemInstruction`` becomes the leading system message(s) (one per
part); a ``user`` content's ``functionResponse`` parts become ``tool`` messages (before the rest of the turn),
a ``model`` content's ``functionCall`` parts ``tool_calls`` and its thought parts (``thought: true``)
``reasoning_content`` and ``reasoning_blocks`` of type ``gemini_thought``. Gemini's calls may have no id: one
is made (``gemini-call-N``) and a response without one answers the oldest unanswered call of its name. A
function response's ``{"output": TEXT}`` is the tool message's text (``{"error": TEXT}`` a failed one); any
other object is kept as its JSON text. A call's ``thoughtSignature`` rides on the tool call as
``thought_signature``. Declarations' ``parametersJsonSchema`` (or their OpenAPI-style ``parameters``, type
names lowered) become the tool's JSON schema; rendering always writes ``parametersJsonSchema``.

Streamed answers are one ``data:`` frame per piece, each a whole ``GenerateContentResponse``; a function call
is sent whole (Gemini does not stream arguments), the last frame carries ``finishReason`` and
``usageMetadata``.
"""

from __future__ import annotations

import json
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
    arguments_object,
    call_input,
    choice_name,
    data_url,
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

FINISH_IN = {"STOP": "stop", "MAX_TOKENS": "length", "SAFETY": "content_filter", "RECITATION": "content_filter",
             "BLOCKLIST": "content_filter", "PROHIBITED_CONTENT": "content_filter", "SPII": "content_filter",
             "IMAGE_SAFETY": "content_filter", "MODEL_ARMOR": "content_filter"}
FINISH_OUT = {"stop": "STOP", "tool_calls": "STOP", "length": "MAX_TOKENS", "content_filter": "SAFETY"}
#: generationConfig field → canonical name.
CONFIG = {"temperature": "temperature", "topP": "top_p", "topK": "top_k", "maxOutputTokens": "max_tokens",
          "seed": "seed", "presencePenalty": "presence_penalty", "frequencyPenalty": "frequency_penalty"}
#: generationConfig fields no other protocol has, kept under ``params["gemini_config"]`` for Gemini alone.
OWN_CONFIG = ("thinkingConfig", "responseMimeType", "responseSchema", "responseJsonSchema", "candidateCount",
              "responseModalities", "mediaResolution", "speechConfig")
STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
          409: "ABORTED", 413: "INVALID_ARGUMENT", 429: "RESOURCE_EXHAUSTED", 499: "CANCELLED",
          500: "INTERNAL", 501: "NOT_IMPLEMENTED", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"}
KIND_STATUS = {"rate_limit_error": 429, "authentication_error": 401, "permission_error": 403,
               "not_found_error": 404, "invalid_request_error": 400, "overloaded_error": 503}
THOUGHT = "gemini_thought"


#: Fields whose values are the caller's data (arguments, results, schemas): their keys are never renamed.
OPAQUE = frozenset({"args", "response", "parametersJsonSchema", "responseJsonSchema", "parameters",
                    "responseSchema", "metadata", "labels"})


def camel_keys(value: Any) -> Any:
    """The request with ``snake_case`` field names as the API's ``camelCase`` ones (the API takes both; the
    Python SDK sends some in snake case), leaving the caller's data (:data:`OPAQUE`) as it is."""
    if isinstance(value, list):
        return [camel_keys(v) for v in value]
    if not isinstance(value, Mapping):
        return value
    out: dict[str, Any] = {}
    for key, item in value.items():
        head, *rest = str(key).split("_")
        name = head + "".join(w[:1].upper() + w[1:] for w in rest) if rest and head else str(key)
        out[name] = item if name in OPAQUE else camel_keys(item)
    return out


def usage_of(data: Any) -> Usage:
    """``usageMetadata``: prompt tokens include the cached ones; completion tokens are the candidates' plus
    the thoughts'."""
    if not isinstance(data, Mapping):
        return Usage()
    thoughts = int(data.get("thoughtsTokenCount") or 0)
    return Usage(int(data.get("promptTokenCount") or 0) + int(data.get("toolUsePromptTokenCount") or 0),
                 int(data.get("candidatesTokenCount") or 0) + thoughts,
                 int(data.get("cachedContentTokenCount") or 0), thoughts)


def usage_body(usage: Usage) -> dict[str, Any]:
    body = {"promptTokenCount": usage.prompt_tokens,
            "candidatesTokenCount": usage.completion_tokens - usage.reasoning_tokens,
            "totalTokenCount": usage.total_tokens}
    if usage.cached_tokens:
        body["cachedContentTokenCount"] = usage.cached_tokens
    if usage.reasoning_tokens:
        body["thoughtsTokenCount"] = usage.reasoning_tokens
    return body


def json_schema(schema: Any) -> Any:
    """An OpenAPI-style Gemini ``Schema`` (``"type": "OBJECT"``) as JSON schema (type names lowered)."""
    if isinstance(schema, list):
        return [json_schema(s) for s in schema]
    if not isinstance(schema, Mapping):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "type" and isinstance(value, str):
            out[key] = value.lower()
        elif key in ("properties", "$defs", "definitions") and isinstance(value, Mapping):
            out[key] = {k: json_schema(v) for k, v in value.items()}
        elif key in ("items", "anyOf", "oneOf", "allOf", "not", "additionalProperties"):
            out[key] = json_schema(value)
        else:
            out[key] = value
    return out


def _tool_text(response: Any) -> tuple[Any, bool]:
    """A ``functionResponse.response`` → (the tool message's content, whether it failed)."""
    if isinstance(response, Mapping) and len(response) == 1:
        (key, value), = response.items()
        if key in ("output", "error") and isinstance(value, str):
            return value, key == "error"
    return json.dumps(response, ensure_ascii=False), False


def _media_part(part: Mapping[str, Any]) -> dict[str, Any] | None:
    if isinstance(part.get("inlineData"), Mapping):
        data = part["inlineData"]
        return {"type": "image_url", "image_url": {
            "url": data_url(str(data.get("mimeType", "image/png")), str(data.get("data", "")))}}
    if isinstance(part.get("fileData"), Mapping):
        return {"type": "image_url", "image_url": {"url": str(part["fileData"].get("fileUri", ""))}}
    return None


def _media_out(part: Mapping[str, Any]) -> dict[str, Any]:
    url = str((part.get("image_url") or {}).get("url", ""))
    inline = split_data_url(url)
    if inline:
        return {"inlineData": {"mimeType": inline[0], "data": inline[1]}}
    return {"fileData": {"mimeType": "image/*", "fileUri": url}}


def _user_content(parts: list[dict[str, Any]]) -> Any:
    """Canonical content of a user/system turn: the text when it is one text part, else the parts."""
    if len(parts) == 1 and parts[0].get("type") == "text":
        return parts[0]["text"]
    return parts


def _parts_out(content: Any) -> list[dict[str, Any]]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"text": content}]
    out: list[dict[str, Any]] = []
    for part in content:
        if not isinstance(part, Mapping):
            continue
        if part.get("type") == "text":
            out.append({"text": str(part.get("text", ""))})
        elif part.get("type") == "image_url":
            out.append(_media_out(part))
    return out


class _CallIds:
    """Ids for Gemini's function calls, which may have none, and the calls a response without one answers."""

    def __init__(self) -> None:
        self.count = 0
        self.pending: list[tuple[str, str]] = []  # (name, id) not answered yet

    def call(self, call: Mapping[str, Any]) -> str:
        self.count += 1
        call_id = str(call.get("id") or f"gemini-call-{self.count}")
        self.pending.append((str(call.get("name", "")), call_id))
        return call_id

    def response(self, response: Mapping[str, Any]) -> str:
        name = str(response.get("name", ""))
        wanted = response.get("id")
        for i, (pending_name, call_id) in enumerate(self.pending):
            if (wanted and call_id == wanted) or (not wanted and pending_name == name):
                del self.pending[i]
                return call_id
        return str(wanted or f"gemini-call-{name}")


def message_of(parts: list[Any], ids: _CallIds | None = None) -> dict[str, Any]:
    """A ``model`` content's parts → a canonical assistant message."""
    ids = ids or _CallIds()
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    thoughts: list[dict[str, Any]] = []
    for part in parts:
        if not isinstance(part, Mapping):
            continue
        if isinstance(part.get("functionCall"), Mapping):
            fc = part["functionCall"]
            call: dict[str, Any] = {"id": ids.call(fc), "type": "function", "function": {
                "name": str(fc.get("name", "")), "arguments": json.dumps(fc.get("args") or {}, ensure_ascii=False)}}
            if part.get("thoughtSignature"):
                call["thought_signature"] = part["thoughtSignature"]
            calls.append(call)
        elif part.get("thought"):
            block = {"type": THOUGHT, "text": str(part.get("text", ""))}
            if part.get("thoughtSignature"):
                block["thoughtSignature"] = part["thoughtSignature"]
            thoughts.append(block)
        elif "text" in part:
            texts.append(str(part.get("text") or ""))
            if part.get("thoughtSignature"):  # a signature on the answer's text: kept as a thought of its own
                thoughts.append({"type": THOUGHT, "text": "", "thoughtSignature": part["thoughtSignature"]})
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts else None}
    if calls:
        message["tool_calls"] = calls
    if thoughts:
        message["reasoning_blocks"] = thoughts
        text = "".join(t["text"] for t in thoughts)
        if text:
            message["reasoning_content"] = text
    return message


def model_parts(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A canonical assistant message → a ``model`` content's parts: thoughts, text, function calls."""
    parts: list[dict[str, Any]] = []
    blocks = [b for b in message.get("reasoning_blocks") or () if b.get("type") == THOUGHT]
    for block in blocks:
        part: dict[str, Any] = {"text": str(block.get("text", "")), "thought": True}
        if block.get("thoughtSignature"):
            part["thoughtSignature"] = block["thoughtSignature"]
        parts.append(part)
    if not blocks and message.get("reasoning_content"):
        parts.append({"text": str(message["reasoning_content"]), "thought": True})
    content = message.get("content")
    parts.extend(p for p in _parts_out(content) if p.get("text") != "")
    for call in message.get("tool_calls") or ():
        name = str(kind_and_body(call)[1].get("name", ""))
        part = {"functionCall": {"id": str(call.get("id", "")), "name": name, "args": call_input(call)}}
        if call.get("thought_signature"):
            part["thoughtSignature"] = call["thought_signature"]
        parts.append(part)
    return parts


def _tool_config_in(config: Any) -> Any:
    calling = config.get("functionCallingConfig") if isinstance(config, Mapping) else None
    if not isinstance(calling, Mapping):
        return None
    mode = str(calling.get("mode") or "AUTO").upper()
    allowed = list(calling.get("allowedFunctionNames") or ())
    if mode == "NONE":
        return "none"
    if mode == "ANY":
        return {"type": "function", "function": {"name": str(allowed[0])}} if len(allowed) == 1 else "required"
    return "auto"


def _tool_config_out(choice: Any) -> dict[str, Any] | None:
    if choice in ("auto", "none", "required"):
        return {"functionCallingConfig": {"mode": {"auto": "AUTO", "none": "NONE", "required": "ANY"}[choice]}}
    if isinstance(choice, Mapping):
        name = choice_name(choice)[1]
        if name:
            return {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": [name]}}
    return None


def _candidate(parts: list[dict[str, Any]] | None, finish: str | None = None) -> dict[str, Any]:
    candidate: dict[str, Any] = {"index": 0}
    if parts is not None:
        candidate["content"] = {"role": "model", "parts": parts}
    if finish:
        candidate["finishReason"] = finish
    return candidate


class GeminiEncoder(Encoder):
    def __init__(self, model: str) -> None:
        self.model = model
        self.id = new_id("")
        self.calls: dict[int, dict[str, Any]] = {}

    def _chunk(self, parts: list[dict[str, Any]] | None, finish: str | None = None, **extra: Any) -> bytes:
        return frame({"candidates": [_candidate(parts, finish)], "modelVersion": self.model,
                      "responseId": self.id, **extra})

    def _flush(self, keep: int | None = None) -> list[dict[str, Any]]:
        """The buffered calls (all but ``keep``) as whole function-call parts."""
        parts = []
        for index in sorted(self.calls):
            if index == keep:
                continue
            call = self.calls.pop(index)
            text = "".join(call["arguments"])
            args = {"input": text} if call["kind"] == "custom" else arguments_object(text)
            parts.append({"functionCall": {"id": call["id"], "name": call["name"], "args": args}})
        return parts

    def event(self, event: StreamEvent) -> bytes:
        if isinstance(event, TextDelta):
            parts = self._flush() + ([{"text": event.text}] if event.text else [])
            return self._chunk(parts) if parts else b""
        if isinstance(event, ReasoningDelta):
            part: dict[str, Any] = {"text": event.text, "thought": True}
            if event.signature:
                part["thoughtSignature"] = event.signature
            return self._chunk([*self._flush(), part]) if event.text or event.signature else b""
        if isinstance(event, ToolCallDelta):
            done = self._flush(keep=event.index) if event.index not in self.calls else []
            call = self.calls.setdefault(event.index, {"id": event.id or new_id("call_"), "name": event.name,
                                                       "arguments": [], "kind": event.kind})
            call["name"] = event.name or call["name"]
            call["arguments"].append(event.arguments)
            return self._chunk(done) if done else b""
        assert isinstance(event, StreamEnd)
        response = event.response
        parts = self._flush()
        return self._chunk(parts or None, FINISH_OUT.get(response.finish_reason, "OTHER"),
                           usageMetadata=usage_body(response.usage))

    def error(self, message: str, kind: str = "api_error") -> bytes:
        status = KIND_STATUS.get(kind, 500)
        return frame({"error": {"code": status, "message": message, "status": STATUS.get(status, "INTERNAL")}})


class GeminiDecoder(Decoder):
    def __init__(self, model: str) -> None:
        super().__init__(model)
        self.finish: str | None = None
        self.ids = _CallIds()
        self.calls = 0

    def feed(self, event: str, data: str) -> list[StreamEvent]:
        chunk = self.payload(data)
        if chunk is None:
            return []
        if chunk.get("error"):
            error = chunk["error"]
            status = int(error.get("code") or 500) if isinstance(error, Mapping) else 500
            raise UpstreamStreamError(str(error.get("message") if isinstance(error, Mapping) else error),
                                      retryable=status in (429, 500, 503, 504), status=status)
        self.model = str(chunk.get("modelVersion") or self.model)
        if chunk.get("usageMetadata"):
            self.usage = usage_of(chunk["usageMetadata"])
        out: list[StreamEvent] = []
        for candidate in (chunk.get("candidates") or ())[:1]:
            for part in (candidate.get("content") or {}).get("parts") or ():
                if not isinstance(part, Mapping):
                    continue
                if isinstance(part.get("functionCall"), Mapping):
                    fc = part["functionCall"]
                    out.append(ToolCallDelta(self.calls, id=self.ids.call(fc), name=str(fc.get("name", "")),
                                             arguments=json.dumps(fc.get("args") or {}, ensure_ascii=False)))
                    self.calls += 1
                elif part.get("thought"):
                    out.append(ReasoningDelta(str(part.get("text") or ""), str(part.get("thoughtSignature") or "")))
                elif part.get("text"):
                    out.append(TextDelta(str(part["text"])))
            if candidate.get("finishReason"):
                self.finish = str(candidate["finishReason"])
        return self.kept(out)

    def end(self) -> StreamEnd:
        finish = FINISH_IN.get(self.finish or "STOP", "stop")
        if finish == "stop" and self.assembler.calls:
            finish = "tool_calls"
        return StreamEnd(self.assembler.finish(self.model, self.usage, finish))


class GeminiCodec(Codec):
    name = "gemini"

    def parse_request(self, body: Any) -> CanonicalRequest:
        require(isinstance(body, Mapping), "the request body must be a JSON object")
        body = camel_keys(body)
        contents = body.get("contents")
        if isinstance(contents, Mapping):
            contents = [contents]
        require(isinstance(contents, list) and all(isinstance(c, Mapping) for c in contents),
                "request needs 'contents': a list of {role, parts}")
        dropped: list[str] = []
        messages: list[dict[str, Any]] = []
        system = body.get("systemInstruction")
        if isinstance(system, str):
            system = {"parts": [{"text": system}]}
        if isinstance(system, Mapping):
            for part in system.get("parts") or ():
                if isinstance(part, Mapping) and "text" in part:
                    messages.append({"role": "system", "content": str(part["text"])})
        ids = _CallIds()
        for content in contents:
            role = str(content.get("role") or "user")
            parts = content.get("parts") or []
            if isinstance(parts, Mapping):
                parts = [parts]
            require(isinstance(parts, list), "each content's 'parts' must be a list")
            require(role in ("user", "model", "function"), f"unknown content role {role!r} (use 'user' or 'model')")
            if role == "model":
                messages.append(message_of(parts, ids))
                dropped.extend(f"part {_part_kind(p)}" for p in parts if _part_kind(p) not in (
                    "text", "thought", "functionCall"))
                continue
            rest: list[dict[str, Any]] = []
            for part in parts:
                kind = _part_kind(part)
                if kind == "functionResponse":
                    fr = part["functionResponse"]
                    text, failed = _tool_text(fr.get("response"))
                    tool: dict[str, Any] = {"role": "tool", "tool_call_id": ids.response(fr), "content": text}
                    if failed:
                        tool["is_error"] = True
                    messages.append(tool)
                elif kind == "text":
                    rest.append({"type": "text", "text": str(part.get("text") or "")})
                elif kind in ("inlineData", "fileData"):
                    media = _media_part(part)
                    if media:
                        rest.append(media)
                else:
                    dropped.append(f"part {kind}")
            if rest or not parts:
                messages.append({"role": "user", "content": _user_content(rest) if rest else ""})
        tools: list[dict[str, Any]] = []
        for entry in body.get("tools") or ():
            if not isinstance(entry, Mapping):
                continue
            dropped.extend(f"tool {key}" for key in entry if key != "functionDeclarations")
            for decl in entry.get("functionDeclarations") or ():
                function: dict[str, Any] = {"name": str(decl.get("name", ""))}
                if decl.get("description"):
                    function["description"] = str(decl["description"])
                schema = decl.get("parametersJsonSchema")
                if schema is None and decl.get("parameters") is not None:
                    schema = json_schema(decl["parameters"])
                function["parameters"] = schema if schema is not None else {"type": "object", "properties": {}}
                tools.append({"type": "function", "function": function})
        params: dict[str, Any] = {}
        config = body.get("generationConfig") or {}
        if isinstance(config, Mapping):
            params.update({CONFIG[k]: v for k, v in config.items() if k in CONFIG and v is not None})
            if config.get("stopSequences"):
                params["stop"] = list(config["stopSequences"])
            own = {k: config[k] for k in OWN_CONFIG if config.get(k) is not None}
            if own:
                params["gemini_config"] = own
            level = (config.get("thinkingConfig") or {}).get("thinkingLevel")
            if level:
                params["reasoning_effort"] = str(level).lower()
        choice = _tool_config_in(body.get("toolConfig"))
        if choice is not None:
            params["tool_choice"] = choice
        for key in ("safetySettings", "cachedContent"):
            if body.get(key):
                dropped.append(key)
        return CanonicalRequest(messages=messages, tools=tools, params=params, model=str(body.get("model") or ""),
                                stream=bool(body.get("stream")), dropped=tuple(dropped))

    def render_request(self, request: CanonicalRequest, model: str) -> dict[str, Any]:
        system: list[dict[str, Any]] = []
        contents: list[dict[str, Any]] = []
        names = {str(c.get("id")): str(kind_and_body(c)[1].get("name", ""))
                 for m in request.messages for c in m.get("tool_calls") or ()}

        def add(role: str, parts: list[dict[str, Any]]) -> None:
            if contents and contents[-1]["role"] == role:
                contents[-1]["parts"].extend(parts)
            else:
                contents.append({"role": role, "parts": parts})

        for m in request.messages:
            role = m.get("role")
            if role in ("system", "developer"):
                system.extend(p for p in _parts_out(m.get("content")) if "text" in p)
            elif role == "assistant":
                add("model", model_parts(m))
            elif role == "tool":
                content = m.get("content")
                text = content if isinstance(content, str) else "".join(
                    str(p.get("text", "")) for p in content or () if isinstance(p, Mapping))
                call_id = str(m.get("tool_call_id", ""))
                add("user", [{"functionResponse": {"id": call_id, "name": names.get(call_id, ""),
                                                   "response": {"error" if m.get("is_error") else "output": text}}}])
            else:
                add("user", _parts_out(m.get("content")) or [{"text": ""}])
        body: dict[str, Any] = {"contents": contents}
        if system:
            body["systemInstruction"] = {"parts": system}
        if request.tools:
            declarations = []
            for t in request.tools:
                fn = kind_and_body(t, t)[1]
                decl: dict[str, Any] = {"name": str(fn.get("name", ""))}
                if fn.get("description"):
                    decl["description"] = str(fn["description"])
                decl["parametersJsonSchema"] = tool_schema(t)
                declarations.append(decl)
            body["tools"] = [{"functionDeclarations": declarations}]
            choice = _tool_config_out(request.params.get("tool_choice"))
            if choice:
                body["toolConfig"] = choice
        params = request.params
        config: dict[str, Any] = {}
        for gemini_name, name in CONFIG.items():
            if params.get(name) is not None:
                config[gemini_name] = params[name]
        if "maxOutputTokens" not in config and params.get("max_completion_tokens") is not None:
            config["maxOutputTokens"] = params["max_completion_tokens"]
        if params.get("stop"):
            stop = params["stop"]
            config["stopSequences"] = [stop] if isinstance(stop, str) else list(stop)
        config.update(params.get("gemini_config") or {})
        if params.get("reasoning_effort") and "thinkingConfig" not in config:
            config["thinkingConfig"] = {"thinkingLevel": str(params["reasoning_effort"]).upper()}
        if config:
            body["generationConfig"] = config
        return body

    def parse_response(self, data: Any) -> ChatResponse:
        candidates = data.get("candidates") if isinstance(data, Mapping) else None
        if not isinstance(candidates, list) or not candidates or not isinstance(candidates[0], Mapping):
            feedback = data.get("promptFeedback") if isinstance(data, Mapping) else None
            if isinstance(feedback, Mapping) and feedback.get("blockReason"):
                return ChatResponse(message={"role": "assistant", "content": None}, model=str(data.get(
                    "modelVersion") or ""), usage=usage_of(data.get("usageMetadata")), finish_reason="content_filter")
            raise ProtocolError("malformed Gemini answer: no candidates", 502, "api_error")
        candidate = candidates[0]
        message = message_of(list((candidate.get("content") or {}).get("parts") or ()))
        finish = FINISH_IN.get(str(candidate.get("finishReason") or "STOP"), "stop")
        if finish == "stop" and message.get("tool_calls"):
            finish = "tool_calls"
        return ChatResponse(message=message, model=str(data.get("modelVersion") or ""),
                            usage=usage_of(data.get("usageMetadata")), finish_reason=finish)

    def render_response(self, response: ChatResponse, model: str) -> dict[str, Any]:
        return {"candidates": [_candidate(model_parts(response.message),
                                          FINISH_OUT.get(response.finish_reason, "OTHER"))],
                "usageMetadata": usage_body(response.usage), "modelVersion": model, "responseId": new_id(""),
                "createTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}

    def encoder(self, model: str, request: CanonicalRequest) -> Encoder:
        return GeminiEncoder(model)

    def decoder(self, model: str) -> Decoder:
        return GeminiDecoder(model)

    def error_body(self, status: int, message: str, kind: str | None = None) -> dict[str, Any]:
        name = STATUS.get(status, "INTERNAL" if status >= 500 else "FAILED_PRECONDITION")
        return {"error": {"code": status, "message": message, "status": name}}


def _part_kind(part: Any) -> str:
    if not isinstance(part, Mapping):
        return type(part).__name__
    for key in ("functionCall", "functionResponse", "inlineData", "fileData", "executableCode",
                "codeExecutionResult"):
        if key in part:
            return key
    if part.get("thought"):
        return "thought"
    if "text" in part:
        return "text"
    return ",".join(sorted(part)) or "empty"
