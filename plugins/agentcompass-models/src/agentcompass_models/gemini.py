"""``gemini``: Google's Gemini API (``generateContent``), spoken in OpenAI's message format on the agentcompass
side through the core's Gemini codec (``CODECS["gemini"]`` of :mod:`agentcompass.runtime.codecs`).

Key from ``$GEMINI_API_KEY`` (then ``$GOOGLE_API_KEY``; or the variable ``--model-api-key-env`` names, or the
credentials file's ``[gemini]``), sent as ``x-goog-api-key``; base URL (the API root, without the version) from
``--model-base-url``, ``$GOOGLE_GEMINI_BASE_URL`` or ``https://generativelanguage.googleapis.com``; API version
``v1beta`` (``--model-arg api_version=v1``). A Gemini agent (Gemini CLI, the ``google-genai`` SDK) is passed
through: its request goes out as it came, with this client's model in the URL and its key in the header.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any

from agentcompass.errors import UsageError
from agentcompass.runtime.codecs import CODECS, CanonicalRequest
from agentcompass.runtime.model_providers import ProviderSettings, load_credentials
from agentcompass.runtime.model_stream import NativeReply, NativeRequest, StreamEvent
from agentcompass.runtime.models import ChatResponse

from agentcompass_models.http import HTTPModelClient, answer_problem
from agentcompass_models.native import send_native
from agentcompass_models.openai import generation_params
from agentcompass_models.streaming import stream_answer

GEMINI_DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com"
API_VERSIONS = ("v1beta", "v1", "v1alpha")


class GeminiClient(HTTPModelClient):
    provider = "gemini"
    native_protocols = frozenset({"gemini"})
    api_version = "v1beta"

    @property
    def root(self) -> str:
        base = self.base_url.rstrip("/")
        for version in API_VERSIONS:
            base = base.removesuffix(f"/{version}")
        return base

    def headers(self) -> dict[str, str]:
        return {"Content-Type": "application/json", "Accept": "application/json",
                "x-goog-api-key": self._api_key or ""}

    def url(self) -> str:
        return f"{self.root}/{self.api_version}/models/{self.model}:generateContent"

    async def native(self, request: NativeRequest) -> NativeReply:
        """The agent's request as it is, to this client's model (see :mod:`agentcompass_models.native`)."""
        version, _, target = request.path.partition("/models/")
        method = target.rpartition(":")[2] or "generateContent"
        url = f"{self.root}/{version if version in API_VERSIONS else self.api_version}/models/{self.model}:{method}"
        if request.query.get("alt"):
            url += f"?alt={request.query['alt']}"
        headers = self.headers()
        if request.stream:
            headers["Accept"] = "text/event-stream"
        body = dict(request.body)
        if self.params:  # --model-arg settings, as Gemini names them, over the agent's
            config = CODECS["gemini"].render_request(CanonicalRequest(messages=[], params=self.params), self.model)
            body["generationConfig"] = {**(body.get("generationConfig") or {}), **config.get("generationConfig", {})}
        return await send_native(self, dataclasses.replace(request, body=body), url, headers, model_in_body=False,
                                 params={})

    def body(self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None,
             params: Mapping[str, Any]) -> dict[str, Any]:
        settings = {**{k: v for k, v in params.items() if v is not None}, **self.params}
        request = CanonicalRequest(messages=[dict(m) for m in messages], tools=[dict(t) for t in tools or ()],
                                   params=settings)
        return CODECS["gemini"].render_request(request, self.model)

    async def stream(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        **params: Any,
    ) -> AsyncGenerator[StreamEvent, None]:
        """The answer as the API streams it (``:streamGenerateContent?alt=sse``)."""
        url = f"{self.root}/{self.api_version}/models/{self.model}:streamGenerateContent?alt=sse"
        async for event in stream_answer(self, "gemini", url, self.headers(), self.body(messages, tools, params)):
            yield event

    async def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        **params: Any,
    ) -> ChatResponse:
        codec = CODECS["gemini"]
        data, attempts = await self.post_json(self.body(messages, tools, params),
                                              lambda data: answer_problem("gemini", data))
        response = codec.parse_response(data)
        return dataclasses.replace(response, model=response.model or self.model, metadata={"attempts": attempts})


def make_gemini(name: str = "", *, settings: ProviderSettings | None = None, **options: Any) -> GeminiClient:
    settings = settings or ProviderSettings()
    if not name:
        raise UsageError("model 'gemini' needs a model name: write it as gemini/MODEL_NAME")
    version = str(options.pop("api_version", "v1beta"))
    if version not in API_VERSIONS:
        raise UsageError(f"--model-arg api_version={version} is not a Gemini API version ({', '.join(API_VERSIONS)})")
    params = generation_params("gemini", f"gemini/{name}", options)
    file = load_credentials(settings.environ).get("gemini", {})
    names = [settings.api_key_env] if settings.api_key_env else ["GEMINI_API_KEY", "GOOGLE_API_KEY"]
    api_key, source = None, f"${names[0]}"
    for key_env in names:
        if settings.env(key_env):
            api_key, source = settings.env(key_env), f"${key_env}"
            break
    if not api_key and not settings.api_key_env and file.get("api_key"):
        api_key, source = str(file["api_key"]), "api_key in the credentials file"
    if not api_key:
        raise UsageError(f"gemini/{name} needs an API key: set ${names[0]} "
                         "(or [gemini] api_key in the credentials file)")
    base_url = (settings.base_url or settings.env("GOOGLE_GEMINI_BASE_URL") or file.get("base_url")
                or GEMINI_DEFAULT_BASE_URL)
    client = GeminiClient(name, str(base_url), settings, api_key=api_key, key_source=source, params=params)
    client.api_version = version
    return client
