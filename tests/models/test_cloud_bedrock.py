"""The bedrock provider against a loopback Bedrock Runtime that recomputes every request's SigV4 signature with
botocore from the same credentials, answers Anthropic models on InvokeModel(-WithResponseStream) and others on
Converse(-Stream), and streams AWS event-stream frames that botocore's own parser reads."""

from __future__ import annotations

import asyncio
import base64
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from agentcompass.errors import UsageError
from agentcompass.runtime.model_providers import ProviderSettings
from agentcompass.runtime.model_stream import StreamEnd, TextDelta, ToolCallDelta
from agentcompass.runtime.models import ModelError
from agentcompass.testing.scripted_models import ScriptedModel, scripted, text, tool_call
from agentcompass_models.bedrock import make_bedrock
from agentcompass_models.bedrock_wire import sse_of_eventstream
from botocore.eventstream import EventStreamBuffer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers.examples import examples
from tests.models.cloud_servers import (
    AWS_KEY_ID,
    AWS_SECRET,
    AWS_SESSION,
    REGION,
    BedrockServer,
    event,
    eventstream_frame,
    exception,
)

CLAUDE = "anthropic.claude-sonnet-4-20250514-v1:0"
NOVA = "amazon.nova-pro-v1:0"
WEATHER = [{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
                                             "parameters": {"type": "object",
                                                            "properties": {"city": {"type": "string"}}}}}]
ASK = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather in Rome?"}]


def aws_env(**extra: str) -> dict[str, str]:
    return {"AWS_ACCESS_KEY_ID": AWS_KEY_ID, "AWS_SECRET_ACCESS_KEY": AWS_SECRET, "AWS_REGION": REGION, **extra}


def bedrock(server: BedrockServer, model: str = CLAUDE, *, environ: dict[str, str] | None = None,
            retries: int = 0, **options: Any) -> Any:
    return make_bedrock(model, settings=ProviderSettings(base_url=server.root, max_retries=retries,
                                                         environ=aws_env() if environ is None else environ),
                        **options)


def weather_then_text() -> ScriptedModel:
    return ScriptedModel(scripted(tool_call("get_weather", "toolu_1", city="Rome"), text("Warm in Rome today.")))


async def collect(client: Any, messages: Any, **kw: Any) -> list[Any]:
    return [e async for e in client.stream(messages, **kw)]


# -- the event-stream encoding -------------------------------------------------------------------------------------

header_names = st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=20)


@settings(max_examples=examples(60), deadline=None)
@given(headers=st.dictionaries(header_names, st.text(max_size=40), max_size=4), payload=st.binary(max_size=300))
def test_the_test_servers_frames_are_read_by_botocores_parser(headers: dict[str, str], payload: bytes) -> None:
    buffer = EventStreamBuffer()
    buffer.add_data(eventstream_frame(headers, payload))
    [message] = list(buffer)
    assert message.headers == headers and message.payload == payload


@settings(max_examples=examples(40), deadline=None, suppress_health_check=list(HealthCheck))
@given(texts=st.lists(st.text(min_size=1, max_size=30), min_size=1, max_size=6), cut=st.integers(1, 50))
def test_invoke_stream_chunks_become_the_anthropic_events_they_carry(texts: list[str], cut: int) -> None:
    """Whatever way the bytes arrive, each ``chunk`` event is unwrapped into the Anthropic event it carries."""
    events = [{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": t}} for t in texts]
    wire = b"".join(event("chunk", {"bytes": base64.b64encode(json.dumps(e).encode()).decode()}) for e in events)

    async def relayed() -> bytes:
        async def chunks() -> Any:
            for i in range(0, len(wire), cut):
                yield wire[i:i + cut]
        return b"".join([piece async for piece in sse_of_eventstream(chunks(), CLAUDE)])

    out = asyncio.run(relayed()).decode()
    datas = [json.loads(line.removeprefix("data: ")) for line in out.split("\n") if line.startswith("data: ")]
    assert datas == events
    assert out.count("event: content_block_delta\n") == len(events)


@settings(max_examples=examples(40), deadline=None, suppress_health_check=list(HealthCheck))
@given(texts=st.lists(st.text(min_size=1, max_size=20), min_size=1, max_size=5),
       arguments=st.dictionaries(st.text(min_size=1, max_size=8), st.integers() | st.text(max_size=10), max_size=3),
       cut=st.integers(1, 64), step=st.integers(1, 9))
def test_converse_stream_events_read_as_the_same_answer(texts: list[str], arguments: dict[str, Any], cut: int,
                                                        step: int) -> None:
    """ConverseStream's events (text deltas, a tool call's input in pieces, the stop, the usage), cut anywhere,
    are read back through the Anthropic decoder as the answer they make."""
    from agentcompass.runtime.codecs import CODECS, SSEParser

    args = json.dumps(arguments)
    wire = event("messageStart", {"role": "assistant"})
    wire += b"".join(event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": t}}) for t in texts)
    wire += event("contentBlockStop", {"contentBlockIndex": 0})
    wire += event("contentBlockStart", {"contentBlockIndex": 1, "start": {"toolUse": {"toolUseId": "tu_1",
                                                                                      "name": "f"}}})
    wire += b"".join(event("contentBlockDelta", {"contentBlockIndex": 1, "delta": {"toolUse": {
        "input": args[i:i + step]}}}) for i in range(0, len(args), step))
    wire += event("contentBlockStop", {"contentBlockIndex": 1}) + event("messageStop", {"stopReason": "tool_use"})
    wire += event("metadata", {"usage": {"inputTokens": 11, "outputTokens": 7, "totalTokens": 18}})

    async def relayed() -> bytes:
        async def chunks() -> Any:
            for i in range(0, len(wire), cut):
                yield wire[i:i + cut]
        return b"".join([piece async for piece in sse_of_eventstream(chunks(), NOVA)])

    decoder, parser = CODECS["anthropic"].decoder(NOVA), SSEParser()
    for name, data in [*parser.feed(asyncio.run(relayed())), *parser.close()]:
        decoder.feed(name, data)
    answer = decoder.end().response
    assert answer.content == "".join(texts)
    (call,) = answer.message["tool_calls"]
    assert call["id"] == "tu_1" and json.loads(call["function"]["arguments"]) == arguments
    assert answer.finish_reason == "tool_calls" and (answer.usage.prompt_tokens, answer.usage.completion_tokens) == (
        11, 7)


# -- Anthropic Messages on InvokeModel -----------------------------------------------------------------------------


async def test_an_anthropic_model_is_invoked_with_a_sigv4_signature_botocore_verifies() -> None:
    async with BedrockServer(weather_then_text()) as server:
        client = bedrock(server)
        first = await client.chat(ASK, tools=WEATHER, max_tokens=300, temperature=0)
        assert first.message["tool_calls"][0]["function"]["name"] == "get_weather"
        assert json.loads(first.message["tool_calls"][0]["function"]["arguments"]) == {"city": "Rome"}
        second = await client.chat([*ASK, first.message, {"role": "tool", "tool_call_id": "toolu_1",
                                                            "content": "28C"}], tools=WEATHER)
        assert second.content == "Warm in Rome today." and second.finish_reason == "stop"
        assert second.usage.prompt_tokens > 0 and second.usage.completion_tokens > 0
        await client.aclose()
    assert server.verified == 2
    arrived = server.requests[-1]
    # The model id is percent-encoded once in the path (":" as %3A), as botocore's client sends it.
    assert arrived.raw_path == "/model/anthropic.claude-sonnet-4-20250514-v1%3A0/invoke"
    assert arrived.body["anthropic_version"] == "bedrock-2023-05-31" and "model" not in arrived.body
    assert arrived.body["system"] == "Be brief."
    assert arrived.body["messages"][-1]["content"][0] == {"type": "tool_result", "tool_use_id": "toolu_1",
                                                          "content": "28C"}
    assert server.requests[0].body["max_tokens"] == 300 and server.requests[0].body["temperature"] == 0


async def test_the_session_token_is_sent_and_signed() -> None:
    async with BedrockServer(token=AWS_SESSION) as server:
        client = bedrock(server, environ=aws_env(AWS_SESSION_TOKEN=AWS_SESSION))
        assert (await client.chat(ASK)).content
        assert AWS_SESSION in client.secrets and AWS_SECRET in client.secrets and AWS_KEY_ID in client.secrets
        await client.aclose()
    assert server.verified == 1
    assert server.requests[0].headers["X-Amz-Security-Token"] == AWS_SESSION


async def test_a_wrong_secret_is_a_fatal_error_naming_the_aws_credentials_and_not_the_secret() -> None:
    wrong = "not-the-right-secret-0123456789abcdef"
    async with BedrockServer(secret=AWS_SECRET) as server:
        client = bedrock(server, environ=aws_env(AWS_SECRET_ACCESS_KEY=wrong))
        with pytest.raises(ModelError) as caught:
            await client.chat(ASK)
        await client.aclose()
    assert caught.value.fatal and caught.value.status == 403
    message = str(caught.value)
    assert "check the AWS credentials" in message and "signature we calculated does not match" in message
    assert wrong not in message and AWS_KEY_ID not in message


async def test_throttling_is_retried_and_every_attempt_is_signed_again() -> None:
    async with BedrockServer() as server:
        server.failures = [(429, {"message": "Too many requests"}, {"x-amzn-ErrorType": "ThrottlingException"}),
                           (503, {"message": "Service unavailable"}, {"Retry-After": "0"})]
        client = bedrock(server, retries=3)
        answer = await client.chat(ASK)
        await client.aclose()
    assert answer.metadata["attempts"] == 3 and server.verified == 3


async def test_invoke_with_response_stream_is_read_piece_by_piece() -> None:
    async with BedrockServer(weather_then_text()) as server:
        client = bedrock(server)
        calls = await collect(client, ASK, tools=WEATHER)
        answer = await collect(client, ASK)
        await client.aclose()
    assert server.verified == 2
    assert server.requests[0].raw_path.endswith("/invoke-with-response-stream")
    assert server.requests[0].headers["Accept"] == "application/vnd.amazon.eventstream"
    assert sum(isinstance(e, ToolCallDelta) for e in calls) > 1
    assert isinstance(calls[-1], StreamEnd)
    assert json.loads(calls[-1].response.message["tool_calls"][0]["function"]["arguments"]) == {"city": "Rome"}
    assert sum(isinstance(e, TextDelta) for e in answer) > 1
    assert answer[-1].response.content == "Warm in Rome today."
    assert answer[-1].response.usage.completion_tokens > 0


async def test_an_exception_inside_the_stream_is_a_model_error() -> None:
    async with BedrockServer() as server:
        server.stream_tail = exception("throttlingException", "Too many tokens, please wait")
        client = bedrock(server)
        with pytest.raises(ModelError, match="throttlingException: Too many tokens"):
            await collect(client, ASK)
        await client.aclose()


# -- Converse ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
async def test_other_models_speak_converse_with_tools(stream: bool) -> None:
    async with BedrockServer(weather_then_text()) as server:
        client = bedrock(server, NOVA)
        assert client.native_protocols == frozenset()  # an Anthropic agent is translated, not passed through

        async def ask(messages: Any) -> Any:
            if stream:
                return (await collect(client, messages, tools=WEATHER, max_tokens=200))[-1].response
            return await client.chat(messages, tools=WEATHER, max_tokens=200)

        first = await ask(ASK)
        assert first.finish_reason == "tool_calls"
        call = first.message["tool_calls"][0]
        assert call["id"] == "toolu_1" and json.loads(call["function"]["arguments"]) == {"city": "Rome"}
        second = await ask([*ASK, first.message, {"role": "tool", "tool_call_id": "toolu_1", "content": "28C"}])
        assert second.content == "Warm in Rome today." and second.usage.prompt_tokens > 0
        await client.aclose()
    action = "converse-stream" if stream else "converse"
    assert [r.raw_path for r in server.requests] == [f"/model/amazon.nova-pro-v1%3A0/{action}"] * 2
    assert server.verified == 2
    body = server.requests[1].body
    assert body["system"] == [{"text": "Be brief."}]
    assert body["inferenceConfig"] == {"maxTokens": 200}
    assert body["toolConfig"]["tools"][0]["toolSpec"]["name"] == "get_weather"
    assert body["messages"][1]["content"][0]["toolUse"] == {"toolUseId": "toolu_1", "name": "get_weather",
                                                             "input": {"city": "Rome"}}
    assert body["messages"][2]["content"][0]["toolResult"] == {"toolUseId": "toolu_1", "content": [{"text": "28C"}]}


# -- configuration -------------------------------------------------------------------------------------------------


def test_no_credentials_anywhere_is_one_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                 "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                 "AWS_CONTAINER_CREDENTIALS_FULL_URI"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with pytest.raises(UsageError, match="found no AWS credentials: set \\$AWS_ACCESS_KEY_ID"):
        make_bedrock(CLAUDE, settings=ProviderSettings(environ={"AWS_REGION": REGION}))


def test_the_profile_in_the_shared_credentials_file_is_used(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "credentials").write_text(f"[team]\naws_access_key_id = {AWS_KEY_ID}\n"
                                          f"aws_secret_access_key = {AWS_SECRET}\n")
    (tmp_path / "config").write_text("[profile team]\nregion = eu-west-3\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    client = make_bedrock(CLAUDE, settings=ProviderSettings(environ={"AWS_PROFILE": "team"}))
    assert client.region == "eu-west-3" and client.base_url == "https://bedrock-runtime.eu-west-3.amazonaws.com"
    assert AWS_SECRET in client.secrets and "shared-credentials-file" in client.key_source


@pytest.mark.parametrize(("environ", "options", "said"), [
    ({"AWS_ACCESS_KEY_ID": AWS_KEY_ID, "AWS_SECRET_ACCESS_KEY": AWS_SECRET}, {},
     "bedrock/" + CLAUDE + " needs a region: set $AWS_REGION or pass --model-arg region=us-east-1"),
    (aws_env(), {"api": "grpc"}, "--model-arg api=grpc is not a Bedrock API"),
    ({**aws_env(), "KEY": "k"}, {"api_key_env": "KEY"}, "bedrock/" + CLAUDE + " signs with the AWS credential chain"),
    (aws_env(), {"api_key": "x"}, "--model-arg api_key=... is refused"),
])
def test_bad_settings_are_one_line_errors(environ: dict[str, str], options: dict[str, str], said: str,
                                          monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    key_env = options.pop("api_key_env", None)
    with pytest.raises(UsageError) as caught:
        make_bedrock(CLAUDE, settings=ProviderSettings(environ=environ, api_key_env=key_env), **options)
    assert str(caught.value).startswith(said) and "\n" not in str(caught.value)


def test_without_botocore_the_provider_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == "botocore" or m.startswith("botocore.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "botocore", None)
    with pytest.raises(UsageError, match=r"pip install 'agentcompass-models\[bedrock\]'"):
        make_bedrock(CLAUDE, settings=ProviderSettings(environ=aws_env()))


def test_the_region_can_be_given_as_a_model_argument() -> None:
    client = make_bedrock(NOVA, settings=ProviderSettings(environ=aws_env()), region="ap-northeast-1")
    assert client.region == "ap-northeast-1" and client.converse
    assert "region" not in client.params
