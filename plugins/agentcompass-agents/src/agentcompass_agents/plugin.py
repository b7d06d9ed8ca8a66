"""Entry point: registers one harness per agent of :data:`~agentcompass_agents.catalog.AGENTS`. Importing it is
cheap: a factory imports its agent's module when called."""

from __future__ import annotations

import importlib
from typing import Any

from agentcompass import hookimpl

from agentcompass_agents.catalog import AGENTS, DEFAULT_LIMITS

#: harness name -> module:class
CLASSES = {
    "claude-code": "agentcompass_agents.agents.claude_code:ClaudeCode",
    "codex": "agentcompass_agents.agents.codex:Codex",
    "opencode": "agentcompass_agents.agents.opencode:OpenCode",
    "qwen-code": "agentcompass_agents.agents.qwen_code:QwenCode",
    "gemini-cli": "agentcompass_agents.agents.gemini_cli:GeminiCli",
    "mini-swe-agent": "agentcompass_agents.agents.mini_swe_agent:MiniSweAgent",
    "aider": "agentcompass_agents.agents.aider:Aider",
    "openhands": "agentcompass_agents.agents.openhands:OpenHands",
}


def harness_class(name: str) -> Any:
    module, _, attribute = CLASSES[name].partition(":")
    return getattr(importlib.import_module(module), attribute)


def _factory(name: str) -> Any:
    def make(**options: Any) -> Any:
        return harness_class(name)(**options)

    make.__doc__ = f"{name} {AGENTS[name].version} ({AGENTS[name].package}, {AGENTS[name].protocol})"
    make.version = AGENTS[name].version  # type: ignore[attr-defined]  # `plugins list` shows it
    make.default_limits = DEFAULT_LIMITS  # type: ignore[attr-defined]  # and this
    return make


@hookimpl
def register_harnesses(register: Any) -> None:
    for name in AGENTS:
        register(name, _factory(name))
