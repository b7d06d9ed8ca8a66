"""The azure provider against a loopback Azure OpenAI resource that checks the deployment URL, the
``api-version`` query and the ``api-key`` header (or an Entra ID bearer token), as the service does."""

from __future__ import annotations

import json
from typing import Any

import pytest
from agentcompass.errors import UsageError
from agentcompass.runtime.model_providers import ProviderSettings
from agentcompass.runtime.model_stream import StreamEnd, TextDelta
from agentcompass.runtime.models import ModelError
from agentcompass.testing.scripted_models import ScriptedModel, scripted, text, tool_call
from agentcompass_models.azure import make_azure

from tests.models.cloud_servers import AZURE_KEY, AzureServer

ASK = [{"role": "user", "content": "Weather in Rome?"}]
WEATHER = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
AD_TOKEN = "eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzI1NiJ9.entra-test-token"


def azure(server: AzureServer, environ: dict[str, str] | None = None, **options: Any) -> Any:
    return make_azure("gpt4o-prod", settings=ProviderSettings(
        base_url=server.root, max_retries=2,
        environ={"AZURE_OPENAI_API_KEY": AZURE_KEY} if environ is None else environ), **options)


async def test_chat_goes_to_the_deployment_with_the_api_version_and_the_api_key() -> None:
    async with AzureServer(ScriptedModel(scripted(tool_call("get_weather", "call_9", city="Rome"),
                                                  text("Warm.")))) as server:
        client = azure(server)
        first = await client.chat(ASK, tools=WEATHER, temperature=0)
        streamed = [e async for e in client.stream([*ASK, first.message,
                                                    {"role": "tool", "tool_call_id": "call_9", "content": "28C"}])]
        await client.aclose()
    assert json.loads(first.message["tool_calls"][0]["function"]["arguments"]) == {"city": "Rome"}
    assert isinstance(streamed[-1], StreamEnd) and streamed[-1].response.content == "Warm."
    assert any(isinstance(e, TextDelta) for e in streamed)
    for arrived in server.requests:
        assert arrived.raw_path == "/openai/deployments/gpt4o-prod/chat/completions?api-version=2025-04-01-preview"
        assert arrived.headers["api-key"] == AZURE_KEY and "Authorization" not in arrived.headers
    assert server.requests[1].body["stream"] is True


async def test_an_entra_id_token_is_sent_as_a_bearer_token() -> None:
    async with AzureServer(api_key="", ad_token=AD_TOKEN) as server:
        client = azure(server, {"AZURE_OPENAI_AD_TOKEN": AD_TOKEN})
        assert (await client.chat(ASK)).content
        assert AD_TOKEN in client.secrets
        await client.aclose()
    assert server.requests[0].headers["Authorization"] == f"Bearer {AD_TOKEN}"
    assert "api-key" not in server.requests[0].headers


async def test_the_api_version_comes_from_the_model_argument_or_the_sdks_variable() -> None:
    async with AzureServer(api_version="2024-10-21") as server:
        by_arg = azure(server, api_version="2024-10-21")
        by_env = azure(server, {"AZURE_OPENAI_API_KEY": AZURE_KEY, "OPENAI_API_VERSION": "2024-10-21"})
        for client in (by_arg, by_env):
            assert (await client.chat(ASK)).content
            await client.aclose()
        assert "api_version" not in by_arg.params
        wrong = azure(server)  # the default version: this resource answers 404, as Azure does for an unknown one
        with pytest.raises(ModelError, match="not found \\(HTTP 404\\)") as caught:
            await wrong.chat(ASK)
        await wrong.aclose()
    assert caught.value.fatal


async def test_a_wrong_key_is_fatal_and_the_key_is_not_in_the_message() -> None:
    async with AzureServer() as server:
        client = azure(server, {"AZURE_OPENAI_API_KEY": "wrong-key-0123456789abcdef"})
        with pytest.raises(ModelError) as caught:
            await client.chat(ASK)
        await client.aclose()
    assert caught.value.fatal and "check the API key ($AZURE_OPENAI_API_KEY)" in str(caught.value)
    assert "wrong-key-0123456789abcdef" not in str(caught.value)


async def test_rate_limits_are_retried_honouring_retry_after() -> None:
    async with AzureServer() as server:
        server.failures = [(429, {"error": {"code": "429", "message": "Rate limit"}}, {"retry-after-ms": "10"})]
        client = azure(server)
        answer = await client.chat(ASK)
        await client.aclose()
    assert answer.metadata["attempts"] == 2 and len(server.requests) == 2


@pytest.mark.parametrize(("environ", "said"), [
    ({"AZURE_OPENAI_ENDPOINT": "https://r.openai.azure.com"}, "azure/d needs credentials: set $AZURE_OPENAI_API_KEY"),
    ({"AZURE_OPENAI_API_KEY": AZURE_KEY}, "azure/d needs the resource's endpoint: set $AZURE_OPENAI_ENDPOINT"),
])
def test_missing_settings_are_one_line_errors(environ: dict[str, str], said: str) -> None:
    with pytest.raises(UsageError) as caught:
        make_azure("d", settings=ProviderSettings(environ=environ))
    assert str(caught.value).startswith(said) and "\n" not in str(caught.value)


def test_the_endpoint_variable_names_the_resource() -> None:
    client = make_azure("d", settings=ProviderSettings(environ={"AZURE_OPENAI_API_KEY": AZURE_KEY,
                                                                "AZURE_OPENAI_ENDPOINT": "https://r.openai.azure.com/"}))
    assert client.url() == "https://r.openai.azure.com/openai/deployments/d/chat/completions?api-version=2025-04-01-preview"
