"""``--faults`` at the gateway, seen by the vendors' own SDKs (``openai`` for chat completions and Responses,
``anthropic``, ``google-genai``) over real loopback HTTP, the scripted model behind: each fault kind arrives in
the protocol's own shape, the SDK's own retry logic rides out what it would ride out against the real service
(a 429 after its ``Retry-After``, a 5xx, a reset connection, a timeout), and each injected fault is on its
call's record, never billed."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import anthropic
import httpx
import openai
import pytest
from agentcompass.models.fault_profiles import FaultProfile, FaultRates, fault_for
from agentcompass.models.faults import FaultSource
from agentcompass.models.gateway import ModelGateway
from agentcompass.models.metering import TaskMeter
from agentcompass.models.prices import Price
from agentcompass.testing.scripted_models import ScriptedModel, text, tool_call
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

PROTOCOLS = ("chat", "responses", "anthropic", "gemini")
WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
#: Retry-After of the injected 429s (seconds): the SDKs must wait it out.
RETRY_AFTER = 0.4


@pytest.fixture
async def gateway() -> AsyncIterator[ModelGateway]:
    """The gateway of a run with ``--faults`` (a dropping fault needs the request being served)."""
    gw = ModelGateway({"agent": "scripted", "judge": "judge"}, faults=True)
    await gw.start()
    try:
        yield gw
    finally:
        await gw.stop()


def seed_faulting_first_call_only(rates: FaultRates, kind: str) -> int:
    """A seed whose draw faults the agent's first call with ``kind`` and leaves the next two alone."""
    for seed in range(10_000):
        kinds = [fault_for(rates, seed, "t", 1, "agent", i).kind for i in (1, 2, 3)]
        if kinds == [kind, "", ""]:
            return seed
    raise AssertionError(f"no seed faults the first call only with {kind}")


def faulted(gateway: ModelGateway, kind: str, answer: dict[str, Any], **settings: Any
            ) -> tuple[str, TaskMeter, ScriptedModel]:
    rates = FaultRates(**{kind: 0.5}, retry_after=RETRY_AFTER, **settings)
    seed = seed_faulting_first_call_only(rates, kind)
    model = ScriptedModel(lambda request: answer)
    meter = TaskMeter("t", 1, seed=seed, prices={"agent": Price(1.0, 1.0)})
    clients = FaultSource(FaultProfile("test", rates)).decorate({"agent": model}, meter)
    token, _ = gateway.grant(clients, meter, gateway.base_url)
    return token, meter, model


async def ask(protocol: str, gateway: ModelGateway, token: str, *, stream: bool = False, retries: int = 2,
              timeout: float = 30.0) -> dict[str, Any]:
    """One call in ``protocol`` with the vendor's SDK: its text and tool-call arguments (raw text)."""
    root = gateway.base_url.removesuffix("/v1")
    messages = [{"role": "user", "content": "Weather in Paris?"}]
    if protocol == "chat":
        client = openai.AsyncOpenAI(base_url=gateway.base_url, api_key=token, max_retries=retries, timeout=timeout)
        tools = [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}}]
        if stream:
            text_parts, args = [], []
            async for chunk in await client.chat.completions.create(model="m", messages=messages, tools=tools,
                                                                    stream=True):
                for choice in chunk.choices:
                    text_parts.append(choice.delta.content or "")
                    args += [c.function.arguments or "" for c in choice.delta.tool_calls or () if c.function]
            return {"text": "".join(text_parts), "arguments": "".join(args) or None}
        reply = await client.chat.completions.create(model="m", messages=messages, tools=tools)
        calls = reply.choices[0].message.tool_calls or []
        return {"text": reply.choices[0].message.content or "",
                "arguments": calls[0].function.arguments if calls else None}  # type: ignore[union-attr]
    if protocol == "responses":
        client = openai.AsyncOpenAI(base_url=gateway.base_url, api_key=token, max_retries=retries, timeout=timeout)
        rtools = [{"type": "function", "name": "get_weather", "parameters": WEATHER, "strict": False}]
        if stream:
            async with client.responses.stream(model="m", input=messages, tools=rtools) as s:  # type: ignore[arg-type]
                async for _ in s:
                    pass
                response = await s.get_final_response()
        else:
            response = await client.responses.create(model="m", input=messages, tools=rtools)  # type: ignore[arg-type]
        calls = [o for o in response.output if o.type == "function_call"]
        return {"text": response.output_text, "arguments": calls[0].arguments if calls else None}
    if protocol == "anthropic":
        aclient = anthropic.AsyncAnthropic(base_url=root, api_key=token, max_retries=retries, timeout=timeout)
        atools = [{"name": "get_weather", "input_schema": WEATHER}]
        kwargs: dict[str, Any] = dict(model="m", max_tokens=64, messages=messages, tools=atools)
        if stream:  # the raw partial JSON as it streamed (the SDK's own reading of it is lenient)
            partial = []
            async with aclient.messages.stream(**kwargs) as s:
                async for event in s:
                    if event.type == "content_block_delta" and event.delta.type == "input_json_delta":
                        partial.append(event.delta.partial_json)
                message = await s.get_final_message()
            text_parts = "".join(b.text for b in message.content if b.type == "text")
            return {"text": text_parts, "arguments": "".join(partial) or None}
        else:
            message = await aclient.messages.create(**kwargs)
        uses = [b for b in message.content if b.type == "tool_use"]
        return {"text": "".join(b.text for b in message.content if b.type == "text"),
                "arguments": json.dumps(uses[0].input) if uses else None}
    gclient = genai.Client(api_key=token, http_options=types.HttpOptions(
        base_url=root, api_version="v1beta", timeout=int(timeout * 1000),
        retry_options=types.HttpRetryOptions(attempts=retries + 1, initial_delay=0.1, max_delay=1.0)))
    config = types.GenerateContentConfig(tools=[types.Tool(function_declarations=[types.FunctionDeclaration(
        name="get_weather", parameters_json_schema=WEATHER)])],
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True))
    if stream:
        text_parts, calls = [], []
        async for chunk in await gclient.aio.models.generate_content_stream(model="m", contents="Weather?",
                                                                             config=config):
            text_parts.append(chunk.text or "")
            calls += chunk.function_calls or []
        return {"text": "".join(text_parts), "arguments": json.dumps(calls[0].args) if calls else None}
    reply = await gclient.aio.models.generate_content(model="m", contents="Weather?", config=config)
    fcalls = reply.function_calls or []
    return {"text": reply.text or "", "arguments": json.dumps(fcalls[0].args) if fcalls else None}


def assert_recorded(meter: TaskMeter, kind: str) -> None:
    """The faulted call is recorded with its fault, unbilled; the SDK's retry is a clean second call."""
    first, *rest = meter.calls
    assert first.fault is not None and first.fault["kind"] == kind and first.fault["index"] == 1
    assert first.prompt_tokens == first.completion_tokens == 0 and not first.cost_usd
    assert meter.outage_error is None  # the agent's to ride out, not the provider's outage
    assert rest and all(c.fault is None and c.error is None for c in rest)


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_429_is_retried_by_the_sdk_after_its_retry_after(gateway: ModelGateway, protocol: str) -> None:
    token, meter, _ = faulted(gateway, "rate_limit", text("Sunny."))
    started = time.monotonic()
    got = await ask(protocol, gateway, token)
    assert got["text"] == "Sunny."
    assert_recorded(meter, "rate_limit")
    assert meter.calls[0].fault == {"kind": "rate_limit", "index": 1, "status": 429, "retry_after": RETRY_AFTER}
    if protocol != "gemini":  # the OpenAI and Anthropic SDKs honour Retry-After (google-genai backs off its own way)
        assert time.monotonic() - started >= RETRY_AFTER


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_429_comes_in_the_protocols_own_error_shape(gateway: ModelGateway, protocol: str) -> None:
    token, meter, _ = faulted(gateway, "rate_limit", text("Sunny."))
    if protocol in ("chat", "responses"):
        with pytest.raises(openai.RateLimitError) as caught:
            await ask(protocol, gateway, token, retries=0)
        assert caught.value.status_code == 429 and caught.value.response.headers["retry-after"] == f"{RETRY_AFTER:g}"
        assert caught.value.body["type"] == "rate_limit_error"  # type: ignore[index]
    elif protocol == "anthropic":
        with pytest.raises(anthropic.RateLimitError) as acaught:
            await ask(protocol, gateway, token, retries=0)
        assert acaught.value.body["error"]["type"] == "rate_limit_error"  # type: ignore[index]
    else:
        with pytest.raises(genai_errors.ClientError) as gcaught:
            await ask(protocol, gateway, token, retries=0)
        assert gcaught.value.code == 429 and gcaught.value.status == "RESOURCE_EXHAUSTED"
    assert [c.fault["kind"] for c in meter.calls if c.fault] == ["rate_limit"]


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_server_error_is_retried_by_the_sdk(gateway: ModelGateway, protocol: str) -> None:
    token, meter, _ = faulted(gateway, "server_error", text("Sunny."))
    assert (await ask(protocol, gateway, token))["text"] == "Sunny."
    assert_recorded(meter, "server_error")
    assert meter.calls[0].fault["status"] in (500, 503)  # type: ignore[index]


@pytest.mark.parametrize("protocol", ["chat", "responses", "anthropic"])
async def test_a_reset_connection_is_retried_by_the_sdk(gateway: ModelGateway, protocol: str) -> None:
    token, meter, _ = faulted(gateway, "connection_reset", text("Sunny."))
    assert (await ask(protocol, gateway, token))["text"] == "Sunny."
    assert_recorded(meter, "connection_reset")


@pytest.mark.parametrize("protocol", ["chat", "anthropic"])
async def test_a_reset_connection_is_a_connection_error_to_the_sdk(gateway: ModelGateway, protocol: str) -> None:
    token, _, _ = faulted(gateway, "connection_reset", text("Sunny."))
    error = openai.APIConnectionError if protocol == "chat" else anthropic.APIConnectionError
    with pytest.raises(error):
        await ask(protocol, gateway, token, retries=0)


async def test_a_reset_connection_fails_the_gemini_sdk_call(gateway: ModelGateway) -> None:
    token, _, _ = faulted(gateway, "connection_reset", text("Sunny."))
    with pytest.raises((httpx.TransportError, aiohttp.ClientError, genai_errors.APIError)):
        await ask("gemini", gateway, token, retries=0)


@pytest.mark.parametrize("protocol", ["chat", "anthropic"])
async def test_a_timeout_times_the_sdk_out_and_its_retry_succeeds(gateway: ModelGateway, protocol: str) -> None:
    token, _, _ = faulted(gateway, "timeout", text("Sunny."), timeout_after=1.5)
    started = time.monotonic()
    assert (await ask(protocol, gateway, token, timeout=0.5))["text"] == "Sunny."
    assert 0.5 <= time.monotonic() - started < 1.5  # the SDK gave up on the hanging call, not the gateway
    error = openai.APITimeoutError if protocol == "chat" else anthropic.APITimeoutError
    token, _, _ = faulted(gateway, "timeout", text("Sunny."), timeout_after=1.5)
    with pytest.raises(error):
        await ask(protocol, gateway, token, timeout=0.5, retries=0)


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_cut_stream_breaks_the_sdks_stream(gateway: ModelGateway, protocol: str) -> None:
    long = " ".join(f"word{i}" for i in range(40))
    token, meter, _ = faulted(gateway, "stream_cut", text(long), cut_after=1)
    with pytest.raises(Exception) as caught:  # each SDK its own: it must not end well
        await ask(protocol, gateway, token, stream=True, retries=0)
    assert not isinstance(caught.value, AssertionError)
    (call,) = meter.calls
    assert call.fault is not None and call.fault["kind"] == "stream_cut" and call.fault["cut_after"] == 1
    assert call.error is not None and not call.cost_usd


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_bad_tool_json_reaches_the_sdk(gateway: ModelGateway, protocol: str, stream: bool) -> None:
    token, meter, _ = faulted(gateway, "bad_tool_json", tool_call("get_weather", "call_1", city="Paris"))
    try:
        got = await ask(protocol, gateway, token, stream=stream)
    except Exception as exc:
        raise AssertionError(f"the SDK should get the bad arguments as an answer: {exc!r}") from exc
    else:
        if protocol in ("chat", "responses") or (protocol, stream) == ("anthropic", True):
            with pytest.raises(json.JSONDecodeError):
                json.loads(got["arguments"])
        else:  # the tool's input is an object in these protocols: the invalid text arrives as such
            assert got["arguments"] is not None and "Paris" in got["arguments"]
            assert json.loads(got["arguments"]) != {"city": "Paris"}
    call = meter.calls[0]
    assert call.fault is not None and call.fault["kind"] == "bad_tool_json"
    assert call.response is not None and call.response["tool_calls"][0]["function"]["arguments"] == (
        '{"city": "Paris"}}')
    assert call.cost_usd  # the provider answered: its answer is billed once, as it is


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_an_empty_answer_is_unbilled(gateway: ModelGateway, protocol: str, stream: bool) -> None:
    token, meter, model = faulted(gateway, "empty_answer", text("Sunny."))
    got = await ask(protocol, gateway, token, stream=stream)
    assert got == {"text": "", "arguments": None}
    (call,) = meter.calls
    assert call.fault == {"kind": "empty_answer", "index": 1}
    assert call.prompt_tokens == call.completion_tokens == 0 and not call.cost_usd
    assert model.requests == []  # never reached the model


# -- passed through: an agent speaking its provider's own protocol (Claude Code on anthropic/...) ------------------


def anthropic_passthrough(gateway: ModelGateway, up: Any, kind: str, **settings: Any) -> tuple[str, TaskMeter]:
    from agentcompass.runtime.model_providers import ProviderSettings
    from agentcompass_models.anthropic import make_anthropic

    provider = make_anthropic("claude-up", settings=ProviderSettings(
        base_url=up.root, max_retries=0, environ={"ANTHROPIC_API_KEY": up.api_key}))
    rates = FaultRates(**{kind: 0.5}, retry_after=RETRY_AFTER, **settings)
    meter = TaskMeter("t", 1, seed=seed_faulting_first_call_only(rates, kind))
    clients = FaultSource(FaultProfile("test", rates)).decorate({"agent": provider}, meter)
    token, _ = gateway.grant(clients, meter, gateway.base_url)
    return token, meter


@pytest.mark.parametrize("kind", ["rate_limit", "server_error", "connection_reset"])
async def test_passed_through_calls_get_the_fault_and_the_sdk_retries(gateway: ModelGateway, kind: str) -> None:
    from agentcompass.testing.upstream import LoopbackUpstream

    async with LoopbackUpstream(ScriptedModel(lambda request: text("Mild."))) as up:
        token, meter = anthropic_passthrough(gateway, up, kind)
        got = await ask("anthropic", gateway, token)
        assert got["text"] == "Mild."
        assert len(up.requests) == 1  # the faulted call never reached the provider
    assert all(c.passthrough for c in meter.calls)
    assert_recorded(meter, kind)


async def test_a_passed_through_stream_is_cut_after_its_events(gateway: ModelGateway) -> None:
    from agentcompass.testing.upstream import LoopbackUpstream

    long = " ".join(f"word{i}" for i in range(60))
    async with LoopbackUpstream(ScriptedModel(lambda request: text(long)), piece=4) as up:
        token, meter = anthropic_passthrough(gateway, up, "stream_cut", cut_after=3)
        root = gateway.base_url.removesuffix("/v1")
        client = anthropic.AsyncAnthropic(base_url=root, api_key=token, max_retries=0)
        seen = []
        with pytest.raises(Exception) as caught:  # the transport error a real cut gives
            async with client.messages.stream(model="m", max_tokens=64, messages=[
                    {"role": "user", "content": "hi"}]) as s:
                async for event in s:
                    seen.append(event.type)
    assert "peer closed connection" in str(caught.value) or isinstance(caught.value, anthropic.APIConnectionError)
    assert 1 <= len(seen) <= 3 and "message_stop" not in seen
    (call,) = meter.calls
    assert call.fault is not None and call.fault["kind"] == "stream_cut" and call.error is not None
