"""The ``openai`` / ``openai-compatible`` providers over real HTTP against a loopback server."""

from __future__ import annotations

import asyncio
import json
import socket
import time

import aiohttp
import pytest
from agentcompass.errors import UsageError
from agentcompass.runtime.model_providers import ProviderSettings
from agentcompass.runtime.models import ModelError
from agentcompass_models.openai import make_openai, make_openai_compatible

from tests.models.fake_server import FakeModelServer
from tests.models.models_support import API_KEY, MODEL, settings

TOOLS = [{"type": "function", "function": {
    "name": "get_user", "description": "Look a user up.",
    "parameters": {"type": "object", "properties": {"user_id": {"type": "string"}}, "required": ["user_id"]}}}]
HELLO = [{"role": "user", "content": "hello there"}]


async def test_plain_reply(server: FakeModelServer) -> None:
    client = make_openai_compatible(MODEL, settings=settings(server))
    try:
        reply = await client.chat(HELLO)
    finally:
        await client.aclose()
    assert reply.content.startswith("I understand")
    assert reply.usage.prompt_tokens > 0 and reply.usage.completion_tokens > 0
    assert reply.finish_reason == "stop" and reply.metadata["attempts"] == 1
    sent = server.requests[-1]
    assert sent["key"] == API_KEY and sent["body"]["model"] == MODEL


async def test_tool_calls_and_tool_results(server: FakeModelServer) -> None:
    client = make_openai_compatible(MODEL, settings=settings(server))
    try:
        reply = await client.chat([{"role": "user", "content": "please get user user_7"}], tools=TOOLS)
        assert reply.finish_reason == "tool_calls"
        [call] = reply.tool_calls
        assert call["function"]["name"] == "get_user"
        assert json.loads(call["function"]["arguments"]) == {"user_id": "user_7"}
        follow = await client.chat(
            [{"role": "user", "content": "please get user user_7"}, dict(reply.message),
             {"role": "tool", "tool_call_id": call["id"], "content": '{"name": "Ann"}'}], tools=TOOLS)
    finally:
        await client.aclose()
    assert follow.content.startswith("Done:") and not follow.tool_calls
    assert server.requests[0]["body"]["tools"] == TOOLS


async def test_model_args_are_typed_and_override_call_params(server: FakeModelServer) -> None:
    client = make_openai_compatible(MODEL, settings=settings(server), temperature="0", seed="7",
                                    stop='["x"]', top_p="0.5")
    try:
        await client.chat(HELLO, temperature=0.9, max_tokens=12)
    finally:
        await client.aclose()
    body = server.requests[-1]["body"]
    assert body["temperature"] == 0 and body["seed"] == 7 and body["stop"] == ["x"] and body["top_p"] == 0.5
    assert body["max_tokens"] == 12


async def test_429_honours_retry_after(server: FakeModelServer) -> None:
    server.script.append({"status": 429, "headers": {"Retry-After": "1"}, "message": "slow down"})
    client = make_openai_compatible(MODEL, settings=settings(server))
    try:
        t0 = time.monotonic()
        reply = await client.chat(HELLO)
        waited = time.monotonic() - t0
    finally:
        await client.aclose()
    assert reply.metadata["attempts"] == 2
    assert waited >= 0.95, waited  # backoff alone is ~10 ms here; Retry-After asked for 1 s
    gap = server.requests[1]["time"] - server.requests[0]["time"]
    assert gap >= 0.95


async def test_retry_after_ms(server: FakeModelServer) -> None:
    server.script.append({"status": 429, "headers": {"retry-after-ms": "300"}})
    client = make_openai_compatible(MODEL, settings=settings(server))
    try:
        await client.chat(HELLO)
    finally:
        await client.aclose()
    assert server.requests[1]["time"] - server.requests[0]["time"] >= 0.28


async def test_500_then_success(server: FakeModelServer) -> None:
    server.script.extend([{"status": 500}, {"status": 503}])
    client = make_openai_compatible(MODEL, settings=settings(server))
    try:
        reply = await client.chat(HELLO)
    finally:
        await client.aclose()
    assert reply.metadata["attempts"] == 3 and len(server.requests) == 3


async def test_5xx_retries_are_bounded(server: FakeModelServer) -> None:
    server.script.extend([{"status": 502}] * 10)
    client = make_openai_compatible(MODEL, settings=settings(server, max_retries=2))
    try:
        with pytest.raises(ModelError) as info:
            await client.chat(HELLO)
    finally:
        await client.aclose()
    assert len(server.requests) == 3
    assert info.value.retryable and info.value.status == 502 and not info.value.fatal
    assert "server error (HTTP 502)" in str(info.value) and "after 3 attempts" in str(info.value)


async def test_401_is_fatal_not_retried_and_names_the_key_variable(server: FakeModelServer) -> None:
    bad = "sk-wrong-key-987654321"
    client = make_openai_compatible(MODEL, settings=settings(server, environ={"TEST_MODEL_KEY": bad}))
    try:
        with pytest.raises(ModelError) as info:
            await client.chat(HELLO)
    finally:
        await client.aclose()
    assert len(server.requests) == 1
    err = info.value
    assert err.status == 401 and err.fatal and not err.retryable
    text = str(err)
    assert "authentication failed (HTTP 401)" in text and "$TEST_MODEL_KEY" in text
    # The server echoed the key back; the message must not carry it.
    assert bad not in text and "***" in text
    assert bad in client.secrets


async def test_404_unknown_model(server: FakeModelServer) -> None:
    client = make_openai_compatible("no-such-model", settings=settings(server))
    try:
        with pytest.raises(ModelError) as info:
            await client.chat(HELLO)
    finally:
        await client.aclose()
    assert len(server.requests) == 1
    assert info.value.status == 404 and info.value.fatal
    assert "unknown model 'no-such-model'" in str(info.value) and "does not exist" in str(info.value)


async def test_400_is_not_retried_and_not_fatal(server: FakeModelServer) -> None:
    server.script.append({"status": 400, "message": "context length exceeded"})
    client = make_openai_compatible(MODEL, settings=settings(server))
    try:
        with pytest.raises(ModelError) as info:
            await client.chat(HELLO)
    finally:
        await client.aclose()
    assert len(server.requests) == 1 and not info.value.fatal and not info.value.retryable
    assert "context length exceeded" in str(info.value)


async def test_malformed_json_is_retried_then_succeeds(server: FakeModelServer) -> None:
    server.script.append({"malformed": True})
    client = make_openai_compatible(MODEL, settings=settings(server))
    try:
        reply = await client.chat(HELLO)
    finally:
        await client.aclose()
    assert reply.metadata["attempts"] == 2


async def test_malformed_json_every_time_fails_clearly(server: FakeModelServer) -> None:
    server.script.extend([{"malformed": True}] * 5)
    client = make_openai_compatible(MODEL, settings=settings(server, max_retries=1))
    try:
        with pytest.raises(ModelError, match="answered HTTP 200 with a body that is not JSON"):
            await client.chat(HELLO)
    finally:
        await client.aclose()


async def test_slow_response_times_out_then_retries(server: FakeModelServer) -> None:
    server.script.append({"delay": 3.0})
    client = make_openai_compatible(MODEL, settings=settings(server, request_timeout=0.5))
    try:
        t0 = time.monotonic()
        reply = await client.chat(HELLO)
        elapsed = time.monotonic() - t0
    finally:
        await client.aclose()
    assert reply.metadata["attempts"] == 2
    assert 0.5 <= elapsed < 2.5


async def test_timeout_every_time_fails_clearly(server: FakeModelServer) -> None:
    server.script.extend([{"delay": 2.0}] * 3)
    client = make_openai_compatible(MODEL, settings=settings(server, request_timeout=0.3, max_retries=1))
    try:
        with pytest.raises(ModelError, match=r"no answer within 0.3s \(--request-timeout\)") as info:
            await client.chat(HELLO)
    finally:
        await client.aclose()
    assert info.value.retryable


async def test_dropped_connection_is_retried(server: FakeModelServer) -> None:
    server.script.append({"drop": True})
    client = make_openai_compatible(MODEL, settings=settings(server))
    try:
        reply = await client.chat(HELLO)
    finally:
        await client.aclose()
    assert reply.metadata["attempts"] == 2


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # nothing listens here once the socket closes


async def test_connection_refused_by_an_endpoint_never_reached_is_fatal_at_once() -> None:
    port = _closed_port()
    client = make_openai_compatible(MODEL, settings=ProviderSettings(
        base_url=f"http://127.0.0.1:{port}/v1", max_retries=5, request_timeout=2, environ={}))
    started = time.monotonic()
    try:
        with pytest.raises(ModelError) as info:
            await client.chat(HELLO)
    finally:
        await client.aclose()
    assert str(info.value).startswith(
        f"openai-compatible model 'tiny': cannot connect to http://127.0.0.1:{port}/v1: connection refused")
    assert info.value.fatal and not info.value.retryable and "attempts" not in str(info.value)
    assert time.monotonic() - started < 1  # no backoff


async def test_connection_refused_after_answers_is_retried_then_fatal() -> None:
    srv = FakeModelServer().start_in_thread()
    client = make_openai_compatible(MODEL, settings=ProviderSettings(
        base_url=srv.base_url, max_retries=2, request_timeout=2, environ={}))
    try:
        await client.chat(HELLO)
        srv.stop_thread()  # the server goes away mid-run (a restart, say)
        with pytest.raises(ModelError, match="connection refused") as info:
            await client.chat(HELLO)
    finally:
        srv.stop_thread()
        await client.aclose()
    assert info.value.fatal and str(info.value).endswith("(after 3 attempts)")
    assert str(info.value).count("attempts") == 1


async def test_max_connections_bounds_concurrency() -> None:
    srv = FakeModelServer(latency=0.2).start_in_thread()
    try:
        client = make_openai_compatible(MODEL, settings=ProviderSettings(
            base_url=srv.base_url, max_connections=3, environ={}))
        other = make_openai_compatible("other", settings=ProviderSettings(
            base_url=srv.base_url, max_connections=3, environ={}))
        try:
            await asyncio.gather(*(c.chat(HELLO) for c in [client, other] * 6))
        finally:
            await client.aclose()
            await other.aclose()
    finally:
        srv.stop_thread()
    # Both role clients of the provider share one pool of 3 connections.
    assert srv.max_in_flight == 3


async def test_clients_share_one_pool_closed_by_the_last(server: FakeModelServer) -> None:
    from agentcompass_models.http import _POOLS

    a = make_openai_compatible(MODEL, settings=settings(server))
    b = make_openai_compatible(MODEL, settings=settings(server))
    await a.chat(HELLO)
    await b.chat(HELLO)
    assert a._pool is b._pool and a._pool is not None
    pool = a._pool
    await a.aclose()
    assert not pool.client.closed
    await b.aclose()
    assert pool.client.closed and pool not in _POOLS.values()


async def test_no_key_sent_to_a_compatible_server_unless_asked() -> None:
    srv = FakeModelServer().start_in_thread()
    try:
        client = make_openai_compatible(MODEL, settings=ProviderSettings(
            base_url=srv.base_url, environ={"OPENAI_API_KEY": "sk-hosted-key-000000"}))
        try:
            await client.chat(HELLO)
        finally:
            await client.aclose()
    finally:
        srv.stop_thread()
    assert srv.requests[0]["key"] is None


async def test_openai_reads_its_environment(server: FakeModelServer) -> None:
    env = {"OPENAI_API_KEY": API_KEY, "OPENAI_BASE_URL": server.base_url}
    client = make_openai(MODEL, settings=ProviderSettings(environ=env))
    try:
        reply = await client.chat(HELLO)
    finally:
        await client.aclose()
    assert reply.content and client.base_url == server.base_url and API_KEY in client.secrets


def test_openai_without_key_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match=r"set \$OPENAI_API_KEY"):
        make_openai("gpt-4o-mini", settings=ProviderSettings(environ={}))
    with pytest.raises(UsageError, match=r"\$MY_KEY"):
        make_openai("gpt-4o-mini", settings=ProviderSettings(api_key_env="MY_KEY", environ={}))


def test_compatible_without_base_url_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="needs --model-base-url"):
        make_openai_compatible("Qwen3-8B", settings=ProviderSettings(environ={}))
    with pytest.raises(UsageError, match="not set or empty"):
        make_openai_compatible("Qwen3-8B", settings=ProviderSettings(
            base_url="http://127.0.0.1:1/v1", api_key_env="NOPE", environ={}))
    with pytest.raises(UsageError, match="http:// or https://"):
        make_openai_compatible("Qwen3-8B", settings=ProviderSettings(base_url="localhost:8000", environ={}))


def test_keys_on_the_command_line_are_refused() -> None:
    with pytest.raises(UsageError, match="refused"):
        make_openai_compatible(MODEL, settings=ProviderSettings(base_url="http://x:1/v1", environ={}),
                               api_key="sk-123456789")


def test_credentials_file(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "credentials.toml"
    path.write_text('[openai]\napi_key = "sk-from-file-123456"\n\n[openai-compatible]\n'
                    'base_url = "http://127.0.0.1:9/v1"\napi_key = "tok-from-file-654321"\n')
    monkeypatch.setenv("AGENTCOMPASS_CREDENTIALS", str(path))
    a = make_openai("gpt-4o-mini", settings=ProviderSettings())
    b = make_openai_compatible("q", settings=ProviderSettings())
    assert "sk-from-file-123456" in a.secrets and "tok-from-file-654321" in b.secrets
    assert b.base_url == "http://127.0.0.1:9/v1"
    # The environment wins over the file.
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env-000000")
    assert make_openai("gpt-4o-mini", settings=ProviderSettings()).secrets[0] == "sk-from-env-000000"
    path.write_text("[openai\napi_key = 'sk-broken-value'")
    with pytest.raises(UsageError) as info:
        make_openai("gpt-4o-mini", settings=ProviderSettings(environ={}))
    assert "sk-broken-value" not in str(info.value)


def test_password_in_base_url_is_a_secret() -> None:
    client = make_openai_compatible(MODEL, settings=ProviderSettings(
        base_url="http://user:hunter2-pass@127.0.0.1:9/v1", environ={}))
    assert "hunter2-pass" in client.secrets
    assert "hunter2-pass" not in repr(client) and "hunter2-pass" not in client.safe_base_url


async def test_gateway_streaming_to_an_sdk_style_client(server: FakeModelServer) -> None:
    """Code in an environment may ask the gateway for ``stream: true``; it gets server-sent events."""
    from agentcompass.models.gateway import ModelGateway
    from agentcompass.models.metering import TaskMeter

    client = make_openai_compatible(MODEL, settings=settings(server))
    gateway = ModelGateway({"agent": f"openai-compatible/{MODEL}"})
    await gateway.start()
    meter = TaskMeter("t", 1)
    try:
        token, _ = gateway.grant({"agent": client}, meter, gateway.base_url)
        async with aiohttp.ClientSession() as h, h.post(
            f"{gateway.base_url}/chat/completions", headers={"Authorization": f"Bearer {token}"},
            json={"model": MODEL, "messages": HELLO, "stream": True},
        ) as r:
            text = await r.text()
        assert r.status == 200 and r.headers["content-type"].startswith("text/event-stream")
        events = [line[6:] for line in text.splitlines() if line.startswith("data: ")]
        assert events[-1] == "[DONE]"
        assert json.loads(events[0])["choices"][0]["delta"]["content"].startswith("I understand")
    finally:
        await gateway.stop()
        await client.aclose()
    assert len(meter.calls) == 1 and meter.calls[0].via == "gateway"
