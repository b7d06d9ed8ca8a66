"""The built-in ``mock`` model: deterministic tool calls from the conversation, its simulated latency, and its
options."""

from __future__ import annotations

import json

import pytest
from agentcompass.builtin.mock_model import MockModel
from agentcompass.errors import UsageError

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
