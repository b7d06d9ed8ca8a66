"""The vendors' SDKs through the gateway onto the cloud providers, each against its loopback cloud
(:mod:`tests.models.cloud_servers`): passthrough for the provider's own protocol (Anthropic Messages on
Bedrock and on Vertex, chat completions and Responses on Azure), translation otherwise — with the cloud's
credentials added on the host and never seen by the client."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
import httpx2 as httpx
import openai
import pytest
from agentcompass.models.gateway import ModelGateway
from agentcompass.models.metering import TaskMeter
from agentcompass.runtime.model_providers import ProviderSettings
from agentcompass.runtime.models import ModelClient
from agentcompass.testing.scripted_models import ScriptedModel, scripted, text, tool_call
from agentcompass_models.azure import make_azure
from agentcompass_models.bedrock import make_bedrock
from agentcompass_models.vertex import make_vertex

from tests.models.cloud_servers import (
    AWS_KEY_ID,
    AWS_SECRET,
    AWS_SESSION,
    AZURE_KEY,
    REGION,
    AzureServer,
    BedrockServer,
    VertexServer,
)

WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
CLAUDE = "anthropic.claude-sonnet-4-20250514-v1:0"


@pytest.fixture
def gateway(gateway_anywhere: Any) -> Any:
    return gateway_anywhere


class Sent:
    """The JSON bodies an SDK sent (an httpx request hook)."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    async def __call__(self, request: httpx.Request) -> None:
        if request.method == "POST":
            self.bodies.append(json.loads(request.content))

    def http(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(event_hooks={"request": [self]})


async def granted(gateway: ModelGateway, client: ModelClient) -> tuple[str, TaskMeter]:
    meter = TaskMeter("t", 1)
    token, _ = gateway.grant({"agent": client}, meter, gateway.base_url)
    return token, meter


def weather_then_text() -> ScriptedModel:
    return ScriptedModel(scripted(tool_call("get_weather", "toolu_7", city="Rome"), text("Warm in Rome.")))


def bedrock_provider(server: BedrockServer, model: str = CLAUDE) -> ModelClient:
    return make_bedrock(model, settings=ProviderSettings(base_url=server.root, max_retries=0, environ={
        "AWS_ACCESS_KEY_ID": AWS_KEY_ID, "AWS_SECRET_ACCESS_KEY": AWS_SECRET, "AWS_SESSION_TOKEN": AWS_SESSION,
        "AWS_REGION": REGION}))


async def anthropic_conversation(gateway: ModelGateway, token: str, stream: bool, sent: Sent) -> None:
    client = anthropic.AsyncAnthropic(base_url=gateway.base_url.removesuffix("/v1"), api_key=token, max_retries=0,
                                      http_client=sent.http())
    history: list[Any] = [{"role": "user", "content": [
        {"type": "text", "text": "Rome?", "cache_control": {"type": "ephemeral"}}]}]
    kwargs: dict[str, Any] = dict(model="claude-sonnet-4-5", max_tokens=1024, system="Be brief.",
                                  tools=[{"name": "get_weather", "input_schema": WEATHER}],
                                  extra_headers={"anthropic-beta": "interleaved-thinking-2025-05-14"})

    async def ask() -> anthropic.types.Message:
        if stream:
            async with client.messages.stream(messages=history, **kwargs) as s:
                return await s.get_final_message()
        answer: anthropic.types.Message = await client.messages.create(messages=history, **kwargs)
        return answer

    first = await ask()
    assert first.content[-1].type == "tool_use" and first.content[-1].input == {"city": "Rome"}
    history += [{"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_7", "content": "28C"}]}]
    second = await ask()
    assert second.content[0].text == "Warm in Rome."  # type: ignore[union-attr]
    counted = await client.messages.count_tokens(model="claude-sonnet-4-5", messages=history)
    assert counted.input_tokens > 1000


@pytest.mark.parametrize("stream", [False, True])
async def test_anthropic_sdk_through_the_gateway_onto_bedrock_is_passed_through_and_signed(
        gateway: ModelGateway, stream: bool) -> None:
    async with BedrockServer(weather_then_text(), token=AWS_SESSION) as server:
        provider = bedrock_provider(server)
        token, meter = await granted(gateway, provider)
        sent = Sent()
        await anthropic_conversation(gateway, token, stream, sent)
        await provider.aclose()
    assert server.verified == 3  # two messages and a count, each signed with the host's credentials
    action = "invoke-with-response-stream" if stream else "invoke"
    assert [r.raw_path.rpartition("/")[2] for r in server.requests] == [action, action, "count-tokens"]
    for arrived, body in zip(server.requests[:2], sent.bodies[:2], strict=True):
        expected = {k: v for k, v in body.items() if k not in ("model", "stream")}
        assert arrived.body == {**expected, "anthropic_version": "bedrock-2023-05-31",
                                "anthropic_beta": ["interleaved-thinking-2025-05-14"]}
        assert token not in json.dumps(arrived.headers)
    counted = json.loads(server.requests[2].body["input"]["invokeModel"]["body"])
    assert counted["messages"] == sent.bodies[2]["messages"]
    calls = meter.calls
    assert [(c.protocol, c.passthrough, c.stream) for c in calls[:2]] == [("anthropic", True, stream)] * 2
    assert all(c.prompt_tokens > 0 and c.completion_tokens > 0 for c in calls[:2])


@pytest.mark.parametrize("stream", [False, True])
async def test_openai_sdk_through_the_gateway_onto_bedrock_converse_is_translated(
        gateway: ModelGateway, stream: bool) -> None:
    async with BedrockServer(weather_then_text(), token=AWS_SESSION) as server:
        provider = bedrock_provider(server, "amazon.nova-pro-v1:0")
        token, meter = await granted(gateway, provider)
        client = openai.AsyncOpenAI(base_url=gateway.base_url, api_key=token, max_retries=0)
        messages: list[Any] = [{"role": "user", "content": "Rome?"}]
        tools: Any = [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}}]
        if stream:
            chunks = [c async for c in await client.chat.completions.create(
                model="nova", messages=messages, tools=tools, stream=True)]
            calls = [tc for c in chunks if c.choices for tc in c.choices[0].delta.tool_calls or ()]
            arguments = "".join(tc.function.arguments or "" for tc in calls if tc.function)
        else:
            answer = await client.chat.completions.create(model="nova", messages=messages, tools=tools)
            arguments = answer.choices[0].message.tool_calls[0].function.arguments  # type: ignore[index,union-attr]
        await provider.aclose()
    assert json.loads(arguments) == {"city": "Rome"}
    assert server.requests[0].raw_path.endswith("/converse-stream" if stream else "/converse")
    assert server.verified == 1
    assert [(c.protocol, c.passthrough) for c in meter.calls] == [("chat", False)]


@pytest.mark.parametrize("stream", [False, True])
async def test_anthropic_sdk_through_the_gateway_onto_claude_on_vertex(gateway: ModelGateway, stream: bool,
                                                                       tmp_path: Path) -> None:
    async with VertexServer(weather_then_text()) as server:
        provider = make_vertex("claude-sonnet-4@20250514", settings=ProviderSettings(
            base_url=server.root, max_retries=0,
            environ={"GOOGLE_APPLICATION_CREDENTIALS": str(server.key_file(tmp_path / "sa.json"))}))
        token, meter = await granted(gateway, provider)
        sent = Sent()
        await anthropic_conversation(gateway, token, stream, sent)
        await provider.aclose()
    method = "streamRawPredict" if stream else "rawPredict"
    assert [r.raw_path.rpartition(":")[2] for r in server.requests] == [method, method, "rawPredict"]
    assert server.requests[2].raw_path.endswith("/publishers/anthropic/models/count-tokens:rawPredict")
    for arrived, body in zip(server.requests[:2], sent.bodies[:2], strict=True):
        expected = {k: v for k, v in body.items() if k != "model"}
        assert arrived.body == {**expected, "anthropic_version": "vertex-2023-10-16"}
        assert arrived.headers["Authorization"] == f"Bearer {server.issued[0]}"
        assert arrived.headers["anthropic-beta"] == "interleaved-thinking-2025-05-14"
    assert [(c.protocol, c.passthrough) for c in meter.calls[:2]] == [("anthropic", True)] * 2


@pytest.mark.parametrize("stream", [False, True])
async def test_openai_sdk_chat_and_responses_through_the_gateway_onto_azure(gateway: ModelGateway,
                                                                            stream: bool) -> None:
    async with AzureServer(ScriptedModel(scripted(text("Hello from chat."), text("Hello from responses.")))) as server:
        provider = make_azure("gpt4o-prod", settings=ProviderSettings(
            base_url=server.root, max_retries=0, environ={"AZURE_OPENAI_API_KEY": AZURE_KEY}))
        token, meter = await granted(gateway, provider)
        client = openai.AsyncOpenAI(base_url=gateway.base_url, api_key=token, max_retries=0)
        messages: Any = [{"role": "user", "content": "hi"}]
        said: Any
        if stream:
            chunks = [c async for c in await client.chat.completions.create(model="gpt-4o", messages=messages,
                                                                             stream=True)]
            said = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
            async with client.responses.stream(model="gpt-4o", input="hi") as s:
                answered = (await s.get_final_response()).output_text
        else:
            said = (await client.chat.completions.create(model="gpt-4o", messages=messages)).choices[0].message.content
            answered = (await client.responses.create(model="gpt-4o", input="hi")).output_text
        await provider.aclose()
    assert (said, answered) == ("Hello from chat.", "Hello from responses.")
    assert [r.raw_path for r in server.requests] == [
        "/openai/deployments/gpt4o-prod/chat/completions?api-version=2025-04-01-preview",
        "/openai/responses?api-version=2025-04-01-preview"]
    assert server.requests[1].body["model"] == "gpt4o-prod"
    for arrived in server.requests:
        assert arrived.headers["api-key"] == AZURE_KEY and token not in json.dumps(arrived.headers)
    assert [(c.protocol, c.passthrough) for c in meter.calls] == [("chat", True), ("responses", True)]


@pytest.mark.parametrize("stream", [False, True])
async def test_gemini_sdk_through_the_gateway_onto_gemini_on_vertex(gateway: ModelGateway, stream: bool,
                                                                    tmp_path: Path) -> None:
    from google import genai
    from google.genai import types

    async with VertexServer(weather_then_text()) as server:
        provider = make_vertex("gemini-2.5-flash", settings=ProviderSettings(
            base_url=server.root, max_retries=0,
            environ={"GOOGLE_APPLICATION_CREDENTIALS": str(server.key_file(tmp_path / "sa.json"))}))
        token, meter = await granted(gateway, provider)
        client = genai.Client(api_key=token, http_options=types.HttpOptions(
            base_url=gateway.base_url.removesuffix("/v1"), api_version="v1beta"))
        config = types.GenerateContentConfig(
            tools=[types.Tool(function_declarations=[types.FunctionDeclaration(
                name="get_weather", parameters_json_schema=WEATHER)])],
            automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True))
        contents = [types.Content(role="user", parts=[types.Part(text="Rome?")])]
        if stream:
            chunks = [c async for c in await client.aio.models.generate_content_stream(
                model="gemini-2.5-pro", contents=contents, config=config)]
            calls = [call for c in chunks for call in c.function_calls or ()]
        else:
            calls = (await client.aio.models.generate_content(model="gemini-2.5-pro", contents=contents,
                                                              config=config)).function_calls or []
        counted = await client.aio.models.count_tokens(model="gemini-2.5-pro", contents=contents)
        await provider.aclose()
    assert [(c.name, c.args) for c in calls] == [("get_weather", {"city": "Rome"})]
    assert counted.total_tokens and counted.total_tokens > 1000
    method = "streamGenerateContent?alt=sse" if stream else "generateContent"
    root = "/v1/projects/proj-test/locations/us-central1/publishers/google/models/gemini-2.5-flash"
    assert [r.raw_path for r in server.requests] == [f"{root}:{method}", f"{root}:countTokens"]
    for arrived in server.requests:
        assert arrived.headers["Authorization"] == f"Bearer {server.issued[0]}"
        assert "x-goog-api-key" not in arrived.headers and token not in json.dumps(arrived.headers)
    assert [(c.protocol, c.passthrough) for c in meter.calls[:1]] == [("gemini", True)]
