"""Google's own SDK (``google-genai``) against the gateway's Gemini endpoints, backed by the testing kit's
scripted model (translated through the canonical form) and by loopback providers (a Gemini one passed
through, an Anthropic one translated to; and an OpenAI client on a Gemini provider): several turns with
function calls and responses, streamed and not; ``countTokens``; keys as ``x-goog-api-key`` and ``?key=``;
errors in Gemini's shape."""

from __future__ import annotations

import base64
import json
from typing import Any

import aiohttp
import openai
import pytest
from agentcompass.models.gateway import ModelGateway
from agentcompass.models.metering import TaskMeter
from agentcompass.runtime.model_providers import ProviderSettings
from agentcompass.runtime.models import ModelClient
from agentcompass.testing.scripted_models import ScriptedModel, scripted, text, tool_call
from agentcompass.testing.upstream import LoopbackUpstream
from agentcompass_models.anthropic import make_anthropic
from agentcompass_models.gemini import make_gemini
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


@pytest.fixture
def gateway(gateway_anywhere: Any) -> Any:
    """Every test here holds for the gateway and for a remote worker's relay of it."""
    return gateway_anywhere


def grant(gateway: ModelGateway, model: ModelClient) -> tuple[str, TaskMeter]:
    meter = TaskMeter("t", 1)
    token, _ = gateway.grant({"agent": model}, meter, gateway.base_url)
    return token, meter


def sdk(gateway: ModelGateway, token: str, version: str | None = "v1beta") -> genai.Client:
    """The SDK pointed at the gateway's root; Gemini CLI's API version (``v1beta``) or the SDK's default."""
    root = gateway.base_url.removesuffix("/v1")
    return genai.Client(api_key=token, http_options=types.HttpOptions(base_url=root, api_version=version))


@pytest.mark.parametrize("stream", [False, True])
async def test_gemini_sdk_tool_loop(gateway: ModelGateway, stream: bool) -> None:
    model = ScriptedModel(scripted(tool_call("get_weather", "call_1", city="Paris"),
                                   tool_call("get_weather", "call_2", city="Oslo"), text("Sunny in Paris, cold in Oslo.")))
    token, meter = grant(gateway, model)
    client = sdk(gateway, token)
    config = types.GenerateContentConfig(
        system_instruction="Be brief.", temperature=0.25, max_output_tokens=300, stop_sequences=["END"],
        tools=[types.Tool(function_declarations=[types.FunctionDeclaration(
            name="get_weather", description="Weather now", parameters_json_schema=WEATHER)])],
        tool_config=types.ToolConfig(function_calling_config=types.FunctionCallingConfig(mode="AUTO")),
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True))
    contents: list[types.Content] = [types.Content(role="user", parts=[types.Part(text="Paris and Oslo?")])]

    async def ask() -> types.GenerateContentResponse:
        if not stream:
            return await client.aio.models.generate_content(model="gemini-2.5-pro", contents=contents, config=config)
        chunks = [c async for c in await client.aio.models.generate_content_stream(
            model="gemini-2.5-pro", contents=contents, config=config)]
        assert chunks and chunks[-1].candidates and chunks[-1].candidates[0].finish_reason == types.FinishReason.STOP
        parts = [p for c in chunks if c.candidates and c.candidates[0].content
                 for p in c.candidates[0].content.parts or ()]
        return types.GenerateContentResponse(
            candidates=[types.Candidate(content=types.Content(role="model", parts=parts),
                                        finish_reason=chunks[-1].candidates[0].finish_reason)],
            usage_metadata=chunks[-1].usage_metadata)

    first = await ask()
    (call,) = first.function_calls or []
    assert call.name == "get_weather" and call.args == {"city": "Paris"} and call.id == "call_1"
    assert first.usage_metadata is not None and first.usage_metadata.prompt_token_count
    assert first.usage_metadata.total_token_count == (first.usage_metadata.prompt_token_count
                                                      + first.usage_metadata.candidates_token_count)
    assert first.candidates and first.candidates[0].content
    contents += [first.candidates[0].content, types.Content(role="user", parts=[
        types.Part(function_response=types.FunctionResponse(id=call.id, name=call.name,
                                                            response={"output": "22C, sun"}))])]
    second = await ask()
    (call2,) = second.function_calls or []
    assert call2.args == {"city": "Oslo"}
    assert second.candidates and second.candidates[0].content
    # Gemini CLI answers without an id; the gateway matches the response to the call by name.
    contents += [second.candidates[0].content, types.Content(role="user", parts=[
        types.Part.from_function_response(name="get_weather", response={"error": "station offline"}),
        types.Part(text="Summarise.")])]
    third = await ask()
    assert third.text == "Sunny in Paris, cold in Oslo." and not third.function_calls
    got = model.requests[2]
    assert got["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Paris and Oslo?"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {
            "name": "get_weather", "arguments": json.dumps({"city": "Paris"})}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "22C, sun"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_2", "type": "function", "function": {
            "name": "get_weather", "arguments": json.dumps({"city": "Oslo"})}}]},
        {"role": "tool", "tool_call_id": "call_2", "content": "station offline", "is_error": True},
        {"role": "user", "content": "Summarise."},
    ]
    assert got["tools"] == [{"type": "function", "function": {"name": "get_weather", "description": "Weather now",
                                                              "parameters": WEATHER}}]
    assert got["temperature"] == 0.25 and got["max_tokens"] == 300 and got["stop"] == ["END"]
    assert got["tool_choice"] == "auto"
    method = "streamGenerateContent" if stream else "generateContent"
    assert [(c.protocol, c.endpoint, c.stream, c.role) for c in meter.calls] == [
        ("gemini", f"/v1beta/models/gemini-2.5-pro:{method}", stream, "agent")] * 3
    assert all((c.ttft_s is not None) == stream for c in meter.calls)
    assert meter.calls[0].response is not None and meter.calls[0].response["tool_calls"][0]["id"] == "call_1"


async def test_gemini_count_tokens_and_openapi_parameters(gateway: ModelGateway) -> None:
    model = ScriptedModel(scripted(tool_call("ls", "c1", dir="/")))
    token, meter = grant(gateway, model)
    client = sdk(gateway, token, version=None)
    counted = await client.aio.models.count_tokens(model="gemini-2.5-flash", contents="hello " * 200)
    assert counted.total_tokens is not None and counted.total_tokens > 200
    declaration = types.FunctionDeclaration(name="ls", parameters=types.Schema(
        type=types.Type.OBJECT, properties={"dir": types.Schema(type=types.Type.STRING)}))
    answer = await client.aio.models.generate_content(
        model="gemini-2.5-flash", contents="list /",
        config=types.GenerateContentConfig(tools=[types.Tool(function_declarations=[declaration])],
                                           automatic_function_calling=types.AutomaticFunctionCallingConfig(
                                               disable=True)))
    assert answer.function_calls and answer.function_calls[0].args == {"dir": "/"}
    assert model.requests[0]["tools"][0]["function"]["parameters"] == {
        "type": "object", "properties": {"dir": {"type": "string"}}}
    assert [c.endpoint for c in meter.calls] == ["/v1/models/gemini-2.5-flash:generateContent"]


async def test_gemini_keys_errors_and_methods(gateway: ModelGateway) -> None:
    token, meter = grant(gateway, ScriptedModel(scripted(text("hi there"))))
    bad = sdk(gateway, "acgw-wrong")
    with pytest.raises(genai_errors.ClientError) as caught:
        await bad.aio.models.generate_content(model="gemini-2.5-pro", contents="hi")
    assert caught.value.code == 401 and caught.value.status == "UNAUTHENTICATED"
    root = gateway.base_url.removesuffix("/v1")
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    async with aiohttp.ClientSession() as session:
        # The key in the query, as some clients send it; the call is recorded without it.
        async with session.post(f"{root}/v1beta/models/gemini-x:streamGenerateContent?alt=sse&key={token}",
                                json=body) as reply:
            assert reply.status == 200 and reply.headers["Content-Type"].startswith("text/event-stream")
            frames = [json.loads(line[5:]) for line in (await reply.text()).splitlines() if line.startswith("data:")]
        assert "".join(p.get("text", "") for f in frames for c in f.get("candidates", [])
                       for p in (c.get("content") or {}).get("parts", [])) == "hi there"
        assert frames[-1]["usageMetadata"]["totalTokenCount"] > 0
        assert token not in json.dumps([c.endpoint for c in meter.calls])
        headers = {"x-goog-api-key": token}
        async with session.post(f"{root}/v1beta/models/gemini-x:streamGenerateContent", json=body,
                                headers=headers) as reply:
            assert reply.status == 400 and "alt=sse" in (await reply.json())["error"]["message"]
        async with session.post(f"{root}/v1beta/models/gemini-x:embedContent", json=body, headers=headers) as reply:
            error = (await reply.json())["error"]
            assert reply.status == 404 and error["status"] == "NOT_FOUND" and "embedContent" in error["message"]
        async with session.post(f"{root}/v1beta/models/gemini-x:generateContent", json={"contents": "x"},
                                headers=headers) as reply:
            error = (await reply.json())["error"]
            assert reply.status == 400 and error["status"] == "INVALID_ARGUMENT" and "contents" in error["message"]


# -- loopback providers: passthrough and translation both ways ------------------------------------------------


def gemini_provider(up: LoopbackUpstream, name: str = "gemini-up") -> ModelClient:
    return make_gemini(name, settings=ProviderSettings(base_url=up.root, max_retries=0,
                                                       environ={"GEMINI_API_KEY": up.api_key}))


@pytest.mark.parametrize("stream", [False, True])
async def test_gemini_passthrough_keeps_the_request_and_thought_signatures(gateway: ModelGateway,
                                                                          stream: bool) -> None:
    async with LoopbackUpstream(ScriptedModel(scripted(tool_call("get_weather", "call_r", city="Rome"),
                                                       text("Warm in Rome."))), piece=3) as up:
        provider = gemini_provider(up)
        token, meter = grant(gateway, provider)
        client = sdk(gateway, token)
        config = types.GenerateContentConfig(
            system_instruction="Be brief.", thinking_config=types.ThinkingConfig(thinking_budget=512),
            tools=[types.Tool(function_declarations=[types.FunctionDeclaration(
                name="get_weather", parameters_json_schema=WEATHER)])],
            automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True))
        contents: list[types.Content] = [types.Content(role="user", parts=[types.Part(text="Rome?")])]

        async def ask() -> list[types.Part]:
            if stream:
                chunks = [c async for c in await client.aio.models.generate_content_stream(
                    model="gemini-3-pro", contents=contents, config=config)]
                return [p for c in chunks if c.candidates and c.candidates[0].content
                        for p in c.candidates[0].content.parts or ()]
            answer = await client.aio.models.generate_content(model="gemini-3-pro", contents=contents, config=config)
            assert answer.candidates and answer.candidates[0].content
            return list(answer.candidates[0].content.parts or ())

        parts = await ask()
        call = parts[-1].function_call
        assert call is not None and call.args == {"city": "Rome"}
        parts[-1].thought_signature = b"signed-thought"
        contents += [types.Content(role="model", parts=[types.Part(text="Checking.", thought=True), *parts]),
                     types.Content(role="user", parts=[types.Part.from_function_response(
                         name="get_weather", response={"output": "28C"})])]
        second = await ask()
        assert "".join(p.text or "" for p in second) == "Warm in Rome."
        counted = await client.aio.models.count_tokens(model="gemini-3-pro", contents="hi")
        assert counted.total_tokens is not None and counted.total_tokens >= 1000  # the provider's own count
        await provider.aclose()
    method = "streamGenerateContent" if stream else "generateContent"
    assert up.requests.pop().path == "/v1beta/models/gemini-up:countTokens"
    assert [r.path for r in up.requests] == [f"/v1beta/models/gemini-up:{method}"] * 2
    for request in up.requests:
        assert request.headers["x-goog-api-key"] == up.api_key and token not in json.dumps(dict(request.headers))
        assert "model" not in request.body
        # As the SDK sent it: not re-rendered (the codec would write parametersJsonSchema).
        assert request.body["tools"][0]["functionDeclarations"][0]["parameters_json_schema"] == WEATHER
        assert request.body["generationConfig"]["thinkingConfig"] == {"thinking_budget": 512}  # the SDK's spelling
    model_turn = up.requests[1].body["contents"][1]
    assert model_turn["parts"][0] == {"text": "Checking.", "thought": True}
    signed = model_turn["parts"][-1]
    assert signed.get("thoughtSignature", signed.get("thought_signature")) == base64.b64encode(
        b"signed-thought").decode()
    calls = meter.calls
    assert [(c.protocol, c.passthrough, c.stream) for c in calls] == [("gemini", True, stream)] * 2
    assert calls[0].response is not None and calls[0].response["tool_calls"][0]["function"]["name"] == "get_weather"
    assert calls[1].messages[2]["tool_calls"][0]["thought_signature"] == base64.b64encode(b"signed-thought").decode()
    assert all(c.prompt_tokens > 0 and c.completion_tokens > 0 for c in calls)
    assert all((c.ttft_s is not None) == stream for c in calls)


@pytest.mark.parametrize("stream", [False, True])
async def test_gemini_client_on_an_anthropic_provider(gateway: ModelGateway, stream: bool) -> None:
    async with LoopbackUpstream(ScriptedModel(scripted(tool_call("get_weather", "toolu_l", city="Lima"),
                                                       text("Mild.")))) as up:
        provider = make_anthropic("claude-up", settings=ProviderSettings(
            base_url=up.root, max_retries=0, environ={"ANTHROPIC_API_KEY": up.api_key}))
        token, meter = grant(gateway, provider)
        client = sdk(gateway, token)
        config = types.GenerateContentConfig(
            system_instruction="Short answers.", max_output_tokens=300,
            tools=[types.Tool(function_declarations=[types.FunctionDeclaration(
                name="get_weather", parameters_json_schema=WEATHER)])],
            automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True))
        contents: list[types.Content] = [types.Content(role="user", parts=[types.Part(text="Lima?")])]
        first = await client.aio.models.generate_content(model="gemini-2.5-pro", contents=contents, config=config)
        assert first.function_calls and first.function_calls[0].id == "toolu_l"
        assert first.candidates and first.candidates[0].content
        contents += [first.candidates[0].content, types.Content(role="user", parts=[
            types.Part.from_function_response(name="get_weather", response={"output": "18C"})])]
        if stream:
            chunks = [c async for c in await client.aio.models.generate_content_stream(
                model="gemini-2.5-pro", contents=contents, config=config)]
            said = "".join(c.text or "" for c in chunks)
        else:
            said = (await client.aio.models.generate_content(model="gemini-2.5-pro", contents=contents,
                                                             config=config)).text or ""
        assert said == "Mild."
        await provider.aclose()
    assert [r.path for r in up.requests] == ["/v1/messages"] * 2
    body = up.requests[1].body
    assert body["system"] == "Short answers." and body["max_tokens"] == 300 and body["model"] == "claude-up"
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Lima?"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_l", "name": "get_weather",
                                           "input": {"city": "Lima"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_l", "content": "18C"}]}]
    assert body["tools"] == [{"name": "get_weather", "input_schema": WEATHER}]
    assert [(c.protocol, c.passthrough) for c in meter.calls] == [("gemini", False)] * 2


@pytest.mark.parametrize("stream", [False, True])
async def test_openai_client_on_a_gemini_provider(gateway: ModelGateway, stream: bool) -> None:
    async with LoopbackUpstream(ScriptedModel(scripted(tool_call("get_weather", "call_g", city="Kyiv"),
                                                       text("Snow all week long."))), piece=4) as up:
        provider = gemini_provider(up)
        token, meter = grant(gateway, provider)
        client = openai.AsyncOpenAI(base_url=gateway.base_url, api_key=token, max_retries=0)
        tools: Any = [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}}]
        messages: list[Any] = [{"role": "system", "content": "Terse."}, {"role": "user", "content": "Kyiv?"}]
        first = await client.chat.completions.create(model="gemini-up", messages=messages, tools=tools,
                                                     temperature=0.5)
        (call,) = first.choices[0].message.tool_calls or []
        assert call.id == "call_g" and json.loads(call.function.arguments) == {"city": "Kyiv"}  # type: ignore[union-attr]
        assert first.choices[0].finish_reason == "tool_calls"
        messages += [first.choices[0].message.model_dump(exclude_none=True),
                     {"role": "tool", "tool_call_id": "call_g", "content": "-3C"}]
        if stream:  # streamed from the provider as it answers, piece by piece, not its whole answer at once
            chunks = [c async for c in await client.chat.completions.create(
                model="gemini-up", messages=messages, tools=tools, stream=True)]
            pieces = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
            assert len(pieces) >= 4
            said = "".join(pieces)
        else:
            said = (await client.chat.completions.create(model="gemini-up", messages=messages,
                                                         tools=tools)).choices[0].message.content or ""
        assert said == "Snow all week long."
        await provider.aclose()
    method = "streamGenerateContent" if stream else "generateContent"
    assert [r.path for r in up.requests] == ["/v1beta/models/gemini-up:generateContent",
                                             f"/v1beta/models/gemini-up:{method}"]
    assert meter.calls[1].response is not None and meter.calls[1].response["content"] == "Snow all week long."
    assert meter.calls[1].completion_tokens > 0 and (meter.calls[1].ttft_s is not None) == stream
    body = up.requests[1].body
    assert body["systemInstruction"] == {"parts": [{"text": "Terse."}]}
    assert body["contents"] == [
        {"role": "user", "parts": [{"text": "Kyiv?"}]},
        {"role": "model", "parts": [{"functionCall": {"id": "call_g", "name": "get_weather",
                                                      "args": {"city": "Kyiv"}}}]},
        {"role": "user", "parts": [{"functionResponse": {"id": "call_g", "name": "get_weather",
                                                         "response": {"output": "-3C"}}}]}]
    assert body["tools"] == [{"functionDeclarations": [{"name": "get_weather", "parametersJsonSchema": WEATHER}]}]
    assert up.requests[0].body["generationConfig"] == {"temperature": 0.5}
    assert [(c.protocol, c.passthrough) for c in meter.calls] == [("chat", False)] * 2
