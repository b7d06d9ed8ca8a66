"""The ``anthropic`` provider over real HTTP against a loopback Anthropic-compatible server."""

from __future__ import annotations

import json

import pytest
from agentcompass.errors import UsageError
from agentcompass.runtime.model_providers import ProviderSettings
from agentcompass.runtime.models import ModelError
from agentcompass_models.anthropic import from_anthropic, make_anthropic, to_anthropic

from tests.models.fake_server import FakeModelServer
from tests.models.models_support import API_KEY, MODEL, settings

TOOLS = [{"type": "function", "function": {
    "name": "get_user", "description": "Look a user up.",
    "parameters": {"type": "object", "properties": {"user_id": {"type": "string"}}, "required": ["user_id"]}}}]


async def test_plain_reply_with_system_prompt(server: FakeModelServer) -> None:
    client = make_anthropic(MODEL, settings=settings(server, anthropic=True))
    try:
        reply = await client.chat([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}],
                                  temperature=0.1, seed=3)
    finally:
        await client.aclose()
    assert reply.content.startswith("I understand") and reply.finish_reason == "stop"
    assert reply.usage.prompt_tokens > 0 and reply.usage.completion_tokens > 0
    req = server.requests[-1]
    assert req["path"] == "/v1/messages" and req["key"] == API_KEY
    body = req["body"]
    assert body["system"] == "Be brief." and body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    assert body["max_tokens"] == 4096 and body["temperature"] == 0.1 and "seed" not in body


async def test_tool_use_round_trip(server: FakeModelServer) -> None:
    client = make_anthropic(MODEL, settings=settings(server, anthropic=True), max_tokens="256")
    try:
        first = await client.chat([{"role": "user", "content": "please get user user_3"}], tools=TOOLS,
                                  tool_choice="required")
        assert first.finish_reason == "tool_calls"
        [call] = first.tool_calls
        assert call["function"]["name"] == "get_user" and json.loads(call["function"]["arguments"]) == {
            "user_id": "user_3"}
        second = await client.chat(
            [{"role": "user", "content": "please get user user_3"}, dict(first.message),
             {"role": "tool", "tool_call_id": call["id"], "content": '{"name": "Bo"}'}], tools=TOOLS)
    finally:
        await client.aclose()
    assert second.content.startswith("Done:")
    body = server.requests[0]["body"]
    assert body["tools"][0]["input_schema"]["required"] == ["user_id"]
    assert body["tool_choice"] == {"type": "any"} and body["max_tokens"] == 256
    sent = server.requests[1]["body"]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert sent[1]["content"][0]["type"] == "tool_use" and sent[2]["content"][0]["type"] == "tool_result"


def test_conversion_merges_consecutive_roles() -> None:
    system, messages = to_anthropic([
        {"role": "system", "content": "A"}, {"role": "system", "content": "B"},
        {"role": "user", "content": "one"}, {"role": "user", "content": [{"type": "text", "text": "two"}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"x\": 1}"}},
            {"id": "c2", "type": "function", "function": {"name": "g", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "r1"},
        {"role": "tool", "tool_call_id": "c2", "content": "r2"},
    ])
    assert system == "A\n\nB"
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert len(messages[0]["content"]) == 2 and messages[1]["content"][0]["input"] == {"x": 1}
    assert [b["tool_use_id"] for b in messages[2]["content"]] == ["c1", "c2"]
    message, finish = from_anthropic({"content": [{"type": "text", "text": "ok"}], "stop_reason": "max_tokens"})
    assert message == {"role": "assistant", "content": "ok"} and finish == "length"


async def test_401(server: FakeModelServer) -> None:
    client = make_anthropic(MODEL, settings=settings(server, anthropic=True,
                                                     environ={"TEST_MODEL_KEY": "sk-ant-wrong-000000"}))
    try:
        with pytest.raises(ModelError) as info:
            await client.chat([{"role": "user", "content": "hi"}])
    finally:
        await client.aclose()
    assert info.value.fatal and info.value.status == 401 and "invalid x-api-key" in str(info.value)
    assert len(server.requests) == 1


async def test_529_overloaded_then_success(server: FakeModelServer) -> None:
    server.script.extend([{"status": 529, "message": "Overloaded"}, {"status": 429, "headers": {"retry-after": "0"}}])
    client = make_anthropic(MODEL, settings=settings(server, anthropic=True))
    try:
        reply = await client.chat([{"role": "user", "content": "hi"}])
    finally:
        await client.aclose()
    assert reply.metadata["attempts"] == 3


async def test_404_unknown_model(server: FakeModelServer) -> None:
    client = make_anthropic("claude-nope", settings=settings(server, anthropic=True))
    try:
        with pytest.raises(ModelError, match="unknown model 'claude-nope'") as info:
            await client.chat([{"role": "user", "content": "hi"}])
    finally:
        await client.aclose()
    assert info.value.fatal


def test_key_required() -> None:
    with pytest.raises(UsageError, match=r"\$ANTHROPIC_API_KEY"):
        make_anthropic("claude-sonnet-4", settings=ProviderSettings(environ={}))


def test_base_url_with_or_without_v1() -> None:
    env = {"ANTHROPIC_API_KEY": "sk-ant-123456"}
    assert make_anthropic("m", settings=ProviderSettings(environ=env)).url() == "https://api.anthropic.com/v1/messages"
    assert make_anthropic("m", settings=ProviderSettings(base_url="http://h:1/v1", environ=env)).url() == (
        "http://h:1/v1/messages")
