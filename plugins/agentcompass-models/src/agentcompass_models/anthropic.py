"""``anthropic``: Anthropic's Messages API, spoken in OpenAI's message format on the agentcompass side.

Key from ``$ANTHROPIC_API_KEY`` (or the variable ``--model-api-key-env`` names, or the credentials file), base
URL from ``--model-base-url``, ``$ANTHROPIC_BASE_URL`` or ``https://api.anthropic.com``.

Conversion: system messages become ``system``; assistant ``tool_calls`` become ``tool_use`` blocks; ``tool``
messages become ``tool_result`` blocks of a user turn; consecutive turns of one role are merged, as the API
requires alternation. Replies come back as OpenAI-style assistant messages with ``tool_calls``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any

from agentcompass.errors import UsageError
from agentcompass.runtime.codecs import arguments_object, split_data_url
from agentcompass.runtime.model_providers import ProviderSettings, load_credentials
from agentcompass.runtime.model_stream import NativeReply, NativeRequest, StreamEvent
from agentcompass.runtime.models import ChatResponse, Usage

from agentcompass_models.http import HTTPModelClient, answer_problem
from agentcompass_models.native import send_native
from agentcompass_models.openai import generation_params
from agentcompass_models.streaming import stream_answer

ANTHROPIC_DEFAULT_BASE_URL = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096
#: Call settings Anthropic understands; OpenAI-only ones a caller passes (seed, penalties...) are dropped.
PASSED = ("temperature", "top_p", "top_k", "metadata", "thinking", "service_tier")
STOP_REASONS = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_calls",
                "refusal": "content_filter"}


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping) and p.get("type") == "text")
    return str(content)


def _image_block(part: Mapping[str, Any]) -> dict[str, Any]:
    url = str((part.get("image_url") or {}).get("url", ""))
    inline = split_data_url(url)
    if inline:
        return {"type": "image", "source": {"type": "base64", "media_type": inline[0], "data": inline[1]}}
    return {"type": "image", "source": {"type": "url", "url": url}}


def _user_blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str) or content is None:
        return [{"type": "text", "text": content or ""}]
    blocks: list[dict[str, Any]] = []
    for part in content:
        if not isinstance(part, Mapping):
            continue
        if part.get("type") == "text":
            blocks.append({"type": "text", "text": str(part.get("text", ""))})
        elif part.get("type") == "image_url":
            blocks.append(_image_block(part))
    return blocks


def to_anthropic(messages: Sequence[Mapping[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """OpenAI-style messages → (system text, Anthropic messages)."""
    system: list[str] = []
    out: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        blocks = [b for b in blocks if not (b.get("type") == "text" and not b.get("text"))]
        if not blocks:
            blocks = [{"type": "text", "text": "(empty)"}]
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})

    for m in messages:
        role = m.get("role")
        if role in ("system", "developer"):
            system.append(_text(m.get("content")))
        elif role == "user":
            add("user", _user_blocks(m.get("content")))
        elif role == "assistant":
            blocks: list[dict[str, Any]] = []
            text = _text(m.get("content"))
            if text:
                blocks.append({"type": "text", "text": text})
            for tc in m.get("tool_calls") or ():
                fn = tc.get("function") or {}
                blocks.append({"type": "tool_use", "id": str(tc.get("id") or ""), "name": str(fn.get("name", "")),
                               "input": arguments_object(fn.get("arguments"))})
            add("assistant", blocks)
        elif role == "tool":
            add("user", [{"type": "tool_result", "tool_use_id": str(m.get("tool_call_id") or ""),
                          "content": _text(m.get("content"))}])
    return "\n\n".join(s for s in system if s), out


def to_anthropic_tools(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for t in tools:
        fn = t.get("function", t)
        tool = {"name": str(fn.get("name", "")),
                "input_schema": fn.get("parameters") or {"type": "object", "properties": {}}}
        if fn.get("description"):
            tool["description"] = str(fn["description"])
        out.append(tool)
    return out


def _tool_choice(choice: Any, parallel: Any) -> dict[str, Any] | None:
    result: dict[str, Any] | None
    if choice is None:
        result = None
    elif choice == "auto":
        result = {"type": "auto"}
    elif choice == "required":
        result = {"type": "any"}
    elif choice == "none":
        result = {"type": "none"}
    elif isinstance(choice, Mapping):
        name = (choice.get("function") or {}).get("name") or choice.get("name")
        result = {"type": "tool", "name": str(name)} if name else dict(choice)
    else:
        result = None
    if parallel is False:
        result = {**(result or {"type": "auto"}), "disable_parallel_tool_use": True}
    return result


def from_anthropic(data: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """An Anthropic reply → (OpenAI-style assistant message, finish reason)."""
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    thinking: list[str] = []
    for block in data.get("content") or ():
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind == "text":
            texts.append(str(block.get("text", "")))
        elif kind == "tool_use":
            calls.append({"id": str(block.get("id", "")), "type": "function",
                          "function": {"name": str(block.get("name", "")),
                                       "arguments": json.dumps(block.get("input") or {})}})
        elif kind == "thinking":
            thinking.append(str(block.get("thinking", "")))
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts else None}
    if calls:
        message["tool_calls"] = calls
    if thinking:
        message["reasoning_content"] = "\n".join(thinking)
    stop = str(data.get("stop_reason") or "end_turn")
    return message, STOP_REASONS.get(stop, stop)


class AnthropicClient(HTTPModelClient):
    provider = "anthropic"
    native_protocols = frozenset({"anthropic"})

    async def native(self, request: NativeRequest) -> NativeReply:
        """The agent's Messages request as it is (see :mod:`agentcompass_models.native`)."""
        base = self.base_url.removesuffix("/v1")
        headers = {"Content-Type": "application/json", "x-api-key": self._api_key or "",
                   "anthropic-version": request.headers.get("anthropic-version", ANTHROPIC_VERSION)}
        if request.headers.get("anthropic-beta"):
            headers["anthropic-beta"] = request.headers["anthropic-beta"]
        return await send_native(self, request, f"{base}/v1/{request.path}", headers)

    def headers(self) -> dict[str, str]:
        return {"Content-Type": "application/json", "Accept": "application/json",
                "x-api-key": self._api_key or "", "anthropic-version": ANTHROPIC_VERSION}

    def url(self) -> str:
        base = self.base_url
        return f"{base}/messages" if base.endswith("/v1") else f"{base}/v1/messages"

    async def stream(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        **params: Any,
    ) -> AsyncGenerator[StreamEvent, None]:
        """The answer as the API streams it (``stream: true``: Messages' event sequence)."""
        body = {**self.body(messages, tools, params), "stream": True}
        async for event in stream_answer(self, "anthropic", self.url(), self.headers(), body):
            yield event

    async def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        **params: Any,
    ) -> ChatResponse:
        data, attempts = await self.post_json(self.body(messages, tools, params),
                                              lambda data: answer_problem("anthropic", data))
        message, finish = from_anthropic(data)
        usage = data.get("usage") if isinstance(data.get("usage"), Mapping) else {}
        assert isinstance(usage, Mapping)
        prompt = sum(int(usage.get(k) or 0) for k in
                     ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"))
        return ChatResponse(
            message=message,
            model=str(data.get("model") or self.model),
            usage=Usage(prompt, int(usage.get("output_tokens") or 0)),
            finish_reason=finish,
            metadata={"attempts": attempts},
        )

    def body(self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None,
             params: Mapping[str, Any]) -> dict[str, Any]:
        """The Messages request for an OpenAI-style conversation."""
        merged = {**{k: v for k, v in params.items() if v is not None}, **self.params}
        system, converted = to_anthropic(messages)
        body: dict[str, Any] = {"model": self.model, "messages": converted}
        if system:
            body["system"] = system
        body["max_tokens"] = int(merged.pop("max_tokens", None) or merged.pop("max_completion_tokens", None)
                                 or DEFAULT_MAX_TOKENS)
        merged.pop("max_completion_tokens", None)
        stop = merged.pop("stop", None) or merged.pop("stop_sequences", None)
        if stop:
            body["stop_sequences"] = [stop] if isinstance(stop, str) else list(stop)
        if tools:
            body["tools"] = to_anthropic_tools(tools)
        choice = _tool_choice(merged.pop("tool_choice", None), merged.pop("parallel_tool_calls", None))
        if choice and tools:
            body["tool_choice"] = choice
        for key in PASSED:
            if key in merged:
                body[key] = merged.pop(key)
        # What is left came from --model-arg (kept: the user asked for it) or is OpenAI-only (dropped).
        body.update({k: v for k, v in merged.items() if k in self.params and k != "stream"})
        return body


def make_anthropic(name: str = "", *, settings: ProviderSettings | None = None, **options: Any) -> AnthropicClient:
    settings = settings or ProviderSettings()
    if not name:
        raise UsageError("model 'anthropic' needs a model name: write it as anthropic/MODEL_NAME")
    params = generation_params("anthropic", f"anthropic/{name}", options)
    file = load_credentials(settings.environ).get("anthropic", {})
    key_env = settings.api_key_env or "ANTHROPIC_API_KEY"
    api_key = settings.env(key_env)
    source = f"${key_env}"
    if not api_key and not settings.api_key_env and file.get("api_key"):
        api_key, source = str(file["api_key"]), "api_key in the credentials file"
    if not api_key:
        raise UsageError(f"anthropic/{name} needs an API key: set ${key_env} "
                         "(or [anthropic] api_key in the credentials file)")
    base_url = (settings.base_url or settings.env("ANTHROPIC_BASE_URL") or file.get("base_url")
                or ANTHROPIC_DEFAULT_BASE_URL)
    return AnthropicClient(name, str(base_url), settings, api_key=api_key, key_source=source, params=params)
