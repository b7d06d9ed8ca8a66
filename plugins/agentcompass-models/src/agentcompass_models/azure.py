"""``azure``: Azure OpenAI — a deployment of an OpenAI model in an Azure resource.

``azure/DEPLOYMENT`` names the deployment (not the model). Requests go to
``{endpoint}/openai/deployments/DEPLOYMENT/chat/completions?api-version=V`` and, for a Responses agent passed
through, ``{endpoint}/openai/responses?api-version=V`` with the deployment as ``model``.

* Endpoint: ``--model-base-url``, else ``$AZURE_OPENAI_ENDPOINT`` (``https://RESOURCE.openai.azure.com``), else
  the credentials file's ``[azure] base_url``.
* Authentication, on the host: an API key (``$AZURE_OPENAI_API_KEY``, or the variable ``--model-api-key-env``
  names, or ``[azure] api_key``) sent as ``api-key``; or a Microsoft Entra ID access token
  (``$AZURE_OPENAI_AD_TOKEN``, e.g. from ``az account get-access-token --resource
  https://cognitiveservices.azure.com``) sent as ``Authorization: Bearer``.
* API version: ``--model-arg api_version=V``, else ``$OPENAI_API_VERSION`` (the variable the OpenAI SDK reads),
  else :data:`AZURE_API_VERSION`.

Everything else — the chat completions wire format, streaming, retries, passthrough of chat completions and
Responses — is the ``openai`` provider's.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from agentcompass.errors import UsageError
from agentcompass.runtime.model_providers import ProviderSettings, load_credentials
from agentcompass.runtime.model_stream import NativeReply, NativeRequest

from agentcompass_models.native import send_native
from agentcompass_models.openai import OpenAIChatClient, generation_params

#: The default ``api-version``: one that serves chat completions and the Responses API.
AZURE_API_VERSION = "2025-04-01-preview"


class AzureOpenAIClient(OpenAIChatClient):
    """Chat completions (and Responses, passed through) on an Azure OpenAI deployment."""

    provider = "azure"
    native_protocols = frozenset({"chat", "responses"})
    api_version = AZURE_API_VERSION
    #: ``"api-key"`` for a key, ``"bearer"`` for an Entra ID token.
    auth = "api-key"

    @property
    def root(self) -> str:
        return self.base_url.removesuffix("/openai")

    def headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.auth == "bearer":
            headers["Authorization"] = f"Bearer {self._api_key}"
        else:
            headers["api-key"] = self._api_key or ""
        return headers

    def url(self) -> str:
        return self.path_url("chat/completions")

    def path_url(self, path: str) -> str:
        """The URL of an OpenAI API ``path`` (``chat/completions``, ``responses``) on this deployment."""
        version = quote(self.api_version, safe="")
        if path == "chat/completions":
            deployment = quote(self.model, safe="")
            return f"{self.root}/openai/deployments/{deployment}/chat/completions?api-version={version}"
        return f"{self.root}/openai/{path}?api-version={version}"

    async def native(self, request: NativeRequest) -> NativeReply:
        """The agent's chat completions or Responses request as it is, to this deployment."""
        headers = self.headers()
        if request.stream:
            headers["Accept"] = "text/event-stream"
        return await send_native(self, request, self.path_url(request.path), headers)


def make_azure(name: str = "", *, settings: ProviderSettings | None = None, **options: Any) -> AzureOpenAIClient:
    settings = settings or ProviderSettings()
    if not name:
        raise UsageError("model 'azure' needs a deployment name: write it as azure/DEPLOYMENT")
    version = str(options.pop("api_version", "") or settings.env("OPENAI_API_VERSION") or AZURE_API_VERSION)
    params = generation_params("azure", f"azure/{name}", options)
    file = load_credentials(settings.environ).get("azure", {})
    key_env = settings.api_key_env or "AZURE_OPENAI_API_KEY"
    api_key, source, auth = settings.env(key_env), f"${key_env}", "api-key"
    if not api_key and not settings.api_key_env:
        if file.get("api_key"):
            api_key, source = str(file["api_key"]), "api_key in the credentials file"
        elif settings.env("AZURE_OPENAI_AD_TOKEN"):
            api_key, auth = settings.env("AZURE_OPENAI_AD_TOKEN"), "bearer"
            source = "the Entra ID token $AZURE_OPENAI_AD_TOKEN"
    if not api_key:
        raise UsageError(
            f"azure/{name} needs credentials: set ${key_env} (the resource's key), or $AZURE_OPENAI_AD_TOKEN "
            "(an Entra ID token: az account get-access-token --resource https://cognitiveservices.azure.com)"
        )
    base_url = settings.base_url or settings.env("AZURE_OPENAI_ENDPOINT") or file.get("base_url")
    if not base_url:
        raise UsageError(f"azure/{name} needs the resource's endpoint: set $AZURE_OPENAI_ENDPOINT "
                         "(https://RESOURCE.openai.azure.com) or pass --model-base-url")
    client = AzureOpenAIClient(name, str(base_url), settings, api_key=api_key, key_source=source, params=params)
    client.api_version, client.auth = version, auth
    return client
