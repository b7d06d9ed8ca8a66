"""The built-in ``mock`` model: deterministic tool calls from the conversation, its simulated latency, and its
options."""

from __future__ import annotations

import json

import pytest
from agentcompass.builtin.mock_model import MockModel
from agentcompass.errors import UsageError
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers.examples import examples

CREATE_TASK = {"type": "function", "function": {"name": "create_task", "parameters": {
    "type": "object", "required": ["user_id", "title"],
    "properties": {"user_id": {"type": "string"}, "title": {"type": "string"}}}}}
UPDATE_STATUS = {"type": "function", "function": {"name": "update_task_status", "parameters": {
    "type": "object", "required": ["task_id", "status"],
    "properties": {"task_id": {"type": "string"}, "status": {"type": "string", "enum": ["pending", "completed"]}}}}}


async def test_mock_model_behaviour():
    model = MockModel()
    reply = await model.chat([{"role": "user", "content": "Mark task_2 as completed please, update its status"}],
                             tools=[CREATE_TASK, UPDATE_STATUS])
    (call,) = reply.tool_calls
    assert call["function"]["name"] == "update_task_status"
    assert json.loads(call["function"]["arguments"]) == {"task_id": "task_2", "status": "completed"}
    # A required argument it cannot fill: no tool call, a text reply instead.
    text = await model.chat([{"role": "user", "content": "create a task for me"}], tools=[CREATE_TASK])
    assert not text.tool_calls and text.content.startswith("I understand")
    after_tool = await model.chat([{"role": "tool", "content": '{"ok": true}'}], tools=[CREATE_TASK])
    assert after_tool.content.startswith("Done:")
    # Deterministic.
    again = await MockModel().chat([{"role": "user", "content": "create a task for me"}], tools=[CREATE_TASK])
    assert again.message == text.message


async def test_mock_latency_is_simulated():
    import time

    model = MockModel(latency="0.2")
    started = time.perf_counter()
    await model.chat([{"role": "user", "content": "x"}])
    assert time.perf_counter() - started >= 0.2
    with pytest.raises(UsageError, match="latency must be 0 or more"):
        MockModel(latency="-1")
    with pytest.raises(UsageError, match="no option 'foo'"):
        MockModel(foo="1")


BASH = {"type": "function", "function": {"name": "bash", "parameters": {
    "type": "object", "required": ["command"], "properties": {"command": {"type": "string"}}}}}


@given(turns=st.integers(min_value=1, max_value=30), limit=st.integers(min_value=1, max_value=12))
@settings(max_examples=examples(60), deadline=None)
async def test_the_mock_ends_a_conversation_it_cannot_drive(turns: int, limit: int) -> None:
    """An agent loop the mock does not understand (every user message asks it to run 'ls' with bash, as an
    agent's format-error reminder does) gets a tool call only while the conversation holds fewer than
    max_turns of the mock's replies; from then on, a final text answer, never a tool call."""
    model = MockModel(max_turns=str(limit))
    messages: list[dict] = [{"role": "system", "content": "You are an agent with a bash tool."}]
    for _ in range(turns):
        messages.append({"role": "user", "content": "Use the bash tool to run 'ls'."})
        reply = await model.chat(messages, tools=[BASH])
        mine = sum(1 for m in messages if m["role"] == "assistant")
        if mine >= limit:
            assert not reply.tool_calls and reply.content.startswith("Final answer:")
        else:
            assert reply.tool_calls and reply.tool_calls[0]["function"]["name"] == "bash"
        messages.append(reply.message)


def test_max_turns_is_checked() -> None:
    with pytest.raises(UsageError, match="max_turns must be a whole number of at least 1"):
        MockModel(max_turns="0")
