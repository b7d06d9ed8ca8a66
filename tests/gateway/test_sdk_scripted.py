"""The vendors' own SDKs against the gateway, backed by the testing kit's scripted model (translated through
the canonical form): several turns with tool calls and tool results, streamed and not."""

from __future__ import annotations

import json

import anthropic
import openai
import pytest
from agentcompass.models.gateway import ModelGateway
from agentcompass.models.metering import TaskMeter
from agentcompass.testing.scripted_models import ScriptedModel, custom_call, scripted, text, tool_call

WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def grant(gateway: ModelGateway, model: ScriptedModel, **meter_options: object) -> tuple[str, TaskMeter]:
    meter = TaskMeter("t", 1, **meter_options)  # type: ignore[arg-type]
    token, _ = gateway.grant({"agent": model}, meter, gateway.base_url)
    return token, meter


@pytest.mark.parametrize("stream", [False, True])
async def test_anthropic_sdk_tool_loop(gateway: ModelGateway, stream: bool) -> None:
    model = ScriptedModel(scripted(tool_call("get_weather", "toolu_01", city="Paris"), text("Sunny in Paris.")))
    token, meter = grant(gateway, model)
    client = anthropic.AsyncAnthropic(base_url=gateway.base_url.removesuffix("/v1"), api_key=token, max_retries=0)
    tools = [{"name": "get_weather", "description": "Weather now", "input_schema": WEATHER}]
    messages: list[dict] = [{"role": "user", "content": "Weather in Paris?"}]

    async def ask() -> anthropic.types.Message:
        kwargs = dict(model="claude-sonnet-4-5", max_tokens=256, system="Be brief.", tools=tools, messages=messages,
                      stop_sequences=["END"], metadata={"user_id": "u1"},
                      extra_headers={"anthropic-beta": "interleaved-thinking-2025-05-14"})
        if stream:
            async with client.messages.stream(**kwargs) as s:  # type: ignore[arg-type]
                return await s.get_final_message()
        return await client.messages.create(**kwargs)  # type: ignore[arg-type,call-overload,no-any-return]

    first = await ask()
    assert first.stop_reason == "tool_use" and first.role == "assistant"
    use = first.content[-1]
    assert use.type == "tool_use" and use.id == "toolu_01" and use.name == "get_weather"
    assert use.input == {"city": "Paris"}
    messages += [{"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "22C, sun"},
                                              {"type": "text", "text": "and tomorrow?"}]}]
    second = await ask()
    assert second.stop_reason == "end_turn"
    assert [b.type for b in second.content] == ["text"] and second.content[0].text == "Sunny in Paris."  # type: ignore[union-attr]
    assert second.usage.input_tokens > 0 and second.usage.output_tokens > 0
    # What the model got: the canonical conversation.
    got = model.requests[1]
    assert got["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "toolu_01", "type": "function", "function": {
            "name": "get_weather", "arguments": json.dumps({"city": "Paris"})}}]},
        {"role": "tool", "tool_call_id": "toolu_01", "content": "22C, sun"},
        {"role": "user", "content": [{"type": "text", "text": "and tomorrow?"}]},
    ]
    assert got["tools"] == [{"type": "function", "function": {"name": "get_weather", "description": "Weather now",
                                                              "parameters": WEATHER}}]
    assert got["stop"] == ["END"] and got["max_tokens"] == 256
    # One record per call, with the protocol and endpoint.
    assert [(c.protocol, c.endpoint, c.stream, c.role) for c in meter.calls] == [
        ("anthropic", "/v1/messages", stream, "agent")] * 2
    assert all((c.ttft_s is not None) == stream for c in meter.calls)
    assert meter.calls[0].response is not None and meter.calls[0].response["tool_calls"][0]["id"] == "toolu_01"


@pytest.mark.parametrize("stream", [False, True])
async def test_openai_responses_sdk_tool_loop(gateway: ModelGateway, stream: bool) -> None:
    patch = "*** Begin Patch\n*** Add File: hello.txt\n+hello\n*** End Patch\n"
    model = ScriptedModel(scripted(tool_call("shell", "call_a", command="ls -la"),
                                   custom_call("apply_patch", patch, "call_b"), text("All done.")))
    token, meter = grant(gateway, model)
    client = openai.AsyncOpenAI(base_url=gateway.base_url, api_key=token, max_retries=0)
    tools = [{"type": "function", "name": "shell", "description": "Run a command", "strict": False,
              "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}},
             {"type": "custom", "name": "apply_patch", "description": "Apply a patch"}]
    items: list[dict] = [{"role": "user", "content": [{"type": "input_text", "text": "Make hello.txt"}]}]

    async def ask() -> openai.types.responses.Response:
        kwargs = dict(model="gpt-5-codex", instructions="You are Codex.", input=items, tools=tools, store=False,
                      parallel_tool_calls=False, reasoning={"effort": "low"})
        if stream:
            seen = []
            async with client.responses.stream(**kwargs) as s:  # type: ignore[arg-type]
                async for event in s:
                    seen.append(event)
                final = await s.get_final_response()
            numbers = [e.sequence_number for e in seen]
            assert numbers == sorted(numbers) and len(set(numbers)) == len(numbers)
            kinds = [e.type for e in seen]
            assert kinds[:2] == ["response.created", "response.in_progress"] and kinds[-1] == "response.completed"
            assert "response.output_item.added" in kinds and "response.output_item.done" in kinds
            return final
        return await client.responses.create(**kwargs)  # type: ignore[arg-type,call-overload,no-any-return]

    first = await ask()
    (call,) = first.output
    assert call.type == "function_call" and call.call_id == "call_a" and json.loads(call.arguments) == {
        "command": "ls -la"}
    assert first.status == "completed" and first.usage is not None and first.usage.total_tokens > 0
    items += [call.model_dump(exclude_none=True),
              {"type": "function_call_output", "call_id": "call_a", "output": "total 0"}]
    second = await ask()
    (custom,) = second.output
    assert custom.type == "custom_tool_call" and custom.input == patch and custom.name == "apply_patch"
    items += [custom.model_dump(exclude_none=True),
              {"type": "custom_tool_call_output", "call_id": "call_b", "output": "Done!"}]
    third = await ask()
    assert third.output_text == "All done."
    got = model.requests[2]
    assert got["messages"] == [
        {"role": "system", "content": "You are Codex."},
        {"role": "user", "content": [{"type": "text", "text": "Make hello.txt"}]},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_a", "type": "function", "function": {
            "name": "shell", "arguments": json.dumps({"command": "ls -la"})}}]},
        {"role": "tool", "tool_call_id": "call_a", "content": "total 0"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_b", "type": "custom", "custom": {
            "name": "apply_patch", "input": patch}}]},
        {"role": "tool", "tool_call_id": "call_b", "content": "Done!"},
    ]
    assert got["tools"][1] == {"type": "custom", "custom": {"name": "apply_patch", "description": "Apply a patch"}}
    assert got["parallel_tool_calls"] is False
    assert [(c.protocol, c.endpoint, c.stream) for c in meter.calls] == [("responses", "/v1/responses", stream)] * 3


@pytest.mark.parametrize("stream", [False, True])
async def test_responses_previous_response_id_continues_the_attempts_conversation(gateway: ModelGateway,
                                                                                  stream: bool) -> None:
    model = ScriptedModel(scripted(tool_call("shell", "call_a", command="ls"), text("Two files."), text("Bye.")))
    token, _ = grant(gateway, model)
    client = openai.AsyncOpenAI(base_url=gateway.base_url, api_key=token, max_retries=0)
    tools = [{"type": "function", "name": "shell", "parameters": {"type": "object", "properties": {}}}]

    async def ask(**kwargs: object) -> openai.types.responses.Response:
        if stream:
            async with client.responses.stream(model="gpt-5", tools=tools, **kwargs) as s:  # type: ignore[arg-type]
                return await s.get_final_response()
        return await client.responses.create(model="gpt-5", tools=tools, **kwargs)  # type: ignore[arg-type,call-overload,no-any-return]

    first = await ask(instructions="Be terse.", input="list files")
    second = await ask(instructions="Be terse.", previous_response_id=first.id,
                       input=[{"type": "function_call_output", "call_id": "call_a", "output": "a b"}])
    assert second.output_text == "Two files."
    third = await ask(previous_response_id=second.id, input="thanks")
    assert third.output_text == "Bye."
    assert model.requests[1]["messages"] == [
        {"role": "system", "content": "Be terse."},
        {"role": "user", "content": "list files"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_a", "type": "function", "function": {
            "name": "shell", "arguments": json.dumps({"command": "ls"})}}]},
        {"role": "tool", "tool_call_id": "call_a", "content": "a b"}]
    # The instructions are not carried over; the whole conversation is.
    assert model.requests[2]["messages"] == [*model.requests[1]["messages"][1:],
                                             {"role": "assistant", "content": "Two files."},
                                             {"role": "user", "content": "thanks"}]
    with pytest.raises(openai.BadRequestError, match="not a response of this task attempt"):
        await client.responses.create(model="x", input="hi", previous_response_id="resp_elsewhere")
    other, _ = grant(gateway, ScriptedModel())  # another attempt does not see this one's responses
    with pytest.raises(openai.BadRequestError, match="not a response of this task attempt"):
        await openai.AsyncOpenAI(base_url=gateway.base_url, api_key=other, max_retries=0).responses.create(
            model="x", input="hi", previous_response_id=first.id)


async def test_chat_completions_stream_with_usage_and_tool_calls(gateway: ModelGateway) -> None:
    model = ScriptedModel(scripted(tool_call("get_weather", "call_9", city="Oslo"), text("Cold.")))
    token, meter = grant(gateway, model)
    client = openai.AsyncOpenAI(base_url=gateway.base_url, api_key=token, max_retries=0)
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}}]
    messages: list[dict] = [{"role": "user", "content": "Oslo?"}]
    chunks = [c async for c in await client.chat.completions.create(
        model="scripted", messages=messages, tools=tools, stream=True,  # type: ignore[arg-type]
        stream_options={"include_usage": True})]
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    (call,) = [tc for d in deltas for tc in d.tool_calls or () if tc.id]
    arguments = "".join(tc.function.arguments or "" for d in deltas for tc in d.tool_calls or () if tc.function)
    assert call.id == "call_9" and call.function is not None and call.function.name == "get_weather"
    assert json.loads(arguments) == {"city": "Oslo"}
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "tool_calls"
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens > 0 and not chunks[-1].choices
    # Without include_usage, no usage chunk.
    messages += [{"role": "assistant", "tool_calls": [{"id": "call_9", "type": "function", "function": {
        "name": "get_weather", "arguments": arguments}}]}, {"role": "tool", "tool_call_id": "call_9", "content": "-5"}]
    chunks = [c async for c in await client.chat.completions.create(
        model="scripted", messages=messages, tools=tools, stream=True)]  # type: ignore[arg-type]
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Cold."
    assert all(c.usage is None for c in chunks)
    assert [c.protocol for c in meter.calls] == ["chat", "chat"]


async def test_tokens_as_x_api_key_and_both_model_list_shapes(gateway: ModelGateway) -> None:
    token, _ = grant(gateway, ScriptedModel())
    listed = await anthropic.AsyncAnthropic(base_url=gateway.base_url.removesuffix("/v1"), api_key=token,
                                            max_retries=0).models.list()
    assert [m.id for m in listed.data] == ["scripted"]
    models = await openai.AsyncOpenAI(base_url=gateway.base_url, api_key=token, max_retries=0).models.list()
    assert [m.id for m in models.data] == ["scripted"]
    bad = anthropic.AsyncAnthropic(base_url=gateway.base_url.removesuffix("/v1"), api_key="acgw-wrong", max_retries=0)
    with pytest.raises(anthropic.AuthenticationError):
        await bad.messages.create(model="x", max_tokens=5, messages=[{"role": "user", "content": "hi"}])
    counted = await anthropic.AsyncAnthropic(base_url=gateway.base_url.removesuffix("/v1"), api_key=token,
                                             max_retries=0).messages.count_tokens(
        model="claude-haiku-4-5", messages=[{"role": "user", "content": "hello " * 100}])
    assert counted.input_tokens > 100


async def test_unknown_model_names_go_to_the_agent_and_aliases_route_elsewhere(gateway: ModelGateway) -> None:
    agent, judge = ScriptedModel(scripted(text("agent here"))), ScriptedModel(scripted(text("judge here")))
    meter = TaskMeter("t", 1)
    token, _ = gateway.grant({"agent": agent, "judge": judge}, meter, gateway.base_url)
    gateway.aliases["claude-haiku-4-5"] = "judge"
    client = anthropic.AsyncAnthropic(base_url=gateway.base_url.removesuffix("/v1"), api_key=token, max_retries=0)
    for name, role in [("claude-haiku-4-5", "judge"), ("claude-opus-4-1", "agent"), ("judge", "judge")]:
        await client.messages.create(model=name, max_tokens=5, messages=[{"role": "user", "content": "hi"}])
        assert meter.calls[-1].role == role, name
    assert "claude-opus-4-1" in gateway._defaulted
