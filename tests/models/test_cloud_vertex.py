"""The vertex provider against a loopback Vertex AI: an access token obtained with google-auth from a
service-account key file made here (a fresh RSA key; the token exchange goes to a loopback token endpoint that
verifies the signed JWT, via the file's ``token_uri``), then Vertex's paths for Gemini and for Claude."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from agentcompass.errors import UsageError
from agentcompass.runtime.model_providers import ProviderSettings
from agentcompass.runtime.model_stream import StreamEnd, TextDelta
from agentcompass.runtime.models import ModelError
from agentcompass.testing.scripted_models import ScriptedModel, scripted, text, tool_call
from agentcompass_models.vertex import VertexAnthropicClient, VertexGeminiClient, make_vertex

from tests.models.cloud_servers import VertexServer

ASK = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather in Rome?"}]
WEATHER = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}}]
ROOT = "/v1/projects/proj-test/locations/us-central1/publishers"


def vertex(server: VertexServer, name: str, key_file: Path, **options: Any) -> Any:
    return make_vertex(name, settings=ProviderSettings(
        base_url=server.root, max_retries=1, environ={"GOOGLE_APPLICATION_CREDENTIALS": str(key_file)}), **options)


def weather_then_text() -> ScriptedModel:
    return ScriptedModel(scripted(tool_call("get_weather", "call_1", city="Rome"), text("Warm in Rome today.")))


@pytest.mark.parametrize("name", ["gemini-2.5-flash", "google/gemini-2.5-flash"])
async def test_gemini_on_vertex_with_a_token_from_a_service_account(name: str, tmp_path: Path) -> None:
    async with VertexServer(weather_then_text()) as server:
        client = vertex(server, name, server.key_file(tmp_path / "sa.json"))
        assert isinstance(client, VertexGeminiClient) and client.project == "proj-test"  # the file's project
        first = await client.chat(ASK, tools=WEATHER)
        streamed = [e async for e in client.stream([*ASK, first.message, {
            "role": "tool", "tool_call_id": first.message["tool_calls"][0]["id"], "content": "28C"}])]
        await client.aclose()
    assert json.loads(first.message["tool_calls"][0]["function"]["arguments"]) == {"city": "Rome"}
    assert isinstance(streamed[-1], StreamEnd) and streamed[-1].response.content == "Warm in Rome today."
    assert any(isinstance(e, TextDelta) for e in streamed)
    assert len(server.issued) == 1  # one token exchange, the token reused while valid
    assert [r.raw_path for r in server.requests] == [
        f"{ROOT}/google/models/gemini-2.5-flash:generateContent",
        f"{ROOT}/google/models/gemini-2.5-flash:streamGenerateContent?alt=sse"]
    for arrived in server.requests:
        assert arrived.headers["Authorization"] == f"Bearer {server.issued[0]}"
    assert server.issued[0] in client.secrets


async def test_claude_on_vertex_uses_raw_predict_with_vertexs_anthropic_version(tmp_path: Path) -> None:
    async with VertexServer(weather_then_text()) as server:
        client = vertex(server, "claude-sonnet-4@20250514", server.key_file(tmp_path / "sa.json"))
        assert isinstance(client, VertexAnthropicClient) and client.native_protocols == {"anthropic"}
        first = await client.chat(ASK, tools=WEATHER, max_tokens=256)
        streamed = [e async for e in client.stream([*ASK, first.message, {
            "role": "tool", "tool_call_id": "call_1", "content": "28C"}])]
        await client.aclose()
    assert first.finish_reason == "tool_calls"
    assert isinstance(streamed[-1], StreamEnd) and streamed[-1].response.content == "Warm in Rome today."
    assert [r.raw_path for r in server.requests] == [
        f"{ROOT}/anthropic/models/claude-sonnet-4@20250514:rawPredict",
        f"{ROOT}/anthropic/models/claude-sonnet-4@20250514:streamRawPredict"]
    body = server.requests[0].body
    assert body["anthropic_version"] == "vertex-2023-10-16" and "model" not in body
    assert body["max_tokens"] == 256 and body["system"] == "Be brief."


async def test_an_expired_token_is_exchanged_again(tmp_path: Path) -> None:
    async with VertexServer(expires_in=1) as server:  # google-auth treats a token this close to expiry as due
        client = vertex(server, "gemini-2.5-flash", server.key_file(tmp_path / "sa.json"))
        for _ in range(2):
            assert (await client.chat(ASK)).content
        await client.aclose()
    assert len(server.issued) == 2
    assert [r.headers["Authorization"] for r in server.requests] == [f"Bearer {t}" for t in server.issued]
    assert set(server.issued) <= set(client.secrets)


async def test_a_key_the_token_endpoint_rejects_is_a_fatal_one_line_error(tmp_path: Path) -> None:
    async with VertexServer() as server:
        key_file = server.key_file(tmp_path / "sa.json")
        server.key_file(tmp_path / "other.json")  # the endpoint now knows another key only
        client = vertex(server, "gemini-2.5-flash", key_file)
        with pytest.raises(ModelError) as caught:
            await client.chat(ASK)
        await client.aclose()
    message = str(caught.value)
    assert caught.value.fatal and "cannot get a Google access token from $GOOGLE_APPLICATION_CREDENTIALS" in message
    assert "invalid_grant" in message and "\n" not in message and server.requests == []


async def test_project_and_location_come_from_arguments_and_variables(tmp_path: Path) -> None:
    async with VertexServer(project="other-proj", location="europe-west4") as server:
        key_file = server.key_file(tmp_path / "sa.json")
        by_arg = vertex(server, "gemini-2.5-flash", key_file, project="other-proj", location="europe-west4")
        by_env = make_vertex("gemini-2.5-flash", settings=ProviderSettings(base_url=server.root, environ={
            "GOOGLE_APPLICATION_CREDENTIALS": str(key_file), "GOOGLE_CLOUD_PROJECT": "other-proj",
            "CLOUD_ML_REGION": "europe-west4"}))
        for client in (by_arg, by_env):
            assert (await client.chat(ASK)).content
            await client.aclose()
    assert {r.path.split("/publishers")[0] for r in server.requests} == {
        "/v1/projects/other-proj/locations/europe-west4"}
    assert "project" not in by_arg.params and "location" not in by_arg.params


def test_the_default_endpoint_is_the_locations(tmp_path: Path) -> None:
    key_file = VertexServer().key_file(tmp_path / "sa.json")
    environ = {"GOOGLE_APPLICATION_CREDENTIALS": str(key_file)}
    regional = make_vertex("gemini-2.5-flash", settings=ProviderSettings(environ=environ))
    assert regional.url() == ("https://us-central1-aiplatform.googleapis.com/v1/projects/proj-test/locations/"
                              "us-central1/publishers/google/models/gemini-2.5-flash:generateContent")
    world = make_vertex("anthropic/claude-opus-4@20250514", settings=ProviderSettings(environ=environ),
                        location="global")
    assert world.url().startswith("https://aiplatform.googleapis.com/v1/projects/proj-test/locations/global/"
                                  "publishers/anthropic/models/claude-opus-4@20250514:rawPredict")


@pytest.mark.parametrize(("name", "environ", "said"), [
    ("meta/llama-4", {}, "vertex/meta/llama-4: publisher 'meta' is not served here"),
    ("gemini-2.5-flash", {"GOOGLE_APPLICATION_CREDENTIALS": "/nonexistent/sa.json"},
     "the vertex provider found no usable Google credentials: File /nonexistent/sa.json was not found"),
    ("gemini-2.5-flash", {"KEY_ENV": "GEMINI_API_KEY"},
     "vertex/gemini-2.5-flash uses Google application-default credentials, not an API key"),
])
def test_bad_settings_are_one_line_errors(name: str, environ: dict[str, str], said: str) -> None:
    with pytest.raises(UsageError) as caught:
        make_vertex(name, settings=ProviderSettings(environ=environ, api_key_env=environ.get("KEY_ENV")))
    assert str(caught.value).startswith(said) and "\n" not in str(caught.value)


def test_without_google_auth_the_provider_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == "google.auth" or m.startswith("google.auth.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "google.auth", None)
    with pytest.raises(UsageError, match=r"pip install 'agentcompass-models\[vertex\]'"):
        make_vertex("gemini-2.5-flash", settings=ProviderSettings(environ={}))


async def test_a_failed_token_exchange_frees_the_connection_slot(tmp_path: Path) -> None:
    """A passed-through request whose credentials cannot be obtained fails, and gives its slot back: with one
    connection allowed, the next request fails the same way instead of waiting for ever."""
    import asyncio

    from agentcompass.runtime.model_stream import NativeRequest

    async with VertexServer() as server:
        key_file = server.key_file(tmp_path / "sa.json")
        server.key_file(tmp_path / "other.json")
        client = make_vertex("claude-sonnet-4@20250514", settings=ProviderSettings(
            base_url=server.root, max_retries=0, max_connections=1,
            environ={"GOOGLE_APPLICATION_CREDENTIALS": str(key_file)}))
        request = NativeRequest("anthropic", "messages", {"max_tokens": 10, "messages": [
            {"role": "user", "content": "hi"}]})
        for _ in range(3):
            with pytest.raises(ModelError, match="cannot get a Google access token"):
                await asyncio.wait_for(client.native(request), 10)
        await client.aclose()
