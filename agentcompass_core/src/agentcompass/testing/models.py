"""The old import path of :mod:`agentcompass.testing.scripted_models` (scripted models and a loopback server)."""

from agentcompass.testing.scripted_models import (
    DEFAULT_API_KEY,
    LoopbackOpenAI,
    Message,
    Responder,
    ScriptedModel,
    custom_call,
    mock_responder,
    scripted,
    text,
    tool_call,
)

__all__ = ["DEFAULT_API_KEY", "LoopbackOpenAI", "Message", "Responder", "ScriptedModel", "custom_call",
           "mock_responder", "scripted", "text", "tool_call"]
