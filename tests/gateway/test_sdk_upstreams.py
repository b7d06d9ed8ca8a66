"""The vendors' SDKs against the gateway, backed by loopback providers in each protocol: passthrough (the
agent's protocol is the provider's) and translation (it is not), comparing what reaches the provider with
what the client sent; budgets and disconnects in the middle of a stream."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import anthropic
import httpx2 as httpx
import openai
import pytest
from agentcompass.models.gateway import ModelGateway
from agentcompass.models.metering import TaskMeter
from agentcompass.protocols import CODECS
from agentcompass.protocols.chat import wire_messages
from agentcompass.runtime.model_providers import ProviderSettings
from agentcompass.runtime.models import ModelClient
from agentcompass.runtime.types import RunResult, TaskStatus
from agentcompass.testing.scripted_models import ScriptedModel, scripted, text, tool_call
from agentcompass.testing.upstream import LoopbackUpstream
from agentcompass_models.anthropic import make_anthropic
from agentcompass_models.openai import make_openai, make_openai_compatible

WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


@pytest.fixture
def gateway(gateway_anywhere: Any) -> Any:
    """Every test here holds for the gateway and for a remote worker's relay of it."""
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


def anthropic_provider(up: LoopbackUpstream, name: str = "claude-up") -> ModelClient:
    return make_anthropic(name, settings=ProviderSettings(base_url=up.root, max_retries=0,
                                                          environ={"ANTHROPIC_API_KEY": up.api_key}))


def openai_provider(up: LoopbackUpstream, name: str = "gpt-up") -> ModelClient:
    return make_openai(name, settings=ProviderSettings(base_url=up.base_url, max_retries=0,
                                                       environ={"OPENAI_API_KEY": up.api_key}))


async def granted(gateway: ModelGateway, client: ModelClient, **meter: Any) -> tuple[str, TaskMeter]:
    task_meter = TaskMeter("t", 1, **meter)
    token, _ = gateway.grant({"agent": client}, task_meter, gateway.base_url)
    return token, task_meter


def _keys(value: Any) -> list[str]:
    """Every mapping key anywhere inside ``value``."""
    if isinstance(value, dict):
        return [k for k, v in value.items() for k in (k, *_keys(v))]
    if isinstance(value, list):
        return [k for v in value for k in _keys(v)]
    return []


def root(gateway: ModelGateway) -> str:
    return gateway.base_url.removesuffix("/v1")


# -- passthrough ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
async def test_anthropic_passthrough_keeps_thinking_and_cache_control(gateway: ModelGateway, stream: bool) -> None:
    async with LoopbackUpstream(ScriptedModel(scripted(tool_call("get_weather", "toolu_7", city="Rome"),
                                                       text("Warm in Rome."))), piece=3) as up:
        provider = anthropic_provider(up)
        token, meter = await granted(gateway, provider)
        sent = Sent()
        client = anthropic.AsyncAnthropic(base_url=root(gateway), api_key=token, max_retries=0,
                                          http_client=sent.http())
        history: list[dict[str, Any]] = [
            {"role": "user", "content": [{"type": "text", "text": "Rome?", "cache_control": {"type": "ephemeral"}}]}]
        kwargs: dict[str, Any] = dict(
            model="claude-sonnet-4-5", max_tokens=2048, thinking={"type": "enabled", "budget_tokens": 1024},
            system=[{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
            tools=[{"name": "get_weather", "input_schema": WEATHER, "cache_control": {"type": "ephemeral"}}],
            extra_headers={"anthropic-beta": "interleaved-thinking-2025-05-14"})

        async def ask() -> anthropic.types.Message:
            if stream:
                async with client.messages.stream(messages=history, **kwargs) as s:
                    return await s.get_final_message()
            return await client.messages.create(messages=history, **kwargs)  # type: ignore[no-any-return]

        first = await ask()
        assert first.content[-1].type == "tool_use" and first.content[-1].input == {"city": "Rome"}
        history += [
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "They want weather.", "signature": "sig-abc=="},
                {"type": "redacted_thinking", "data": "opaque=="},
                *[b.model_dump(exclude_none=True) for b in first.content]]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_7", "content": "28C"}]}]
        second = await ask()
        assert second.content[0].text == "Warm in Rome."  # type: ignore[union-attr]
        await provider.aclose()
    # The provider got what the client sent, with only the model name replaced, and its own key.
    assert len(up.requests) == 2
    for request, body in zip(up.requests, sent.bodies, strict=True):
        assert request.body == {**body, "model": "claude-up"}
        assert request.headers["x-api-key"] == up.api_key and token not in json.dumps(dict(request.headers))
        assert request.headers["anthropic-beta"] == "interleaved-thinking-2025-05-14"
    assert up.requests[1].body["messages"][1]["content"][0]["signature"] == "sig-abc=="
    calls = meter.calls
    assert [(c.protocol, c.passthrough, c.stream) for c in calls] == [("anthropic", True, stream)] * 2
    assert calls[0].response is not None and calls[0].response["tool_calls"][0]["id"] == "toolu_7"
    assert calls[1].messages[2]["reasoning_blocks"][0]["signature"] == "sig-abc=="  # canonical, in the record
    assert all(c.prompt_tokens > 0 and c.completion_tokens > 0 for c in calls)
    assert all((c.ttft_s is not None) == stream for c in calls)


@pytest.mark.parametrize("stream", [False, True])
async def test_responses_passthrough_keeps_reasoning_items(gateway: ModelGateway, stream: bool) -> None:
    async with LoopbackUpstream(ScriptedModel(scripted(tool_call("shell", "call_1", command="ls"), text("ok"))),
                                piece=4) as up:
        provider = openai_provider(up)
        token, meter = await granted(gateway, provider)
        sent = Sent()
        client = openai.AsyncOpenAI(base_url=gateway.base_url, api_key=token, max_retries=0, http_client=sent.http())
        items: list[Any] = [{"role": "user", "content": "list files"}]
        kwargs: dict[str, Any] = dict(model="gpt-5-codex", instructions="Codex.", store=False,
                                      include=["reasoning.encrypted_content"], prompt_cache_key="k1",
                                      tools=[{"type": "function", "name": "shell", "parameters": WEATHER}])
        if stream:
            async with client.responses.stream(input=items, **kwargs) as s:
                first = await s.get_final_response()
        else:
            first = await client.responses.create(input=items, **kwargs)
        (call,) = first.output
        assert call.type == "function_call" and call.call_id == "call_1"
        items += [{"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAA-secret-state"},
                  call.model_dump(exclude_none=True), {"type": "function_call_output", "call_id": "call_1",
                                                       "output": "a.txt"}]
        second = await client.responses.create(input=items, **kwargs)
        assert second.output_text == "ok"
        await provider.aclose()
    for request, body in zip(up.requests, sent.bodies, strict=True):
        assert request.body == {**body, "model": "gpt-up"}
        assert request.headers["Authorization"] == f"Bearer {up.api_key}"
    assert up.requests[1].body["input"][1]["encrypted_content"] == "gAAAA-secret-state"
    assert [(c.protocol, c.passthrough) for c in meter.calls] == [("responses", True)] * 2


async def test_chat_passthrough_streams_incrementally_with_usage(gateway: ModelGateway) -> None:
    async with LoopbackUpstream(ScriptedModel(scripted(text("one two three four five six"))), piece=4) as up:
        provider = make_openai_compatible("tiny", settings=ProviderSettings(base_url=up.base_url, api_key_env="K",
                                                                            environ={"K": up.api_key}))
        token, meter = await granted(gateway, provider)
        client = openai.AsyncOpenAI(base_url=gateway.base_url, api_key=token, max_retries=0)
        chunks = [c async for c in await client.chat.completions.create(
            model="tiny", messages=[{"role": "user", "content": "count"}], stream=True,
            stream_options={"include_usage": True})]
        await provider.aclose()
    pieces = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert "".join(pieces) == "one two three four five six" and len(pieces) >= 6  # the provider's pieces
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0
    assert up.requests[0].body["stream_options"] == {"include_usage": True}
    (record,) = meter.calls
    assert record.passthrough and record.stream and record.completion_tokens == chunks[-1].usage.completion_tokens


# -- translation ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
async def test_anthropic_client_on_a_chat_completions_provider(gateway: ModelGateway, stream: bool) -> None:
    async with LoopbackUpstream(ScriptedModel(scripted(tool_call("get_weather", "call_x", city="Lima"),
                                                       text("Mild.")))) as up:
        provider = make_openai_compatible("tiny", settings=ProviderSettings(base_url=up.base_url, api_key_env="K",
                                                                            environ={"K": up.api_key}))
        token, meter = await granted(gateway, provider)
        sent = Sent()
        client = anthropic.AsyncAnthropic(base_url=root(gateway), api_key=token, max_retries=0,
                                          http_client=sent.http())
        # Claude Code marks prompt-cache points and failed tool results: Anthropic-only keys.
        cache = {"cache_control": {"type": "ephemeral"}}
        history: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": "Lima?", **cache}]}]
        kwargs: dict[str, Any] = dict(model="claude-sonnet-4-5", max_tokens=300, system="Short answers.",
                                      tools=[{"name": "get_weather", "input_schema": WEATHER, **cache}])
        first = await client.messages.create(messages=history, **kwargs)
        history += [{"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_x", "content": "18C",
                                                  "is_error": True, **cache}]}]
        if stream:
            async with client.messages.stream(messages=history, **kwargs) as s:
                second = await s.get_final_message()
        else:
            second = await client.messages.create(messages=history, **kwargs)
        assert second.content[0].text == "Mild."  # type: ignore[union-attr]
        await provider.aclose()
    # The chat-completions provider got the canonical form of what the client sent, without the keys only the
    # canonical form has (a chat-completions server refuses unknown message fields).
    for request, body in zip(up.requests, sent.bodies, strict=True):
        assert request.path == "/v1/chat/completions"
        canonical = CODECS["anthropic"].parse_request(body).messages
        assert "cache_control" in json.dumps(canonical)
        assert request.body["messages"] == wire_messages(canonical)
        assert not {"cache_control", "is_error"} & set(_keys(request.body))
        assert request.body["tools"] == [{"type": "function", "function": {"name": "get_weather",
                                                                           "parameters": WEATHER}}]
        assert request.body["max_tokens"] == 300
    assert [(c.protocol, c.passthrough) for c in meter.calls] == [("anthropic", False)] * 2


async def test_responses_client_on_an_anthropic_provider(gateway: ModelGateway) -> None:
    async with LoopbackUpstream(ScriptedModel(scripted(tool_call("shell", "toolu_q", command="pwd"),
                                                       text("In /work.")))) as up:
        provider = anthropic_provider(up)
        token, meter = await granted(gateway, provider)
        client = openai.AsyncOpenAI(base_url=gateway.base_url, api_key=token, max_retries=0)
        items: list[Any] = [{"role": "user", "content": "where am I?"}]
        tools = [{"type": "function", "name": "shell", "parameters": WEATHER}]
        first = await client.responses.create(model="gpt-5-codex", instructions="Be Codex.", input=items,
                                              tools=tools)  # type: ignore[arg-type]
        (call,) = first.output
        assert call.type == "function_call" and json.loads(call.arguments) == {"command": "pwd"}
        items += [call.model_dump(exclude_none=True),
                  {"type": "function_call_output", "call_id": call.call_id, "output": "/work"}]
        async with client.responses.stream(model="gpt-5-codex", instructions="Be Codex.", input=items,
                                           tools=tools) as s:  # type: ignore[arg-type]
            second = await s.get_final_response()
        assert second.output_text == "In /work."
        await provider.aclose()
    body = up.requests[1].body
    assert up.requests[1].path == "/v1/messages" and body["system"] == "Be Codex."
    assert body["messages"][1]["content"][0] == {"type": "tool_use", "id": "toolu_q", "name": "shell",
                                                 "input": {"command": "pwd"}}
    assert body["messages"][2]["content"][0]["type"] == "tool_result"
    assert body["messages"][2]["content"][0]["content"] == "/work"
    assert [(c.protocol, c.passthrough) for c in meter.calls] == [("responses", False)] * 2


async def test_chat_client_on_an_anthropic_provider(gateway: ModelGateway) -> None:
    async with LoopbackUpstream(ScriptedModel(scripted(text("Bright and dry.")))) as up:
        provider = anthropic_provider(up)
        token, meter = await granted(gateway, provider)
        client = openai.AsyncOpenAI(base_url=gateway.base_url, api_key=token, max_retries=0)
        chunks = [c async for c in await client.chat.completions.create(
            model="gpt-4o", stream=True, max_tokens=200,
            messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather?"}])]
        await provider.aclose()
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Bright and dry."
    (request,) = up.requests
    assert request.path == "/v1/messages" and request.body["system"] == "Be brief."
    assert request.body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "Weather?"}]}]
    assert [(c.protocol, c.passthrough, c.stream) for c in meter.calls] == [("chat", False, True)]


async def test_anthropic_count_tokens_is_the_providers(gateway: ModelGateway) -> None:
    async with LoopbackUpstream() as up:
        provider = anthropic_provider(up)
        token, _ = await granted(gateway, provider)
        client = anthropic.AsyncAnthropic(base_url=root(gateway), api_key=token, max_retries=0)
        messages: Any = [{"role": "user", "content": [{"type": "text", "text": "count me",
                                                       "cache_control": {"type": "ephemeral"}}]}]
        counted = await client.messages.count_tokens(model="claude-sonnet-4-5", messages=messages)
        await provider.aclose()
    (request,) = up.requests
    assert request.path == "/v1/messages/count_tokens" and request.body["messages"] == messages
    assert counted.input_tokens == 1000 + len(json.dumps(request.body)) // 10


# -- streams arrive as the provider produces them ---------------------------------------------------------


async def _first_and_last(events: Any) -> tuple[float, float]:
    loop = asyncio.get_running_loop()
    first = last = 0.0
    async for _ in events:
        last = loop.time()
        first = first or last
    return first, last


@pytest.mark.parametrize("protocol", ["anthropic", "responses", "chat"])
async def test_a_stream_reaches_the_client_event_by_event(gateway: ModelGateway, protocol: str) -> None:
    """The upstream pauses between its pieces (20 of them, 50 ms apart): the client has its first event about
    a second before the last, as the provider produced them (not assembled on the way)."""
    async with LoopbackUpstream(ScriptedModel(scripted(text("abcde" * 20))), piece=5, delay=0.05) as up:
        provider = anthropic_provider(up) if protocol == "anthropic" else openai_provider(up)
        token, _ = await granted(gateway, provider)
        if protocol == "anthropic":
            claude = anthropic.AsyncAnthropic(base_url=root(gateway), api_key=token, max_retries=0)
            async with claude.messages.stream(model="m", max_tokens=100,
                                              messages=[{"role": "user", "content": "go"}]) as s:
                first, last = await _first_and_last(s.text_stream)
        else:
            client = openai.AsyncOpenAI(base_url=gateway.base_url, api_key=token, max_retries=0)
            if protocol == "responses":
                events = await client.responses.create(model="m", input="go", stream=True)
            else:
                events = await client.chat.completions.create(model="m", stream=True,
                                                              messages=[{"role": "user", "content": "go"}])
            first, last = await _first_and_last(events)
        await provider.aclose()
    assert up.requests[0].path.endswith("/messages" if protocol == "anthropic" else f"/{protocol}".replace(
        "/chat", "/chat/completions"))
    assert last - first > 0.7


# -- budgets and disconnects in the middle of a stream ------------------------------------------------------


@pytest.mark.parametrize("via", ["passthrough", "translation"])
async def test_a_budget_reached_mid_stream_ends_it_with_an_error_event(gateway: ModelGateway, via: str) -> None:
    long_text = "word " * 400
    async with LoopbackUpstream(ScriptedModel(scripted(text(long_text))), piece=20, delay=0.005) as up:
        provider = anthropic_provider(up) if via == "passthrough" else SlowModel(long_text, 0.005)
        token, meter = await granted(gateway, provider, max_tokens=50)
        client = anthropic.AsyncAnthropic(base_url=root(gateway), api_key=token, max_retries=0)
        received: list[str] = []
        with pytest.raises(anthropic.APIStatusError, match="max_tokens_per_task=50"):
            async with client.messages.stream(model="claude-sonnet-4-5", max_tokens=4000,
                                              messages=[{"role": "user", "content": "talk"}]) as s:
                async for piece in s.text_stream:
                    received.append(piece)
        await provider.aclose()
        assert 0 < len("".join(received)) < len(long_text)
    assert meter.limit_reached and "max_tokens_per_task" in meter.limit_reached
    result = meter.settle(RunResult(task_id="t", category=None, status=TaskStatus.COMPLETED))
    assert result.status is TaskStatus.LIMIT_REACHED
    assert meter.calls[-1].error and "max_tokens_per_task" in meter.calls[-1].error


class SlowModel(ModelClient):
    """Streams a text in pieces, slowly; notes whether its stream was closed before the end."""

    def __init__(self, content: str, delay: float) -> None:
        self.model, self.content, self.delay = "slow", content, delay
        self.closed_early = False

    async def chat(self, messages: Any, *, tools: Any = None, **params: Any) -> Any:
        raise AssertionError("streamed only")

    async def stream(self, messages: Any, *, tools: Any = None, **params: Any) -> AsyncIterator[Any]:
        from agentcompass.runtime.model_stream import StreamAssembler, StreamEnd, TextDelta

        pieces = StreamAssembler()
        finished = False
        try:
            for i in range(0, len(self.content), 20):
                await asyncio.sleep(self.delay)
                event = TextDelta(self.content[i:i + 20])
                pieces.add(event)
                yield event
            finished = True
            yield StreamEnd(pieces.finish(self.model))
        finally:
            self.closed_early = not finished


@pytest.mark.parametrize("via", ["passthrough", "translation"])
async def test_a_client_disconnecting_mid_stream_cancels_the_upstream_call(gateway: ModelGateway, via: str) -> None:
    long_text = "word " * 2000
    async with LoopbackUpstream(ScriptedModel(scripted(text(long_text))), piece=10, delay=0.01) as up:
        provider: Any = anthropic_provider(up) if via == "passthrough" else SlowModel(long_text, 0.01)
        token, meter = await granted(gateway, provider)
        async with aiohttp.ClientSession() as http, http.post(
                f"{gateway.base_url}/messages", headers={"x-api-key": token, "anthropic-version": "2023-06-01"},
                json={"model": "m", "max_tokens": 9000, "stream": True,
                      "messages": [{"role": "user", "content": "talk"}]}) as r:
            assert r.status == 200
            await r.content.readuntil(b"text_delta")  # the stream is flowing: go away
        for _ in range(200):
            if meter.calls:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)
        if via == "passthrough":
            assert up.cancelled == 1  # the provider saw its client (the gateway) go
        else:
            assert provider.closed_early
        await provider.aclose()
    (record,) = meter.calls
    assert record.error and "disconnected" in record.error
    assert record.passthrough == (via == "passthrough")
