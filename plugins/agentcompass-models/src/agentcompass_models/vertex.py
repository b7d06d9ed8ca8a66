"""``vertex``: Google Vertex AI — Gemini (publisher ``google``) and Anthropic's Claude (publisher ``anthropic``),
with Google application-default credentials obtained on the host through ``google-auth``.

``vertex/MODEL`` (``vertex/gemini-2.5-flash``, ``vertex/claude-sonnet-4@20250514``); a name starting with
``claude`` is Anthropic's, any other Google's; ``vertex/anthropic/NAME`` or ``vertex/google/NAME`` say it outright.

* Gemini: ``{root}/v1/projects/P/locations/L/publishers/google/models/M:generateContent`` and
  ``:streamGenerateContent?alt=sse`` (and ``:countTokens``), the Gemini API's body; a Gemini agent is passed
  through.
* Claude: ``.../publishers/anthropic/models/M:rawPredict`` and ``:streamRawPredict``, Anthropic Messages without
  ``model`` and with ``anthropic_version: vertex-2023-10-16``; a Messages agent (Claude Code) is passed through,
  ``count_tokens`` goes to ``.../publishers/anthropic/models/count-tokens:rawPredict``.
* Credentials: ``$GOOGLE_APPLICATION_CREDENTIALS`` (a service-account or user file), else
  ``google.auth.default()`` (gcloud's application-default login, the metadata server), scoped to
  ``cloud-platform``; the access token is refreshed on the host before it expires and sent as
  ``Authorization: Bearer``. It never reaches an environment: agents talk to the run's gateway.
* Project: ``--model-arg project=P``, else ``$GOOGLE_CLOUD_PROJECT``, ``$ANTHROPIC_VERTEX_PROJECT_ID``, the
  credentials' project. Location: ``--model-arg location=L``, else ``$GOOGLE_CLOUD_LOCATION``,
  ``$CLOUD_ML_REGION``, ``us-central1``. Endpoint: ``--model-base-url`` (a Private Service Connect endpoint,
  a proxy), else ``https://L-aiplatform.googleapis.com`` (``https://aiplatform.googleapis.com`` for ``global``).

google-auth is an optional dependency: ``pip install 'agentcompass-models[vertex]'``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import warnings
from collections.abc import AsyncGenerator, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from agentcompass.errors import UsageError
from agentcompass.runtime.codecs import CODECS, CanonicalRequest
from agentcompass.runtime.model_providers import ProviderSettings
from agentcompass.runtime.model_stream import NativeReply, NativeRequest, StreamEvent

from agentcompass_models.anthropic import AnthropicClient
from agentcompass_models.gemini import GeminiClient
from agentcompass_models.http import HTTPModelClient, ProviderError
from agentcompass_models.native import send_native
from agentcompass_models.openai import generation_params
from agentcompass_models.streaming import stream_answer

SCOPE = "https://www.googleapis.com/auth/cloud-platform"
VERTEX_ANTHROPIC_VERSION = "vertex-2023-10-16"
DEFAULT_LOCATION = "us-central1"
API_VERSION = "v1"


def _google_auth() -> Any:
    try:
        import google.auth
        import google.auth.transport.requests
    except ImportError:
        raise UsageError("the vertex provider needs google-auth: pip install 'agentcompass-models[vertex]'") from None
    return google.auth


class _Token:
    """An access token from Google credentials, refreshed (in a thread: google-auth is synchronous) when due."""

    def __init__(self, credentials: Any, source: str) -> None:
        self.credentials = credentials
        self.source = source
        self._lock: asyncio.Lock | None = None

    async def bearer(self, client: HTTPModelClient) -> str:
        google_auth = _google_auth()
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if not self.credentials.valid:
                try:
                    await asyncio.to_thread(self.credentials.refresh, google_auth.transport.requests.Request())
                except google_auth.exceptions.RefreshError as exc:
                    raise ProviderError(client.scrub(
                        f"{client.origin}: cannot get a Google access token from {self.source}: "
                        f"{str(exc)[:300]}"), fatal=True) from None
                except google_auth.exceptions.TransportError as exc:
                    raise ProviderError(client.scrub(
                        f"{client.origin}: cannot reach Google's token endpoint ({self.source}): "
                        f"{str(exc)[:300]}"), retryable=True) from None
        token = str(self.credentials.token)
        client.add_secret(token)
        return token


class _VertexAuth(HTTPModelClient):
    """Vertex's URL scheme and bearer token, shared by both publishers."""

    publisher = "google"
    project = ""
    location = DEFAULT_LOCATION
    token: _Token

    def model_url(self, method: str, model: str | None = None) -> str:
        root = self.base_url.removesuffix(f"/{API_VERSION}")
        name = quote(model or self.model, safe="@-._")
        return (f"{root}/{API_VERSION}/projects/{quote(self.project, safe='')}/locations/"
                f"{quote(self.location, safe='')}/publishers/{self.publisher}/models/{name}:{method}")

    async def authorize(self, url: Any, headers: dict[str, str], content: bytes) -> tuple[Any, dict[str, str]]:
        return url, {**headers, "Authorization": f"Bearer {await self.token.bearer(self)}"}

    def _http_error(self, status: int, body: bytes) -> ProviderError:
        error = HTTPModelClient._http_error(self, status, body)
        if status in (401, 403):
            error.args = (error.args[0].replace("check the API key", "check the Google credentials"),)
        return error


class VertexGeminiClient(_VertexAuth, GeminiClient):
    """Gemini on Vertex AI (the Gemini API's body on Vertex's paths)."""

    provider = "vertex"
    native_protocols = frozenset({"gemini"})

    def headers(self) -> dict[str, str]:
        return {"Content-Type": "application/json", "Accept": "application/json"}

    def url(self) -> str:
        return self.model_url("generateContent")

    async def native(self, request: NativeRequest) -> NativeReply:
        method = request.path.rpartition(":")[2] or "generateContent"
        url = self.model_url(method)
        if request.query.get("alt"):
            url += f"?alt={quote(request.query['alt'], safe='')}"
        headers = self.headers()
        if request.stream:
            headers["Accept"] = "text/event-stream"
        body = dict(request.body)
        if self.params and method != "countTokens":
            config = CODECS["gemini"].render_request(CanonicalRequest(messages=[], params=self.params), self.model)
            body["generationConfig"] = {**(body.get("generationConfig") or {}), **config.get("generationConfig", {})}
        return await send_native(self, dataclasses.replace(request, body=body), url, headers, model_in_body=False,
                                 params={})

    async def stream(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        **params: Any,
    ) -> AsyncGenerator[StreamEvent, None]:
        url = self.model_url("streamGenerateContent") + "?alt=sse"
        async for event in stream_answer(self, "gemini", url, self.headers(), self.body(messages, tools, params)):
            yield event


class VertexAnthropicClient(_VertexAuth, AnthropicClient):
    """Claude on Vertex AI (Anthropic Messages on ``rawPredict`` / ``streamRawPredict``)."""

    provider = "vertex"
    publisher = "anthropic"
    native_protocols = frozenset({"anthropic"})

    def headers(self) -> dict[str, str]:
        return {"Content-Type": "application/json", "Accept": "application/json"}

    def url(self) -> str:
        return self.model_url("rawPredict")

    def body(self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None,
             params: Mapping[str, Any]) -> dict[str, Any]:
        return self.vertex_body(AnthropicClient.body(self, messages, tools, params))

    @staticmethod
    def vertex_body(body: Mapping[str, Any]) -> dict[str, Any]:
        """A Messages body as Vertex takes it: no ``model`` (the URL names it), Vertex's ``anthropic_version``."""
        out = {k: v for k, v in body.items() if k != "model"}
        out.setdefault("anthropic_version", VERTEX_ANTHROPIC_VERSION)
        return out

    async def stream(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        **params: Any,
    ) -> AsyncGenerator[StreamEvent, None]:
        body = {**self.body(messages, tools, params), "stream": True}
        async for event in stream_answer(self, "anthropic", self.model_url("streamRawPredict"), self.headers(), body):
            yield event

    async def native(self, request: NativeRequest) -> NativeReply:
        headers = self.headers()
        if request.headers.get("anthropic-beta"):
            headers["anthropic-beta"] = request.headers["anthropic-beta"]
        if request.path.endswith("count_tokens"):  # Vertex counts with the model named in the body
            body = {k: v for k, v in request.body.items() if k != "max_tokens"}
            body["model"] = self.model
            return await send_native(self, dataclasses.replace(request, body=body),
                                     self.model_url("rawPredict", "count-tokens"), headers,
                                     model_in_body=False, params={})
        if request.stream:
            headers["Accept"] = "text/event-stream"
        url = self.model_url("streamRawPredict" if request.stream else "rawPredict")
        return await send_native(self, dataclasses.replace(request, body=self.vertex_body(request.body)), url,
                                 headers, model_in_body=False)


def _credentials(settings: ProviderSettings) -> tuple[Any, str, str]:
    """Google credentials (google-auth's object), where they came from, and their project."""
    google_auth = _google_auth()
    path = settings.env("GOOGLE_APPLICATION_CREDENTIALS")
    try:
        if path:
            creds, project = _from_file(google_auth, path)
            return creds, f"$GOOGLE_APPLICATION_CREDENTIALS ({path})", str(project or "")
        creds, project = google_auth.default(scopes=[SCOPE])
    except google_auth.exceptions.DefaultCredentialsError as exc:
        raise UsageError(f"the vertex provider found no usable Google credentials: {str(exc).splitlines()[0]} "
                         "(run `gcloud auth application-default login` or set $GOOGLE_APPLICATION_CREDENTIALS)"
                         ) from None
    return creds, "Google application-default credentials", str(project or "")


def _from_file(google_auth: Any, path: str) -> tuple[Any, str | None]:
    """The credentials of the key file the user named: a service account's or a user's by their own loaders;
    another kind (workload identity federation) through google-auth's generic loader, as ``default()`` does."""
    try:
        kind = json.loads(Path(path).read_text(encoding="utf-8")).get("type")
    except (OSError, ValueError, AttributeError):
        kind = None  # google-auth's loader says what is wrong with it
    if kind == "service_account":
        from google.oauth2 import service_account

        creds = service_account.Credentials.from_service_account_file(path, scopes=[SCOPE])
        return creds, creds.project_id
    if kind == "authorized_user":
        from google.oauth2 import credentials

        return credentials.Credentials.from_authorized_user_file(path, scopes=[SCOPE]), None
    with warnings.catch_warnings():  # the generic loader warns about untrusted files: this one is the user's own
        warnings.simplefilter("ignore", DeprecationWarning)
        return google_auth.load_credentials_from_file(path, scopes=[SCOPE])


def make_vertex(name: str = "", *, settings: ProviderSettings | None = None, **options: Any) -> HTTPModelClient:
    settings = settings or ProviderSettings()
    if not name:
        raise UsageError("model 'vertex' needs a model name: write it as vertex/MODEL "
                         "(vertex/gemini-2.5-flash, vertex/claude-sonnet-4@20250514)")
    if settings.api_key_env:
        raise UsageError(f"vertex/{name} uses Google application-default credentials, not an API key: drop "
                         f"--model-api-key-env {settings.api_key_env} and set $GOOGLE_APPLICATION_CREDENTIALS "
                         "or run `gcloud auth application-default login`")
    publisher, _, model = name.partition("/")
    if not model:
        publisher, model = ("anthropic" if name.startswith("claude") else "google"), name
    if publisher not in ("google", "anthropic"):
        raise UsageError(f"vertex/{name}: publisher {publisher!r} is not served here; use vertex/google/MODEL "
                         "or vertex/anthropic/MODEL")
    project_arg = str(options.pop("project", "") or "")
    location = str(options.pop("location", "") or settings.env("GOOGLE_CLOUD_LOCATION")
                   or settings.env("CLOUD_ML_REGION") or DEFAULT_LOCATION)
    params = generation_params("vertex", f"vertex/{name}", options)
    credentials, source, own_project = _credentials(settings)
    project = (project_arg or settings.env("GOOGLE_CLOUD_PROJECT") or settings.env("ANTHROPIC_VERTEX_PROJECT_ID")
               or own_project)
    if not project:
        raise UsageError(f"vertex/{name} needs a Google Cloud project: set $GOOGLE_CLOUD_PROJECT "
                         "or pass --model-arg project=PROJECT")
    host = "aiplatform.googleapis.com" if location == "global" else f"{location}-aiplatform.googleapis.com"
    base_url = settings.base_url or f"https://{host}"
    cls: type[VertexGeminiClient | VertexAnthropicClient] = (
        VertexAnthropicClient if publisher == "anthropic" else VertexGeminiClient)
    client = cls(model, str(base_url), settings, api_key=None, key_source=source, params=params)
    client.project, client.location, client.token = project, location, _Token(credentials, source)
    return client


__all__ = ["VertexAnthropicClient", "VertexGeminiClient", "make_vertex"]
