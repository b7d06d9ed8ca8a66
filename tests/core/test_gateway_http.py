"""The model gateway over real loopback HTTP (TCP and Unix socket): chat completions metered, tokens checked and
revoked, bad requests, streaming."""

from __future__ import annotations

import json

import aiohttp
import pytest
from agentcompass.builtin.mock_model import MockModel
from agentcompass.models.gateway import ModelGateway
from agentcompass.models.metering import TaskMeter

CREATE_TASK = {"type": "function", "function": {"name": "create_task", "parameters": {
    "type": "object", "required": ["user_id", "title"],
    "properties": {"user_id": {"type": "string"}, "title": {"type": "string"}}}}}


@pytest.fixture
async def gateway():
    gw = ModelGateway({"agent": "mock", "user": "user"})
    await gw.start()
    try:
        yield gw
    finally:
        await gw.stop()


async def post(url, token, body, *, connector=None, raw=None):
    async with aiohttp.ClientSession(connector=connector) as http:
        async with http.post(url, data=raw if raw is not None else json.dumps(body),
                             headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"}) as r:
            return r.status, await r.text()


async def test_chat_completion_with_tool_calls_is_metered(gateway):
    meter = TaskMeter("t", 1)
    token, endpoints = gateway.grant({"agent": MockModel("mock"), "user": MockModel("user")}, meter, gateway.base_url)
    assert endpoints["agent"].api_key == token and endpoints["agent"].model == "mock"
    status, text = await post(f"{gateway.base_url}/chat/completions", token, {
        "model": "mock", "tools": [CREATE_TASK],
        "messages": [{"role": "user", "content": "Please create a task called 'Important Meeting' for user_1."}]})
    assert status == 200, text
    reply = json.loads(text)
    call = reply["choices"][0]["message"]["tool_calls"][0]["function"]
    assert call["name"] == "create_task"
    assert json.loads(call["arguments"]) == {"user_id": "user_1", "title": "Important Meeting"}
    assert reply["choices"][0]["finish_reason"] == "tool_calls" and reply["usage"]["total_tokens"] > 0
    assert [(c.role, c.via) for c in meter.calls] == [("agent", "gateway")]
    # The role's name selects that role.
    status, _ = await post(f"{gateway.base_url}/chat/completions", token,
                           {"model": "user", "messages": [{"role": "user", "content": "hi"}]})
    assert status == 200 and meter.calls[-1].role == "user"


async def test_tokens_are_checked_and_end_with_the_attempt(gateway):
    token, _ = gateway.grant({"agent": MockModel()}, TaskMeter("t", 1), gateway.base_url)
    body = {"model": "mock", "messages": [{"role": "user", "content": "hi"}]}
    assert (await post(f"{gateway.base_url}/chat/completions", "wrong", body))[0] == 401
    gateway.revoke(token)
    status, text = await post(f"{gateway.base_url}/chat/completions", token, body)
    assert status == 401 and "expired" in text


async def test_bad_requests(gateway):
    token, _ = gateway.grant({"agent": MockModel()}, TaskMeter("t", 1), gateway.base_url)
    url = f"{gateway.base_url}/chat/completions"
    # A name no role has (the model a CLI asks for on its own) goes to the agent role.
    status, text = await post(url, token, {"model": "gpt-5", "messages": [{"role": "user", "content": "hi"}]})
    assert status == 200 and json.loads(text)["model"] == "mock"
    judge_only, _ = gateway.grant({"user": MockModel()}, TaskMeter("t", 1), gateway.base_url)
    status, text = await post(url, judge_only, {"model": "gpt-5", "messages": []})
    assert status == 404 and "unknown model 'gpt-5'" in text
    assert (await post(url, token, None, raw="{not json"))[0] == 400
    assert (await post(url, token, {"model": "mock"}))[0] == 400


async def test_streaming_answers_as_server_sent_events(gateway):
    token, _ = gateway.grant({"agent": MockModel()}, TaskMeter("t", 1), gateway.base_url)
    status, text = await post(f"{gateway.base_url}/chat/completions", token, {
        "model": "mock", "stream": True, "messages": [{"role": "user", "content": "hello there"}]})
    assert status == 200
    events = [line[6:] for line in text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    first = json.loads(events[0])
    assert "hello there" in first["choices"][0]["delta"]["content"]


async def test_the_unix_socket_serves_the_same_api(gateway):
    token, _ = gateway.grant({"agent": MockModel()}, TaskMeter("t", 1), gateway.base_url)
    status, _ = await post("http://gateway/v1/chat/completions", token,
                           {"model": "mock", "messages": [{"role": "user", "content": "hi"}]},
                           connector=aiohttp.UnixConnector(path=gateway.unix_socket))
    assert status == 200
