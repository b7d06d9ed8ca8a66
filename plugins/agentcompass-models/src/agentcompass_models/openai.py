"""``openai`` and ``openai-compatible``: OpenAI's chat-completions API, hosted or self-hosted.

* ``openai/NAME`` — key from ``$OPENAI_API_KEY`` (or the variable ``--model-api-key-env`` names, or the
  credentials file), base URL from ``--model-base-url``, ``$OPENAI_BASE_URL`` or ``https://api.openai.com/v1``.
* ``openai-compatible/NAME`` — any server speaking the protocol (vLLM, SGLang, Ollama, llama.cpp, LM Studio,
  a proxy): base URL from ``--model-base-url`` (or the credentials file); a key only if
  ``--model-api-key-env VAR`` names one (or the file has one), so a hosted key is never sent to a server by
  accident.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any

from agentcompass.errors import UsageError
from agentcompass.runtime.codecs import wire_messages, wire_tools
from agentcompass.runtime.model_providers import ProviderSettings, load_credentials, parse_value
from agentcompass.runtime.model_stream import NativeReply, NativeRequest, StreamEvent
from agentcompass.runtime.models import ChatResponse, ModelError, Usage

from agentcompass_models.http import HTTPModelClient, answer_problem
from agentcompass_models.native import send_native
from agentcompass_models.streaming import stream_answer

OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1"

#: ``--model-arg`` keys that must never be given on the command line (they would land in run.json).
FORBIDDEN_ARGS = frozenset({"api_key", "key", "token", "authorization", "password"})


def generation_params(provider: str, spec: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """``--model-arg`` values as typed generation settings."""
    params: dict[str, Any] = {}
    for key, value in options.items():
        if key.lower() in FORBIDDEN_ARGS:
            raise UsageError(
                f"--model-arg {key}=... is refused: arguments are recorded in run.json. Put the key in an "
                f"environment variable and name it with --model-api-key-env, or in the credentials file"
            )
        if key in ("base_url", "api_base"):
            raise UsageError(f"give the base URL of {spec!r} with --model-base-url, not --model-arg {key}")
        if key in ("model", "messages", "tools", "stream"):
            raise UsageError(f"--model-arg {key} cannot be set for {provider!r}: the runtime sets it")
        params[key] = parse_value(value)
    return params


class OpenAIChatClient(HTTPModelClient):
    """Chat completions over HTTP. ``--model-arg`` settings override what the caller passes."""

    provider = "openai"
    #: Chat completions and Responses pass through (``openai-compatible`` servers: chat completions only).
    native_protocols = frozenset({"chat", "responses"})

    async def native(self, request: NativeRequest) -> NativeReply:
        """The agent's request as it is (see :mod:`agentcompass_models.native`)."""
        headers = self.headers()
        if request.stream:
            headers["Accept"] = "text/event-stream"
        if request.headers.get("openai-beta"):
            headers["OpenAI-Beta"] = request.headers["openai-beta"]
        return await send_native(self, request, f"{self.base_url}/{request.path}", headers)

    def headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    def url(self) -> str:
        return f"{self.base_url}/chat/completions"

    def body(self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None,
             params: Mapping[str, Any]) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "messages": wire_messages(messages)}
        if tools:
            body["tools"] = wire_tools(tools)
        body.update({k: v for k, v in params.items() if v is not None})
        body.update(self.params)
        body.pop("stream", None)
        body.pop("stream_options", None)
        return body

    async def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        **params: Any,
    ) -> ChatResponse:
        data, attempts = await self.post_json(self.body(messages, tools, params),
                                              lambda data: answer_problem("chat", data))
        return self.parse(data, attempts)

    async def stream(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        **params: Any,
    ) -> AsyncGenerator[StreamEvent, None]:
        """The answer as the server streams it (``stream: true`` with the usage in a last chunk)."""
        body = {**self.body(messages, tools, params), "stream": True, "stream_options": {"include_usage": True}}
        async for event in stream_answer(self, "chat", self.url(), self.headers(), body):
            yield event

    def parse(self, data: Mapping[str, Any], attempts: int) -> ChatResponse:
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
            raise self.unreadable(200, json.dumps(data), "JSON that is not a chat completion (no choices)")
        choice = choices[0]
        raw = choice.get("message")
        if not isinstance(raw, Mapping):
            raise self.unreadable(200, json.dumps(data), "JSON that is not a chat completion (no message)")
        message: dict[str, Any] = {"role": "assistant", "content": raw.get("content")}
        tool_calls = raw.get("tool_calls")
        if tool_calls:
            message["tool_calls"] = [dict(tc) for tc in tool_calls if isinstance(tc, Mapping)]
        for extra in ("reasoning_content", "refusal"):
            if raw.get(extra):
                message[extra] = raw[extra]
        usage = data.get("usage") if isinstance(data.get("usage"), Mapping) else {}
        assert isinstance(usage, Mapping)
        return ChatResponse(
            message=message,
            model=str(data.get("model") or self.model),
            usage=Usage(int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)),
            finish_reason=str(choice.get("finish_reason") or "stop"),
            metadata={"attempts": attempts},
        )


def _check_name(provider: str, name: str) -> None:
    if not name:
        raise UsageError(f"model {provider!r} needs a model name: write it as {provider}/MODEL_NAME")


def make_openai(name: str = "", *, settings: ProviderSettings | None = None, **options: Any) -> OpenAIChatClient:
    settings = settings or ProviderSettings()
    _check_name("openai", name)
    params = generation_params("openai", f"openai/{name}", options)
    file = load_credentials(settings.environ).get("openai", {})
    key_env = settings.api_key_env or "OPENAI_API_KEY"
    api_key = settings.env(key_env)
    source = f"${key_env}"
    if not api_key and not settings.api_key_env and file.get("api_key"):
        api_key, source = str(file["api_key"]), "api_key in the credentials file"
    if not api_key:
        raise UsageError(
            f"openai/{name} needs an API key: set ${key_env} (or [openai] api_key in the credentials file). "
            f"For a local server that needs no key use openai-compatible/{name} --model-base-url URL"
        )
    base_url = (settings.base_url or settings.env("OPENAI_BASE_URL") or file.get("base_url")
                or OPENAI_DEFAULT_BASE_URL)
    client = OpenAIChatClient(name, str(base_url), settings, api_key=api_key, key_source=source, params=params)
    client.provider = "openai"
    return client


def make_openai_compatible(
    name: str = "", *, settings: ProviderSettings | None = None, **options: Any
) -> OpenAIChatClient:
    settings = settings or ProviderSettings()
    _check_name("openai-compatible", name)
    params = generation_params("openai-compatible", f"openai-compatible/{name}", options)
    file = load_credentials(settings.environ).get("openai-compatible", {})
    base_url = settings.base_url or file.get("base_url")
    if not base_url:
        raise UsageError(
            f"openai-compatible/{name} needs --model-base-url, e.g. http://127.0.0.1:8000/v1 (vLLM), "
            "http://127.0.0.1:11434/v1 (Ollama), http://127.0.0.1:8080/v1 (llama.cpp)"
        )
    api_key: str | None = None
    source = "no API key was sent; pass --model-api-key-env VAR if the server needs one"
    if settings.api_key_env:
        api_key = settings.env(settings.api_key_env)
        if not api_key:
            raise UsageError(f"--model-api-key-env names ${settings.api_key_env}, which is not set or empty")
        source = f"${settings.api_key_env}"
    elif file.get("api_key"):
        api_key, source = str(file["api_key"]), "api_key in the credentials file"
    client = OpenAIChatClient(name, str(base_url), settings, api_key=api_key, key_source=source, params=params)
    client.provider = "openai-compatible"
    client.native_protocols = frozenset({"chat"})
    return client


__all__ = ["ModelError", "OpenAIChatClient", "make_openai", "make_openai_compatible"]
